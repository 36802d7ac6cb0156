"""One build of the workloads per MPI stack under $COMMSCOPE_HOME/builds/<stack>, with Caliper when CMake finds
one built against the same MPI, and what each build recorded."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


from commscope.workflow.paths import builds_dir, git_commit
from commscope.workflow.stacks import WORKLOADS, build_workloads


@dataclass
class Build:
    stack: str
    path: Path
    caliper: bool
    caliper_dir: str = ""     # the Caliper's CMake package folder, PREFIX/share/cmake/caliper
    note: str = ""

    @property
    def caliper_prefix(self) -> Path | None:
        """The install prefix of the Caliper the workloads were built with, or None."""
        return Path(self.caliper_dir).parents[2] if self.caliper_dir else None


def read_builds() -> dict[str, Build]:
    out = {}
    for f in sorted(builds_dir().glob("*/commscope-build.json")):
        d = json.loads(f.read_text())
        out[d["stack"]] = Build(d["stack"], Path(d["path"]), d["caliper"], d.get("caliper_dir", ""), d.get("note", ""))
    return out


def loaded_mpi_libraries(binary: Path) -> dict[str, Path | None]:
    """The MPI libraries a binary or library loads, as the loader resolves them (ldd): soname -> real path, or
    None when the loader finds none."""
    p = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    out: dict[str, Path | None] = {}
    for line in p.stdout.splitlines():
        name, _, where = line.strip().partition(" => ")
        if name.startswith(("libmpi.so", "libmpich.so", "libmpichcxx")):
            path = where.split(" (")[0]
            out[name] = Path(path).resolve() if path.startswith("/") else None
    return out


def _mpi_libraries(binary: Path) -> set[str]:
    """The MPI libraries a binary loads, by soname family."""
    return {("openmpi" if ".so.40" in name else "mpich-abi-or-impi") if name.startswith("libmpi.so") else "mpich"
            for name in loaded_mpi_libraries(binary)}


def stack_mpi_libraries(stack) -> set[Path]:
    """The MPI libraries (real paths) the stack's own wrapper links: its -l names looked up in its -L folders.
    Empty when the wrapper does not say."""
    def ask(*flags: str) -> list[str]:
        p = subprocess.run([stack.mpicc, *flags], capture_output=True, text=True, env=stack.environ())
        return shlex.split(p.stdout) if p.returncode == 0 else []
    if stack.family == "openmpi":
        dirs, names = ask("--showme:libdirs"), ask("--showme:libs")
    else:   # MPICH and Intel MPI print the whole link line
        words = ask("-show")
        dirs = [w[2:] for w in words if w.startswith("-L")]
        names = [w[2:] for w in words if w.startswith("-l")]
    found = set()
    for name in (n for n in names if n.startswith("mpi")):
        hit = next((Path(d) / f"lib{name}.so" for d in dirs if (Path(d) / f"lib{name}.so").exists()), None)
        if hit is not None:
            found.add(hit.resolve())
    return found


def caliper_library(search: str) -> Path | None:
    """libcaliper.so under the first prefix of a CMAKE_PREFIX_PATH-style search (':'-separated) that has one."""
    for prefix in filter(None, search.split(":")):
        for libdir in ("lib", "lib64"):
            lib = Path(prefix) / libdir / "libcaliper.so"
            if lib.exists():
                return lib
    return None


def _folder_and_name(lib: Path) -> tuple[Path, str]:
    """A library's folder and name without its version: a wheel copies libmpi.so.40 to libmpi.so."""
    return lib.parent, lib.name.split(".so")[0]


def caliper_mpi_clash(stack, search: str) -> str | None:
    """Why the Caliper that `search` would give CMake must not be linked into this stack's workloads, or None.

    Checked before anything is linked: the MPI libraries libcaliper.so loads (its NEEDED entries as the loader
    resolves them) against those the stack's wrapper links. A Caliper built against Debian Open MPI 4.1 and the
    PyPI Open MPI 5 share the soname libmpi.so.40 but not the ABI, so names alone would not tell them apart.
    None also when it cannot be told (no libcaliper.so in the search, or a wrapper that names no library):
    the build's own checks (link failure, two MPI libraries in a binary) still apply then."""
    lib = caliper_library(search)
    if lib is None:
        return None
    needs = {path for path in loaded_mpi_libraries(lib).values() if path is not None}
    own = stack_mpi_libraries(stack)
    if not needs or not own or {_folder_and_name(n) for n in needs} & {_folder_and_name(o) for o in own}:
        return None
    return (f"Caliper at {lib} loads {', '.join(sorted(map(str, needs)))}, not {stack.name}'s own "
            f"{', '.join(sorted(map(str, own)))}")


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
    elif bdir.exists() and _configured_source(bdir) not in (None, str(WORKLOADS)):
        # CMake refuses a build directory configured from another source tree (another checkout of commscope)
        log(f"[setup] {stack.name}: {bdir} was configured from {_configured_source(bdir)}; building afresh")
        shutil.rmtree(bdir)
    clash = caliper_mpi_clash(stack, request)
    if clash:   # never linked: a Caliper of another MPI would put two MPI libraries into one process
        return _without_caliper(stack, bdir, clash, request)
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
    shutil.rmtree(bdir, ignore_errors=True)
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


def _configured_source(bdir: Path) -> str | None:
    """The source tree a CMake build directory was configured from (CMakeCache.txt), or None."""
    cache = bdir / "CMakeCache.txt"
    m = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", cache.read_text(errors="replace"), re.M) if cache.exists() else None
    return m.group(1) if m else None


def _defines(bdir: Path) -> str:
    """The compile definitions CMake generated (flags.make of the common library)."""
    return "\n".join(f.read_text(errors="replace") for f in bdir.rglob("flags.make"))
