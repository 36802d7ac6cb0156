#!/usr/bin/env python3
"""The overlap and imbalance advisor on real halo3d runs with and without a
deliberate load imbalance (issue 7, item 4).

The imbalance is halo3d's absorbing layer on one x face only: with
--dims 2,1,1 --pml-width 32 --pml-faces x- on a 64-plane grid, rank 0's whole
subdomain does the layer's extra pass and rank 1 does none, so rank 1 waits
for rank 0. The balanced setting puts the same layer on both x faces
(--pml-faces x-,x+): the slow rank's work is unchanged, the other rank gets
as much, and what waiting is left is the exchange itself (shared memory) and
whatever the machine's other load takes. Two ranks on two cores, so the ranks
do not steal each other's core (four ranks here would, and a waiting rank's
time would then include its core-mate's compute).

Both settings run for each variant, alternating (ABAB), under Caliper with
comm.stats; the profiles are ingested as one campaign and
`commscope advise overlap campaign:ID` judges every run. The script prints,
per setting and variant, how many runs were judged right (imbalanced:
`imbalance`, balanced: `network`), the medians of the figures the verdict
rests on, and the load average (`uptime`) before and after every repeat.
--json writes every run's figures.

--competing-task runs one `yes` beside the ranks for the whole campaign, so
the ranks share the 2 cores with another runnable task, as on a shared
machine. Every rank then waits for a core part of the run, which the
workloads record (runqueue_wait_share_max), and the right verdict is
`descheduled` (no verdict on the cause) in both settings.

Caliper is in no registry: point --caliper-prefix (or COMMSCOPE_CALIPER_PREFIX)
at a Caliper+Adiak install built with the stack's MPI. The store is the one
commscope commands use (COMMSCOPE_DB_URL, PG* or the embedded server)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "ci"))
import suite  # noqa: E402
from _caliper_build import caliper_build  # noqa: E402

from commscope.advise import overlap as ao
from commscope.store import db  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stack", default="debian-openmpi4")
    ap.add_argument("--caliper-prefix", default=os.environ.get("COMMSCOPE_CALIPER_PREFIX", ""))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--dims", default="2,1,1")
    ap.add_argument("--n", default="64,64,64")
    ap.add_argument("--iters", default="40")
    ap.add_argument("--pml-width", default="32")
    ap.add_argument("--imbalanced-faces", default="x-", help="--pml-faces of the imbalanced setting")
    ap.add_argument("--balanced-faces", default="x-,x+", help="--pml-faces of the balanced setting")
    ap.add_argument("--variants", default="blocking,nonblocking,overlap,rma")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    ap.add_argument("--competing-task", action="store_true",
                    help="run one `yes` beside the ranks for the whole campaign")
    ap.add_argument("--out", type=Path, default=Path("/tmp/commscope-overlap-advice"))
    args = ap.parse_args()
    stack, bdir = caliper_build(args.stack, args.caliper_prefix, args.out)
    settings = {"imbalanced": args.imbalanced_faces, "balanced": args.balanced_faces}
    load0, t0, loads = os.getloadavg(), time.monotonic(), []
    hog = subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) if args.competing_task else None
    try:
        campaign_runs(args, stack, bdir, settings, loads)
    finally:
        if hog:
            hog.kill()
            hog.wait()
    report(args, stack, settings, load0, t0, loads)


def campaign_runs(args, stack, bdir, settings, loads):
    for i in range(args.repeats):
        before = os.getloadavg()[0]
        for setting in (("imbalanced", "balanced") if i % 2 == 0 else ("balanced", "imbalanced")):
            for v in args.variants.split(","):
                stem = args.out / f"halo3d-{v}-{setting}-{i:02d}"
                wargs = ["--variant", v, "--dims", args.dims, "--n", args.n, "--iters", args.iters,
                         "--pml-width", args.pml_width, "--pml-faces", settings[setting]]
                r = suite.run(stack, bdir, "halo3d", wargs, args.ranks, env={
                    "CALI_CONFIG": f"runtime-profile,profile.mpi,region.count,comm.stats,output={stem}.cali"})
                bad = suite.problems(r, allow_skip=True)
                if bad:
                    sys.exit(f"bench: halo3d {' '.join(wargs)} failed: {'; '.join(bad)}")
                Path(f"{stem}.out").write_text(r.stdout)
        loads.append((before, os.getloadavg()[0]))
        print(f"repeat {i}: load average {before:.2f} -> {loads[-1][1]:.2f}", flush=True)


def report(args, stack, settings, load0, t0, loads):
    load1 = os.getloadavg()
    cli = [sys.executable, "-m", "commscope.cli"]
    p = subprocess.run([*cli, "ingest", str(args.out)], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"bench: commscope ingest failed: {p.stderr}")
    with db.connect() as conn:
        (campaign,) = conn.execute("SELECT max(campaign_id) FROM runs").fetchone()
    p = subprocess.run([*cli, "advise", "overlap", f"campaign:{campaign}"], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"bench: commscope advise overlap failed: {p.stderr}")
    with db.connect() as conn:
        results, _ = ao.from_store(conn, f"campaign:{campaign}")
    print(f"halo3d --dims {args.dims} --n {args.n} --iters {args.iters} --pml-width {args.pml_width}, "
          f"--pml-faces {args.imbalanced_faces} (imbalanced) vs {args.balanced_faces} (balanced), {args.ranks} ranks, "
          f"{stack.name}, {args.repeats} repeats in {time.monotonic() - t0:.0f} s"
          f"{', beside a competing task' if args.competing_task else ''}; load average {load0[0]:.2f} -> "
          f"{load1[0]:.2f}; campaign {campaign}")
    setting_of = {v: k for k, v in settings.items()}
    right_cause = ({"imbalanced": "descheduled", "balanced": "descheduled"} if args.competing_task
                   else {"imbalanced": "imbalance", "balanced": "network"})
    groups, rows = defaultdict(list), []
    for o in results:
        setting = setting_of[o.info["pml_faces"]]
        groups[(setting, o.label)].append(o)
        halo = next(r for r in o.regions if r.cause)
        users = [g for g in o.regions if g.kind == "compute"]
        rows.append({"run_id": o.run_id, "setting": setting, "variant": o.label, "cause": halo.cause,
                     "excess": halo.excess, "exposed": o.exposed, "halo_wait": halo.mpi_avg,
                     "explained": halo.explained, "loop": o.loop_time, "efficiency": o.efficiency,
                     "load_balance": o.load_balance, "runqueue_share": o.runqueue_share,
                     "compute_imbalance": max((u.imbalance or 0) for u in users)})
    print(f"{'setting':11}{'variant':12}{'right':>6}{'imbalance':>10}{'network':>8}{'desched.':>9}{'runq':>6}"
          f"{'max/avg':>8}{'excess ms':>10}{'MPI ms':>8}{'halo ms':>8}{'explained':>10}{'loop ms':>8}{'eff.':>6}")
    med = statistics.median
    for (setting, label), runs in sorted(groups.items(), key=lambda kv: (kv[0][0] != "imbalanced", kv[0][1])):
        mine = [r for r in rows if r["setting"] == setting and r["variant"] == label]
        eff = [r["efficiency"] for r in mine if r["efficiency"] is not None]
        print(f"{setting:11}{label:12}{sum(r['cause'] == right_cause[setting] for r in mine):>3}/{len(mine):<2}"
              f"{sum(r['cause'] == 'imbalance' for r in mine):>10}{sum(r['cause'] == 'network' for r in mine):>8}"
              f"{sum(r['cause'] == 'descheduled' for r in mine):>9}"
              f"{med(r['runqueue_share'] if r['runqueue_share'] is not None else float('nan') for r in mine):6.1%}"
              f"{med(r['compute_imbalance'] for r in mine):8.2f}{med(r['excess'] for r in mine) * 1e3:10.1f}"
              f"{med(r['exposed'] for r in mine) * 1e3:8.1f}{med(r['halo_wait'] for r in mine) * 1e3:8.1f}"
              f"{med(r['explained'] for r in mine):10.0%}{med(r['loop'] for r in mine) * 1e3:8.1f}"
              f"{med(eff) if eff else float('nan'):6.0%}")
    right = sum(r["cause"] == right_cause[r["setting"]] for r in rows)
    print(f"right verdicts: {right} of {len(rows)}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "campaign": campaign,
                                         "loads": loads, "runs": rows}, indent=1))

if __name__ == "__main__":
    main()
