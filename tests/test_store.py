"""The store, against a real PostgreSQL: the embedded server the tests start
under a temporary COMMSCOPE_HOME, migrations, ingest of the real fixtures,
idempotence, atomicity, bad input, views and the read-only role."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from commscope.store import db
from conftest import grant_local, private_home
from corpus import varied_copies
from commscope.read.workload_output import parse_output
from commscope.workflow.ingest import Provenance, ingest
from commscope.read.profiles import BadProfile

DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-m", "commscope.cli"]


def counts(url) -> dict:
    with psycopg.connect(url) as c:
        return {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("campaigns", "runs", "nodes", "node_metrics", "mpi_metrics", "rank_metrics",
                          "comm_matrix", "foms")}


def cli(*args, env=None):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_migrations_are_versioned_and_rerunnable(dsn):
    with psycopg.connect(dsn) as conn:
        assert db.migrate(conn) == []  # already applied by the fixture
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]
    assert versions == [v for v, _, _ in db.migrations()]


def test_ingest_fixtures_then_again_is_a_no_op(dsn):
    with psycopg.connect(dsn) as conn:
        first = ingest(conn, [DATA], Provenance(system="testbox"))
    per_rank_dirs = [d for d in DATA.glob("*/") if d.name != "ramble"]
    expected_runs = len(list(DATA.glob("*.cali"))) + len(list(DATA.glob("*.json"))) + len(per_rank_dirs)
    assert len(first.inserted) == expected_runs
    # Ramble workspaces below are campaigns of their own: left out, and said so
    assert sorted(first.left_out) == sorted(str(d) for d in (DATA / "ramble").iterdir() if d.is_dir())
    before = counts(dsn)
    with psycopg.connect(dsn) as conn:
        again = ingest(conn, [DATA], Provenance(system="testbox"))
    assert again.inserted == [] and len(again.skipped) == expected_runs
    assert counts(dsn) == before  # not even an empty campaign is left


def test_a_workload_output_without_profile_is_a_run_without_call_tree(dsn, tmp_path):
    """Runs without Caliper: the stdout gives FOMs, VERIFY status and wall time."""
    ok = tmp_path / "halo3d.out"
    shutil.copy(DATA / "halo3d-overlap-n4.runtime-profile.out", ok)
    failed = tmp_path / "failed" / "halo3d.out"
    failed.parent.mkdir()
    failed.write_text(ok.read_text().replace("VERIFY checksum PASS", "VERIFY checksum FAIL"))
    (tmp_path / "notes.out").write_text("some other program's log\n")  # in a directory: not a workload output
    with psycopg.connect(dsn) as conn:
        res = ingest(conn, [tmp_path], Provenance(system="nocali"))
        assert len(res.inserted) == 2
        rows = conn.execute("SELECT status, profile_kind, app, variant, ranks, wall_time FROM v_runs ORDER BY status"
                            ).fetchall()
        out = parse_output(ok.read_text())
        wall = out.foms["total_time"][0]
        assert rows == [("failed", "none", "halo3d", "overlap", 4, wall), ("ok", "none", "halo3d", "overlap", 4, wall)]
        foms = dict(conn.execute("SELECT name, value FROM v_foms WHERE status = 'ok'").fetchall())
        assert foms == {k: v for k, (v, _) in out.foms.items()}
        assert conn.execute("SELECT count(*) FROM node_metrics").fetchone()[0] == 0
        with pytest.raises(BadProfile, match="notes.out: not a commscope workload output"):
            ingest(conn, [tmp_path / "notes.out"], Provenance())


@pytest.mark.parametrize("ranks", [2, 4])
def test_comm_stats_per_region_equal_the_workload_s_halo_bytes(dsn, ranks):
    f = DATA / f"halo3d-nonblocking-n{ranks}.comm-stats.cali"
    out = parse_output(f.with_suffix(".out").read_text())
    with psycopg.connect(dsn) as conn:
        ingest(conn, [f], Provenance())
        row = conn.execute("SELECT sends, recvs, bytes_sent, bytes_recv, dest_ranks, irecv_gap_min, irecv_gap_avg, "
                           "irecv_gap_max FROM v_comm_stats WHERE region = 'main/timestep/halo_exchange/halo'").fetchone()
    sends, recvs, sent, recv, peers, gmin, gavg, gmax = row
    iters = int(out.params["iters"])
    assert sent == recv == out.foms["halo_bytes_per_iter_avg"][0] * ranks * iters
    assert sends == recvs and sends >= 2 * iters * (ranks - 1)
    # the most neighbours of one rank in the (non-periodic) process grid
    grid = [int(d) for d in out.params["process_grid"].split(",")]
    assert peers == sum(2 if d > 2 else 1 if d == 2 else 0 for d in grid)
    assert 0 < gmin <= gavg <= gmax


def test_comm_matrix_equals_commgraph_ground_truth(dsn):
    d = DATA / "commgraph-random-sparse-n4.msgtrace"
    with psycopg.connect(dsn) as conn:
        ingest(conn, [d], Provenance())
        rows = conn.execute("SELECT src, sum(bytes), sum(messages), min(dst) FROM v_comm_matrix GROUP BY src").fetchall()
    truth = parse_output((d / "commgraph.out").read_text())
    sent = {int(x["rank"]): (int(float(x["bytes_sent"])), int(float(x["msgs_sent"]))) for x in truth.rank_lines}
    assert {src: (b, m) for src, b, m, _ in rows} == sent
    assert all(mindst >= 0 for *_, mindst in rows)


def test_proc_null_is_excluded_from_the_matrix(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA / "halo3d-blocking-n4.msgtrace"], Provenance())
        assert conn.execute("SELECT count(*) FROM comm_matrix WHERE dst < 0 OR src < 0").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM comm_matrix").fetchone()[0] == 8


def test_rank_totals_add_up_and_fractions_are_consistent(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA / "halo3d-overlap-n4.runtime-profile.cali"], Provenance())
        r = conn.execute("SELECT wall_time, mpi_fraction_avg, mpi_fraction_slowest, mpi_time_avg FROM runs").fetchone()
        ranks = conn.execute("SELECT rank, total_time, user_time, mpi_time, mpi_sync_time FROM rank_metrics "
                             "ORDER BY rank").fetchall()
    assert [x[0] for x in ranks] == [0, 1, 2, 3]
    for _, total, user, mpi, sync in ranks:
        assert abs(total - (user + mpi + sync)) < 1e-9
    totals = [x[1] for x in ranks]
    mpis = [x[3] + x[4] for x in ranks]
    assert r[0] == pytest.approx(max(totals))
    assert r[1] == pytest.approx(sum(mpis) / sum(totals))
    slowest = totals.index(max(totals))
    assert r[2] == pytest.approx(mpis[slowest] / totals[slowest])
    assert 0 < r[1] < 1


def test_foms_from_the_workload_output_are_stored(dsn):
    f = DATA / "halo3d-overlap-n2.runtime-profile.cali"
    with psycopg.connect(dsn) as conn:
        ingest(conn, [f], Provenance())
        foms = dict(conn.execute("SELECT name, value FROM foms").fetchall())
    assert foms == {k: v for k, (v, _) in parse_output(f.with_suffix(".out").read_text()).foms.items()}


def test_views_answer(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA], Provenance(system="testbox", interconnect="shm"))
        frac = conn.execute("SELECT count(*) FROM v_mpi_fraction").fetchone()[0]
        # the series of the runtime-profile pair at 2 and 4 ranks (other overlap fixtures have other sizes)
        scaling = conn.execute("SELECT app, variant, ranks, speedup, efficiency FROM v_scaling s "
                               "WHERE app = 'halo3d' AND variant = 'overlap' AND global_size = "
                               "(SELECT global_size FROM v_scaling WHERE app = 'halo3d' AND variant = 'overlap' "
                               "AND ranks = 4) ORDER BY ranks").fetchall()
        stacks = conn.execute("SELECT count(*) FROM v_stack_comparison").fetchone()[0]
        routines = conn.execute("SELECT function, sum(calls) FROM v_mpi_routines GROUP BY function").fetchall()
    assert frac >= 8
    assert [s[2] for s in scaling] == [2, 4] and scaling[0][3] == pytest.approx(1.0)
    assert stacks >= 1
    assert "MPI_Isend" in dict(routines)


BAD = {
    "empty.cali": b"",
    "text.cali": b"this is not a profile\n",
    "truncated.cali": None,  # filled from a real fixture below
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_names_the_file_and_changes_nothing(dsn, tmp_path, name):
    content = BAD[name]
    if content is None:
        content = (DATA / "halo3d-overlap-n2.runtime-profile.cali").read_bytes()[:300]
    bad = tmp_path / name
    bad.write_bytes(content)
    good = tmp_path / "good.cali"
    shutil.copy(DATA / "halo3d-overlap-n2.runtime-profile.cali", good)
    before = counts(dsn)
    with psycopg.connect(dsn) as conn:
        with pytest.raises(BadProfile) as e:
            ingest(conn, [good, bad], Provenance())
    assert str(bad) in str(e.value)
    assert counts(dsn) == before
    # The CLI says the same, exits non-zero, and --skip-bad stores the good one.
    r = cli("ingest", str(good), str(bad), env={"COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 2 and str(bad) in r.stderr and "nothing was stored" in r.stderr
    assert counts(dsn) == before
    r = cli("ingest", "--skip-bad", str(good), str(bad), env={"COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 3 and str(bad) in r.stderr   # 3: stored, but skipped some (commscope/README.md)
    assert counts(dsn)["runs"] == before["runs"] + 1


def test_profile_naming_no_application_is_refused_until_app_is_given(dsn, tmp_path):
    # A real profile whose every name source (Adiak workload, executable, executablepath, cmdline) is renamed.
    src = DATA / "halo3d-overlap-n2.runtime-profile.cali"
    text = src.read_bytes()
    for key in (b"workload", b"executablepath", b"executable", b"cmdline"):
        text = text.replace(b"data=" + key + b"\n", b"data=x" + key[1:] + b"\n").replace(b"data=" + key + b",",
                                                                                      b"data=x" + key[1:] + b",")
    f = tmp_path / "noname.cali"
    f.write_bytes(text)
    before = counts(dsn)
    r = cli("ingest", str(f), env={"COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 2 and str(f) in r.stderr and "--app" in r.stderr and "nothing was stored" in r.stderr
    assert counts(dsn) == before
    r = cli("ingest", "--app", "my-halo", str(f), env={"COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT app, metadata->>'app_source' FROM runs").fetchall() == [("my-halo", "--app")]


def test_hostile_metadata_is_stored_verbatim_not_executed(dsn):
    evil = "x'); DROP TABLE runs; --\x00\u202e"
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA / "halo3d-overlap-n2.runtime-profile.cali"], Provenance(system=evil, stack=evil))
        name = conn.execute("SELECT name FROM systems").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    assert name == evil.replace("\x00", "\ufffd")


def test_readonly_role_reads_views_and_reader_tables_and_writes_nothing(dsn):
    """The read-only role reads the views and db.READER_TABLES (what check, changepoints and the advisors read),
    no other table, and writes nothing (the dashboards' own queries read views only: test_store_security)."""
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA / "halo3d-overlap-n2.runtime-profile.cali"], Provenance())
        tables = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_type = 'BASE TABLE'")}
    ro = grant_local(dsn, "grafana_ro")
    with psycopg.connect(ro, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM v_mpi_fraction").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        others = sorted(tables - set(db.READER_TABLES))
        assert others
        for t in others:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(f'SELECT 1 FROM "{t}" LIMIT 1')
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("UPDATE runs SET app = 'x'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("DELETE FROM annotations")


def test_readonly_role_is_granted_views_that_later_migrations_add(dsn):
    ro = grant_local(dsn, "grafana_ro2")
    with psycopg.connect(dsn) as conn:
        # what a later migration does: a new view, then migrate() finishes
        conn.execute("CREATE VIEW v_later AS SELECT run_id, app FROM v_runs")
        conn.commit()
        db.migrate(conn)
    with psycopg.connect(ro) as c:
        assert c.execute("SELECT count(*) FROM v_later").fetchone()[0] == 0
        assert c.execute("SELECT count(*) FROM v_system_comparison").fetchone()[0] == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT count(*) FROM readonly_roles")


VIEW_DEFINED = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+(\w+)", re.IGNORECASE)
# The one view a versioned migration creates: 0029's backfill and shown_metrics_daily's trigger function read it
# while later migrations run; views.sql replaces it after them.
READ_WHILE_MIGRATING = {("0013_run_metrics_daily.sql", "v_run_metrics_daily")}


def test_every_view_is_defined_once_in_views_sql_and_the_migrations_create_none(dsn):
    text, _ = db.views_sql()
    defined = VIEW_DEFINED.findall(re.sub(r"--[^\n]*", "", text))
    in_migrations = {(name, v) for _, name, sql in db.migrations()
                     for v in VIEW_DEFINED.findall(re.sub(r"--[^\n]*", "", sql))}
    assert in_migrations == READ_WHILE_MIGRATING
    with psycopg.connect(dsn) as conn:
        views = {r[0] for r in conn.execute("SELECT table_name FROM information_schema.views "
                                            "WHERE table_schema = 'public'")}
    assert sorted(defined) == sorted(set(defined)) == sorted(views)


def test_views_sql_is_applied_again_when_it_differs_and_read_only_roles_read_every_view(dsn):
    """A store whose views.sql is not this one (its checksum differs): migrate drops every view and creates them
    from views.sql, each with the rows it had, and a read-only role granted before reads every one of them."""
    ro = grant_local(dsn, "grafana_ro3")
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA / "halo3d-overlap-n2.runtime-profile.cali"], Provenance())
        views = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.views "
                                            "WHERE table_schema = 'public' ORDER BY 1")]
        before = {v: sorted(map(repr, conn.execute(f"SELECT * FROM {v}").fetchall())) for v in views}
        conn.execute("UPDATE schema_repeatable SET checksum = 'another views.sql'")
        conn.commit()
        assert db.migrate(conn) == [db.VIEWS_FILE]
        assert db.migrate(conn) == []
        assert conn.execute("SELECT checksum FROM schema_repeatable").fetchone()[0] == db.views_sql()[1]
        after = {v: sorted(map(repr, conn.execute(f"SELECT * FROM {v}").fetchall())) for v in views}
    assert after == before and any(before.values())
    with psycopg.connect(ro, autocommit=True) as c:
        for v in views:
            c.execute(f"SELECT * FROM {v} LIMIT 1")


