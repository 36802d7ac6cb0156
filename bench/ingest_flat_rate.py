#!/usr/bin/env python3
"""Does ingest slow down as a series fills? N runs of one series on one day go
in as consecutive ingests (campaigns) of --batch runs each; prints each
batch's rate and the last batch's rate as a ratio of the first's (target >= 0.8).

Every run is a real fixture profile with one Adiak value (the user) varied, so
all of them land in the same (series, day) group: the worst case for rollups
that are rebuilt per group. The store is a private embedded PostgreSQL under
a temporary COMMSCOPE_HOME, removed afterwards.

    .venv/bin/python bench/ingest_flat_rate.py [--runs 10000] [--batch 250]
"""
import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from commscope.store import db
from commscope.workflow.ingest import Provenance, ingest

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))
from corpus import varied_copies  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--fixture", default="halo3d-overlap-n4.runtime-profile.cali")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="commscope-bench-"))
    tmp.chmod(0o711)
    emb = db.Embedded(tmp)
    try:
        files = varied_copies(TESTS / "data" / args.fixture, args.runs, tmp / "corpus")
        url = emb.start()
        rates = []
        with psycopg.connect(url) as conn:
            db.migrate(conn)
            for i in range(0, len(files), args.batch):
                part = files[i:i + args.batch]
                t0 = time.perf_counter()
                res = ingest(conn, part, Provenance(system="bench"))
                dt = time.perf_counter() - t0
                assert len(res.inserted) == len(part), (len(res.inserted), len(part))
                rates.append(len(part) / dt)
                print(f"batch {len(rates):3d}: runs {i + len(part):6d}  {rates[-1]:7.1f} runs/s", flush=True)
            groups = conn.execute("SELECT count(DISTINCT (series_id, day)) FROM run_day").fetchone()[0]
        head, tail = rates[:3], rates[-3:]
        print(f"{args.runs} runs of one series in {groups} (series, day) group(s), batches of {args.batch}")
        print(f"first batch {rates[0]:.1f} runs/s, last batch {rates[-1]:.1f} runs/s, "
              f"ratio last/first {rates[-1] / rates[0]:.2f}")
        print(f"median of the first 3 {statistics.median(head):.1f}, of the last 3 {statistics.median(tail):.1f}, "
              f"ratio {statistics.median(tail) / statistics.median(head):.2f} (target >= 0.8)")
    finally:
        emb.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
