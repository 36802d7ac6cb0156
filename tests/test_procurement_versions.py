"""The procurement panels compare each stack on its newest version and name it (docs/measurement-model.md). One
cgsolve experiment on two systems, both on Open MPI, each first on 4.1.4 (much faster), then on 4.1.6: workload
outputs written from a real one with real cgsolve timings (tests/upgrade_history.py), ingested night by night through
`commscope ingest`. The expected figures are read back from the files alone: the mean FOM total_time of the outputs
whose MPI_LIBRARY line names the newest version in the time range, never from the store."""
from __future__ import annotations

import datetime as dt
import math
import random
import re
import statistics
from pathlib import Path

import psycopg
import pytest

from upgrade_history import NEW_MPI, OLD_MPI, output, samples

SYSTEMS = {"proc-a": 1.0, "proc-b": 1.5}   # system -> how much slower than the samples it runs on 4.1.6
OLD_SPEEDUP = 0.4                          # 4.1.4 ran in 40 % of 4.1.6's time
NIGHTS = {1: OLD_MPI, 2: OLD_MPI, 3: OLD_MPI, 4: NEW_MPI, 5: NEW_MPI}
RUNS = 3
ITERS = 2500
REF = "proc-b"


def started(night: int) -> dt.datetime:
    return dt.datetime(2026, 9, night, 2, tzinfo=dt.timezone.utc)


def write_and_ingest(dsn: str, root: Path) -> None:
    """Each system's nights as workload outputs, each night one `commscope ingest` (click's runner)."""
    from click.testing import CliRunner
    from commscope.cli import main
    rnd, pool = random.Random(43), samples()
    for system, slower in SYSTEMS.items():
        for night, library in NIGHTS.items():
            folder = root / system / f"night{night}"
            folder.mkdir(parents=True)
            for i in range(RUNS):
                value = rnd.choice(pool) * slower * (OLD_SPEEDUP if library == OLD_MPI else 1.0) * (1 + 1e-6 * i)
                (folder / f"cgsolve-r{i}.out").write_text(output(value, ITERS, library))
            r = CliRunner().invoke(main, ["ingest", "-q", "--system", system, "--started-at",
                                          started(night).isoformat(), str(folder)],
                                   env={"COMMSCOPE_DB_URL": dsn}, catch_exceptions=False)
            assert r.exit_code == 0, r.output


def files_say(root: Path, system: str, nights) -> dict[str, list[float]]:
    """The version each output's MPI_LIBRARY line names ("4.1.4") -> the FOM total_time of those outputs, over
    NIGHTS of SYSTEM, read from the files."""
    times: dict[str, list[float]] = {}
    for night in nights:
        for f in sorted((root / system / f"night{night}").glob("*.out")):
            text = f.read_text()
            version = re.search(r"^MPI_LIBRARY Open MPI v(\S+),", text, re.M)[1]
            times.setdefault(version, []).append(float(re.search(r"^FOM total_time (\S+) s$", text, re.M)[1]))
    return times


def panel(title: str):
    from commscope.views import panels as P
    board = next(b for b in P.DASHBOARDS if b.uid == "commscope-procurement")
    return next(p for p in board.panels if p.title == title)


def shown(conn, title: str, t0: dt.datetime, t1: dt.datetime) -> list[dict]:
    """The panel's rows as Grafana gets them, every system and stack selected, REF the reference."""
    from commscope.views import panels as P
    values = P.all_values(conn) | P.reference_values(conn, REF, "Open MPI")
    cur = conn.execute(P.expand(panel(title).sql, t0, t1, values))
    return [dict(zip([d.name for d in cur.description], r)) for r in cur.fetchall()]


@pytest.fixture(scope="module")
def store(server, tmp_path_factory):
    from conftest import fresh_database
    root = tmp_path_factory.mktemp("procurement-versions")
    with fresh_database(server[0]) as url:
        write_and_ingest(url, root)
        yield url, root


@pytest.mark.parametrize("nights, version", [(range(1, 6), "4.1.6"), (range(1, 4), "4.1.4")])
def test_each_stack_is_compared_on_its_newest_version_in_the_range_and_named(store, nights, version):
    """Over all five nights the panels show 4.1.6's figures and name it; over the first three only, 4.1.4's. The
    mean of both versions' runs (what a mix would show) differs from the newest's by far, so a mix cannot pass."""
    url, root = store
    t0, t1 = started(nights[0]) - dt.timedelta(hours=1), started(nights[-1]) + dt.timedelta(hours=1)
    expected = {}
    for system in SYSTEMS:
        by_version = files_say(root, system, nights)
        newest = by_version[version]
        expected[system] = statistics.fmean(newest)
        mixed = statistics.fmean([t for ts in by_version.values() for t in ts])
        assert len(newest) == RUNS * sum(1 for n in nights if NIGHTS[n] == (NEW_MPI if version == "4.1.6"
                                                                               else OLD_MPI))
        assert len(by_version) == 1 or not math.isclose(mixed, expected[system], rel_tol=0.1)
    with psycopg.connect(url) as conn:
        rows = shown(conn, "Normalized time per experiment", t0, t1)
        bars = {r["system_stack_interconnect"]: r for r in shown(conn, "Geometric mean of normalized time", t0, t1)}
    assert sorted(r["system"] for r in rows) == sorted(SYSTEMS), rows
    for r in rows:
        assert r["stack"] == "Open MPI" and r["window"] == "focus", r
        assert r["versions"] == f"Open MPI {version}" and r["ref_versions"] == f"Open MPI {version}", r
        assert r["runs"] == len(files_say(root, r["system"], nights)[version])
        assert r["time_s"] == pytest.approx(expected[r["system"]], rel=1e-9)
        assert r["ref_time"] == pytest.approx(expected[REF], rel=1e-9)
        assert r["normalized"] == pytest.approx(expected[r["system"]] / expected[REF], rel=1e-9)
    interconnect = rows[0]["interconnect"]
    assert set(bars) == {f"{s} Open MPI (Open MPI {version}) {interconnect}" for s in SYSTEMS}, bars
    for s in SYSTEMS:
        bar = bars[f"{s} Open MPI (Open MPI {version}) {interconnect}"]
        assert bar["normalized"] == pytest.approx(expected[s] / expected[REF], rel=1e-9)
        assert bar["experiments"] == 1


def test_the_reports_procurement_panels_name_the_newest_version_only(store):
    """The static report renders the same panels over all the runs: they name 4.1.6, and 4.1.4 nowhere."""
    from commscope.views import report
    url, _root = store
    with psycopg.connect(url) as conn:
        page = report.render(conn)
    assert "Open MPI (Open MPI 4.1.6)" in page and "Open MPI 4.1.6" in page
    assert "Open MPI 4.1.4" not in page
