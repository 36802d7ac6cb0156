#!/usr/bin/env python3
"""cgsolve with and without --debug-barriers: MPI time and total time.

The reservoir study removed the MPI_Barrier calls developers had left before
every collective and after every halo exchange and saw 5-8% less MPI time and
2-4% less total time. Here MPI time is cgsolve's comm_time (halo exchange +
reductions + barriers, averaged over ranks). Runs alternate between the two
settings so drift in the machine's load hits both alike; medians are reported.
The results must be identical (the script stops if any VERIFY value differs)."""
import statistics
import sys

from _bench import parser, setup
import suite  # noqa: E402  (on the path once _bench is imported)

FOMS = ["comm_time_avg", "barrier_time_avg", "allreduce_time_avg", "halo_time_avg", "total_time"]


def main():
    ap = parser(__doc__)
    ap.add_argument("--n", default="64,64,64")
    ap.add_argument("--ranks", default="2,4", help="rank counts (4 is oversubscribed on 2 cores)")
    ap.add_argument("--methods", default="direct,hierarchical,nonblocking")
    args = ap.parse_args()
    stack, bdir = setup(args)
    print(f"cgsolve --n {args.n}, {stack.name}, median of {args.repeats} alternating pairs")
    print(f"{'ranks':>5} {'method':13} {'barriers':8} {'iters':>5} {'MPI s':>9} {'barrier s':>9} {'total s':>9} "
          f"{'MPI saved':>10} {'total saved':>11}")
    for n in (int(x) for x in args.ranks.split(",")):
        for method in args.methods.split(","):
            values = {b: {f: [] for f in FOMS} for b in (False, True)}
            verify = {}
            for _ in range(args.repeats):
                for b in (True, False):
                    wargs = ["--n", args.n, "--allreduce", method] + (["--debug-barriers"] if b else [])
                    r = suite.run(stack, bdir, "cgsolve", wargs, n)
                    bad = suite.problems(r)
                    if bad:
                        sys.exit(f"bench: cgsolve {' '.join(wargs)} failed: {'; '.join(bad)}")
                    verify.setdefault(b, r.out.verify)
                    for f in FOMS:
                        values[b][f].append(r.out.foms[f][0])
            if verify[True] != verify[False]:
                sys.exit(f"bench: --debug-barriers changed the results: {verify[True]} != {verify[False]}")
            med = {b: {f: statistics.median(v) for f, v in values[b].items()} for b in values}
            iters = verify[False]["iterations"][1]
            for b in (True, False):
                m = med[b]
                saved = "" if b else (f"{(1 - m['comm_time_avg'] / med[True]['comm_time_avg']) * 100:9.1f}% "
                                      f"{(1 - m['total_time'] / med[True]['total_time']) * 100:10.1f}%")
                print(f"{n:5} {method:13} {'on' if b else 'off':8} {iters:>5} {m['comm_time_avg']:9.5f} "
                      f"{m['barrier_time_avg']:9.5f} {m['total_time']:9.5f} {saved}", flush=True)


if __name__ == "__main__":
    main()
