"""`commscope setup`: checkouts, the Python packages they need, Caliper and Adiak per MPI stack, one build of the
workloads per MPI stack, the local site.

A stack whose Caliper is neither named (--caliper-prefix) nor found by CMake (or found built against another MPI)
gets its Caliper built from the pinned sources (commscope.workflow.caliper): one build serves the workloads that
link it and the unmodified binaries that preload it. When that cannot be done the stack is built without Caliper
and setup says why."""
from __future__ import annotations

import os
import time
from pathlib import Path


from commscope.store import db
from commscope.workflow import stacks as stacks_catalog
from commscope.workflow import caliper, imb as imb_build
from commscope.workflow.builds import build_stack, caliper_mpi_clash, caliper_library, read_builds
from commscope.workflow.checkouts import RAMBLE_PIP, SPACK_PIP, checkout, clone, missing_message, pip_install
from commscope.workflow.errors import WorkflowError
from commscope.workflow.progress import Progress
from commscope.workflow.sites import write_spack_externals, write_local_site
from commscope.workflow.sources import source


def setup(stacks: list[str] | None = None, caliper_prefixes: dict | None = None, build: bool = True,
          log=print, spack_mirror: Path | None = None, sources: Path | None = None, imb: bool = False) -> dict:
    """Returns {"ramble": path|None, "spack": path|None, "builds": {...}, "missing": [msgs], "preload": {stack:
    prefix}, "imb": {stack: prefix}}. SOURCES is a source mirror (versions.yaml's archives): Ramble, Caliper,
    Adiak and IMB come from it instead of clones."""
    got, missing = _checkouts(sources, spack_mirror, log)
    pip_install(RAMBLE_PIP + (SPACK_PIP if got["spack"] else []), log)
    wanted = ([stacks_catalog.by_name(n) for n in stacks] if stacks
              else [s for s in stacks_catalog.catalog() if s.present()])
    absent = [s.name for s in wanted if not s.present()]
    if absent:
        raise WorkflowError(f"MPI stacks not installed: {', '.join(absent)} (bash ci/setup.sh installs them)")
    builds = read_builds()
    prefixes = dict(caliper_prefixes or {})
    preload = _calipers(wanted, prefixes, sources, log) if build else {}
    imbs = {s.name: p for s in wanted if imb and (p := _imb(s, sources, log)) is not None}
    failed = _workloads(wanted, prefixes, builds, log) if build else {}
    d = write_local_site(builds)
    log(f"[setup] local site: {d}")
    spack_scope = write_spack_externals(spack_mirror)
    if got["spack"] or spack_mirror:
        log(f"[setup] local site's Spack externals: {spack_scope}")
    if failed:
        raise WorkflowError("the builds of " + ", ".join(failed) + " failed (the other stacks were built and the "
                            "local site written):\n" + "\n".join(f"{k}: {v[-1500:]}" for k, v in failed.items()))
    return {"ramble": got["ramble"], "spack": got["spack"], "builds": builds, "missing": missing,
            "preload": preload, "imb": imbs}


def _checkouts(sources: Path | None, spack_mirror: Path | None, log) -> tuple[dict, list[str]]:
    """Ramble and Spack: $RAMBLE_ROOT/$SPACK_ROOT, the cached copy, else extracted from SOURCES (Ramble) or cloned
    (no SOURCES). Returns ({tool: root|None}, [missing messages]). Spack is optional: its absence is said only
    when it was asked for ($SPACK_ROOT, --spack-source-mirror) or a clone of it failed."""
    missing, got = [], {}
    for tool, env_var in (("ramble", "RAMBLE_ROOT"), ("spack", "SPACK_ROOT")):
        root = checkout(tool, env_var)
        tried = False
        if root is None and env_var not in os.environ:   # set means "use this one": never clone over it
            dest = db.home() / "cache" / tool
            if sources is not None and tool == "ramble":
                log(f"[setup] {tool}: {env_var} not set; extracting the pinned version from {sources} into {dest}")
                root = source(tool, sources, dest)
            elif sources is None:
                log(f"[setup] {tool}: {env_var} not set; cloning the pinned version into {dest}")
                tried = True
                if clone(tool, dest):
                    root = dest
                    if tool == "spack":
                        clone("spack-packages", db.home() / "cache" / "spack-packages")
        if root is None and tool == "spack":   # optional: only `commscope run --spack` needs it
            if tried or env_var in os.environ or spack_mirror is not None:
                log(f"[setup] spack: not in place; only `commscope run --spack` needs it ({env_var} names a "
                    "checkout: packages/README.md)")
        elif root is None:
            missing.append(missing_message(tool, env_var))
            log(f"[setup] {tool}: MISSING")
        else:
            log(f"[setup] {tool}: {root}")
        got[tool] = root
    return got, missing


