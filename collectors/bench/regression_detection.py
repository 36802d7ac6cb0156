#!/usr/bin/env python3
"""Detection rate and false-alarm rate of the regression gate, at the noise
level measured on this machine in the same run, against Benchpark's fixed
rule (new mean > baseline mean x 1.05).

1. Noise: a real workload (halo3d, Debian Open MPI, 2 ranks) runs --noise-runs
   times; its total_time spread (MAD / median, and the coefficient of variation)
   is the noise of this machine now.
2. Series: for each shift in --shifts, --series synthetic nightly histories
   (--nights baseline nights and one new night, --per-night runs each) with
   that noise, drawn from the measured run times themselves (bootstrap), the
   new night multiplied by 1 + shift. Shift 0 gives the false-alarm rate.

    .venv/bin/python collectors/bench/regression_detection.py [--noise-runs 20] [--series 400]
"""
import argparse
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))
import mpi_stacks  # noqa: E402
import suite  # noqa: E402

from commscope.regressions import compare  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--noise-runs", type=int, default=20)
    ap.add_argument("--series", type=int, default=400)
    ap.add_argument("--nights", type=int, default=10)
    ap.add_argument("--per-night", type=int, default=3)
    ap.add_argument("--shifts", default="0,0.05,0.10,0.20,0.50")
    ap.add_argument("--min-effect", type=float, default=0.05)
    ap.add_argument("--alpha", type=float, default=0.01)
    args = ap.parse_args()

    stack = mpi_stacks.by_name("debian-openmpi4")
    bdir = suite.build(stack)
    times = []
    for _ in range(args.noise_runs):
        r = suite.run(stack, bdir, "halo3d", ["--n", "48,48,48", "--iters", "20", "--variant", "blocking"], 2)
        assert not suite.problems(r), suite.problems(r)
        times.append(r.out.foms["total_time"][0])
    med = statistics.median(times)
    mad = statistics.median(abs(t - med) for t in times) * 1.4826
    cv = statistics.stdev(times) / statistics.mean(times)
    print(f"noise: halo3d 48^3 x 20 iters, 2 ranks, {args.noise_runs} runs on this machine: median {med * 1e3:.2f} ms, "
          f"robust spread {mad / med:.1%}, CV {cv:.1%} (min {min(times) * 1e3:.2f}, max {max(times) * 1e3:.2f} ms)")

    rnd = random.Random(1)
    draw = lambda: rnd.choice(times) / med  # noqa: E731  (bootstrap from the real run times)
    print(f"{args.series} series per shift, {args.nights} baseline nights x {args.per_night} runs, "
          f"min effect {args.min_effect:.0%}, alpha {args.alpha}")
    print(f"{'shift':>6}  {'commscope check':>16}  {'baseline x 1.05':>16}")
    for shift in (float(s) for s in args.shifts.split(",")):
        ours = fixed = 0
        for _ in range(args.series):
            base = [draw() for _ in range(args.nights * args.per_night)]
            new = [draw() * (1 + shift) for _ in range(args.per_night)]
            ours += compare(new, base, args.min_effect, args.alpha)[0] == "regression"
            fixed += statistics.mean(new) > statistics.mean(base) * 1.05
        what = "false alarms" if shift == 0 else "detected"
        print(f"{shift:>6.0%}  {ours / args.series:>15.1%}   {fixed / args.series:>15.1%}   ({what})")


if __name__ == "__main__":
    main()
