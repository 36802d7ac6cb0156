#!/usr/bin/env python3
"""collsweep against IMB-MPI1: Allreduce and Bcast t_avg per size, same MPI, same ranks.

IMB-MPI1 (intel/mpi-benchmarks) is the peer benchmark, and collsweep measures
as it does (IMB_allreduce.c, IMB_bcast.c, IMB_warm_up.c, IMB_output.c): each
call timed on its own, an MPI_Barrier between calls (IMB's default -sync 1),
one buffer reused by every call (off_cache off), root 0, a warm-up of a tenth
of the timed calls (at least 10), at most 1000 timed calls cut to 40 MiB /
size, and t_avg the mean over ranks of each rank's mean per call. collsweep
also refills and checks every call, outside the timed interval. So its t_avg
should be within +-10% of IMB's. Each figure is the best (smallest) t_avg over
--repeats runs of each program, because a busy neighbour on a shared machine
slows some runs, rarely all. IMB runs with its default (dynamic) iteration
policy, `-iter 1000,40`, and `-time 600`: its time limit per size then never
binds, so its count is min(1000, 40 MiB / size) as collsweep's is
(IMB_mem_manager.c; `-iter_policy off` would instead run 1000 calls at every
size), and it does not give up on large sizes of a slow run ("time-out").
collsweep runs with IMB's payload and memory too: `--datatype float` (IMB
reduces floats; MPICH 4.0's small float Allreduces are up to 1.25x slower
than double ones here) and `--alloc mpi` (IMB's buffers come from
MPI_Alloc_mem; Open MPI 4.1's 16-64 KiB Allreduces on such memory take about
2x as long as on malloc'd memory here). The
two programs alternate, so load drift hits both alike; the load average is
printed before and after.

The noise floor is measured in the same run: IMB runs twice per repeat (A
before collsweep, B after it), and IMB-B's best against IMB-A's best shows
how far the same program is from itself here. On a 2-core VM the latency of
one launch can differ 2x from the next launch of the same binary (the MPI
ranks busy-poll, and the launch decides how they share the cores), so the
count within +-10% of collsweep is to be read against IMB's own count.

IMB is in no package registry: build it outside this repository with the
stack's own wrappers and pass --imb. The Intel MPI wheel ships its own
IMB-MPI1, used by default for pypi-impi2021."""
import re
import signal
import subprocess
import sys
from pathlib import Path

from _bench import parser, setup
import suite  # noqa: E402  (on the path once _bench is imported)

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def run_imb(stack, imb, ranks, colls, msglog):
    cmd = stack.launch(ranks, [imb, "-npmin", str(ranks), "-msglog", msglog, "-iter", "1000,40",
                               "-time", "600", *colls])
    p = subprocess.Popen(cmd, env=stack.environ(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        import os
        os.killpg(p.pid, signal.SIGKILL)
        sys.exit("bench: IMB-MPI1 hung")
    if p.returncode:
        sys.exit(f"bench: IMB-MPI1 failed ({p.returncode}): {err[-1500:]}")
    result, current = {}, None
    for line in out.splitlines():
        m = re.match(r"# Benchmarking (\w+)", line)
        if m:
            current = m.group(1).lower()
            continue
        m = ROW.match(line)
        if current and m:
            result[current, int(m.group(1))] = float(m.group(5))  # t_avg[usec]
    return result


def load():
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main():
    ap = parser(__doc__)
    ap.add_argument("--imb", help="path of IMB-MPI1 built with this stack")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--msglog", default="3:22", help="sizes 2^a..2^b bytes (IMB's -msglog); collsweep uses the same")
    args = ap.parse_args()
    stack, bdir = setup(args)
    imb = args.imb
    if not imb and stack.family == "impi":
        imb = str(Path(stack.prefix) / "bin" / "IMB-MPI1")
    if not imb or not Path(imb).exists():
        sys.exit("bench: SKIP: no IMB-MPI1 for this stack; build intel/mpi-benchmarks with its wrappers and pass --imb")
    lo, hi = (int(x) for x in args.msglog.split(":"))
    sizes = [1 << k for k in range(lo, hi + 1)]
    colls = ["allreduce", "bcast"]
    load_at_start = load()
    ours = {(c, s): [] for c in colls for s in sizes}
    imb_a = {(c, s): [] for c in colls for s in sizes}
    imb_b = {(c, s): [] for c in colls for s in sizes}

    def add_imb(into):
        for key, t in run_imb(stack, imb, args.ranks, ["Allreduce", "Bcast"], args.msglog).items():
            if key in into:  # absent if IMB timed out at this size
                into[key].append(t)

    for _ in range(args.repeats):
        add_imb(imb_a)
        r = suite.run(stack, bdir, "collsweep", ["--coll", ",".join(colls), "--sizes", f"{sizes[0]}:{sizes[-1]}",
                                                  "--datatype", "float", "--alloc", "mpi"],
                      args.ranks, timeout=900)
        bad = suite.problems(r)
        if bad:
            sys.exit(f"bench: collsweep failed: {'; '.join(bad)}")
        for c in colls:
            for s in sizes:
                ours[c, s].append(r.out.foms[f"{c}_{s}B_t_avg"][0])
        add_imb(imb_b)
    print(f"collsweep vs IMB-MPI1 ({imb}), {args.ranks} ranks, {stack.name}, best t_avg of {args.repeats}; "
          f"load average {load_at_start} at the start, {load()} at the end")
    print(f"{'coll':9} {'bytes':>8} {'collsweep us':>12} {'IMB-A us':>9} {'ratio':>6} {'IMB-B us':>9} "
          f"{'B/A':>5}  (B/A: IMB against itself, the noise floor)")
    within = control = total = 0
    for c in colls:
        for s in sizes:
            if not imb_a[c, s] or not imb_b[c, s]:
                print(f"{c:9} {s:8} {min(ours[c, s]):12.2f} {'-':>9}  IMB gave no time")
                continue
            a, b, b2 = min(ours[c, s]), min(imb_a[c, s]), min(imb_b[c, s])
            ok, ok2 = abs(a / b - 1) <= 0.10, abs(b2 / b - 1) <= 0.10
            within += ok
            control += ok2
            total += 1
            print(f"{c:9} {s:8} {a:12.2f} {b:9.2f} {a / b:6.2f}{' ' if ok else '*'} {b2:9.2f} {b2 / b:5.2f}"
                  f"{' ' if ok2 else '*'}", flush=True)
    print(f"\n(* outside +-10%) collsweep within +-10% of IMB-A at {within} of {total} sizes; "
          f"IMB-B within +-10% of IMB-A at {control} of {total} (noise floor)")
    print(f"ratio of the two counts: {within / control if control else float('nan'):.2f}")


if __name__ == "__main__":
    main()