def test_embedded_server_runs_on_the_binaries_pgserver_bundles(monkeypatch):
    """Where Debian's postgresql is absent, the PyPI pgserver package's PostgreSQL serves."""
    bindir = db.pgserver_bindir()
    assert bindir, "pgserver is a test dependency (commscope[embedded])"
    monkeypatch.setenv("COMMSCOPE_PG_BINDIR", str(bindir))
    home = private_home()
    emb = db.Embedded(home)
    try:
        url = emb.start()
        with psycopg.connect(url) as conn:
            assert conn.execute("SHOW server_version").fetchone()[0].startswith("16.")
            assert conn.execute("SHOW listen_addresses").fetchone()[0] == ""
            db.migrate(conn)
            assert len(ingest(conn, [DATA / "halo3d-overlap-n2.runtime-profile.cali"], Provenance()).inserted) == 1
        assert emb.stop()
        assert not emb.running()
    finally:
        emb.stop()
        shutil.rmtree(home, ignore_errors=True)
    monkeypatch.setenv("COMMSCOPE_PG_BINDIR", str(home / "nowhere"))
    with pytest.raises(db.DBError, match="COMMSCOPE_PG_BINDIR=.*has no initdb"):
        db.pg_bin("initdb")


def test_cli_db_lifecycle_under_its_own_home():
    home = private_home()
    env = {"COMMSCOPE_HOME": str(home)}
    base = {k: v for k, v in os.environ.items() if k not in ("COMMSCOPE_DB_URL", "PGHOST", "PGDATABASE")}
    run = lambda *a: subprocess.run([*CLI, *a], capture_output=True, text=True,  # noqa: E731
                                    env={**base, "COMMSCOPE_HOME": env["COMMSCOPE_HOME"]})
    assert "not reachable" in run("db", "status").stdout or "stopped" in run("db", "status").stdout
    r = run("db", "url")
    assert r.returncode == 1 and "commscope db start" in r.stderr
    r = run("db", "start")
    try:
        assert r.returncode == 0, r.stderr
        url = r.stdout.strip().splitlines()[-1]
        assert url.startswith("postgresql://") and str(home) in url
        # a new store says so in one line, naming the newest migration (read from the store itself), not one
        # line per migration
        with psycopg.connect(url) as c:
            names = [n for (n,) in c.execute("SELECT name FROM schema_version ORDER BY name")]
        assert r.stdout.strip().splitlines()[:-1] == [
            f"new store: {len(names)} migrations and the views applied, up to {names[-1]}"]
        assert run("db", "url").stdout.strip().splitlines()[-1] == url
        assert "running" in run("db", "status").stdout
        r = run("ingest", "-q", str(DATA / "halo3d-overlap-n2.runtime-profile.cali"))
        assert r.returncode == 0, r.stderr
        with psycopg.connect(url) as c:
            assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
            # only a unix socket: no TCP listener
            assert c.execute("SHOW listen_addresses").fetchone()[0] == ""
    finally:
        assert run("db", "stop").stdout.strip() == "stopped"
        shutil.rmtree(home, ignore_errors=True)


