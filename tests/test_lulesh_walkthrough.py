"""docs/add-your-application.md's walk-through, from what it made (tests/thirdparty/lulesh-preload/): LLNL's LULESH
2.0, unmodified, profiled by preloading the no-GOTCHA Caliper.

- Ingested directly: without --param its two problem sizes are one series and ingest warns, naming --param; with
  --param s=… --per-rank s they are two series named by their size, and each stored time and MPI fraction equals
  caliper-reader's over the profile's records.
- The workspace `commscope run my-studies/lulesh --caliper mpi` made (Ramble's builtin LULESH at 1 and 8 ranks):
  each run's FOMs equal the lines LULESH printed (read here with a regex of this file), its time and MPI fraction
  caliper-reader's, and the 1- and 8-rank runs are the weak scaling the study declares (commscope_per_rank: size),
  efficiency = caliper-reader's time at 1 rank / at 8."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from conftest import ROOT
from helpers import profile_reference

DATA = ROOT / "tests" / "thirdparty" / "lulesh-preload"
DIRECT = DATA / "direct"
WS = DATA / "ramble-workspace"


def ingest(dsn: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COMMSCOPE_DB_URL": dsn}
    return subprocess.run([sys.executable, "-m", "commscope.cli", "ingest", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300, cwd=ROOT)


def reference(cali: Path) -> tuple[float, float]:
    """(time of the slowest rank, Σ MPI / Σ time over ranks) from the profile's records, read with caliper-reader."""
    total, mpi, _ = profile_reference(cali)
    return max(total.values()), sum(mpi.values()) / sum(total.values())


def stored(conn, where: str, args=()) -> dict:
    return {r[0]: r[1:] for r in conn.execute(
        "SELECT r.source, r.wall_time, r.mpi_fraction_avg, d.series_label FROM runs r "
        "JOIN v_run_metrics m ON m.run_id = r.id AND m.\"window\" = 'run' "
        "JOIN (SELECT DISTINCT series_id, series_label FROM v_shown_metrics_daily) d ON d.series_id = m.series_id "
        f"WHERE {where}", args)}


def test_without_param_the_sizes_are_one_series_and_ingest_says_what_to_pass(dsn):
    files = sorted(DIRECT.glob("*.cali"))
    p = ingest(dsn, "--app", "lulesh", *files)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 runs of lulesh record no command line, Adiak values or parameters, so all its problem sizes are one " \
           "series; give --param KEY=VALUE" in p.stderr, p.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(DISTINCT series_id) FROM runs WHERE app = 'lulesh'").fetchone() == (1,)


def test_with_param_each_size_is_its_own_series_with_caliper_reader_s_numbers(dsn):
    for s in (8, 10):
        p = ingest(dsn, "--app", "lulesh", "--system", "vm", "--stack", "debian-openmpi4", "--param", f"s={s}",
                   "--per-rank", "s", DIRECT / f"lulesh-s{s}-n8.cali")
        assert p.returncode == 0 and "stored 1 runs" in p.stdout, p.stdout + p.stderr
        # labelled, but its MPI library version is still unknown: nothing in the file names it
        assert [x for x in p.stderr.splitlines() if "warning" in x] == [
            "commscope ingest: warning: 1 run record no MPI library: its version is stored as unknown "
            "(`commscope run` records it for preloaded runs)"], p.stderr
    with psycopg.connect(dsn) as conn:
        runs = stored(conn, "r.app = 'lulesh'")
    assert len(runs) == 2
    for source, (wall, frac, label) in runs.items():
        s = re.search(r"lulesh-s(\d+)-n8", source).group(1)
        assert label.startswith(f"vm lulesh s={s} debian-openmpi4 ") and " n8" in label and "unknown" not in label
        t, f = reference(Path(source))
        assert wall == pytest.approx(t, rel=1e-9) and frac == pytest.approx(f, rel=1e-9), source


LULESH_LINES = {"Time": r"^Elapsed time\s+=\s+([0-9.]+)", "FOM": r"^FOM\s+=\s+([0-9.]+)",
                "Size": r"^\s*Problem size\s+=\s+(\d+)", "NumTasks": r"^\s*MPI tasks\s+=\s+(\d+)",
                "Iterations": r"^\s*Iteration count\s+=\s+(\d+)", "Grind Time": r"^Grind time \(us/z/c\)\s+=\s+([0-9.]+)"}


def test_the_commscope_run_workspace_stores_lulesh_s_numbers_and_its_weak_scaling(dsn, tmp_path):
    ws = tmp_path / "lulesh-workspace"
    shutil.copytree(WS, ws)
    p = ingest(dsn, ws)
    assert p.returncode == 0 and "stored 2 runs" in p.stdout, p.stdout + p.stderr
    outs = sorted(ws.glob("experiments/lulesh/standard/*/*.out"))
    assert len(outs) == 2
    with psycopg.connect(dsn) as conn:
        by_ranks = {}
        for out in outs:
            run_id, ranks, wall, frac = conn.execute(
                "SELECT id, ranks, wall_time, mpi_fraction_avg FROM runs WHERE experiment LIKE %s",
                (f"%.{out.stem}",)).fetchone()
            text = out.read_text()
            expected = {n: float(re.search(rx, text, re.M).group(1)) for n, rx in LULESH_LINES.items()}
            foms = dict(conn.execute("SELECT name, value FROM v_foms WHERE run_id = %s", (run_id,)).fetchall())
            assert foms == pytest.approx(expected), out.name
            assert ranks == expected["NumTasks"]
            t, f = reference(out.with_suffix(".cali"))
            assert wall == pytest.approx(t, rel=1e-9) and frac == pytest.approx(f, rel=1e-9), out.name
            by_ranks[ranks] = t
        scaling = {r[0]: r[1:] for r in conn.execute(
            "SELECT ranks, kind, base_ranks, speedup, efficiency FROM v_scaling WHERE app = 'lulesh' "
            "AND \"window\" = 'run'")}
    assert sorted(scaling) == [1, 8]
    assert scaling[8][:3] == ("weak", 1, None)
    assert scaling[8][3] == pytest.approx(by_ranks[1] / by_ranks[8], rel=1e-9)
