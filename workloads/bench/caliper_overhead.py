#!/usr/bin/env python3
"""Caliper overhead: the same runs with and without
CALI_CONFIG=runtime-profile,profile.mpi, on the default sizes at 2 ranks.

Needs a Caliper-enabled build: --build-dir, or CMAKE_PREFIX_PATH pointing at a
Caliper + Adiak install built with --stack's MPI (then this script builds
build/<stack>-caliper). The goal is <= 2% on total_time.

Two measurements:
1. wall time at 2 ranks, on and off alternating so drift hits both. On a
   noisy 2-core machine its spread is often larger than the effect; the
   spread is printed beside it.
2. instructions per iteration at 1 rank under callgrind: (I(2N) - I(N)) / N
   with and without the config, which is deterministic and excludes
   Caliper's start-up and flush. One rank makes no halo MPI calls, so this
   is the cost of the region annotations alone."""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _bench import measure, parser, suite
from commscope.workflow import stacks as mpi_stacks


def main():
    ap = parser(__doc__)
    ap.add_argument("--config", default="runtime-profile,profile.mpi")
    args = ap.parse_args()
    stack = mpi_stacks.by_name(args.stack)
    bdir = args.build_dir
    if bdir is None:
        if not os.environ.get("CMAKE_PREFIX_PATH"):
            sys.exit("bench: error: no Caliper: give --build-dir of a Caliper build or set CMAKE_PREFIX_PATH")
        bdir = suite.build(stack, caliper="ON", build_dir=suite.BUILD / f"{stack.name}-caliper")
    cases = [("halo3d", []), ("halo3d", ["--variant", "overlap"]), ("stencil2d", []), ("commgraph", [])]
    print(f"{args.config} vs no Caliper config, default sizes, 2 ranks, {stack.name}, same binary, "
          f"{args.repeats} alternating pairs")
    print("overhead = median over pairs of (on / off - 1); noise = spread of the off runs (max/min - 1)")
    print(f"{'workload':10} {'args':20} {'off s':>9} {'on s':>9} {'overhead':>9} {'noise':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for workload, wargs in cases:
            off, on = [], []
            for _ in range(args.repeats):
                off.append(measure(stack, bdir, workload, wargs, 2, 1, ["total_time"])["total_time"])
                env = {"CALI_CONFIG": f"{args.config},output={Path(tmp) / 'p.cali'}"}
                on.append(measure(stack, bdir, workload, wargs, 2, 1, ["total_time"], env)["total_time"])
            ratio = statistics.median(b / a for a, b in zip(off, on)) - 1
            print(f"{workload:10} {' '.join(wargs) or '(defaults)':20} {statistics.median(off):9.4f} "
                  f"{statistics.median(on):9.4f} {ratio * 100:8.1f}% {(max(off) / min(off) - 1) * 100:6.0f}%")
    if shutil.which("valgrind"):
        callgrind(stack, bdir, args.config)


def instructions(stack, bdir, workload, wargs, env) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", str(bdir / workload), *wargs]
        p = subprocess.run(cmd, env=stack.environ(env), capture_output=True, text=True, cwd=tmp)
        m = re.search(r"Collected : (\d+)", p.stderr)
        if p.returncode or not m:
            sys.exit(f"bench: callgrind run failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
        return int(m.group(1))


def callgrind(stack, bdir, config):
    n = 4
    cases = [("halo3d", ["--verify-max-points", "0"]), ("halo3d", ["--variant", "overlap", "--verify-max-points", "0"]),
             ("stencil2d", ["--verify-max-points", "0"])]
    print(f"\ninstructions per iteration, 1 rank, callgrind, default sizes, (I({2 * n} iters) - I({n} iters)) / {n}")
    print(f"{'workload':10} {'args':20} {'off':>14} {'on':>14} {'overhead':>9}")
    for workload, wargs in cases:
        per_iter = []
        for env in ({}, {"CALI_CONFIG": f"{config},output=p.cali"}):
            a = instructions(stack, bdir, workload, wargs + ["--iters", str(n)], env)
            b = instructions(stack, bdir, workload, wargs + ["--iters", str(2 * n)], env)
            per_iter.append((b - a) / n)
        shown = " ".join(a for a in wargs if a != "--verify-max-points" and a != "0") or "(defaults)"
        print(f"{workload:10} {shown:20} {per_iter[0]:14,.0f} {per_iter[1]:14,.0f} "
              f"{(per_iter[1] / per_iter[0] - 1) * 100:8.3f}%")


if __name__ == "__main__":
    main()
