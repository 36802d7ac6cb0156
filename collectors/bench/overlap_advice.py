#!/usr/bin/env python3
"""The overlap and imbalance advisor on real halo3d runs with and without a
deliberate load imbalance (issue 7, item 4).

The imbalance is halo3d's absorbing layer: with --pml-width W on a 4x1x1
process grid the two end subdomains hold W of the layer's planes on their
global x faces, and the middle two hold none there, so the ends compute more
and the middle ranks wait for them. --pml-width 0 makes every rank do the
same work: what waiting is left is the exchange itself (here shared memory
and, at 4 ranks on 2 cores, the scheduler). Both settings run for each variant,
alternating, under Caliper with comm.stats; the profiles are ingested as one
campaign and `commscope advise overlap campaign:ID` judges every run. The
script prints, per setting and variant, how many runs had their halo wait
blamed on imbalance and on the network, and the medians of the figures the
verdict rests on.

Caliper is in no registry: point --caliper-prefix (or COMMSCOPE_CALIPER_PREFIX)
at a Caliper+Adiak install built with the stack's MPI. The store is the one
commscope commands use (COMMSCOPE_DB_URL, PG* or the embedded server)."""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))
import mpi_stacks  # noqa: E402
import suite  # noqa: E402

from commscope import advise_overlap as ao, db  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stack", default="debian-openmpi4")
    ap.add_argument("--caliper-prefix", default=os.environ.get("COMMSCOPE_CALIPER_PREFIX", ""))
    ap.add_argument("--n", default="64,64,64")
    ap.add_argument("--iters", default="20")
    ap.add_argument("--pml-width", type=int, default=8, help="the imbalanced setting; the balanced one is 0")
    ap.add_argument("--variants", default="blocking,overlap")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("/tmp/commscope-overlap-advice"))
    args = ap.parse_args()
    if not args.caliper_prefix:
        sys.exit("bench: error: set --caliper-prefix or COMMSCOPE_CALIPER_PREFIX to a Caliper+Adiak install")
    stack = mpi_stacks.by_name(args.stack)
    if not stack.present():
        sys.exit(f"bench: error: --stack {stack.name} is not installed; run bash ci/setup.sh")
    bdir = suite.build(stack, caliper="ON", build_dir=suite.BUILD / f"{stack.name}-caliper-bench",
                       extra=[f"-DCMAKE_PREFIX_PATH={args.caliper_prefix}"])
    args.out.mkdir(parents=True, exist_ok=True)
    for f in args.out.iterdir():
        f.unlink()
    load0, t0 = os.getloadavg(), time.monotonic()
    for i in range(args.repeats):
        for pml in ((args.pml_width, 0) if i % 2 == 0 else (0, args.pml_width)):
            for v in args.variants.split(","):
                stem = args.out / f"halo3d-{v}-pml{pml}-{i:02d}"
                wargs = ["--variant", v, "--dims", "4,1,1", "--n", args.n, "--iters", args.iters, "--pml-width", str(pml)]
                r = suite.run(stack, bdir, "halo3d", wargs, 4, env={
                    "CALI_CONFIG": f"runtime-profile,profile.mpi,region.count,comm.stats,output={stem}.cali"})
                bad = suite.problems(r, allow_skip=True)
                if bad:
                    sys.exit(f"bench: halo3d {' '.join(wargs)} failed: {'; '.join(bad)}")
                Path(f"{stem}.out").write_text(r.stdout)
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
    print(f"halo3d --dims 4,1,1 --n {args.n} --iters {args.iters}, 4 ranks, {stack.name}, {args.repeats} repeats in "
          f"{time.monotonic() - t0:.0f} s; load average {load0[0]:.2f} -> {load1[0]:.2f}; campaign {campaign}")
    groups = defaultdict(list)
    for o in results:
        groups[(o.info["pml_width"], o.label)].append(o)
    print(f"{'pml':>4} {'variant':10}{'imbalance':>10}{'network':>8}{'compute':>9}{'max/avg':>8}{'excess ms':>10}"
          f"{'wait ms':>8}{'explained':>10}{'eff.':>6}{'corr':>6}")
    for (pml, label), runs in sorted(groups.items(), key=lambda kv: (-int(kv[0][0] or 0), kv[0][1])):
        halo = [next(r for r in o.regions if r.cause) for o in runs]
        comp = [max((r for r in o.regions if r.kind == "compute"), key=lambda r: r.imbalance or 0) for o in runs]
        med = statistics.median
        eff = [o.efficiency for o in runs if o.efficiency is not None]
        corr = [o.rank_corr for o in runs if o.rank_corr is not None]
        print(f"{pml:>4} {label:10}{sum(h.cause == 'imbalance' for h in halo):>10}"
              f"{sum(h.cause == 'network' for h in halo):>8}{comp[0].path.rsplit('/', 1)[-1]:>9}"
              f"{med(c.imbalance for c in comp):8.2f}{med(h.excess for h in halo) * 1e3:10.3f}"
              f"{med(h.mpi_avg for h in halo) * 1e3:8.3f}{med(h.explained for h in halo):10.0%}"
              f"{med(eff) if eff else float('nan'):6.0%}{med(corr) if corr else float('nan'):6.2f}")


if __name__ == "__main__":
    main()
