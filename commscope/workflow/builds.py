"""One build of the workloads per MPI stack under $COMMSCOPE_HOME/builds/<stack>, with Caliper when CMake finds
one built against the same MPI, and what each build recorded."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


from commscope.workflow.paths import builds_dir, git_commit
from commscope.workflow.stacks import build_workloads


@dataclass
class Build:
    stack: str
    path: Path
    caliper: bool
    caliper_dir: str = ""
    note: str = ""


def read_builds() -> dict[str, Build]:
    out = {}
    for f in sorted(builds_dir().glob("*/commscope-build.json")):
        d = json.loads(f.read_text())
        out[d["stack"]] = Build(d["stack"], Path(d["path"]), d["caliper"], d.get("caliper_dir", ""), d.get("note", ""))
    return out


def _mpi_libraries(binary: Path) -> set[str]:
    """The MPI libraries a binary loads, by soname family."""
    p = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    fams = set()
    for line in p.stdout.splitlines():
        name = line.strip().split(" ", 1)[0]
        if name.startswith("libmpi.so"):
            fams.add("openmpi" if ".so.40" in name else "mpich-abi-or-impi")
        elif name.startswith(("libmpich.so", "libmpichcxx")):
            fams.add("mpich")
    return fams


def build_stack(stack, caliper_prefix: str | None = None, log=print) -> Build:
    """Builds the workloads once for one stack under $COMMSCOPE_HOME/builds/<stack>, with
    Caliper when CMake finds it. A Caliper built against another MPI would load two MPI
    libraries into one process, so such a build is redone without Caliper."""
    bdir = builds_dir() / stack.name
    extra = []
    if caliper_prefix:
        extra.append(f"-DCMAKE_PREFIX_PATH={caliper_prefix.replace(':', ';')}")
    # Where CMake may find Caliper this time. A build directory configured with another answer keeps its cached
    # caliper_DIR, so it is started afresh rather than reused.
    request = caliper_prefix or os.environ.get("CMAKE_PREFIX_PATH", "")
    made = bdir / "commscope-build.json"
    if bdir.exists() and (not made.exists() or json.loads(made.read_text()).get("caliper_request") != request):
        log(f"[setup] {stack.name}: the Caliper search changed since {bdir} was configured; building afresh")
        shutil.rmtree(bdir)
    try:
        build_workloads(stack, bdir, caliper="AUTO", extra=extra)
    except RuntimeError as e:
        with_caliper = bdir.exists() and "COMMSCOPE_HAVE_CALIPER" in _defines(bdir)
        if not with_caliper:
            raise
        # A Caliper linked against another MPI of the same soname (Debian Open MPI 4.1 and the PyPI Open MPI 5
        # share libmpi.so.40) fails at link time rather than loading two libraries.
        return _without_caliper(stack, bdir, f"building with Caliper failed ({str(e).splitlines()[0][:160]}...; "
                                f"a Caliper built against another MPI?)", request)
    cache = (bdir / "CMakeCache.txt").read_text(errors="replace")
    m = re.search(r"^caliper_DIR:PATH=(.*)$", cache, re.M)
    caliper_dir = m.group(1) if m and not m.group(1).endswith("NOTFOUND") else ""
    with_cali = bool(caliper_dir) and "COMMSCOPE_HAVE_CALIPER" in _defines(bdir)
    if with_cali and len(_mpi_libraries(bdir / "halo3d")) > 1:
        return _without_caliper(stack, bdir, f"Caliper at {caliper_dir} was built against another MPI", request)
    return _record_build(stack, bdir, with_cali, caliper_dir, "", request)


def _without_caliper(stack, bdir: Path, why: str, request: str) -> Build:
    """The stack's workloads built afresh without Caliper, saying WHY and what to pass instead."""
    shutil.rmtree(bdir)
    build_workloads(stack, bdir, caliper="OFF")
    note = (f"{why}; built without Caliper. Pass --caliper-prefix {stack.name}=<prefix of a Caliper built with "
            f"{stack.name}>")
    return _record_build(stack, bdir, False, "", note, request)


def _record_build(stack, bdir: Path, with_cali: bool, caliper_dir: str, note: str, request: str) -> Build:
    b = Build(stack.name, bdir, with_cali, caliper_dir, note)
    (bdir / "commscope-build.json").write_text(json.dumps(
        {"stack": b.stack, "path": str(b.path), "caliper": b.caliper, "caliper_dir": b.caliper_dir,
         "note": b.note, "mpicc": stack.mpicc, "git_commit": git_commit(), "caliper_request": request},
        indent=2) + "\n")
    return b


def caliper_profile_config(caliper_dir: str) -> str:
    """runtime-profile from Caliper 2.13 on; 2.12 and older only know its old name."""
    query = Path(caliper_dir).parents[2] / "bin" / "cali-query" if caliper_dir else None
    if query and query.exists():
        p = subprocess.run([str(query), "--help", "configs"], capture_output=True, text=True)
        if "runtime-profile" not in p.stdout + p.stderr:
            return "hatchet-region-profile"
    return "runtime-profile"


def _defines(bdir: Path) -> str:
    """The compile definitions CMake generated (flags.make of the common library)."""
    return "\n".join(f.read_text(errors="replace") for f in bdir.rglob("flags.make"))
