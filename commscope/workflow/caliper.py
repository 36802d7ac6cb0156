"""Caliper and Adiak for one MPI stack, built from the pinned sources (versions.yaml) when CMake finds none.

A Caliper belongs to one MPI, so each stack gets its own install: one build with `-DWITH_GOTCHA=OFF`, whose
exported PMPI wrappers (MPI_Send, ...) profile MPI both in the annotated workloads that link it and in unmodified
binaries that preload it (LD_PRELOAD). It is configured with only what commscope uses (MPI, Adiak; no tools).
Adiak and Caliper share one prefix, $COMMSCOPE_HOME/cache/caliper/<versions>/<stack>/pmpi, which is reused while
its stamp names the same versions, MPI wrappers and Caliper options. A failed step raises CaliperBuildError naming
the step and its log, and leaves no prefix behind. Where ccache is installed it compiles through one cache,
$COMMSCOPE_HOME/cache/ccache, with paths taken relative to $COMMSCOPE_HOME/cache: only the files that see the MPI
headers differ between stacks, so every build after the first reuses the rest."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from commscope.store import db
from commscope.workflow.paths import versions
from commscope.workflow.progress import pace
from commscope.workflow.sources import source

STAMP = "commscope-caliper.json"
# Caliper's CMake options besides the MPI wrappers and the prefix: PMPI wrappers instead of GOTCHA (so linking and
# preloading both profile MPI), Adiak, and none of the tools, tests or Kokkos hooks commscope does not use.
OPTIONS = ("-DWITH_MPI=ON", "-DWITH_GOTCHA=OFF", "-DWITH_ADIAK=ON", "-DWITH_TOOLS=OFF", "-DWITH_KOKKOS=OFF",
           "-DBUILD_TESTING=OFF")


class CaliperBuildError(RuntimeError):
    def __init__(self, stack: str, step: str, log: Path):
        self.step, self.log = step, log
        super().__init__(f"Caliper for {stack}: {step} failed; see {log}")


def release() -> str:
    v = versions()
    return f"caliper-{v['caliper']['version']}-adiak-{v['adiak']['version']}"


def prefix(stack_name: str) -> Path:
    return db.home() / "cache" / "caliper" / release() / stack_name / "pmpi"


def preloads(prefix: Path | str) -> bool:
    """Whether the Caliper at PREFIX profiles an unmodified binary through LD_PRELOAD: built with MPI, its PMPI
    wrappers exported rather than installed by GOTCHA (its caliper-config.h says), with lib/libcaliper.so."""
    try:
        config = (Path(prefix) / "include" / "caliper" / "caliper-config.h").read_text()
    except OSError:
        return False
    return ("#define CALIPER_HAVE_MPI\n" in config and "#define CALIPER_MPIWRAP_USE_GOTCHA" not in config
            and (Path(prefix) / "lib" / "libcaliper.so").exists())


def preload_prefix(stack, named: Path | str | None = None) -> Path | None:
    """The Caliper that profiles STACK's unmodified binaries: the pinned build, else NAMED (the prefix the stack's
    workloads were built with, `--caliper-prefix`) when that one preloads; None otherwise."""
    built = installed(stack)
    if built is not None:
        return built
    return Path(named) if named and preloads(named) else None


def mpicxx(stack) -> str:
    """The stack's C++ wrapper beside its C one (mpicc.openmpi -> mpicxx.openmpi, bin/mpicc -> bin/mpicxx)."""
    return str(Path(stack.mpicc).with_name(Path(stack.mpicc).name.replace("mpicc", "mpicxx")))


def _stamp(stack) -> dict:
    return {"release": release(), "mpicc": stack.mpicc, "mpicxx": mpicxx(stack), "options": list(OPTIONS)}


def installed(stack) -> Path | None:
    """The prefix of STACK's finished install, or None."""
    p = prefix(stack.name)
    f = p / STAMP
    try:
        return p if json.loads(f.read_text()) == _stamp(stack) and (p / "lib" / "libcaliper.so").exists() else None
    except (OSError, ValueError):
        return None


