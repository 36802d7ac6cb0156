#!/usr/bin/env python3
"""The live toolchain for the tests, from a source mirror (versions.yaml's archives), as an offline site has it.

    .venv/bin/python ci/toolchain.py MIRROR > .venv/commscope-toolchain.env

Runs `commscope setup --source-mirror MIRROR --imb` for Debian Open MPI 4.1 (Ramble extracted, Caliper and Adiak
built once, IMB-MPI1 built, all cached under $COMMSCOPE_HOME/cache), sets up Spack and spack-packages offline
(packages/README.md), starts Spack's index of its recipes (it goes on building beside the Calipers of FORTRAN_TOO,
the other stacks tests/test_fortran.py profiles Fortran on, and the first tests), and prints the variables the live
tests read (tests/conftest.py loads the file):
COMMSCOPE_SOURCE_MIRROR, RAMBLE_ROOT, SPACK_ROOT, SPACK_PYTHON, SPACK_USER_CONFIG_PATH, SPACK_USER_CACHE_PATH,
COMMSCOPE_CALIPER_PREFIX (the Caliper linked into workloads), COMMSCOPE_CALIPER_NOGOTCHA_PREFIX (the one preloaded
into unmodified binaries: the same no-GOTCHA build, which serves both) and COMMSCOPE_IMB_PREFIX.
Progress goes to stderr; a variable whose part could not be made is left out, so its tests skip and say why."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from commscope.store import db
from commscope.workflow import caliper, imb, stacks
from commscope.workflow.checkouts import SPACK_PIP, pip_install
from commscope.workflow.errors import WorkflowError
from commscope.workflow.sources import source

STACK = "debian-openmpi4"   # the stack the live tests run on
# Their Calipers too, so tests/test_fortran.py profiles Fortran on every stack of FORTRAN_STACKS (each about 1.5 min
# on 2 cores, most of it compiled from the ccache the first build filled).
FORTRAN_TOO = ("debian-mpich4", "pypi-impi2021")


def spack(mirror: Path) -> dict[str, Path]:
    """Spack and its builtin recipes from the mirror, set up offline as packages/README.md says: a user scope of
    its own whose repos.yaml names the local recipes, clingo in this venv (SPACK_PYTHON), no online bootstrap."""
    root, recipes = source("spack", mirror), source("spack-packages", mirror)
    user = db.home() / "cache" / "spack-user"
    env = {"SPACK_ROOT": root, "SPACK_PYTHON": Path(sys.executable),
           "SPACK_USER_CONFIG_PATH": user / "config", "SPACK_USER_CACHE_PATH": user / "cache"}
    env["SPACK_USER_CONFIG_PATH"].mkdir(parents=True, exist_ok=True)
    (env["SPACK_USER_CONFIG_PATH"] / "repos.yaml").write_text(
        f"repos:\n  builtin: {recipes / 'repos' / 'spack_repo' / 'builtin'}\n")
    pip_install(SPACK_PIP, log=lambda line: print(line, file=sys.stderr))
    run_env = spack_environ(env)
    listed = subprocess.run([str(root / "bin" / "spack"), "bootstrap", "list"], env=run_env, capture_output=True,
                            text=True, check=True).stdout
    for name in re.findall(r"^Name: (\S+)", listed, re.M):
        subprocess.run([str(root / "bin" / "spack"), "bootstrap", "disable", name], env=run_env,
                       stdout=subprocess.DEVNULL, check=True)
    return env


def spack_environ(env: dict) -> dict:
    """This process's environment with spack()'s variables (ENV), for running Spack."""
    return {**os.environ, **{k: str(v) for k, v in env.items()}}


def index_recipes(env: dict) -> subprocess.Popen:
    """Spack's index of its recipes (which package provides what: each of its 8,000 recipes loaded, about 70 s of
    one core), built in the user cache the tests' Spack reads, while the other stacks' Calipers build and the first
    tests run. Started in a session of its own and not waited for: it outlives this script, writes its output to
    index.log beside Spack's user cache, and a Spack command that needs the index meanwhile waits on Spack's own
    lock."""
    log = open(env["SPACK_USER_CACHE_PATH"].parent / "index.log", "w")
    with log:
        return subprocess.Popen([str(env["SPACK_ROOT"] / "bin" / "spack"), "providers", "mpi"],
                                env=spack_environ(env), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)


def main(mirror: Path) -> int:
    p = subprocess.run([sys.executable, "-m", "commscope.cli", "setup", "--source-mirror", str(mirror),
                        "--stacks", STACK, "--imb"], stdout=sys.stderr, stderr=sys.stderr)
    print(f"[toolchain] commscope setup exited {p.returncode} (1: Ramble is missing)", file=sys.stderr)
    stack = stacks.by_name(STACK)
    found = {
        "COMMSCOPE_SOURCE_MIRROR": mirror,
        "RAMBLE_ROOT": db.home() / "cache" / "ramble",
        "COMMSCOPE_CALIPER_PREFIX": caliper.installed(stack),
        "COMMSCOPE_CALIPER_NOGOTCHA_PREFIX": caliper.installed(stack),
        "COMMSCOPE_IMB_PREFIX": imb.prefix(STACK) if (imb.prefix(STACK) / "bin" / "IMB-MPI1").exists() else None,
    }
    try:
        spack_env = spack(mirror)
        found.update(spack_env)
        print(f"[toolchain] Spack's index of its recipes: building (pid {index_recipes(spack_env).pid})",
              file=sys.stderr)
    except (WorkflowError, subprocess.CalledProcessError) as e:
        print(f"[toolchain] no Spack: {e}", file=sys.stderr)
    for other in map(stacks.by_name, FORTRAN_TOO):
        if not other.present():
            continue
        try:
            caliper.ensure(other, mirror, log=lambda line: print(line, file=sys.stderr))
        except caliper.CaliperBuildError as e:
            print(f"[toolchain] {e}; tests/test_fortran.py will skip {other.name}", file=sys.stderr)
    if not (found["RAMBLE_ROOT"] / "bin" / "ramble").exists():
        found["RAMBLE_ROOT"] = None
    for name, path in found.items():
        if path is None:
            print(f"[toolchain] {name}: not made (see above); its tests will skip", file=sys.stderr)
        else:
            print(f"{name}={path}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("usage: ci/toolchain.py MIRROR (a folder with versions.yaml's source archives)", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1]).resolve()))