def test_eight_concurrent_ingests_of_overlapping_inputs(dsn, tmp_path):
    """No duplicates, no lost runs, no deadlocks."""
    parts = sorted(p for p in DATA.iterdir() if p.suffix in (".cali", ".json") or (p.is_dir() and p.name != "ramble"))
    jobs = []
    for i in range(8):
        # overlapping, differently ordered selections; together they cover everything
        mine = parts[i % 3::2] + parts[::-1][: 4 + i]
        jobs.append(subprocess.Popen([*CLI, "ingest", "-q", *map(str, mine)], env={**os.environ, "COMMSCOPE_DB_URL": dsn},
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for j in jobs:
        _, err = j.communicate(timeout=300)
        assert j.returncode == 0, err
    with psycopg.connect(dsn) as c:
        runs, distinct = c.execute("SELECT count(*), count(DISTINCT content_hash) FROM runs").fetchone()
        empty = c.execute("SELECT count(*) FROM campaigns c WHERE NOT EXISTS "
                          "(SELECT 1 FROM runs r WHERE r.campaign_id = c.id)").fetchone()[0]
    assert runs == distinct == len(parts)
    assert empty == 0


def test_same_bytes_under_another_name_is_the_same_run(dsn, tmp_path):
    src = DATA / "halo3d-overlap-n2.runtime-profile.cali"
    shutil.copy(src, tmp_path / "renamed.cali")
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [src], Provenance()).inserted) == 1
        assert ingest(conn, [tmp_path / "renamed.cali"], Provenance()).inserted == []


