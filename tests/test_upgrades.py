"""Series that outlive upgrades (docs/measurement-model.md, gate/attribution.py): an MPI library upgrade, a compiler
change, a Spack rebuild and a kernel update, each with five of ten series 30 % slower from the change on, ingested
night by night through the real command line (tests/upgrade_history.py: real cgsolve timings). The gate must judge
each series against its history before the change, flag the slowed ones within two nights naming the change, keep the
others quiet, and judge against a level once it is accepted. The expected values come from the generator's own plan
(which series slowed, when, what changed), never from commscope's formulas."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from helpers import cli_in_process

from upgrade_history import CHANGE, NIGHTS, RUNS, SCENARIOS, SERIES, SLOWED, first_iters, write_nights

CLI = [sys.executable, "-m", "commscope.cli"]
FLAGGED = ("suspect", "regression")


def cli(dsn: str, *args: str) -> subprocess.CompletedProcess:
    """The real command, in this process (cli_in_process)."""
    return cli_in_process(args, {**os.environ, "COMMSCOPE_DB_URL": dsn}, timeout=600)


def ingest_nights(dsn: str, tmp_path, scenario: str) -> list[int]:
    """Each night through `commscope ingest`, invoked in this process (click's runner: the same command, without
    a Python start per night)."""
    from click.testing import CliRunner
    from commscope.cli import main
    campaigns = []
    for _night, folder, opts in write_nights(tmp_path, scenario):
        r = CliRunner().invoke(main, ["ingest", "-q", *[x for kv in opts.items() for x in kv], str(folder)],
                               env={"COMMSCOPE_DB_URL": dsn}, catch_exceptions=False)
        assert r.exit_code == 0, r.output
        campaigns.append(int(r.stdout.split()[-1]))
    return campaigns


def check(dsn: str, campaign: int, scenario: str, *extra: str) -> dict[int, dict]:
    """Series index -> its finding."""
    r = cli(dsn, "check", "--campaign", str(campaign), "--system", SCENARIOS[scenario][0], "--format", "json",
            "--no-annotate", *extra)
    assert r.returncode in (0, 1), r.stderr
    return {int(s["parameters"]["param.iters"]) - first_iters(scenario): s for s in json.loads(r.stdout)["series"]}


@pytest.fixture(scope="module")
def history(server, tmp_path_factory):
    """One store holding the three scenarios, each under its own system."""
    from conftest import fresh_database
    tmp = tmp_path_factory.mktemp("upgrades")
    with fresh_database(server[0]) as url:
        yield url, {s: ingest_nights(url, tmp, s) for s in SCENARIOS}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_change_is_one_series_judged_against_its_history(history, scenario):
    url, campaigns = history
    system, what, (before, after) = SCENARIOS[scenario]
    with psycopg.connect(url) as conn:
        per_series = conn.execute("SELECT count(DISTINCT r.series_id), count(*) FROM runs r JOIN systems s "
                                  "ON s.id = r.system_id WHERE s.name = %s", (system,)).fetchone()
    assert per_series == (SERIES, SERIES * NIGHTS * RUNS)
    for night in (CHANGE, CHANGE + 1):   # alerted within two nights
        found = check(url, campaigns[scenario][night - 1], scenario)
        assert sorted(found) == list(range(SERIES))
        # every series is judged against its runs before the change, not against the changed night alone
        assert all(f["n_baseline"] >= RUNS * 5 for f in found.values()), \
            {s: f["n_baseline"] for s, f in found.items()}
        # the series that did not slow: no regression, and at most one early warning (a suspect is raised at
        # alpha per series and direction)
        quiet = [s for s in range(SERIES) if s not in SLOWED]
        said = {s: found[s]["verdict"] for s in quiet}
        assert "regression" not in said.values() and list(said.values()).count("suspect") <= 1, said
        if night == CHANGE + 1:
            # judged against their history at what these series can show (cgsolve's runs spread by about 21 %):
            # no change
            loose = check(url, campaigns[scenario][night - 1], scenario, "--max-undetectable", "0.5")
            assert sum(loose[s]["verdict"] == "no change" for s in quiet) >= len(quiet) - 1, \
                {s: (loose[s]["verdict"], loose[s]["detectable_effect"]) for s in quiet}
            flagged = [s for s in SLOWED if found[s]["verdict"] in FLAGGED]
            assert len(flagged) >= len(SLOWED) - 1, {s: found[s]["verdict"] for s in SLOWED}
            for s in flagged:
                a = found[s]["attribution"]
                assert a["cause"] == "version change", a
                (v,) = [v for v in a["versions"] if v["what"] == what]
                assert (v["from"], v["to"], v["campaign"]) == (before, after, campaigns[scenario][CHANGE - 1]), v
                assert f"{what} {before} -> {after} (campaign {campaigns[scenario][CHANGE - 1]})" in a["cause_reason"]


def test_an_accepted_level_is_the_baseline_from_then_on(history):
    url, campaigns = history
    system = SCENARIOS["mpi"][0]
    changed = campaigns["mpi"][CHANGE - 1]
    r = cli(url, "accept", "--campaign", str(changed), "--system", system, "--reason", "Open MPI 4.1.6 is intended")
    assert r.returncode == 0, r.stderr
    assert f"campaign {changed} is the new level of {SERIES} series" in r.stdout
    found = check(url, campaigns["mpi"][CHANGE], "mpi")
    # the baseline is the accepted campaign alone: the slowed series no longer stand out
    assert all(f["n_baseline"] == RUNS for f in found.values()), {s: f["n_baseline"] for s, f in found.items()}
    assert not [s for s, f in found.items() if f["verdict"] in FLAGGED]
    with psycopg.connect(url) as conn:
        levels = conn.execute("SELECT count(*), min(reason) FROM v_accepted_levels WHERE campaign_id = %s",
                              (changed,)).fetchone()
        notes = conn.execute("SELECT count(*) FROM v_annotations WHERE 'accepted-level' = ANY(tags)").fetchone()[0]
    assert levels == (SERIES, "Open MPI 4.1.6 is intended") and notes == SERIES
    # a campaign that ran none of the named series accepts nothing, in one line
    r = cli(url, "accept", "--campaign", str(changed), "--series", "999999", "--reason", "x")
    assert r.returncode == 2 and "nothing was accepted" in r.stderr and "Traceback" not in r.stderr


# ---- a store of the previous schema -----------------------------------------------------------------------------

OLD_DUMP = Path(__file__).parent / "stores" / "schema-37-upgrades.dump"


def test_the_schema_37_store_merges_the_upgrade_into_one_series_keeping_every_run(server, tmp_path):
    """tests/stores/README.md: the MPI scenario stored by schema 37's code, which split each series at the upgrade.
    Reference: PostgreSQL's own pg_restore of the dump, read without commscope's code."""
    from commscope.store import db
    from conftest import pg_restored, private_home
    from rollup_oracle import ON_THE_FLY_VIEWS
    emb, _ = server
    runs_q = ("SELECT r.content_hash, r.started_at, r.wall_time, r.status, r.campaign_id, st.library FROM runs r "
              "JOIN stacks st ON st.id = r.stack_id ORDER BY 1")
    with pg_restored(emb, OLD_DUMP) as ref, psycopg.connect(ref) as c:
        assert c.execute("SELECT max(version) FROM schema_version").fetchone()[0] == 37
        old_runs = c.execute(runs_q).fetchall()
        # the old store's series, and the experiments they are (their iteration count): two series each
        old_series = dict(c.execute("SELECT r.content_hash, s.parameters->>'param.iters' FROM runs r "
                                    "JOIN series s ON s.id = r.series_id"))
        assert c.execute("SELECT count(*) FROM series").fetchone()[0] == 2 * SERIES
    assert len(old_runs) == SERIES * NIGHTS * RUNS

    home = private_home()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG") and k != "COMMSCOPE_DB_URL"}
    env["COMMSCOPE_HOME"] = str(home)
    try:
        assert subprocess.run([*CLI, "db", "start"], capture_output=True, text=True, env=env).returncode == 0
        url = db.Embedded(home).url()
        r = subprocess.run([*CLI, "db", "restore", str(OLD_DUMP)], capture_output=True, text=True, env=env)
        assert r.returncode == 0 and "applied 0038_series_across_versions.sql" in r.stdout, r.stderr
        with psycopg.connect(url) as c:
            assert c.execute(runs_q).fetchall() == old_runs          # every run kept, its library string too
            new_series = dict(c.execute("SELECT r.content_hash, r.series_id FROM runs r"))
            stacks = {s for (s,) in c.execute("SELECT DISTINCT v.stack FROM v_runs v")}
            kept, fly = [], []
            for read in (kept, fly):
                if read is fly:
                    with c.transaction(force_rollback=True):
                        for view in ON_THE_FLY_VIEWS:
                            c.execute(view)
                        read += c.execute("SELECT * FROM v_run_metrics_daily ORDER BY 1, 2, 3").fetchall()
                else:
                    read += c.execute("SELECT * FROM v_run_metrics_daily ORDER BY 1, 2, 3").fetchall()
            changes = c.execute("SELECT DISTINCT what, previous, value FROM v_version_changes").fetchall()
        # one series per experiment: runs of one iteration count share one series, and no two counts do
        by_experiment: dict[str, set] = {}
        for h, iters in old_series.items():
            by_experiment.setdefault(iters, set()).add(new_series[h])
        assert len(by_experiment) == SERIES and all(len(s) == 1 for s in by_experiment.values())
        assert len({next(iter(s)) for s in by_experiment.values()}) == SERIES
        assert stacks == {"Open MPI"}                               # the library's family, not its version
        assert kept == fly                                          # the rollups follow the merged series
        assert changes == [("MPI library", SCENARIOS["mpi"][2][0], SCENARIOS["mpi"][2][1])]
    finally:
        db.Embedded(home).stop()


def test_one_line_per_experiment_with_the_version_change_drawn(history):
    """The panels and the report: each experiment is one series across the upgrade (its daily rows before and after
    it), the dashboards' version-change annotation layer marks the upgrade's first run on every series, and the
    report's "What changed" names it."""
    from commscope.views import grafana as D
    from commscope.views import panels as P
    from commscope.views import report
    url, campaigns = history
    system, what, (before, after) = SCENARIOS["mpi"]
    changed = campaigns["mpi"][CHANGE - 1]
    with psycopg.connect(url) as conn:
        lines = conn.execute("SELECT v.series_id, count(DISTINCT v.day) FROM v_run_metrics_daily v "
                             "WHERE v.system = %s GROUP BY 1", (system,)).fetchall()
        assert len(lines) == SERIES and {n for _, n in lines} == {NIGHTS}
        first = conn.execute("SELECT min(started_at) FROM runs WHERE campaign_id = %s", (changed,)).fetchone()[0]
        values = P.all_values(conn)
        t0, t1 = first - dt.timedelta(days=20), first + dt.timedelta(days=5)
        marks = conn.execute(P.expand(P.VERSION_CHANGES_ANNOTATION_SQL, t0, t1, values)).fetchall()
        page = report.render(conn)
    mpi = [m for m in marks if f" {before} -&gt; {after} (campaign {changed})" in m[2]]
    assert len(mpi) == SERIES and {float(m[0]) for m in mpi} == {first.timestamp() * 1000}
    assert all(m[3].startswith(f"commscope-version,{what},series:") for m in mpi)
    # drawn as Grafana's annotation tooltip draws a text: @grafana/data's sanitize, set as HTML: plain text that
    # names the change, and no element
    from grafana_draw import grafana_shows
    for shown in grafana_shows([m[2] for m in mpi]):
        assert shown["elements"] == [] and shown["shown"].startswith(f"version change: {system} "), shown
        assert shown["shown"].endswith(f": {what} {before} -> {after} (campaign {changed})"), shown
    assert "Version change: " in page and f"[{what}]: {before} → {after}, campaign {changed}" in page
    anns = {a["name"]: a for a in D.build_dashboard(P.MPI_FRACTION)["annotations"]["list"]}
    assert anns["Version changes"]["target"]["rawSql"] == P.VERSION_CHANGES_ANNOTATION_SQL


def test_change_points_name_the_versions_that_changed_there(history):
    """The change points ingest computes over each series' whole history (Apache Otava): one at the upgrade's first
    night names the MPI library change; one elsewhere names none."""
    from commscope.gate import changepoints
    url, campaigns = history
    system, what, (before, after) = SCENARIOS["mpi"]
    changed = campaigns["mpi"][CHANGE - 1]
    with psycopg.connect(url) as conn:
        ids = [r[0] for r in conn.execute("SELECT DISTINCT r.series_id FROM runs r JOIN systems s "
                                          "ON s.id = r.system_id WHERE s.name = %s", (system,))]
        found = changepoints.stored(conn, "time_s", ids)
    at_upgrade = [c for c in found if c["campaign_id"] == changed]
    assert len(at_upgrade) >= len(SLOWED) - 2, [(c["series_id"], c["campaign_id"]) for c in found]
    for c in found:
        named = f"{what} {before} -> {after} (campaign {changed})"
        assert c["versions_changed"] == (named if c["campaign_id"] == changed else None), c
        assert (f"versions changed: {named}" in changepoints.describe(c)) == (c["campaign_id"] == changed)
