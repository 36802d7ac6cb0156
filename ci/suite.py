#!/usr/bin/env python3
"""Build every workload against every MPI stack, run the verification matrix
and check that the VERIFY values agree across variants, rank counts and stacks.

    python3 ci/suite.py                       # all present stacks, 1/2/4 ranks
    python3 ci/suite.py --stacks debian-mpich4 --ranks 2

Builds go to build/<stack>/, outputs to build/results/<stack>/. Stdlib only.
The output contract is parsed by commscope/read/workload_output.py.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the checkout's commscope package
from commscope.read.workload_output import Output, parse_output  # noqa: E402,F401  (one parser for CI and the readers)
from commscope.workflow import stacks as mpi_stacks  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "workloads"
BUILD = Path(os.environ.get("COMMSCOPE_BUILD_DIR", ROOT / "build"))
RUN_TIMEOUT = 180  # seconds; a hang is a failure, never a wait

# Small sizes with uneven remainders, so every block-distribution edge case runs.
HALO3D = ["--n", "21,17,12", "--iters", "6", "--pml-width", "3"]
STENCIL2D = ["--n", "37,29", "--iters", "15"]
COMMGRAPH = ["--iters", "3", "--small-bytes", "256", "--large-bytes", "65536"]
# collsweep checks every call, so a few timed calls per size prove each collective; at 4 ranks on 2 cores every
# call waits for the ranks to get a core in turn.
COLLSWEEP = ["--sizes", "8,1K,64K", "--iters", "4", "--warmup", "2"]
CGSOLVE = ["--n", "20,18,16", "--tol", "1e-8"]
# pio writes its shared file here; one directory per process, so concurrent
# suites never share a file. Callers create it (scratch_dir()).
PIO_DIR = Path(tempfile.gettempdir()) / f"commscope-pio-{os.getpid()}"
PIO = ["--n", "21,17,12", "--iters", "2", "--dir", str(PIO_DIR)]

# (workload, case id, arguments). Cases of one workload with the same
# "agree" group must print the same checksum at every rank count and stack.
MATRIX = (
    [("halo3d", f"{v}{'-fused' if f else ''}", HALO3D + ["--variant", v] + (["--fused"] if f else []))
     for v in ("blocking", "nonblocking", "overlap", "rma") for f in (False, True)]
    + [("stencil2d", f"{d}-{s}", STENCIL2D + ["--decomp", d, "--send", s])
       for d in ("row-naive", "row-vector", "col", "cart") for s in ("ssend", "send", "isend")]
    + [("commgraph", p, COMMGRAPH + ["--pattern", p]) for p in ("pairs", "stencil4d", "random-sparse")]
    # "forced" runs the same sweep with every collective's algorithm forced
    # through the stack's own control (FORCED_ALGORITHMS).
    + [("collsweep", c, COLLSWEEP) for c in ("default", "forced")]
    + [("cgsolve", f"{m}{'-barriers' if b else ''}", CGSOLVE + ["--allreduce", m] + (["--debug-barriers"] if b else []))
       for m in ("direct", "hierarchical", "nonblocking") for b in (False, True)]
    + [("pio", m, PIO + ["--method", m]) for m in ("independent", "collective")]
    + [("pio", f"two-phase-g{g}", PIO + ["--method", "two-phase", "--group-size", str(g)]) for g in (1, 2, 4)]
)

# A non-default algorithm for each of the six collectives, through each MPI's
# own runtime control (valid names and numbers: workloads/README.md). Every
# choice is valid at 1, 2 and 4 ranks for every size in COLLSWEEP.
FORCED_ALGORITHMS = {
    # Open MPI 4.1 and 5.0: numbers from `ompi_info --param coll tuned --level 9`.
    "openmpi": {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                "OMPI_MCA_coll_tuned_barrier_algorithm": "1",     # linear
                "OMPI_MCA_coll_tuned_bcast_algorithm": "1",       # basic_linear
                "OMPI_MCA_coll_tuned_reduce_algorithm": "1",      # linear
                "OMPI_MCA_coll_tuned_allreduce_algorithm": "3",   # recursive_doubling
                "OMPI_MCA_coll_tuned_allgather_algorithm": "2",   # bruck
                "OMPI_MCA_coll_tuned_alltoall_algorithm": "2"},   # pairwise
    # MPICH 4.0 and 5.0: names valid in both. FALLBACK=error makes MPICH fail
    # the call instead of silently running another algorithm, so a passing
    # run proves the forced one ran.
    "mpich": {"MPIR_CVAR_BARRIER_INTRA_ALGORITHM": "nb",
              "MPIR_CVAR_BCAST_INTRA_ALGORITHM": "scatter_ring_allgather",
              "MPIR_CVAR_REDUCE_INTRA_ALGORITHM": "binomial",
              "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "recursive_doubling",
              "MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM": "ring",
              "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "pairwise",
              "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"},
    # Intel MPI 2021: preset numbers within the ranges `impi_info -v` gives.
    # I_MPI_DEBUG=6 makes the library print every I_MPI_ variable it accepted.
    "impi": {"I_MPI_ADJUST_BARRIER": "2", "I_MPI_ADJUST_BCAST": "2", "I_MPI_ADJUST_REDUCE": "2",
             "I_MPI_ADJUST_ALLREDUCE": "2", "I_MPI_ADJUST_ALLGATHER": "2", "I_MPI_ADJUST_ALLTOALL": "2",
             "I_MPI_DEBUG": "6"},
}


def case_env(family: str, workload: str, case: str) -> dict:
    """Environment a matrix case needs on a stack family."""
    return dict(FORCED_ALGORITHMS[family]) if (workload, case) == ("collsweep", "forced") else {}


def forcing_problems(r: "Run", family: str) -> list[str]:
    """Why a forced collsweep run does not show that its forcing took effect.
    Open MPI and MPICH: the header's MPI_T read-back (PARAM mpit.*) holds the
    forced value, i.e. the library parsed it. Intel MPI exposes no MPI_T
    variable for it: its own startup lines must list each control, without an
    "Incorrect adjust value" warning."""
    bad = []
    env = FORCED_ALGORITHMS[family]
    for name, value in env.items():
        if name != "I_MPI_DEBUG" and r.out.params.get(f"env.{name}") != value:
            bad.append(f"header does not echo {name}={value}")
    if family == "openmpi":
        for name, value in env.items():
            cvar = name[len("OMPI_MCA_"):]
            got = r.out.params.get(f"mpit.{cvar}", "")
            want = "1" if cvar.endswith("dynamic_rules") else value
            if got.split(" ")[0] != want:
                bad.append(f"library holds {cvar}={got!r}, forced {want}")
    elif family == "mpich":
        for name in env:
            if name.endswith("_ALGORITHM"):
                got = r.out.params.get(f"mpit.{name}", "")
                # MPICH numbers its enum internally (0 = auto) and the numbers
                # differ between 4.0 and 5.0; nonzero means forced.
                if got in ("", "0"):
                    bad.append(f"library holds {name}={got!r}, forced {env[name]}")
    else:
        for name, value in env.items():
            if name.startswith("I_MPI_ADJUST") and f"MPI startup(): {name}={value}" not in r.stdout + r.stderr:
                bad.append(f"Intel MPI did not report accepting {name}={value}")
        if "Incorrect adjust value" in r.stdout + r.stderr:
            bad.append("Intel MPI rejected an I_MPI_ADJUST value")
    return bad


def scratch_dir() -> Path:
    PIO_DIR.mkdir(parents=True, exist_ok=True)
    return PIO_DIR

# The VERIFY value that must be identical across cases, per workload. For
# commgraph the traffic depends on the graph, so only payload errors (0) are.
# collsweep's results are checked on every call (wrong elements, always 0);
# cgsolve's iteration count to the tolerance must match across Allreduce
# methods, barriers, rank counts and stacks; pio's read-back checksum is exact.
AGREE = {"halo3d": "checksum", "stencil2d": "checksum", "commgraph": "payload",
         "collsweep": "wrong_elements", "cgsolve": "iterations", "pio": "checksum"}


@dataclass
class Run:
    stack: str
    workload: str
    case: str
    ranks: int
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    out: Output

    def label(self) -> str:
        return f"{self.stack}/{self.workload}/{self.case}/n{self.ranks}"


def build(stack: mpi_stacks.Stack, caliper: str = "OFF", build_dir: Path | None = None,
          extra: list[str] | None = None) -> Path:
    """Builds the workloads for one stack under build/<stack> (or build_dir)."""
    return mpi_stacks.build_workloads(stack, build_dir or BUILD / stack.name, caliper, extra)


# Launcher start-up failures that happen before any rank runs (seen with the
# PyPI Open MPI 5 prterun under load). The program never started, so the run
# is launched again, once; anything the program itself printed is never retried.
LAUNCHER_STARTUP_FAILURES = ("The PMIx server's listener thread failed to start",)


def run(stack: mpi_stacks.Stack, bdir: Path, workload: str, args: list[str], ranks: int,
        case: str = "", env: dict | None = None, timeout: float = RUN_TIMEOUT, cwd: Path | None = None) -> Run:
    cmd = stack.launch(ranks, [str(bdir / workload), *args])
    t0 = time.monotonic()
    for _ in range(2):
        # A new session, so a hung launcher and all its ranks die together.
        p = subprocess.Popen(cmd, env=stack.environ(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, cwd=cwd)
        try:
            so, se = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            so, se = p.communicate()
            rc, se = -999, se + f"\n[suite] killed after {timeout:.0f} s: hang"
        if rc == 0 or "COMMSCOPE " in so or not any(f in se for f in LAUNCHER_STARTUP_FAILURES):
            break
    return Run(stack.name, workload, case, ranks, rc, so, se, time.monotonic() - t0, parse_output(so))


def problems(r: Run, allow_skip: bool = False) -> list[str]:
    """Why a run does not count as verified, if it does not. SKIP (no serial
    reference was run) counts as a problem unless allow_skip."""
    bad = []
    if r.returncode != 0:
        bad.append(f"exit status {r.returncode}: {r.stderr.strip()[-500:]}")
    if r.out.workload != r.workload:
        bad.append("no COMMSCOPE header")
    if r.out.ranks != r.ranks:
        bad.append(f"ran as {r.out.ranks} ranks, asked for {r.ranks}")
    if not r.out.verify:
        bad.append("no VERIFY line")
    for name, (status, value) in r.out.verify.items():
        if status != "PASS" and not (allow_skip and status == "SKIP"):
            bad.append(f"VERIFY {name} {status} {value}")
    for need in ("total_time", "time_per_iter", "comm_time_avg", "comm_time_max"):
        if need not in r.out.foms:
            bad.append(f"no FOM {need}")
    # Every workload reports its most-delayed rank's wait for a core where Linux's schedstat says it.
    share = r.out.foms.get("runqueue_wait_share_max")
    if share is None and Path("/proc/thread-self/schedstat").exists():
        bad.append("no FOM runqueue_wait_share_max")
    elif share is not None and not 0.0 <= share[0] <= 1.0:
        bad.append(f"FOM runqueue_wait_share_max {share[0]} is not a share of the run")
    if (r.workload, r.case) == ("collsweep", "forced"):
        bad += forcing_problems(r, mpi_stacks.by_name(r.stack).family)
    return bad


def disagreements(runs: list[Run]) -> list[str]:
    """Runs of one workload whose agreed VERIFY value differs from the first."""
    msgs = []
    for workload, key in AGREE.items():
        rs = [r for r in runs if r.workload == workload and key in r.out.verify]
        if rs and len({r.out.verify[key][1] for r in rs}) > 1:
            ref = rs[0]
            for r in rs[1:]:
                if r.out.verify[key][1] != ref.out.verify[key][1]:
                    msgs.append(f"{r.label()}: {key} {r.out.verify[key][1]} != {ref.label()}: {ref.out.verify[key][1]}")
    return msgs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stacks", default="", help="comma-separated stack names (default: every present one)")
    ap.add_argument("--ranks", default="1,2,4", help="rank counts (default: 1,2,4)")
    ap.add_argument("--workloads", default="halo3d,stencil2d,commgraph,collsweep,cgsolve,pio")
    args = ap.parse_args()
    try:
        stacks = [mpi_stacks.by_name(n) for n in args.stacks.split(",") if n] or \
            [s for s in mpi_stacks.catalog() if s.present()]
        ranks = [int(x) for x in args.ranks.split(",")]
    except (KeyError, ValueError) as e:
        print(f"suite: error: {e}", file=sys.stderr)
        return 2
    missing = [s.name for s in stacks if not s.present()]
    if missing or not stacks:
        print(f"suite: error: MPI stacks not installed: {', '.join(missing) or 'all'}; run bash ci/setup.sh",
              file=sys.stderr)
        return 2
    wanted = set(args.workloads.split(","))
    runs, failed = [], []
    for stack in stacks:
        print(f"== {stack.name}: building with {stack.mpicc}", flush=True)
        bdir = build(stack)
        results = BUILD / "results" / stack.name
        results.mkdir(parents=True, exist_ok=True)
        for workload, case, wargs in MATRIX:
            if workload not in wanted:
                continue
            scratch_dir()
            for n in ranks:
                r = run(stack, bdir, workload, wargs, n, case, env=case_env(stack.family, workload, case))
                (results / f"{workload}-{case}-n{n}.out").write_text(r.stdout + r.stderr)
                runs.append(r)
                why = problems(r)
                key = AGREE[workload]
                shown = r.out.verify.get(key, ("-", "-"))[1]
                print(f"   {'ok  ' if not why else 'FAIL'} {workload:9} {case:22} n={n}  "
                      f"{r.seconds:5.2f}s  {key}={shown}", flush=True)
                if why:
                    failed.append(f"{r.label()}: {'; '.join(why)}")
    failed += disagreements(runs)
    print(f"\n{len(runs)} runs on {len(stacks)} stacks; {len(failed)} problems")
    for f in failed:
        print(f"  {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
