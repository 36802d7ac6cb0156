"""The one after-run sequence (commscope/workflow/ingest.py) that `commscope ingest` and `commscope run` share: a real
Ramble workspace (tests/data/ramble/smoke-openmpi4-mpi) is stored as one campaign, every experiment of Ramble's own
results.latest.json a run; its series' change points are refreshed; its report is written, or, when it cannot be,
the line says how to make it. Against the real PostgreSQL test store."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import psycopg
import pytest

from commscope.store.ingest import Provenance
from commscope.workflow.ingest import ingest_and_report

WS = Path(__file__).parent / "data" / "ramble" / "smoke-openmpi4-mpi"


@pytest.fixture
def store(dsn, monkeypatch):
    monkeypatch.setenv("COMMSCOPE_DB_URL", dsn)
    return dsn


def test_the_workspace_is_stored_its_change_points_refreshed_and_its_report_written(store, tmp_path):
    experiments = json.loads((WS / "results.latest.json").read_text())["experiments"]
    notes, said, out = [], [], tmp_path / "report.html"
    res, reported = ingest_and_report([WS], Provenance(git_commit="abc123"), notes.append, report_to=out,
                                      stored=said.append)
    assert said == [res] and len(res.inserted) == len(experiments) and res.campaign_id is not None
    assert reported == f"report: {out}" and out.stat().st_size > 0
    with psycopg.connect(store) as conn:
        series = {r[0] for r in conn.execute("SELECT DISTINCT series_id FROM runs WHERE status = 'ok' "
                                             "AND series_id IS NOT NULL AND campaign_id = %s", (res.campaign_id,))}
        refreshed = {r[0] for r in conn.execute("SELECT series_id FROM change_point_state WHERE metric = 'time_s'")}
    if importlib.util.find_spec("otava"):
        assert series and refreshed == series, (series, refreshed)
    else:
        assert not refreshed and any("change points not updated" in n for n in notes), notes

    again, none = ingest_and_report([WS], Provenance(git_commit="abc123"), notes.append)
    assert not again.inserted and again.campaign_id == res.campaign_id and none is None


def test_a_report_that_cannot_be_written_leaves_the_runs_stored_and_says_how_to_make_it(store, tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    res, reported = ingest_and_report([WS], Provenance(), lambda m: None, report_to=blocked / "report.html")
    assert res.inserted and reported.startswith("  no report (")
    assert f"commscope report -o {blocked / 'report.html'} --campaign {res.campaign_id}" in reported
    with psycopg.connect(store) as conn:
        assert conn.execute("SELECT count(*) FROM runs WHERE campaign_id = %s",
                            (res.campaign_id,)).fetchone()[0] == len(res.inserted)
