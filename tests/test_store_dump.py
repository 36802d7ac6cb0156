"""Moving and upgrading the store with `commscope db dump` and `db restore`
(pg_dump/pg_restore): embedded to embedded, embedded to a site server over
TCP with a password, and the committed dump of schema version 9 (the store
as the session-5 main left it) into today's schema. What a restore gives is
checked against the source store, or for the old dump against PostgreSQL's
own pg_restore into a scratch database, never against commscope's reader."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from commscope.store import db
from commscope.store.ingest import MODEL_VERSION
from commscope.workflow.ingest import Provenance, ingest
from conftest import pg_restored, private_home

DATA = Path(__file__).parent / "data"
OLD_DUMP = Path(__file__).parent / "stores" / "schema-9-fixtures.dump"
CLI = [sys.executable, "-m", "commscope.cli"]
TABLES = ("campaigns", "runs", "nodes", "node_metrics", "mpi_metrics", "rank_metrics", "comm_matrix", "comm_stats",
          "foms", "halo_times", "collective_latency", "io_bandwidth", "readonly_roles")


def cli(*args, env):
    base = {k: v for k, v in os.environ.items() if not k.startswith("PG") and k != "COMMSCOPE_DB_URL"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env={**base, **env}, timeout=300)


def snapshot(url: str) -> dict:
    """Row counts of the base tables, and every run's identity and measurements."""
    with psycopg.connect(url) as c:
        out = {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        out["runs_rows"] = c.execute(
            "SELECT content_hash, app, variant, ranks, status, started_at, wall_time, mpi_fraction_avg, "
            "mpi_fraction_slowest, metadata::text FROM runs ORDER BY content_hash").fetchall()
        out["node_sums"] = c.execute("SELECT round(sum(excl_avg)::numeric, 9), count(DISTINCT node_id) "
                                     "FROM node_metrics").fetchone()
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def homes():
    made = []

    def make():
        made.append(private_home())
        return made[-1]
    yield make
    for h in made:
        db.Embedded(h).stop()
        shutil.rmtree(h, ignore_errors=True)


def started(home: Path, *extra) -> str:
    r = cli("db", "start", *extra, env={"COMMSCOPE_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_embedded_to_embedded(homes, tmp_path):
    src_home, dst_home = homes(), homes()
    src = started(src_home)
    with psycopg.connect(src) as c:
        ingest(c, [DATA], Provenance(system="lab"))
        ingest(c, [DATA / "ramble" / "smoke-openmpi4-repeats"], Provenance())
    r = cli("db", "dump", str(tmp_path / "store.dump"), env={"COMMSCOPE_HOME": str(src_home)})
    assert r.returncode == 0, r.stderr
    dst = started(dst_home)
    r = cli("db", "restore", str(tmp_path / "store.dump"), env={"COMMSCOPE_HOME": str(dst_home)})
    assert r.returncode == 0, r.stderr
    before = snapshot(src)
    assert before["runs"] > 20
    assert snapshot(dst) == before
    # the restored store is commscope's to write: the next ingest adds to it
    with psycopg.connect(dst) as c:
        assert ingest(c, [DATA / "ramble" / "smoke-mpich4-matrix"], Provenance()).inserted


def test_embedded_to_a_site_server_over_tcp(homes, tmp_path):
    src_home, site_home = homes(), homes()
    src = started(src_home)
    with psycopg.connect(src) as c:
        ingest(c, [DATA], Provenance(system="lab"))
    assert cli("db", "dump", str(tmp_path / "s.dump"), env={"COMMSCOPE_HOME": str(src_home)}).returncode == 0
    # The site server: a server listening on loopback TCP, where passwords (scram) are the only way in.
    port = free_port()
    started(site_home, "--listen", "127.0.0.1", "--port", str(port))
    with db.Embedded(site_home).admin() as a:
        a.execute("ALTER ROLE commscope PASSWORD 'site-secret'")
    site = f"postgresql://commscope:site-secret@127.0.0.1:{port}/commscope"
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(f"postgresql://commscope:wrong@127.0.0.1:{port}/commscope").close()
    r = cli("db", "restore", str(tmp_path / "s.dump"), env={"COMMSCOPE_DB_URL": site})
    assert r.returncode == 0, r.stderr
    assert "site-secret" not in r.stdout + r.stderr
    assert snapshot(site) == snapshot(src)
    # a restore over runs is refused, names the store (masked) and changes nothing
    r = cli("db", "restore", str(tmp_path / "s.dump"), env={"COMMSCOPE_DB_URL": site})
    assert r.returncode != 0 and "holds" in r.stderr and "site-secret" not in r.stderr and "127.0.0.1" in r.stderr
    assert snapshot(site) == snapshot(src)


def test_the_schema_9_store_migrates_with_every_run_intact(homes, tmp_path, server):
    """The committed dump (tests/stores/README.md) into today's schema: the migrations since run."""
    # Reference: PostgreSQL's own pg_restore of the same dump into a scratch database, no commscope code.
    emb, _ = server
    with pg_restored(emb, OLD_DUMP) as ref:
        expected = snapshot(ref)
        with psycopg.connect(ref) as c:
            assert c.execute("SELECT max(version) FROM schema_version").fetchone()[0] == 9
            # the tests/data groups of that day
            from_data = {h for (h,) in c.execute("SELECT r.content_hash FROM runs r JOIN campaigns k "
                                                 "ON k.id = r.campaign_id WHERE k.kind = 'ingest'")}
    assert expected["runs"] == 65

    home = homes()
    url = started(home)
    r = cli("db", "restore", str(OLD_DUMP), env={"COMMSCOPE_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert "applied 0010_rollups_add_per_batch.sql" in r.stdout
    assert snapshot(url) == expected
    with psycopg.connect(url) as c:
        assert c.execute("SELECT max(version) FROM schema_version").fetchone()[0] == db.migrations()[-1][0]
        # the old store's read-only role is remembered; the views the migrations added are granted to it
        # once the role exists on this server
        assert c.execute("SELECT name FROM readonly_roles").fetchall() == [("grafana_old",)]
        # Runs from before the measurement model are listed, and re-ingesting their files measures them anew.
        old_runs = c.execute("SELECT count(*) FROM v_runs_needing_reingest").fetchone()[0]
        assert old_runs == expected["runs"]
        status = cli("db", "status", env={"COMMSCOPE_HOME": str(home)}).stdout
        assert f"{old_runs} runs were stored before the measurement model" in status, status
        again = ingest(c, [DATA], Provenance(system="testbox"))
        assert not again.skipped and len(again.inserted) >= len(from_data) == 24
        assert c.execute("SELECT count(*) FROM v_runs_needing_reingest").fetchone()[0] == old_runs - len(from_data)
        remeasured = {h for (h,) in c.execute("SELECT content_hash FROM runs WHERE model_version = %s",
                                              (MODEL_VERSION,))}
        assert from_data <= remeasured


def test_a_file_that_is_not_a_dump_is_refused_and_changes_nothing(homes, tmp_path):
    home = homes()
    url = started(home)
    with psycopg.connect(url) as c:
        ingest(c, [DATA / "halo3d-overlap-n2.runtime-profile.cali"], Provenance())
    before = snapshot(url)
    bad = tmp_path / "notes.txt"
    bad.write_text("not a dump\n")
    for f in (bad, tmp_path / "missing.dump"):
        r = cli("db", "restore", str(f), env={"COMMSCOPE_HOME": str(home)})
        assert r.returncode != 0 and str(f) in r.stderr and "commscope db dump" in r.stderr, r.stderr
    assert snapshot(url) == before
    # a dump to a place that cannot be written leaves nothing behind
    r = cli("db", "dump", str(tmp_path / "no-such-dir" / "x.dump"), env={"COMMSCOPE_HOME": str(home)})
    assert r.returncode != 0 and "pg_dump" in r.stderr
    assert not list(tmp_path.rglob("x.dump*"))
