#!/usr/bin/env python3
"""Ingest time and peak memory against rank count (issue 19).

A real 4-rank runtime-profile (tests/data) is copied to N ranks: rank 0's
records are written again for every rank with its mpi.rank replaced, so the
file is what Caliper writes for an N-rank job with that call tree. Each size
is ingested by `commscope ingest --ranks N` in a separate process, whose
resident memory (with its reader processes) is sampled every 20 ms. The
baseline is the smallest size, measured in the same run: time per rank and
peak memory are printed as ratios against it.

    .venv/bin/python bench/ingest_rank_scaling.py [--ranks 1024,8192,65536,100000]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from commscope.store import db

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import copy_to_ranks  # noqa: E402  (the same copies tests/test_rank_spread.py ingests)
from ingest_throughput import tree_rss_mib  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


def ingest_once(path: Path, n: int, url: str) -> tuple[float, float]:
    env = {**os.environ, "COMMSCOPE_DB_URL": url}
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "commscope.cli", "ingest", "-q", "--ranks", str(n), str(path)],
                         env=env)
    peak = 0.0
    while p.poll() is None:
        peak = max(peak, tree_rss_mib(p.pid))
        time.sleep(0.02)
    secs = time.perf_counter() - t0
    assert p.returncode == 0, f"ingest of {path} failed"
    with psycopg.connect(url) as conn:
        got = conn.execute("SELECT ranks FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert got == n, (got, n)
    return secs, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="1024,8192,65536,100000")
    ap.add_argument("--fixture", default="halo3d-overlap-n4.runtime-profile.cali")
    args = ap.parse_args()
    sizes = [int(x) for x in args.ranks.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="commscope-bench-"))
    tmp.chmod(0o711)
    emb = db.Embedded(tmp)
    try:
        url = emb.start()
        with psycopg.connect(url) as conn:
            db.migrate(conn)
        base = None
        print(f"fixture {args.fixture}, {os.cpu_count()} cores")
        print(f"{'ranks':>8} {'file MB':>8} {'ingest s':>9} {'us/rank':>8} {'peak MiB':>9} {'time/rank vs base':>18} "
              f"{'memory vs base':>15}")
        for n in sizes:
            f = copy_to_ranks(DATA / args.fixture, n, tmp / f"ranks-{n}.cali")
            mb = f.stat().st_size / 1e6
            secs, peak = ingest_once(f, n, url)
            per_rank = secs / n * 1e6
            base = base or (per_rank, peak)
            print(f"{n:>8} {mb:>8.1f} {secs:>9.1f} {per_rank:>8.1f} {peak:>9.0f} {per_rank / base[0]:>17.2f}x "
                  f"{peak / base[1]:>14.2f}x")
            f.unlink()
    finally:
        emb.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
