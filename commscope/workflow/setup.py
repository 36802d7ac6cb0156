"""`commscope setup`: checkouts, the Python packages they need, one build per MPI stack, the local site."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path


from commscope.store import db
from commscope.workflow import stacks as stacks_catalog
from commscope.workflow.builds import build_stack, read_builds
from commscope.workflow.checkouts import RAMBLE_PIP, SPACK_PIP, checkout, clone, missing_message, pip_install
from commscope.workflow.errors import WorkflowError
from commscope.workflow.sites import write_spack_externals, write_local_site


def setup(stacks: list[str] | None = None, caliper_prefixes: dict | None = None, build: bool = True,
          log=print, source_mirror: Path | None = None) -> dict:
    """Returns {"ramble": path|None, "spack": path|None, "builds": {...}, "missing": [msgs]}."""
    missing = []
    got = {}
    for tool, env_var in (("ramble", "RAMBLE_ROOT"), ("spack", "SPACK_ROOT")):
        root = checkout(tool, env_var)
        if root is None and env_var not in os.environ:   # set means "use this one": never clone over it
            dest = db.home() / "cache" / tool
            log(f"[setup] {tool}: {env_var} not set; cloning the pinned version into {dest}")
            if clone(tool, dest):
                root = dest
                if tool == "spack":
                    clone("spack-packages", db.home() / "cache" / "spack-packages")
        if root is None:
            missing.append(missing_message(tool, env_var))
            log(f"[setup] {tool}: MISSING")
        else:
            log(f"[setup] {tool}: {root}")
        got[tool] = root
    log(f"[setup] pip install {' '.join(RAMBLE_PIP + (SPACK_PIP if got['spack'] else []))} into {sys.prefix}")
    pip_install(RAMBLE_PIP + (SPACK_PIP if got["spack"] else []))

    wanted = [stacks_catalog.by_name(n) for n in stacks] if stacks else [s for s in stacks_catalog.catalog() if s.present()]
    absent = [s.name for s in wanted if not s.present()]
    if absent:
        raise WorkflowError(f"MPI stacks not installed: {', '.join(absent)} (bash ci/setup.sh installs them)")
    builds = read_builds()
    failed: dict[str, str] = {}
    if build:
        prefixes = caliper_prefixes or {}
        for s in wanted:
            t0 = time.monotonic()
            try:
                b = build_stack(s, prefixes.get(s.name), log)
            except RuntimeError as e:   # one stack's failure never stops the others
                failed[s.name] = str(e)
                log(f"[setup] skipped {s.name}: its build failed: {str(e).splitlines()[0]}")
                builds.pop(s.name, None)
                continue
            builds[s.name] = b
            log(f"[setup] built {s.name} in {time.monotonic() - t0:.0f} s -> {b.path} "
                f"({'with Caliper ' + b.caliper_dir if b.caliper else 'without Caliper'})")
            if b.note:
                log(f"[setup]   {b.note}")
    d = write_local_site(builds)
    log(f"[setup] local site: {d}")
    spack_scope = write_spack_externals(source_mirror)
    log(f"[setup] local site's Spack externals: {spack_scope}")
    if failed:
        raise WorkflowError("the builds of " + ", ".join(failed) + " failed (the other stacks were built and the "
                            "local site written):\n" + "\n".join(f"{k}: {v[-1500:]}" for k, v in failed.items()))
    return {"ramble": got["ramble"], "spack": got["spack"], "builds": builds, "missing": missing}
