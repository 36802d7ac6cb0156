#!/usr/bin/env python3
"""The barrier advisor's predicted saving against the saving measured by
removing the barriers (issue 7, item 1).

Runs cgsolve with and without --debug-barriers, under Caliper
(runtime-profile,profile.mpi,region.count) and without it, alternating the
four settings and reversing their order every other repeat (ABBA) so drift in
the machine's load hits all alike. The prediction comes from each profiled run
with barriers (commscope.advise.barriers: the barrier time of the rank that
waits least plus the barrier region's own time, summed over the likely
debugging sites); the measured saving is the drop of the median slowest-rank
time of the region holding them (main/timestep). It prints both and their
ratio. The runs without Caliper measure what a production run saves (the
workload's total_time, the slowest rank's loop), against the latency part of
the prediction alone. Per barrier call it splits the saving: latency, the
barrier region's own time, what Caliper adds beyond that, the skew the barrier
held and whether the other MPI calls absorbed it.

The default grid, 12x12x12 on 2 ranks (84 debugging barriers per rank, a loop
of about 0.3-0.5 ms), makes the barriers 20-40% of the loop, so the saving is
large against the run-to-run jitter of the undisturbed runs, and a run is short
enough that most runs are undisturbed. It is the regime the reservoir study
was in: a strong-scaled solve whose subdomains are small, so each iteration is
latency-bound. --n 24,24,24 (barriers about 10% of an undisturbed 3.5 ms loop,
which most runs on a shared 2-core machine do not get) shows how the
figure degrades when the saving is small against noise.

Both sides are compared on the medians of all runs by default, with a
bootstrap interval. --fastest F also compares only the fastest share F of each
side's runs (the prediction is then the median over the kept runs with
barriers): on a 2-core box at load 7 most runs were slowed by other processes,
up to 100x, and only the fastest were undisturbed. At load about 2, with 100
repeats of the 12x12x12 grid, the fastest tenth gave intervals that spanned
zero (10 runs a side, the lowest order statistics of two disturbed
distributions) while the all-runs medians' interval was +-15%.

--undisturbed keeps only the runs in which no rank waited for a core for 5%
of the run or more (the workload's FOM runqueue_wait_share_max, the overlap
advisor's DESCHEDULED_SHARE): a direct test of what --fastest guesses from
the times. It prints how many runs of each setting it kept.

With --store the profiles are ingested as one campaign into the store
(COMMSCOPE_DB_URL, PG* or the embedded server) and `commscope advise barriers
campaign:ID` records predicted and measured in the advice table.

Caliper is in no registry: point --caliper-prefix (or COMMSCOPE_CALIPER_PREFIX)
at a Caliper+Adiak install built with the stack's MPI."""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "ci"))
import suite  # noqa: E402
from _caliper_build import caliper_build  # noqa: E402

