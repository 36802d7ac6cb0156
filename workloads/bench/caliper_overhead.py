#!/usr/bin/env python3
"""Caliper overhead: the same runs with and without
CALI_CONFIG=runtime-profile,profile.mpi, on the default sizes at 2 ranks.

Needs a Caliper-enabled build: --build-dir, or CMAKE_PREFIX_PATH pointing at a
Caliper + Adiak install built with --stack's MPI (then this script builds
build/<stack>-caliper). Runs alternate between the two settings so drift hits
both; the goal is <= 2% on total_time."""
import os
import sys
import tempfile
from pathlib import Path

from _bench import measure, parser, suite
import mpi_stacks


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
    print(f"{args.config} vs no Caliper config, default sizes, 2 ranks, {stack.name}, "
          f"median of {args.repeats}, same binary")
    print(f"{'workload':10} {'args':20} {'off s':>9} {'on s':>9} {'overhead':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for workload, wargs in cases:
            off, on = [], []
            for _ in range(args.repeats):
                off.append(measure(stack, bdir, workload, wargs, 2, 1, ["total_time"])["total_time"])
                env = {"CALI_CONFIG": f"{args.config},output={Path(tmp) / 'p.cali'}"}
                on.append(measure(stack, bdir, workload, wargs, 2, 1, ["total_time"], env)["total_time"])
            off.sort(), on.sort()
            a, b = off[len(off) // 2], on[len(on) // 2]
            print(f"{workload:10} {' '.join(wargs) or '(defaults)':20} {a:9.4f} {b:9.4f} {(b / a - 1) * 100:8.1f}%")


if __name__ == "__main__":
    main()
