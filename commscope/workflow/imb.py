"""Intel MPI Benchmarks for one MPI stack, built from the pinned sources (versions.yaml) for the `imb` study.

IMB-MPI1 is built with IMB's own Makefile and the stack's wrappers into
$COMMSCOPE_HOME/cache/imb/<version>/<stack>/bin/IMB-MPI1, reused while its stamp names the same wrapper."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from commscope.store import db
from commscope.workflow.caliper import mpicxx
from commscope.workflow.paths import versions
from commscope.workflow.sources import source

STAMP = "commscope-imb.txt"


def prefix(stack_name: str) -> Path:
    return db.home() / "cache" / "imb" / str(versions()["imb"]["version"]) / stack_name


def ensure(stack, mirror: Path | None, log=print) -> Path | None:
    """The prefix holding bin/IMB-MPI1 for STACK, built now unless cached; None without sources.
    Raises RuntimeError naming the log when the build fails."""
    dest = prefix(stack.name)
    if (dest / "bin" / "IMB-MPI1").exists() and (dest / STAMP).exists() and (dest / STAMP).read_text() == stack.mpicc:
        return dest
    src = source("imb", mirror)
    if src is None:
        return None
    work = dest.parent / f"{stack.name}.build"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    logfile = dest.parent / f"{stack.name}.log"
    log(f"[setup] IMB {versions()['imb']['version']} for {stack.name}: building IMB-MPI1 (log {logfile})")
    # OMPI_SKIP_MPICXX: Open MPI's deprecated C++ bindings are not wanted (IMB uses the C API).
    cmd = ["make", "-j", "2", f"CC={stack.mpicc}", f"CXX={mpicxx(stack)}", "CPPFLAGS=-DOMPI_SKIP_MPICXX=1",
           "IMB-MPI1"]
    with logfile.open("w") as out:
        p = subprocess.run(cmd, cwd=work, env=stack.environ(), stdout=out, stderr=subprocess.STDOUT)
    if p.returncode or not (work / "IMB-MPI1").exists():
        shutil.rmtree(dest, ignore_errors=True)
        raise RuntimeError(f"IMB for {stack.name}: make IMB-MPI1 failed; see {logfile}")
    (dest / "bin").mkdir()
    shutil.copy2(work / "IMB-MPI1", dest / "bin" / "IMB-MPI1")
    shutil.rmtree(work, ignore_errors=True)
    (dest / STAMP).write_text(stack.mpicc)
    return dest
