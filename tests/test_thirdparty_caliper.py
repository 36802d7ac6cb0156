"""Caliper profiles of applications commscope did not write (issue 15), stored and checked against
references taken by other routes: the upstream caliper-reader's records (MPI time is the records
carrying `mpi.function`, time outside regions the records with no path), and the applications' own
timers printed on stdout (hypre's PCG Solve wall clock, Kripke's Timers table). The files are real
runs of LLNL AMG2023, LLNL Kripke and an unmodified Intel MPI Benchmarks binary; tests/thirdparty/
says how each was made."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
from caliperreader import read_caliper_contents

from commscope.ingest import Provenance, ingest
from commscope.profiles import BadProfile
from commscope.records import ReadOptions

THIRD = Path(__file__).parent / "thirdparty"
CLI = [sys.executable, "-m", "commscope.cli"]
TIME = ("sum#sum#time.duration", "sum#time.duration")
AMG_KEYS = ("Problem", "Size-x", "Size-y", "Size-z", "Solver")
# The folders of Caliper profiles (ramble-imb-preload/ is a Ramble workspace: tests/test_thirdparty_ramble.py)
CALI = sorted(p for d in ("amg2023", "kripke", "imb-unannotated") for p in (THIRD / d).rglob("*.cali"))
RUNTIME = [p for p in CALI if ".spot." not in p.name]
SPOT = [p for p in CALI if p.name.endswith(".spot.cali")]


def cli(*args, dsn):
    import os
    return subprocess.run([*CLI, *args], capture_output=True, text=True,
                          env={**os.environ, "COMMSCOPE_DB_URL": dsn})


def app_of(path: Path) -> str:
    return {"amg2023": "amg", "kripke": "kripke", "imb-unannotated": "IMB-MPI1"}[path.parent.name]


def per_rank_reference(path: Path, focus: str | None = None) -> dict[int, list[float]]:
    """rank -> [time, MPI time] over the run (or the FOCUS region's subtrees), from caliper-reader."""
    records, _ = read_caliper_contents(str(path))
    acc: dict = defaultdict(lambda: [0.0, 0.0])
    for r in records:
        t = next((float(r[a]) for a in TIME if a in r), None)
        if t is None:
            continue
        p = r.get("path") or []
        p = p if isinstance(p, list) else [p]
        if focus and focus not in p:
            continue
        a = acc[int(r["mpi.rank"])]
        a[0] += t
        if "mpi.function" in r:
            a[1] += t
    return dict(acc)


def spot_reference(path: Path) -> tuple[float, float]:
    """(mean rank's time, mean rank's MPI time) from a spot file: Σ of each record's across-rank sum of
    exclusive time over the job's rank count, the record without a path included. (Spot's avg is over the
    ranks that made the record: AMG2023's MPI_Test on some ranks only would count as if on all.)"""
    records, g = read_caliper_contents(str(path))
    ranks = int(g["mpi.world.size"])
    total = mpi = 0.0
    for r in records:
        v = r.get("sum#scale#sum#time.duration.ns")
        if v is None:
            continue
        total += float(v) / ranks
        if "mpi.function" in r:
            mpi += float(v) / ranks
    return total, mpi


def app_timer(path: Path) -> float | None:  # noqa: D401
    """The application's own timer of its solve phase, from its stdout: hypre's `PCG Solve` wall clock
    (the maximum over ranks), or Kripke's `Solve` timer (rank 0's)."""
    text = path.with_suffix(".out").read_text()
    m = re.search(r"PCG Solve:\s*\n\s*wall clock time = ([0-9.eE+-]+) seconds", text)
    if m:
        return float(m.group(1))
    m = re.search(r"^\s*Solve\s+\d+\s+([0-9.eE+-]+)\s*$", text, re.M)
    return float(m.group(1)) if m else None


def _store(dsn, paths, **opts):
    with psycopg.connect(dsn) as conn:
        return ingest(conn, paths, Provenance(), read=ReadOptions(**opts))


def _windows(dsn) -> dict:
    """source file name -> window -> v_run_metrics row."""
    with psycopg.connect(dsn) as conn:
        cur = conn.execute("SELECT r.source, m.* FROM v_run_metrics m JOIN runs r ON r.id = m.run_id")
        cols = [d.name for d in cur.description]
        out: dict = defaultdict(dict)
        for row in cur.fetchall():
            d = dict(zip(cols, row))
            out[Path(d["source"]).name][d["window"]] = d
    return out


@pytest.fixture
def stored(dsn):
    """Every third-party profile stored, each application with the name and parameters a user gives."""
    _store(dsn, [THIRD / "amg2023"], param_keys=AMG_KEYS)
    _store(dsn, [THIRD / "kripke"], app="kripke")
    _store(dsn, [THIRD / "imb-unannotated"], app="IMB-MPI1")
    return dsn


def test_every_runtime_profile_is_stored_with_the_records_numbers(stored):
    got = _windows(stored)
    with psycopg.connect(stored) as conn:
        runs = {Path(s).name: (app, ranks, src) for s, app, ranks, src in conn.execute(
            "SELECT source, app, ranks, metadata->>'ranks_source' FROM runs")}
    assert len(runs) == len(RUNTIME) + len(SPOT)
    for f in RUNTIME:
        ref = per_rank_reference(f)
        app, ranks, source = runs[f.name]
        assert app == app_of(f)
        assert ranks == len(ref), f.name   # every rank left records
        assert source == ("jobsize" if "amg" in f.name else "mpi.world.size")
        row = got[f.name]["run"]
        times = {r: v[0] for r, v in ref.items()}
        slowest = max(times, key=times.get)
        assert row["time_s"] == pytest.approx(times[slowest], rel=1e-9), f.name
        assert row["ranks_measured"] == len(ref)
        if "nompi" in f.name:
            # recorded without profile.mpi: MPI was not measured, which is not 0
            assert all(v[1] == 0 for v in ref.values())
            for col in ("mpi_time_avg_s", "mpi_fraction_avg", "mpi_fraction_slowest", "load_balance",
                        "parallel_efficiency"):
                assert row[col] is None, (f.name, col)
            continue
        mpi = {r: v[1] for r, v in ref.items()}
        assert row["mpi_time_avg_s"] == pytest.approx(sum(mpi.values()) / len(mpi), rel=1e-9), f.name
        assert row["mpi_fraction_avg"] == pytest.approx(sum(mpi.values()) / sum(times.values()), rel=1e-9), f.name
        assert row["mpi_fraction_slowest"] == pytest.approx(mpi[slowest] / times[slowest], rel=1e-9), f.name


def test_spot_profiles_give_the_mean_rank_and_leave_the_slowest_unknown(stored):
    got = _windows(stored)
    for f in SPOT:
        total, mpi = spot_reference(f)
        row = got[f.name]["run"]
        assert row["mpi_fraction_avg"] == pytest.approx(mpi / total, rel=1e-4), f.name
        assert row["mpi_time_avg_s"] == pytest.approx(mpi, rel=1e-4), f.name
        assert row["time_s"] is None and row["mpi_fraction_slowest"] is None, f.name


def test_an_unannotated_binary_keeps_its_mpi_time_per_function(stored):
    f = THIRD / "imb-unannotated" / "imb-mpi1-n2.runtime-profile.cali"
    records, _ = read_caliper_contents(str(f))
    per_function: dict = defaultdict(float)
    for r in records:
        if "mpi.function" in r:
            per_function[r["mpi.function"]] += float(r["sum#sum#time.duration"])
    with psycopg.connect(stored) as conn:
        rows = dict(conn.execute(
            "SELECT m.function, m.time_total FROM mpi_metrics m JOIN runs r ON r.id = m.run_id "
            "WHERE r.app = 'IMB-MPI1'").fetchall())
    assert rows.keys() == per_function.keys()
    for fn, t in per_function.items():
        assert rows[fn] == pytest.approx(t, rel=1e-9), fn
    # all its time is MPI or outside every region: the fraction is MPI over both, not 100 %
    ref = per_rank_reference(f)
    frac = sum(v[1] for v in ref.values()) / sum(v[0] for v in ref.values())
    assert _windows(stored)[f.name]["run"]["mpi_fraction_avg"] == pytest.approx(frac, rel=1e-9)
    assert frac < 0.99


# hypre prints the maximum over ranks; Kripke prints rank 0's, which is the slowest only in one-rank runs
TIMED = [p for p in CALI if app_timer(p) is not None
         and ("kripke" not in p.name or "-n1." in p.name)]


@pytest.mark.parametrize("path", TIMED, ids=lambda p: p.name)
def test_focus_on_the_solve_phase_equals_the_application_s_own_timer(dsn, path):
    """--focus Solve: the focus window's time is the slowest rank's time in the Solve subtrees, which
    hypre prints as the PCG Solve wall clock (max over ranks)."""
    own = app_timer(path)
    _store(dsn, [path], app=app_of(path), focus="Solve")
    row = _windows(dsn)[path.name]["focus"]
    assert row["focus_region"] == "Solve"
    assert row["time_s"] == pytest.approx(own, abs=5e-5), path.name


def test_declared_parameters_make_series_and_scaling_pairs(stored):
    """AMG2023 with --param-keys: one series per rank count and Caliper mode; problem and solver are
    parameters; weak scaling pairs the three rank counts of one mode (same problem per rank)."""
    with psycopg.connect(stored) as conn:
        rows = conn.execute("SELECT r.ranks, s.parameters, s.environment->>'caliper', r.series_id FROM runs r "
                            "JOIN series s ON s.id = r.series_id WHERE r.app = 'amg'").fetchall()
        weak = conn.execute("SELECT weak_scaling_key(s.app, s.parameters, s.environment), "
                            "array_agg((s.parameters->>'ranks')::int ORDER BY (s.parameters->>'ranks')::int) "
                            "FROM series s WHERE s.app = 'amg' GROUP BY 1").fetchall()
        searched = conn.execute("SELECT count(*) FROM runs WHERE metadata @> '{\"Solver\": \"PCG\"}'").fetchone()[0]
    assert len(rows) == 7 and len({r[3] for r in rows}) == 7
    for ranks, params, _caliper, _sid in rows:
        assert params == {"ranks": ranks, "nodes": 1, "Problem": "2", "Size-x": "32", "Size-y": "32",
                          "Size-z": "32", "Solver": "PCG"}
    # runtime-profile and spot at 1, 2 and 4 ranks, and the one run without profile.mpi
    assert sorted(ranks for _key, ranks in weak) == [[1, 2, 4], [1, 2, 4], [2]]
    assert searched == 7   # application metadata is kept and searchable


def test_without_declared_keys_the_command_line_defines_the_experiment(dsn):
    f = THIRD / "amg2023" / "amg2023-n2.runtime-profile.cali"
    _store(dsn, [f], params=(("queue", "debug"),))
    with psycopg.connect(dsn) as conn:
        (params,) = conn.execute("SELECT s.parameters FROM series s").fetchone()
    assert params == {"ranks": 2, "nodes": 1, "cmdline": "-problem 2 -n 32 32 32 -P 2 1 1", "queue": "debug"}


def test_an_application_without_adiak_keeps_its_own_globals_as_parameters(stored):
    _, g = read_caliper_contents(str(THIRD / "kripke" / "kripke-n2.runtime-profile.cali"))
    own = {k: str(v) for k, v in g.items() if k.startswith("kripke.")}
    assert own
    with psycopg.connect(stored) as conn:
        params = [p for (p,) in conn.execute("SELECT s.parameters FROM series s WHERE s.app = 'kripke'")]
    assert params and all({k: p[k] for k in own} == own for p in params)


def test_refusals_name_the_file_the_missing_input_and_the_flag(dsn):
    kripke = THIRD / "kripke" / "kripke-n2.runtime-profile.cali"
    amg = THIRD / "amg2023" / "amg2023-n2.runtime-profile.cali"
    r = cli("ingest", str(amg), str(kripke), dsn=dsn)
    assert r.returncode == 2 and str(kripke) in r.stderr and "--app" in r.stderr and "nothing was stored" in r.stderr
    r = cli("ingest", "--param-keys", "Problem,Size-q", str(amg), dsn=dsn)
    assert r.returncode == 2 and str(amg) in r.stderr and "'Size-q'" in r.stderr and "--param" in r.stderr
    r = cli("ingest", "--param", "novalue", str(amg), dsn=dsn)
    assert r.returncode == 2 and "--param" in r.stderr and "KEY=VALUE" in r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    r = cli("ingest", "--skip-bad", str(amg), str(kripke), dsn=dsn)
    assert r.returncode == 0 and str(kripke) in r.stderr and "--app" in r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT app FROM runs").fetchall() == [("amg",)]


_LINE = re.compile(r"#(\d+) \[(focus|run)\]$")


def test_dashboards_and_report_show_third_party_series(stored, tmp_path):
    """Only third-party runs in the store: every panel query of every dashboard runs; the MPI fraction panel
    draws a line per measured series on its run window (no focus region here), equal to caliper-reader's
    Σ MPI / Σ time; runs without MPI wrapping draw none; the report is written and names the applications."""
    from click.testing import CliRunner

    from commscope import panels as P
    from commscope.cli import main
    with psycopg.connect(stored) as conn:
        values = P.all_values(conn)
        lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM runs").fetchone()
        import datetime as dt
        t0, t1 = lo - dt.timedelta(days=1), hi + dt.timedelta(days=1)
        for board in P.DASHBOARDS:
            for panel in board.panels:
                conn.execute(P.expand(panel.sql, t0, t1, values)).fetchall()   # raises on an error
        lines = {}
        for _t, metric, value in conn.execute(P.expand(P.MPI_FRACTION.panels[0].sql, t0, t1, values)).fetchall():
            sid, window = _LINE.search(metric).groups()
            lines.setdefault(int(sid), []).append((window, value))
        series_of = {Path(s).name: sid for s, sid in conn.execute("SELECT source, series_id FROM runs")}
    checked = 0
    for f in RUNTIME:
        sid = series_of[f.name]
        if "nompi" in f.name:
            assert sid not in lines, f.name
            continue
        ref = per_rank_reference(f)
        ((window, value),) = lines[sid]
        assert window == "run"
        assert value == pytest.approx(sum(v[1] for v in ref.values()) / sum(v[0] for v in ref.values()), rel=1e-9)
        checked += 1
    assert checked == 7
    out = tmp_path / "report.html"
    r = CliRunner(env={"COMMSCOPE_DB_URL": stored}).invoke(main, ["report", "-o", str(out)])
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert "amg" in html and "kripke" in html and "IMB-MPI1" in html