def _calipers(wanted: list, prefixes: dict, sources: Path | None, log) -> dict[str, Path]:
    """The pinned Caliper of every stack of WANTED that PREFIXES does not name, built where not cached, its prefix
    added to PREFIXES. Returns {stack: prefix} of those that preload (every one built here)."""
    pending = [s.name for s in wanted if s.name not in prefixes and caliper.installed(s) is None]
    progress = Progress("Caliper + Adiak builds", len(pending), log)
    if pending:
        log(f"[setup] {len(pending)} Caliper + Adiak builds to make ({', '.join(pending)}): a few minutes each on "
            "2 cores; cached afterwards")
    unsourced, preload = [], {}
    for s in wanted:
        if s.name in prefixes:
            continue
        if unsourced:   # the sources could not be had for the first stack: not for the others either
            unsourced.append(s.name)
            continue
        made = _pinned_caliper(s, sources, log, progress)
        if made == "unsourced":
            unsourced.append(s.name)
        elif isinstance(made, Path):
            prefixes[s.name] = str(made)
            preload[s.name] = made
    if unsourced:
        log(f"[setup] no Caliper for {', '.join(unsourced)}: CMake finds none and the pinned sources cannot "
            f"be cloned here; pass --source-mirror DIR (a folder with versions.yaml's archives) or "
            f"--caliper-prefix STACK=PREFIX")
    return preload


def _workloads(wanted: list, prefixes: dict, builds: dict, log) -> dict[str, str]:
    """One build of the workloads per stack of WANTED, with its Caliper of PREFIXES, recorded into BUILDS.
    Returns {stack: error} of the stacks whose build failed (one failure never stops the others)."""
    failed = {}
    progress = Progress("workload builds", len(wanted), log)
    for s in wanted:
        t0 = time.monotonic()
        try:
            b = build_stack(s, prefixes.get(s.name), log)
        except RuntimeError as e:
            failed[s.name] = str(e)
            log(f"[setup] skipped {s.name}: its build failed: {str(e).splitlines()[0]}")
            builds.pop(s.name, None)
            continue
        builds[s.name] = b
        progress.done(time.monotonic() - t0)
        log(f"[setup] built {s.name} in {time.monotonic() - t0:.0f} s -> {b.path} "
            f"({'with Caliper ' + b.caliper_dir if b.caliper else 'without Caliper'})")
        if b.note:
            log(f"[setup]   {b.note}")
        if (why := stacks_catalog.no_fortran(s)) is not None:
            log(f"[setup]   {s.name}: no Fortran workload (fjacobi) or libcommscope-mpif: {why}")
        elif (why := stacks_catalog.NO_F08.get(s.name)) is not None:
            log(f"[setup]   {s.name}: fjacobi takes `use mpi`, not mpi_f08: {why}")
    return failed


def _pinned_caliper(stack, sources: Path | None, log, progress: Progress) -> Path | str:
    """STACK's Caliper from the pinned sources: its prefix. Else "found" (CMake finds a Caliper of the stack's own
    MPI, which the build uses), "unsourced" (no mirror given and no clone possible) or "failed" (a build step
    failed; said here)."""
    search = os.environ.get("CMAKE_PREFIX_PATH", "")
    if caliper_library(search) is not None and caliper_mpi_clash(stack, search) is None:
        return "found"
    built = caliper.installed(stack) is None
    t0 = time.monotonic()
    try:
        made = caliper.ensure(stack, sources, log)
    except (caliper.CaliperBuildError, WorkflowError) as e:
        log(f"[setup] {stack.name}: {e}; going on without Caliper for {stack.name}")
        return "failed"
    if made is None:
        return "unsourced"
    if built:
        progress.done(time.monotonic() - t0)
    return made


def _imb(stack, sources: Path | None, log) -> Path | None:
    """IMB-MPI1 for STACK from the pinned sources; None, saying why, when it cannot be built."""
    try:
        p = imb_build.ensure(stack, sources, log)
    except (RuntimeError, WorkflowError) as e:
        log(f"[setup] {stack.name}: no IMB: {e}")
        return None
    if p is None:
        log(f"[setup] {stack.name}: no IMB: the pinned sources cannot be cloned here; pass --source-mirror DIR")
    return p