from commscope.advise import barriers as ab
from commscope.read import measures, profiles, records  # noqa: E402
from commscope.advise.overlap import DESCHEDULED_SHARE  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stack", default="debian-openmpi4")
    ap.add_argument("--caliper-prefix", default=os.environ.get("COMMSCOPE_CALIPER_PREFIX", ""),
                    help="CMAKE_PREFIX_PATH list of the Caliper and Adiak installs")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--n", default="12,12,12")
    ap.add_argument("--allreduce", default="direct")
    ap.add_argument("--repeats", type=int, default=10,
                    help="repeats of the four runs (with and without barriers, under Caliper and without)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/commscope-barrier-advice"),
                    help="directory for the profiles (emptied first)")
    ap.add_argument("--fastest", type=float, default=1.0,
                    help="compare the fastest share of each side's runs (the undisturbed ones on a shared machine); "
                         "1 compares the medians of all runs")
    ap.add_argument("--cali-config", default="runtime-profile,profile.mpi,region.count",
                    help="CALI_CONFIG without output= (Caliper 2.12 has no runtime-profile: there use "
                         "hatchet-region-profile,profile.mpi,region.count,output.format=cali)")
    ap.add_argument("--store", action="store_true", help="ingest the profiles and run commscope advise barriers")
    ap.add_argument("--undisturbed", action="store_true",
                    help=f"compare only runs whose ranks waited for a core under {DESCHEDULED_SHARE:.0%} of the run")
    args = ap.parse_args()
    stack, bdir = caliper_build(args.stack, args.caliper_prefix, args.out)
    load0 = os.getloadavg()
    t0 = time.monotonic()
    # (barriers, under Caliper) -> runs; the four settings alternate, their order reversed every other repeat
    runs = {(b, c): [] for b in (True, False) for c in (True, False)}
    order = [(True, True), (False, True), (True, False), (False, False)]
    for i in range(args.repeats):
        for b, c in (order if i % 2 == 0 else order[::-1]):
            stem = args.out / f"cgsolve-{'barriers' if b else 'plain'}-{i:02d}"
            wargs = ["--n", args.n, "--allreduce", args.allreduce] + (["--debug-barriers"] if b else [])
            env = {"CALI_CONFIG": f"{args.cali_config},output={stem}.cali"} if c else {}
            r = suite.run(stack, bdir, "cgsolve", wargs, args.ranks, env=env)
            bad = suite.problems(r)
            if bad:
                sys.exit(f"bench: cgsolve {' '.join(wargs)} failed: {'; '.join(bad)}")
            if c:
                Path(f"{stem}.out").write_text(r.stdout)   # only the profiled runs go into the store
            runs[b, c].append((stem, r.out.foms))
    load1 = os.getloadavg()
    if args.undisturbed:
        total = {k: len(v) for k, v in runs.items()}
        runs = {k: [(stem, f) for stem, f in v if f.get("runqueue_wait_share_max", (1.0,))[0] < DESCHEDULED_SHARE]
                for k, v in runs.items()}
        print("undisturbed runs kept (barriers, Caliper): " + ", ".join(
            f"{'with' if b else 'without'} barriers, {'Caliper' if c else 'plain'}: {len(runs[b, c])} of {total[b, c]}"
            for b, c in runs))
        if any(len(v) < 3 for v in runs.values()):
            sys.exit("bench: fewer than 3 undisturbed runs in some setting; the machine is too busy for this")
    # every run's FOMs, the ones without Caliper included, next to (not in) the directory the store ingests
    args.out.with_name(args.out.name + "-foms.json").write_text(json.dumps(
        [{"barriers": b, "caliper": c, "stem": str(stem), "foms": foms} for (b, c), rs in runs.items()
         for stem, foms in rs]))

    def record(stem):
        prof = profiles.read_files([Path(f"{stem}.cali")])
        return records.from_profile(prof, measures.measure_profile(prof, None))

    def nodes(stem):
        return ab.nodes_from_record(record(stem))

    with_b = []
    for stem, _ in runs[True, True]:
        rec = record(stem)
        a = ab.analyse(ab.nodes_from_record(rec), rec.ranks, rec.summary["mpi_time_avg"], rec.summary["wall_time"])
        with_b.append((a, ab.nodes_from_record(rec)))
    without_nodes = [nodes(stem) for stem, _ in runs[False, True]]
    cmp = ab.compare(with_b, without_nodes, args.fastest)
    everything = ab.compare(with_b, without_nodes)
    kept = sorted(with_b, key=lambda x: ab.loop_time(x[1], cmp["region"]))[:cmp["runs_with"]]
    latency = statistics.median(a.predicted_saving_without_caliper for a, _ in kept)
    overhead = statistics.median(a.predicted_saving - a.predicted_saving_without_caliper for a, _ in kept)
    calls = statistics.median(sum(x.calls_per_rank for x in a.sites if x.likely_debug) for a, _ in kept)
    print(f"cgsolve --n {args.n} --allreduce {args.allreduce}, {args.ranks} ranks, {stack.name}, "
          f"{args.repeats} alternating repeats of 4 runs in {time.monotonic() - t0:.0f} s; "
          f"load average {load0[0]:.2f} -> {load1[0]:.2f}")
    print(f"region holding the barriers: {cmp['region']}; barrier share of MPI time (median): "
          f"{statistics.median(a.barrier_time / a.mpi_time_avg for a, _ in with_b):.1%}; "
          f"{calls:.0f} debugging barriers per rank")
    print(f"{'under Caliper':44}{'with':>10}{'without':>10}{'saved':>10}{'predicted':>10}{'ratio':>7}")
    for what, c in ((f"fastest {args.fastest:.0%}: slowest rank, {cmp['region']} s", cmp),
                    (f"all runs: slowest rank, {cmp['region']} s", everything)):
        print(f"{what:44}{c['time_with']:10.5f}{c['time_without']:10.5f}{c['measured_saving']:10.5f}"
              f"{c['predicted_saving']:10.5f}{c['ratio']:7.2f}")
    preds = [a.predicted_saving for a, _ in with_b]
    print(f"per-run predictions: min {min(preds):.5f} median {statistics.median(preds):.5f} max {max(preds):.5f} s")

    # Without Caliper: the workload's own loop time (total_time, the slowest rank) and the latency part alone.
    def fastest_median(values):
        values = sorted(values)
        return statistics.median(values[:max(1, math.ceil(args.fastest * len(values)))])

    plain = {b: [foms["total_time"][0] for _, foms in runs[b, False]] for b in (True, False)}
    bare = fastest_median(plain[True]) - fastest_median(plain[False])
    print(f"{'without Caliper':44}{'with':>10}{'without':>10}{'saved':>10}{'latency':>10}{'ratio':>7}")
    print(f"{f'fastest {args.fastest:.0%}: FOM total_time s':44}{fastest_median(plain[True]):10.5f}"
          f"{fastest_median(plain[False]):10.5f}{bare:10.5f}{latency:10.5f}{latency / bare if bare else 0:7.2f}")

    # How sure the measurements are: a bootstrap of the same estimators over the runs.
    rng = random.Random(7)
    boot = sorted(ab.compare(rng.choices(with_b, k=len(with_b)), rng.choices(without_nodes, k=len(without_nodes)),
                             args.fastest)["measured_saving"] for _ in range(1000))
    boot_all = sorted(ab.compare(rng.choices(with_b, k=len(with_b)),
                                 rng.choices(without_nodes, k=len(without_nodes)))["measured_saving"]
                      for _ in range(1000))
    boot_bare = sorted(fastest_median(rng.choices(plain[True], k=len(plain[True])))
                       - fastest_median(rng.choices(plain[False], k=len(plain[False]))) for _ in range(1000))
    # Where the saving comes from, per debugging barrier call (hypothesis: the instrumentation is part of it).
    us = 1e6 / calls if calls else 0
    print(f"per barrier call: latency {latency * us:.2f} us, annotations (1.5 x the barrier region's own time) "
          f"{overhead * us:.2f} us; "
          f"saved {cmp['measured_saving'] * us:.2f} us under Caliper, {bare * us:.2f} us without; "
          f"Caliper's part of the saving {(cmp['measured_saving'] - bare) * us:.2f} us")
    # Where the skew went (the model says: into the next operations) and where the rest of Caliper's cost lands
    # (the loop region's own time: the annotations' cost outside their own timestamps).
    kept_without = sorted(without_nodes, key=lambda n: ab.loop_time(n, cmp["region"]))[:cmp["runs_without"]]

    def avg_of(nodes_list, keep):
        return statistics.median(sum(n.excl_avg or 0 for n in nodes if keep(n.path)) for nodes in nodes_list)

    in_loop = lambda p: p.startswith(cmp["region"] + "/")  # noqa: E731
    other_mpi = lambda p: (in_loop(p) and p.rsplit("/", 1)[-1].startswith("MPI_")  # noqa: E731
                           and not p.endswith("MPI_Barrier"))
    absorbed = avg_of(kept_without, other_mpi) - avg_of([n for _, n in kept], other_mpi)
    skew = statistics.median(sum(x.time_avg - x.time_min for x in a.sites if x.likely_debug) for a, _ in kept)
    own = lambda p: p == cmp["region"]  # noqa: E731
    loop_own = avg_of([n for _, n in kept], own) - avg_of(kept_without, own)
    print(f"per barrier call: skew held in the barrier (avg - min) {skew * us:.2f} us, other MPI time in the loop "
          f"grew by {absorbed * us:.2f} us without the barriers; {cmp['region']}'s own time (avg over ranks) "
          f"{loop_own * us:.2f} us larger with them")
    print(f"predicted saving {cmp['predicted_saving']:.5f} s, measured {cmp['measured_saving']:.5f} s "
          f"(90% bootstrap interval {boot[50]:.5f} .. {boot[949]:.5f}), predicted/measured {cmp['ratio']:.2f} "
          f"(target 0.75-1.25); latency alone "
          f"{latency / cmp['measured_saving'] if cmp['measured_saving'] else float('nan'):.2f}")
    print(f"all runs: predicted saving {everything['predicted_saving']:.5f} s, measured "
          f"{everything['measured_saving']:.5f} s (90% bootstrap interval {boot_all[50]:.5f} .. {boot_all[949]:.5f}), "
          f"predicted/measured {everything['ratio']:.2f}")
    bare_all = statistics.median(plain[True]) - statistics.median(plain[False])
    latency_all = statistics.median(a.predicted_saving_without_caliper for a, _ in with_b)
    print(f"all runs without Caliper: latency {latency_all:.5f} s, measured {bare_all:.5f} s, "
          f"latency/measured {latency_all / bare_all if bare_all else float('nan'):.2f}")
    print(f"without Caliper: latency {latency:.5f} s, measured {bare:.5f} s "
          f"(90% bootstrap interval {boot_bare[50]:.5f} .. {boot_bare[949]:.5f}), "
          f"latency/measured {latency / bare if bare else float('nan'):.2f}")
    if args.store:
        cli = [sys.executable, "-m", "commscope.cli"]
        p = subprocess.run([*cli, "ingest", str(args.out)], capture_output=True, text=True)
        if p.returncode:
            sys.exit(f"bench: commscope ingest failed: {p.stderr}")
        print(p.stdout.strip().splitlines()[-1])
        from commscope.store import db
        with db.connect() as conn:
            (campaign,) = conn.execute("SELECT max(campaign_id) FROM runs").fetchone()
        p = subprocess.run([*cli, "advise", "barriers", f"campaign:{campaign}", "--fastest", str(args.fastest)],
                           capture_output=True, text=True)
        measured = [line for line in p.stdout.splitlines() if "Measured" in line]
        print(measured[0] if measured else p.stdout + p.stderr)
        if p.returncode:
            sys.exit(p.returncode)


if __name__ == "__main__":
    main()
