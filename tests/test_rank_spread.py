"""What is kept of a run's ranks (issue 19): per-rank rows up to --rank-rows ranks, and for every run the
distribution over ranks per window and per call-path node (v_rank_spread). The reference is computed
here from caliper-reader's records with the standard library: statistics.quantiles (inclusive method,
numpy's linear interpolation), sorted() for the slowest ranks, and counting for the histogram."""
from __future__ import annotations

import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
from caliperreader import read_caliper_contents

from commscope.workflow.ingest import Provenance, ingest
from commscope.read.records import ReadOptions
from corpus import copy_to_ranks
from helpers import calipers_own

DATA = Path(__file__).parent / "data"
FILE = DATA / "halo3d-overlap-n4.runtime-profile.cali"
CLI = [sys.executable, "-m", "commscope.cli"]


def per_rank(path: Path) -> dict[str, dict[int, float]]:
    """rank -> run-window time and MPI time, and rank -> inclusive time of main/timestep, from the records."""
    out = {"time": defaultdict(float), "mpi": defaultdict(float), "loop": defaultdict(float)}
    records, _ = read_caliper_contents(str(path))
    for r in records:
        if "sum#sum#time.duration" not in r or calipers_own(r, path):
            continue
        t, rank = float(r["sum#sum#time.duration"]), int(r["mpi.rank"])
        out["time"][rank] += t
        if "mpi.function" in r:
            out["mpi"][rank] += t
        p = r.get("path") or []
        if isinstance(p, list) and p[:2] == ["main", "timestep"]:
            out["loop"][rank] += t
    return out


def check(row: dict, values: dict[int, float]) -> None:
    v = [values[r] for r in sorted(values)]
    assert row["ranks"] == len(v)
    assert row["min"] == pytest.approx(min(v)) and row["max"] == pytest.approx(max(v))
    assert row["mean"] == pytest.approx(statistics.fmean(v))
    q = statistics.quantiles(v, n=100, method="inclusive")
    assert [row["p50"], row["p90"], row["p99"]] == pytest.approx([q[49], q[89], q[98]])
    slowest = sorted(values, key=lambda r: -values[r])
    assert row["top_ranks"] == slowest[:10]
    assert row["top_values"] == pytest.approx([values[r] for r in slowest[:10]])
    bins = len(row["hist_counts"])
    width = (max(v) - min(v)) / bins
    counts = [0] * bins
    for x in v:
        counts[min(int((x - min(v)) / width), bins - 1)] += 1
    assert row["hist_counts"] == counts and sum(counts) == len(v)


def test_distributions_over_ranks_equal_the_records_and_rank_rows_follow_the_limit(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [FILE], Provenance(), read=ReadOptions(rank_rows=2))   # 4 ranks > 2: no per-rank rows
        cur = conn.execute("SELECT * FROM v_rank_spread")
        cols = [d.name for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        kept = conn.execute("SELECT count(*) FROM rank_metrics").fetchone()[0]
        note = conn.execute("SELECT metadata->>'rank_rows' FROM runs").fetchone()[0]
    ref = per_rank(FILE)
    by = {(r["window"], r["node"], r["quantity"]): r for r in rows}
    check(by["run", None, "time"], ref["time"])
    check(by["run", None, "mpi"], ref["mpi"])
    check(by["run", None, "useful"], {r: ref["time"][r] - ref["mpi"][r] for r in ref["time"]})
    check(by[None, "main/timestep", "incl_time"], ref["loop"])
    assert kept == 0 and "--rank-rows 2" in note and "v_rank_spread" in note


def test_a_large_job_keeps_distributions_and_per_rank_rows_only_on_request(dsn, tmp_path):
    big = copy_to_ranks(FILE, 1500, tmp_path / "ranks-1500.cali")
    env = {"COMMSCOPE_DB_URL": dsn}
    import os
    r = subprocess.run([*CLI, "ingest", "--ranks", "1500", str(big)], capture_output=True, text=True,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT ranks FROM runs").fetchone()[0] == 1500
        assert conn.execute("SELECT count(*) FROM rank_metrics").fetchone()[0] == 0   # default limit 1024
        (n,) = conn.execute("SELECT ranks FROM v_rank_spread WHERE \"window\" = 'run' AND quantity = 'time'").fetchone()
        assert n == 1500
        conn.execute("TRUNCATE campaigns, runs CASCADE")
        conn.commit()
    r = subprocess.run([*CLI, "ingest", "--ranks", "1500", "--rank-rows", "all", str(big)], capture_output=True,
                       text=True, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(DISTINCT rank) FROM rank_metrics").fetchone()[0] == 1500
    r = subprocess.run([*CLI, "ingest", "--rank-rows", "many", str(big)], capture_output=True, text=True,
                       env={**os.environ, **env})
    assert r.returncode == 2 and "--rank-rows" in r.stderr
