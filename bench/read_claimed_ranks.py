#!/usr/bin/env python3
"""Reader memory against the rank count a profile claims (issue 32).

A real 4-rank runtime-profile (tests/data) is copied to N ranks with data (tests/corpus.py, as
bench/ingest_rank_scaling.py does). Each copy is read by profiles.read_files with --ranks equal to N, and
with the largest count the reader believes for N ranks with data (profiles.claim_limit: 2N + 1024; the
ranks without data make it a partial run, read with --allow-partial). Each read runs in a process of its
own, which reports its peak resident memory (ru_maxrss) and the peak of Python's and numpy's allocations
during the read (tracemalloc). Run it against another checkout with PYTHONPATH=that/checkout.

    .venv/bin/python bench/read_claimed_ranks.py [--ranks 4,256,4096] [--source PROFILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from corpus import copy_to_ranks  # noqa: E402

DATA = HERE.parent / "tests" / "data"
SOURCE = DATA / "halo3d-overlap-n4.runtime-profile.cali"

CHILD = """
import json, resource, sys, time, tracemalloc
from pathlib import Path
from commscope.read import profiles
path, claimed = Path(sys.argv[1]), int(sys.argv[2])
tracemalloc.start()
t0 = time.perf_counter()
prof = profiles.read_files([path], allow_partial=True, ranks=claimed)
stats = prof.stats
seconds = time.perf_counter() - t0
_, peak = tracemalloc.get_traced_memory()
print(json.dumps({"ranks": prof.ranks, "with_data": len(prof.measured_ranks), "paths": len(prof.excl),
                  "missing": len(prof.missing_ranks), "seconds": seconds, "traced_peak_mib": peak / 2**20,
                  "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def read_once(path: Path, claimed: int) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), str(claimed)], capture_output=True, text=True,
                       env=os.environ)
    if r.returncode:
        raise SystemExit(r.stderr.strip().splitlines()[-1])
    return json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="4,256,4096", help="ranks with data, comma-separated")
    ap.add_argument("--source", type=Path, default=SOURCE, help="a runtime-profile whose rank 0 is copied")
    args = ap.parse_args()
    from commscope.read import profiles
    print(f"reader: {Path(profiles.__file__).resolve().parents[2]}; profile: {args.source.name}")
    print("| ranks with data | claimed | paths | traced peak (MiB) | peak RSS (MiB) | read + stats (s) |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in map(int, args.ranks.split(",")):
            path = copy_to_ranks(args.source, n, Path(tmp) / f"n{n}.cali")
            for claimed in (n, 2 * n + 1024):
                m = read_once(path, claimed)
                assert m["with_data"] == n and m["ranks"] == claimed, m
                print(f"| {n} | {claimed} | {m['paths']} | {m['traced_peak_mib']:.2f} | {m['maxrss_mib']:.0f} | "
                      f"{m['seconds']:.2f} |")


if __name__ == "__main__":
    main()