def children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
            except (OSError, IndexError):
                pass
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_kill_9_mid_ingest_leaves_a_consistent_store_and_rerun_completes(dsn, tmp_path):
    files = varied_copies(DATA / "halo3d-overlap-n4.runtime-profile.cali", 400, tmp_path / "corpus")
    env = {**os.environ, "COMMSCOPE_DB_URL": dsn}
    p = subprocess.Popen([*CLI, "ingest", "-q", str(tmp_path / "corpus")], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Kill once the campaign's transaction is writing runs.
    import time
    deadline = time.monotonic() + 120
    with psycopg.connect(dsn, autocommit=True) as watch:
        while time.monotonic() < deadline and p.poll() is None:
            busy = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE '%%COPY node_metrics%%' "
                                 "AND pid <> pg_backend_pid()").fetchone()[0]
            if busy:
                break
            time.sleep(0.01)
    assert p.poll() is None, "the ingest finished before it could be killed; make the corpus larger"
    readers = children(p.pid)
    assert readers, "the ingest of 400 profiles should read them in reader processes"
    p.kill()
    p.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(c) for c in readers):
        time.sleep(0.1)
    assert not any(alive(c) for c in readers), "reader processes outlived the killed ingest"
    c1 = counts(dsn)
    assert c1["runs"] == 0 and c1["node_metrics"] == 0 and c1["campaigns"] == 0  # the transaction died with it
    r = subprocess.run([*CLI, "ingest", "-q", str(tmp_path / "corpus")], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    c2 = counts(dsn)
    assert c2["runs"] == len(files) and c2["campaigns"] == 1
    with psycopg.connect(dsn) as c:
        orphans = c.execute("SELECT count(*) FROM runs r WHERE NOT EXISTS "
                            "(SELECT 1 FROM node_metrics m WHERE m.run_id = r.id)").fetchone()[0]
    assert orphans == 0


def test_two_ingests_inside_one_caller_transaction_both_store_their_runs(dsn, tmp_path):
    """A caller that opens its own transaction and ingests twice (a script storing two result directories
    atomically) gets both campaigns, and nothing until it commits. The runs are counted by another
    connection, against the number of files given."""
    first, second = tmp_path / "a", tmp_path / "b"
    varied_copies(DATA / "stencil2d-row-naive-n2.spot.cali", 3, first, "root")
    varied_copies(DATA / "halo3d-overlap-n2.runtime-profile.cali", 2, second, "root")
    before = counts(dsn)["runs"]
    with psycopg.connect(dsn) as conn:
        with conn.transaction():
            a = ingest(conn, [first], Provenance(system="testbox"))
            b = ingest(conn, [second], Provenance(system="testbox"))
            assert counts(dsn)["runs"] == before   # not visible to others before the commit
    assert (len(a.inserted), len(b.inserted)) == (3, 2) and a.campaign_id != b.campaign_id
    assert counts(dsn)["runs"] == before + 5
