"""Series that outlive upgrades (docs/measurement-model.md, gate/attribution.py): an MPI library upgrade, a compiler
change and a Spack rebuild, each with five of ten series 30 % slower from the change on, ingested night by night
through the real command line (tests/upgrade_history.py: real cgsolve timings). The gate must judge each series
against its history before the change, flag the slowed ones within two nights naming the change, keep the others
quiet, and judge against a level once it is accepted. The expected values come from the generator's own plan (which
series slowed, when, what changed), never from commscope's formulas."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg
import pytest

from upgrade_history import CHANGE, NIGHTS, RUNS, SCENARIOS, SERIES, SLOWED, first_iters, write_nights

CLI = [sys.executable, "-m", "commscope.cli"]
FLAGGED = ("suspect", "regression")


def cli(dsn: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COMMSCOPE_DB_URL": dsn})


def ingest_nights(dsn: str, tmp_path, scenario: str) -> list[int]:
    campaigns = []
    for _night, folder, opts in write_nights(tmp_path, scenario):
        r = cli(dsn, "ingest", "-q", *[x for kv in opts.items() for x in kv], str(folder))
        assert r.returncode == 0, r.stderr
        campaigns.append(int(r.stdout.split()[-1]))
    return campaigns


def check(dsn: str, campaign: int, scenario: str) -> dict[int, dict]:
    """Series index -> its finding."""
    r = cli(dsn, "check", "--campaign", str(campaign), "--system", SCENARIOS[scenario][0], "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    return {int(s["parameters"]["param.iters"]) - first_iters(scenario): s for s in json.loads(r.stdout)["series"]}


@pytest.fixture(scope="module")
def history(server, tmp_path_factory):
    """One store holding the three scenarios, each under its own system."""
    import uuid
    from commscope.store import db
    emb, _ = server
    name = f"t_{uuid.uuid4().hex[:12]}"
    with emb.admin("postgres") as c:
        c.execute(f'CREATE DATABASE "{name}"')
    emb.prepare_database(name)
    url = emb.url(name)
    with psycopg.connect(url) as conn:
        db.migrate(conn)
    tmp = tmp_path_factory.mktemp("upgrades")
    yield url, {s: ingest_nights(url, tmp, s) for s in SCENARIOS}
    with emb.admin("postgres") as c:
        c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


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