def ensure(stack, mirror: Path | None, log=print) -> Path | None:
    """The prefix of STACK's Caliper: the cached install, else built now. None when the pinned sources cannot be
    had (no mirror and no network). Raises CaliperBuildError when a build step fails."""
    done = installed(stack)
    if done is not None:
        return done
    srcs = {}
    for tool in ("adiak", "caliper"):
        srcs[tool] = source(tool, mirror)
        if srcs[tool] is None:
            return None
    dest = prefix(stack.name)
    shutil.rmtree(dest, ignore_errors=True)
    work = db.home() / "cache" / "caliper" / "build" / stack.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    logfile = dest.parent / f"{dest.name}.log"
    logfile.parent.mkdir(parents=True, exist_ok=True)
    logfile.write_text("")
    mpi = [f"-DMPI_C_COMPILER={stack.mpicc}", f"-DMPI_CXX_COMPILER={mpicxx(stack)}"]
    common = ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", f"-DCMAKE_INSTALL_PREFIX={dest}",
              *compiler_cache()]
    adiak = ["cmake", "-S", str(srcs["adiak"]), "-B", str(work / "adiak"), *common, *mpi, "-DENABLE_MPI=ON",
             "-DENABLE_TESTS=OFF", "-DENABLE_EXAMPLES=OFF"]
    cali = ["cmake", "-S", str(srcs["caliper"]), "-B", str(work / "caliper"), *common, *mpi, *OPTIONS,
            f"-Dadiak_DIR={dest}/lib/cmake/adiak"]
    what = f"Caliper {versions()['caliper']['version']} for {stack.name}"
    log(f"[setup] {what}: building into {dest} (log {logfile})")
    t0 = time.monotonic()
    try:
        for step, cmd in (("Adiak configure", adiak), ("Adiak build", _build(work / "adiak")),
                          ("Adiak install", ["cmake", "--install", str(work / "adiak")]),
                          ("Caliper configure", cali), ("Caliper build", _build(work / "caliper")),
                          ("Caliper install", ["cmake", "--install", str(work / "caliper")])):
            _step(stack, step, cmd, logfile, lambda msg: log(f"[setup] {what}: {msg}"))
    except CaliperBuildError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (dest / STAMP).write_text(json.dumps(_stamp(stack), indent=1) + "\n")
    log(f"[setup] {what}: built in {time.monotonic() - t0:.0f} s")
    return dest


def compiler_cache() -> list[str]:
    """CMake's launcher options for ccache, or none where ccache is not installed."""
    launcher = shutil.which("ccache")
    return [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={launcher}" for lang in ("C", "CXX")] if launcher else []


def compiler_cache_environ() -> dict[str, str]:
    """ccache's settings for the builds: one cache under $COMMSCOPE_HOME, paths relative to its cache folder (the
    sources and build folders of every stack lie at the same depth there), no hashing of the build folder. A
    setting the user's environment already makes is kept."""
    cache = db.home() / "cache"
    ours = {"CCACHE_DIR": str(cache / "ccache"), "CCACHE_BASEDIR": str(cache), "CCACHE_NOHASHDIR": "true",
            "CCACHE_MAXSIZE": "2G"}
    return {k: v for k, v in ours.items() if k not in os.environ}


def _build(bdir: Path) -> list[str]:
    return ["cmake", "--build", str(bdir), "-j", "2"]


def _step(stack, step: str, cmd: list[str], logfile: Path, say) -> None:
    """Runs one step with its output appended to LOGFILE; a build step reports its progress every quarter, with
    the time left at its pace so far."""
    with logfile.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=stack.environ(compiler_cache_environ()), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        told = 0
        for line in p.stdout:
            out.write(line)
            m = re.match(r"\[(\d+)/(\d+)\]", line)
            if m and int(m.group(2)) > 20:
                quarter = 4 * int(m.group(1)) // int(m.group(2))
                if quarter > told and quarter < 4:
                    told = quarter
                    done, total = int(m.group(1)), int(m.group(2))
                    say(f"{step} {25 * quarter} %: {pace(done, total, time.monotonic() - t0, 'steps done')}")
        if p.wait():
            raise CaliperBuildError(stack.name, step, logfile)
