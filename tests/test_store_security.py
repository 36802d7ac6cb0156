"""The store is safe to share: the embedded server admits only its owner,
commscope works as a role that owns the schema but is no superuser, site
roles get least privilege, writers give up on a held lock, and no password
is ever printed. Everything runs against a real PostgreSQL."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from commscope.store import db
from commscope.workflow.ingest import Provenance, ingest
from conftest import private_home

DATA = Path(__file__).parent / "data"
PROFILE = DATA / "halo3d-overlap-n2.runtime-profile.cali"
CLI = [sys.executable, "-m", "commscope.cli"]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another local user (runuser)")


def cli(*args, env=None, timeout=120):
    base = {k: v for k, v in os.environ.items() if not k.startswith("PG") and k != "COMMSCOPE_DB_URL"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env={**base, **(env or {})},
                          timeout=timeout)


@pytest.fixture(scope="module")
def emb():
    """An embedded server of its own, started by the real `commscope db start`."""
    home = private_home()
    r = cli("db", "start", env={"COMMSCOPE_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    e = db.Embedded(home)
    yield e
    e.stop()
    shutil.rmtree(home, ignore_errors=True)


def superuser(e: db.Embedded):
    return psycopg.connect(e.url(user=db.SUPERUSER), autocommit=True)


@as_root
@pytest.mark.parametrize("role", ["postgres", "commscope"])
def test_another_local_user_cannot_connect(emb, role):
    """The issue's own reproduction: `nobody` asks for the superuser (or commscope's role) on the socket."""
    r = subprocess.run(["runuser", "-u", "nobody", "--", "psql", "-X", "-w", "-c", "SELECT 1",
                        f"host={emb.sock} user={role} dbname={db.DB_NAME}"],
                       capture_output=True, text=True, cwd="/", timeout=60)
    assert r.returncode != 0
    assert "Permission denied" in r.stderr or "authentication failed" in r.stderr, r.stderr


def test_socket_is_private_and_no_rule_trusts(emb):
    assert stat.S_IMODE(emb.sock.stat().st_mode) == 0o700
    sockets = list(emb.sock.glob(".s.PGSQL.*"))
    assert sockets and all(stat.S_IMODE(s.stat().st_mode) == 0o700 for s in sockets if not s.name.endswith(".lock"))
    with superuser(emb) as c:
        methods = {r[0] for r in c.execute("SELECT auth_method FROM pg_hba_file_rules")}
        kinds = {r[0] for r in c.execute("SELECT type FROM pg_hba_file_rules")}
        assert c.execute("SHOW listen_addresses").fetchone()[0] == ""
        assert c.execute("SHOW unix_socket_permissions").fetchone()[0] == "0700"
    assert methods <= {"peer", "scram-sha-256"} and "trust" not in methods
    assert kinds == {"local"}  # the socket only


def test_embedded_server_runs_without_jit(emb):
    """Dashboard queries are short: compiling them costs more than it saves (commscope/README.md, JIT off)."""
    with db.connect(emb.url()) as c:
        assert c.execute("SHOW jit").fetchone()[0] == "off"


def test_commscope_connects_as_a_schema_owner_that_is_no_superuser(emb):
    with db.connect(emb.url()) as c:
        me, su = c.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        owner = c.execute("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'public'").fetchone()[0]
        tables = c.execute("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'").fetchall()
        assert c.execute("SHOW application_name").fetchone()[0] == "commscope"
    assert me == "commscope" and su is False
    assert owner == "commscope" and tables == [("commscope",)]


@pytest.mark.parametrize("attack, sql", [
    ("run a program", "COPY (SELECT 1) TO PROGRAM 'id'"),
    ("read a server file", "SELECT pg_read_file('postgresql.conf')"),
    ("read a server file by COPY", "CREATE TEMP TABLE t (x text); COPY t FROM '/etc/passwd'"),
    ("create a trusted extension", "CREATE EXTENSION pgcrypto"),
    ("create an untrusted extension", "CREATE EXTENSION file_fdw"),
    ("create a role", "CREATE ROLE intruder LOGIN SUPERUSER"),
])
def test_commscope_role_cannot_escape_the_database(emb, attack, sql):
    with db.connect(emb.url()) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(sql)


def test_writer_role_ingests_but_cannot_change_the_schema(emb):
    r = cli("db", "grant-writer", "ingest_bot", env={"COMMSCOPE_HOME": str(emb.root.parent)})
    assert r.returncode == 0, r.stderr
    writer = emb.url(user="ingest_bot")
    with psycopg.connect(writer) as c:
        assert len(ingest(c, [PROFILE], Provenance()).inserted) == 1
    with psycopg.connect(writer) as c:
        assert c.execute("SELECT count(*) FROM runs").fetchone()[0] >= 1
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("CREATE TABLE mine (x int)")
    with psycopg.connect(writer) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("DROP TABLE comm_matrix")
    with psycopg.connect(writer) as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("ALTER TABLE runs ADD COLUMN evil int")


def test_readonly_role_through_the_cli_reads_the_views_and_the_gates_tables_and_writes_nothing(emb):
    """The views (Grafana) and db.READER_TABLES (check, changepoints and the advisors read them); no other table,
    and no write anywhere."""
    r = cli("db", "grant-readonly", "viewer", env={"COMMSCOPE_HOME": str(emb.root.parent)})
    assert r.returncode == 0, r.stderr
    with psycopg.connect(emb.url(user="viewer"), autocommit=True) as c:
        c.execute("SELECT count(*) FROM v_runs")
        for t in db.READER_TABLES:
            c.execute(f"SELECT count(*) FROM {t}")
        for q in ("SELECT count(*) FROM readonly_roles", "SELECT count(*) FROM comm_matrix",
                  "DELETE FROM runs", "INSERT INTO annotations (\"time\", text) VALUES (now(), 'x')",
                  "UPDATE series SET key = 'x'", "CREATE TABLE mine (x int)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(q)


def _relations_read(sql_text: str) -> set[str]:
    """The relations a query names after FROM or JOIN (not functions, subqueries or its own WITH names; nor the
    operand of the comparison IS [NOT] DISTINCT FROM)."""
    import re
    ctes = {c.lower() for c in re.findall(r"(?i)\b([a-z_][a-z0-9_]*)\s+AS\s+(?:MATERIALIZED\s+)?\(", sql_text)}
    return {m.group(1) for m in re.finditer(r"(?i)(?<!DISTINCT )\b(?:FROM|JOIN)\s+([a-z_][a-z0-9_.]*)(\s*\()?",
                                            sql_text)
            if not m.group(2) and m.group(1).lower() not in ctes}


def test_grafanas_dashboards_read_views_only(dsn):
    """The read-only role may read db.READER_TABLES too (for check and the advisors), so its grants no longer catch
    a panel that reads a base table: every query in dashboards/json (panels, variables, annotations) names views
    only."""
    import json

    def queries(doc, key=None):
        if isinstance(doc, dict):
            for k, v in doc.items():
                yield from queries(v, k)
        elif isinstance(doc, list):
            for v in doc:
                yield from queries(v, key)
        elif isinstance(doc, str) and key in ("rawSql", "query", "definition"):
            yield doc

    with psycopg.connect(dsn) as c:
        views = {v for (v,) in c.execute("SELECT table_name FROM information_schema.views "
                                          "WHERE table_schema = 'public'")}
    read = {}
    for f in sorted((Path(__file__).parents[1] / "dashboards" / "json").glob("*.json")):
        for q in queries(json.loads(f.read_text())):
            for name in _relations_read(q):
                read.setdefault(name, f.name)
    assert len(read) > 10 and "v_runs" in read
    assert {n: f for n, f in read.items() if n not in views} == {}
    assert _relations_read('SELECT 1 FROM runs r JOIN v_series s ON true, generate_series(1, 2) '
                           'WHERE extract(epoch FROM "time") > 0') == {"runs", "v_series"}
    assert _relations_read("SELECT 1 FROM v_runs WHERE a IS NOT DISTINCT FROM b JOIN runs ON true") \
        == {"v_runs", "runs"}


def test_a_store_made_with_trust_by_the_old_server_is_closed_on_start():
    """A data directory as `db start` made it before: trust, everything owned by the superuser."""
    home = private_home()
    e = db.Embedded(home)
    try:
        e.root.mkdir(parents=True)
        e._own(e.root)
        e._run([db.pg_bin("initdb"), "-D", str(e.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                "--locale=C.UTF-8"])
        e.sock.mkdir(mode=0o755)
        e._own(e.sock)
        e._run([db.pg_bin("pg_ctl"), "start", "-w", "-D", str(e.data), "-l", str(e.log), "-o",
                f"-c listen_addresses='' -c unix_socket_directories='{e.sock}'"])
        old = f"postgresql:///postgres?host={e.sock}&user=postgres"
        with psycopg.connect(old, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{db.DB_NAME}"')
        with psycopg.connect(old.replace("/postgres?", f"/{db.DB_NAME}?")) as c:
            db.migrate(c)
            ingest(c, [PROFILE], Provenance())
        e._run([db.pg_bin("pg_ctl"), "stop", "-w", "-D", str(e.data)])

        r = cli("db", "start", env={"COMMSCOPE_HOME": str(home)})
        assert r.returncode == 0, r.stderr
        with superuser(e) as c:
            assert "trust" not in {m for (m,) in c.execute("SELECT auth_method FROM pg_hba_file_rules")}
        with db.connect(e.url()) as c:
            assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
            owners = c.execute("SELECT DISTINCT relowner::regrole::text FROM pg_class "
                               "WHERE relnamespace = 'public'::regnamespace").fetchall()
            assert owners == [("commscope",)]
            c.execute("DELETE FROM runs")  # the owner role can write what the old superuser made
        assert stat.S_IMODE(e.sock.stat().st_mode) == 0o700
    finally:
        e.stop()
        shutil.rmtree(home, ignore_errors=True)


def test_two_starts_at_once_give_one_server():
    home = private_home()
    env = {"COMMSCOPE_HOME": str(home)}
    base = {k: v for k, v in os.environ.items() if not k.startswith("PG") and k != "COMMSCOPE_DB_URL"}
    try:
        procs = [subprocess.Popen([*CLI, "db", "start"], env={**base, **env}, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=180) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
        urls = {o[0].strip().splitlines()[-1] for o in outs}
        assert len(urls) == 1
        data = str(db.Embedded(home).data)
        postmasters = subprocess.run(["pgrep", "-f", f"postgres -D {data}"], capture_output=True, text=True)
        assert len(postmasters.stdout.split()) == 1
    finally:
        db.Embedded(home).stop()
        shutil.rmtree(home, ignore_errors=True)


def test_a_held_write_lock_times_out_with_a_message_naming_its_holder(dsn):
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(hashtext('commscope.store.ingest'))")
        pid = holder.info.backend_pid
        t0 = time.monotonic()
        r = cli("ingest", "-q", str(PROFILE), env={"COMMSCOPE_DB_URL": dsn, "COMMSCOPE_LOCK_TIMEOUT": "2s"},
                timeout=90)
        waited = time.monotonic() - t0
        holder.rollback()
    assert r.returncode != 0
    assert "lock" in r.stderr and str(pid) in r.stderr and "COMMSCOPE_LOCK_TIMEOUT" in r.stderr, r.stderr
    assert waited < 60
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


@pytest.mark.parametrize("command", [("db", "status"), ("ingest", str(PROFILE)), ("db", "url"), ("check",)])
def test_passwords_are_never_printed(command):
    secret = "s3cr3t-Pa55"
    url = f"postgresql://alice:{secret}@127.0.0.1:1/commscope?password={secret}"
    r = cli(*command, env={"COMMSCOPE_DB_URL": url, "PGCONNECT_TIMEOUT": "2"})
    assert secret not in r.stdout + r.stderr
    assert "alice" in r.stdout + r.stderr  # the URL is still named, masked


def test_connect_sets_application_name_and_a_timeout(dsn):
    with db.connect(dsn) as c:
        assert c.execute("SHOW application_name").fetchone()[0] == "commscope"
    t0 = time.monotonic()
    with pytest.raises(db.DBError, match="cannot connect"):
        # a port nothing answers on, behind an address that drops packets would hang without a timeout;
        # here a closed loopback port answers at once, so this checks the message and the mask
        db.connect("postgresql://bob:pw@127.0.0.1:1/x")
    assert time.monotonic() - t0 < 30


@as_root
def test_binaries_in_a_directory_the_server_user_cannot_enter_still_serve(monkeypatch, tmp_path):
    """A checkout (and its venv with pgserver's PostgreSQL) inside a 0700 directory, as from `mktemp -d`."""
    bundled = db.pgserver_bindir()
    assert bundled, "pgserver is a test dependency (commscope[embedded])"
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    site = bundled.parent.parent.parent  # site-packages: pgserver/pginstall and the wheel's pgserver.libs
    shutil.copytree(site / "pgserver", private / "pgserver", symlinks=True)
    shutil.copytree(site / "pgserver.libs", private / "pgserver.libs", symlinks=True)
    monkeypatch.setenv("COMMSCOPE_PG_BINDIR", str(private / "pgserver" / "pginstall" / "bin"))
    home = private_home()
    e = db.Embedded(home)
    try:
        e.start()
        with db.connect(e.url()) as c:
            assert c.execute("SHOW server_version").fetchone()[0].startswith("16.")
            db.migrate(c)
            assert len(ingest(c, [PROFILE], Provenance()).inserted) == 1
    finally:
        e.stop()
        shutil.rmtree(home, ignore_errors=True)


def test_times_go_in_and_out_in_utc_whatever_the_server_s_zone(dsn, server):
    """A server (or database) set to another zone: bounds without a zone still mean UTC, and
    commscope's connections read times in UTC."""
    import datetime as dt
    from commscope.views.thicket import select_runs
    emb, _ = server
    name = dsn.split("/")[3].split("?")[0]
    with emb.admin("postgres") as a:
        a.execute(f'ALTER DATABASE "{name}" SET timezone = \'Pacific/Auckland\'')
    with psycopg.connect(dsn) as c:
        ingest(c, [PROFILE], Provenance())
        assert c.execute("SHOW timezone").fetchone()[0] == "Pacific/Auckland"
        (started,) = c.execute("SELECT started_at FROM runs").fetchone()
        utc = started.astimezone(dt.timezone.utc)
        naive_after = (utc + dt.timedelta(seconds=1)).replace(tzinfo=None).isoformat()
        naive_before = (utc - dt.timedelta(seconds=1)).replace(tzinfo=None).isoformat()
        # the run started inside [naive_before, naive_after) read as UTC; as Auckland time it would not
        assert [r["run_id"] for r in select_runs(c, since=naive_before, until=naive_after)]
        assert not select_runs(c, until=naive_before)
    with db.connect(dsn) as c:
        assert c.execute("SHOW timezone").fetchone()[0] == "UTC"
        assert c.execute("SELECT started_at FROM runs").fetchone()[0].utcoffset() == dt.timedelta(0)
