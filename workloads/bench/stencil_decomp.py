#!/usr/bin/env python3
"""stencil2d decompositions and send modes at 4096^2 with 2 ranks.

The coursework study saw row-naive (halo columns sent element by element)
12x slower than contiguous col halos at 16 cores. This prints time per
iteration and communication time for every decomposition and send mode,
relative to col/isend."""
from _bench import measure, parser, setup


def main():
    ap = parser(__doc__)
    ap.add_argument("--n", default="4096,4096")
    ap.add_argument("--iters", default="20")
    args = ap.parse_args()
    stack, bdir = setup(args)
    foms = ["time_per_iter", "comm_time_avg", "comm_time_max", "messages_per_iter_avg"]
    rows = {}
    for decomp in ("col", "row-vector", "row-naive", "cart"):
        for send in ("isend", "send", "ssend"):
            rows[decomp, send] = measure(stack, bdir, "stencil2d",
                                         ["--n", args.n, "--iters", args.iters, "--decomp", decomp, "--send", send,
                                          "--verify-max-points", "0"], 2, args.repeats, foms)
    base = rows["col", "isend"]
    print(f"stencil2d --n {args.n} --iters {args.iters}, 2 ranks, {stack.name}, median of {args.repeats}")
    print(f"{'decomp':11} {'send':6} {'s/iter':>9} {'comm avg s':>11} {'msgs/iter':>10} {'iter vs col':>12} "
          f"{'comm vs col':>12}")
    for (decomp, send), m in rows.items():
        print(f"{decomp:11} {send:6} {m['time_per_iter']:9.5f} {m['comm_time_avg']:11.5f} "
              f"{m['messages_per_iter_avg']:10.0f} {m['time_per_iter'] / base['time_per_iter']:11.2f}x "
              f"{m['comm_time_avg'] / base['comm_time_avg']:11.2f}x")


if __name__ == "__main__":
    main()
