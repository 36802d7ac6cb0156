"""`commscope run` makes sure of its store before any experiment runs (issue 17): without COMMSCOPE_DB_URL or
PG* it starts and migrates the embedded store under COMMSCOPE_HOME; a named server that does not answer stops the
run before it starts, naming the server. Real PostgreSQL; no Ramble needed (workflow.ensure_store is the step
`commscope run` takes before its experiments)."""
from __future__ import annotations

import shutil

import psycopg
import pytest

from commscope import db, workflow
from conftest import private_home


@pytest.fixture
def home(monkeypatch):
    h = private_home()
    monkeypatch.setenv("COMMSCOPE_HOME", str(h))
    for v in ("COMMSCOPE_DB_URL", "PGHOST", "PGDATABASE", "PGSERVICE"):
        monkeypatch.delenv(v, raising=False)
    yield h
    db.Embedded(h).stop()
    shutil.rmtree(h, ignore_errors=True)


def test_without_a_server_the_embedded_store_is_started_and_migrated(home):
    assert not db.Embedded(home).running()
    said = []
    workflow.ensure_store(said.append)
    assert db.Embedded(home).running()
    assert any(str(home) in s and "starting the embedded store" in s for s in said), said
    with psycopg.connect(db.Embedded(home).url()) as conn:
        applied = {r[0] for r in conn.execute("SELECT name FROM schema_version")}
    assert applied == {name for _v, name, _sql in db.migrations()}
    said.clear()
    workflow.ensure_store(said.append)     # running already: nothing started, nothing said
    assert said == []


def test_a_named_server_that_does_not_answer_stops_the_run_before_it_starts(home, monkeypatch):
    monkeypatch.setenv("COMMSCOPE_DB_URL", f"postgresql:///commscope?host={home}/no-such-socket-dir&user=x")
    monkeypatch.setenv("COMMSCOPE_CONNECT_TIMEOUT", "2")
    with pytest.raises(workflow.WorkflowError, match="nothing was run.*cannot connect.*no-such-socket-dir"):
        workflow.ensure_store(lambda s: None)
    assert not db.Embedded(home).running()   # a named server is never replaced by the embedded one
