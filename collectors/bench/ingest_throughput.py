#!/usr/bin/env python3
"""Ingest throughput end to end into PostgreSQL, against Thicket reading the
same files, measured in the same run.

The corpus is real fixture profiles copied with one Adiak value (the user)
varied, so each copy is a distinct run. The store is a private embedded
PostgreSQL under a temporary COMMSCOPE_HOME, removed afterwards.

    .venv/bin/python collectors/bench/ingest_throughput.py [--n 200] [--fixture NAME]
"""
import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from commscope import db
from commscope.ingest import Provenance, ingest

TESTS = Path(__file__).resolve().parents[2] / "tests"
DATA = TESTS / "data"
sys.path.insert(0, str(TESTS))
from corpus import varied_copies  # noqa: E402  (the same corpus the kill -9 test uses)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--fixture", default="stencil2d-row-naive-n2.spot.cali")
    ap.add_argument("--thicket-n", type=int, default=100, help="files Thicket reads (it is the slow baseline)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="commscope-bench-"))
    tmp.chmod(0o711)
    emb = db.Embedded(tmp)
    try:
        files = varied_copies(DATA / args.fixture, args.n, tmp / "corpus")
        url = emb.start()
        with psycopg.connect(url) as conn:
            db.migrate(conn)
        import thicket as th
        from commscope import hatchet_io
        t0 = time.perf_counter()
        base = [str(f) for f in files[: args.thicket_n]]
        try:
            th.Thicket.from_caliperreader(base, disable_tqdm=True)
        except th.utils.DuplicateIndexError:
            # upstream's duplicate-root bug on files with mpi.rank: same reader, filler rows dropped
            t0 = time.perf_counter()
            th.Thicket.reader_dispatch(hatchet_io.read_cali, False, True, True, base)
        thicket_rate = args.thicket_n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        with psycopg.connect(url) as conn:
            res = ingest(conn, [tmp / "corpus"], Provenance(system="bench"))
        rate = len(res.inserted) / (time.perf_counter() - t0)
        assert len(res.inserted) == args.n
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        size = (DATA / args.fixture).stat().st_size / 1024
        print(f"corpus: {args.n} copies of {args.fixture} ({size:.0f} KB each), 2-core machine")
        print(f"Thicket.from_caliperreader ({args.thicket_n} files): {thicket_rate:8.1f} profiles/s  1.00x")
        print(f"commscope ingest into PostgreSQL:          {rate:8.1f} profiles/s  {rate / thicket_rate:.2f}x")
        print(f"peak RSS of this process (includes Thicket): {rss:.0f} MiB")
    finally:
        emb.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
