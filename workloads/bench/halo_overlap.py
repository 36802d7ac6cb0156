#!/usr/bin/env python3
"""halo3d exposed communication time: overlap and rma against blocking, at 2 ranks.

The seismic study reports 67-72% less communication time from boundary-first
overlap. Here comm_time is the exposed time: what a rank spends in the
exchange calls, not the compute they overlap. Run over shared memory and TCP
loopback (Open MPI transport selection)."""
from _bench import measure, parser, setup

TRANSPORTS = {"openmpi": {"shm": {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,vader"},
                          "tcp": {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp"}}}


def main():
    ap = parser(__doc__)
    ap.add_argument("--n", default="96,96,96")
    ap.add_argument("--iters", default="40")
    args = ap.parse_args()
    stack, bdir = setup(args)
    transports = TRANSPORTS.get(stack.family, {"default": {}})
    if stack.name == "pypi-openmpi5":
        transports = {k: {**v, "OMPI_MCA_btl": v["OMPI_MCA_btl"].replace("vader", "sm")} for k, v in transports.items()}
    foms = ["comm_time_avg", "comm_time_max", "compute_time_avg", "total_time"]
    print(f"halo3d --n {args.n} --iters {args.iters}, 2 ranks, {stack.name}, median of {args.repeats}")
    print(f"{'transport':9} {'variant':12} {'comm avg s':>11} {'comm max s':>11} {'compute s':>10} {'total s':>9} "
          f"{'comm vs blocking':>17}")
    for tname, env in transports.items():
        base = None
        for variant in ("blocking", "overlap", "rma"):
            m = measure(stack, bdir, "halo3d", ["--n", args.n, "--iters", args.iters, "--variant", variant],
                        2, args.repeats, foms, env)
            base = base or m
            ratio = m["comm_time_avg"] / base["comm_time_avg"]
            print(f"{tname:9} {variant:12} {m['comm_time_avg']:11.5f} {m['comm_time_max']:11.5f} "
                  f"{m['compute_time_avg']:10.4f} {m['total_time']:9.4f} "
                  f"{ratio:8.2f}x ({(1 - ratio) * 100:.0f}% less)")


if __name__ == "__main__":
    main()
