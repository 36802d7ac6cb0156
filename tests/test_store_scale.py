"""History partitioned by month and the retention of per-rank detail (migration 0022, `commscope db retain`),
against a real PostgreSQL with the real fixtures.

Where each row lives is read from PostgreSQL's own catalog (each partition's bounds, pg_get_expr of
relpartbound), not from commscope's naming. What a migration carries over is compared with the same store's rows
before it ran; what retention drops is fixed by the test's own choice of run times (runs well inside or well
outside the age), not by the month arithmetic the implementation does."""
from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from commscope.store import db
from commscope.views import panels as P
from commscope.workflow.ingest import Provenance, ingest
from conftest import grant_local

DATA = Path(__file__).parent / "data"
OLD_DUMP = Path(__file__).parent / "stores" / "schema-9-fixtures.dump"
CLI = [sys.executable, "-m", "commscope.cli"]
HISTORY = ("node_metrics", "mpi_metrics", "rank_spread", "rank_metrics", "comm_matrix")
PER_RANK = ("rank_metrics", "comm_matrix")
# The views over the history tables (commscope/store/views.sql), each one row per row of its table.
VIEW_OF = {"v_node_metrics": "node_metrics", "v_mpi_routines": "mpi_metrics", "v_rank_groups": "rank_metrics",
           "v_comm_matrix": "comm_matrix", "v_rank_spread": "rank_spread"}
SUMMARIES = ("runs", "run_windows", "rank_spread", "node_metrics", "mpi_metrics", "foms", "comm_stats", "run_day",
             "runs_daily", "wall_time_daily", "routines_daily", "collectives_daily", "halo_daily", "io_daily",
             "run_metrics_daily", "v_run_metrics")
BOUND = re.compile(r"FOR VALUES FROM \('([^']+)'\) TO \('([^']+)'\)")


def columns(conn, table: str) -> list[str]:
    return [c for (c,) in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped "
        "AND attname <> 'started_at' ORDER BY attnum", (table,))]


def rows(conn, table: str, only: list[str] | None = None) -> list[tuple]:
    """TABLE's rows, sorted; ONLY: just these columns (those a table had before a later migration added more)."""
    cols = ", ".join(f'"{c}"' for c in (only or columns(conn, table)))
    return sorted(conn.execute(f"SELECT {cols} FROM {table}").fetchall(), key=repr)


def misplaced(conn, table: str) -> list[tuple]:
    """Rows of TABLE whose run's started_at is not inside the bounds of the partition holding them (bounds as
    PostgreSQL prints them), or whose own started_at differs from their run's."""
    bounds = {}
    for part, expr in conn.execute("SELECT c.oid::regclass::text, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
                                   "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass", (table,)):
        lo, hi = BOUND.match(expr).groups()
        bounds[part] = (dt.datetime.fromisoformat(lo), dt.datetime.fromisoformat(hi))
    bad = []
    for part, run_id, own, run_started in conn.execute(
            f"SELECT t.tableoid::regclass::text, t.run_id, t.started_at, r.started_at FROM {table} t "
            f"JOIN runs r ON r.id = t.run_id"):
        lo, hi = bounds[part]
        if own != run_started or not lo <= run_started < hi:
            bad.append((part, run_id, run_started))
    return bad


def test_the_schema_9_store_keeps_every_row_when_partitioned(server):
    """The committed schema-9 dump, migrated to the schema before 0022 (with distributions over ranks made from
    its real rank rows, as 0019's table holds them), then through 0022: every row of every history table is the
    same and sits in the partition of its run's month, and each view over them shows its rows."""
    emb, _ = server
    name = "scale_schema9"
    with emb.admin("postgres") as a:
        a.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        a.execute(f"CREATE DATABASE {name}")
    emb.prepare_database(name)
    url = emb.url(name)
    subprocess.run([emb.bin("pg_restore"), "--no-owner", "--no-acl", f"--dbname={url}", str(OLD_DUMP)], check=True,
                   capture_output=True)
    try:
        with psycopg.connect(url) as conn:
            done = {v for (v,) in conn.execute("SELECT version FROM schema_version")}
            for version, mname, sql in db.migrations():
                if version < 22 and version not in done:
                    conn.execute(sql)
                    conn.execute("INSERT INTO schema_version (version, name) VALUES (%s, %s)", (version, mname))
            conn.execute("""INSERT INTO rank_spread (run_id, "window", node_id, quantity, ranks, min, mean, max, p50,
                    p90, p99, hist_lo, hist_hi, hist_counts, top_ranks, top_values)
                SELECT run_id, 'run', NULL, 'time', count(*), min(total_time), avg(total_time), max(total_time),
                       percentile_cont(0.5) WITHIN GROUP (ORDER BY total_time),
                       percentile_cont(0.9) WITHIN GROUP (ORDER BY total_time),
                       percentile_cont(0.99) WITHIN GROUP (ORDER BY total_time), min(total_time), max(total_time),
                       ARRAY[count(*)::integer], (array_agg(rank ORDER BY total_time DESC))[1:2],
                       (array_agg(total_time ORDER BY total_time DESC))[1:2]
                FROM rank_metrics GROUP BY run_id""")
            conn.commit()
            before = {t: rows(conn, t) for t in HISTORY}
            had = {t: columns(conn, t) for t in HISTORY}   # later migrations add columns (0035)
            assert all(before[t] for t in HISTORY), {t: len(before[t]) for t in HISTORY}
            assert conn.execute("SELECT relkind FROM pg_class WHERE oid = 'rank_metrics'::regclass").fetchone() == ("r",)
            applied = db.migrate(conn)
            assert "0022_history_partitions.sql" in applied
            for t in HISTORY:
                assert conn.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", (t,)).fetchone() == ("p",)
                assert rows(conn, t, had[t]) == before[t], t
                assert not misplaced(conn, t), t
            for v, t in VIEW_OF.items():   # each view shows its table's rows, those columns unchanged
                shown = [c for c in columns(conn, v) if c in had[t]]
                assert len(shown) >= 3, (v, shown)
                at = [had[t].index(c) for c in shown]
                assert rows(conn, v, shown) == sorted((tuple(r[i] for i in at) for r in before[t]), key=repr), v
            months = {m for (m,) in conn.execute("SELECT DISTINCT date_trunc('month', started_at, 'UTC') FROM runs")}
            assert len(months) >= 1
    finally:
        with emb.admin("postgres") as a:
            a.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_each_run_s_rows_go_to_its_month_and_follow_it_when_its_time_changes(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA], Provenance(system="lab"))
        before = {t: rows(conn, t) for t in HISTORY}
        assert all(before[t] for t in HISTORY)
        for t in HISTORY:
            assert not misplaced(conn, t), t
        # Runs moved more than a year back (a month with no partitions yet) and one moved by an hour.
        moved = conn.execute("UPDATE runs SET started_at = started_at - interval '400 days' "
                             "WHERE app IN ('halo3d', 'commgraph') RETURNING id").fetchall()
        assert len(moved) >= 10
        conn.execute("UPDATE runs SET started_at = started_at + interval '1 hour' WHERE app = 'cgsolve'")
        for t in HISTORY:
            assert rows(conn, t) == before[t], t
            assert not misplaced(conn, t), t
        parts = conn.execute("SELECT count(DISTINCT tableoid) FROM rank_metrics").fetchone()[0]
        assert parts >= 2
        # A run deleted takes its rows with it from its partition.
        (gone,) = moved[0]
        conn.execute("DELETE FROM runs WHERE id = %s", (gone,))
        for t in HISTORY:
            assert not conn.execute(f"SELECT 1 FROM {t} WHERE run_id = %s", (gone,)).fetchone(), t


def test_a_writer_role_stores_runs_of_a_month_without_partitions(dsn, tmp_path):
    """A site's ingest job (commscope db grant-writer) may not create tables; the month's partitions are made
    for it, owned by the schema's owner."""
    out = tmp_path / "halo3d.out"
    shutil.copy(DATA / "halo3d-overlap-n4.runtime-profile.out", out)
    may_2019 = dt.datetime(2019, 5, 10, 2, 0, tzinfo=dt.timezone.utc).timestamp()
    os.utime(out, (may_2019, may_2019))   # a run without a profile starts at its file's time
    writer = grant_local(dsn, "scale_ingest_job", db.grant_writer)
    with psycopg.connect(writer) as conn:
        assert conn.execute("SELECT has_schema_privilege('public', 'CREATE')").fetchone() == (False,)
        conn.commit()
        assert ingest(conn, [out], Provenance(system="lab")).inserted
        ingest(conn, [DATA / "halo3d-overlap-n4.runtime-profile.cali"], Provenance(system="lab"))
        conn.execute("UPDATE runs SET started_at = '2018-02-03T04:05:06Z' WHERE profile_kind <> 'none'")
        conn.commit()
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT started_at FROM runs WHERE profile_kind = 'none'").fetchone()[0].year == 2019
        for t in HISTORY:
            assert not misplaced(conn, t), t
        owners = conn.execute(
            "SELECT DISTINCT pg_get_userbyid(c.relowner) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'rank_metrics'::regclass").fetchall()
        assert owners == [(db.OWNER,)]
        assert conn.execute("SELECT count(*) FROM rank_metrics WHERE started_at < '2019-01-01'").fetchone()[0] == 4


def cli(*args, dsn):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env={**env, "COMMSCOPE_DB_URL": dsn},
                          timeout=300)


def snapshot(conn) -> dict:
    return {t: rows(conn, t) for t in SUMMARIES}


def panel_results(url: str) -> dict:
    """Every panel query of every dashboard, expanded as Grafana expands it over the whole history, as the
    read-only role: its rows."""
    out = {}
    with psycopg.connect(url) as conn:
        values = P.all_values(conn)
        values.update(P.reference_values(conn, "lab", "debian-openmpi4"))
        lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM v_runs").fetchone()
        for board in P.DASHBOARDS:
            for p in board.panels:
                out[(board.uid, p.title)] = sorted(map(repr, conn.execute(
                    P.expand(p.sql, lo - dt.timedelta(days=1), hi + dt.timedelta(days=1), values)).fetchall()))
    return out


def test_retain_drops_old_per_rank_rows_and_keeps_the_summaries(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA], Provenance(system="lab"))
        ingest(conn, [DATA / "ramble" / "smoke-openmpi4-repeats"], Provenance())
        now = conn.execute("SELECT now()").fetchone()[0]
        # Old: well over 7 months back, so its whole month ended more than 6 months ago. Kept: 5 months back,
        # so its month ends less than 6 months ago. The rest a day back.
        old = [r for (r,) in conn.execute(
            "UPDATE runs SET started_at = %s WHERE app IN ('halo3d', 'commgraph') AND id %% 2 = 0 RETURNING id",
            (now - dt.timedelta(days=230),))]
        kept = [r for (r,) in conn.execute(
            "UPDATE runs SET started_at = %s WHERE app IN ('halo3d', 'commgraph') AND id %% 2 = 1 RETURNING id",
            (now - dt.timedelta(days=152),))]
        conn.execute("UPDATE runs SET started_at = %s WHERE NOT (id = ANY(%s))", (now - dt.timedelta(days=1), old + kept))
        conn.commit()
        per_rank = {t: dict(conn.execute(f"SELECT run_id, count(*) FROM {t} GROUP BY run_id").fetchall())
                    for t in PER_RANK}
        old_rows = sum(n for t in PER_RANK for r, n in per_rank[t].items() if r in old)
        assert old_rows and sum(per_rank["comm_matrix"].get(r, 0) for r in old), per_rank
        assert sum(n for t in PER_RANK for r, n in per_rank[t].items() if r not in old)
        before = snapshot(conn)
        all_rank_rows = {t: rows(conn, t) for t in PER_RANK}
    reader = grant_local(dsn, "scale_grafana")
    panels_before = panel_results(reader)

    dry = cli("db", "retain", "--per-rank-older-than", "6mo", "--dry-run", dsn=dsn)
    assert dry.returncode == 0, dry.stderr
    assert f"would drop 2 partitions, {old_rows} rows" in dry.stdout, dry.stdout
    with psycopg.connect(dsn) as conn:
        assert {t: rows(conn, t) for t in PER_RANK} == all_rank_rows

    done = cli("db", "retain", "--per-rank-older-than", "6mo", dsn=dsn)
    assert done.returncode == 0, done.stderr
    assert f"dropped 2 partitions, {old_rows} rows" in done.stdout, done.stdout
    with psycopg.connect(dsn) as conn:
        for t in PER_RANK:
            left = dict(conn.execute(f"SELECT run_id, count(*) FROM {t} GROUP BY run_id").fetchall())
            assert left == {r: n for r, n in per_rank[t].items() if r not in old}, t
        assert snapshot(conn) == before
        assert conn.execute("SELECT count(*) FROM v_run_metrics WHERE run_id = ANY(%s)", (old,)).fetchone()[0] > 0
    after = panel_results(reader)
    assert after.keys() == panels_before.keys()
    differ = [k for k in after if after[k] != panels_before[k]]
    # Only the matrix panels read per-rank rows (the newest traced run of the range); every other panel is the same.
    assert all(uid == "commscope-comm-matrix" for uid, _ in differ), differ
    # Again: nothing left to drop.
    again = cli("db", "retain", "--per-rank-older-than", "6mo", dsn=dsn)
    assert again.returncode == 0 and "no per-rank rows older than 6mo" in again.stdout, again.stdout

    # A run that arrives in a month whose per-rank rows were dropped gets them stored again.
    with psycopg.connect(dsn) as conn:
        run_id, n = conn.execute("SELECT run_id, count(*) FROM rank_metrics GROUP BY run_id ORDER BY 1 LIMIT 1"
                                 ).fetchone()
        conn.execute("UPDATE runs SET started_at = %s WHERE id = %s", (now - dt.timedelta(days=230), run_id))
        assert conn.execute("SELECT count(*) FROM rank_metrics WHERE run_id = %s", (run_id,)).fetchone()[0] == n
        assert not misplaced(conn, "rank_metrics")


@pytest.mark.parametrize("age", ["6", "six months", "0mo", "3 mo", "6m"])
def test_retain_refuses_an_age_it_cannot_read_and_changes_nothing(dsn, age):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA / "commgraph-random-sparse-n4.msgtrace"], Provenance())
        conn.execute("UPDATE runs SET started_at = started_at - interval '3 years'")
        conn.commit()
        before = {t: rows(conn, t) for t in PER_RANK}
    r = cli("db", "retain", "--per-rank-older-than", age, dsn=dsn)
    assert r.returncode == 2, r.stdout + r.stderr
    assert repr(age) in r.stderr and "6mo" in r.stderr, r.stderr
    with psycopg.connect(dsn) as conn:
        assert {t: rows(conn, t) for t in PER_RANK} == before


def test_the_read_only_role_cannot_make_partitions(dsn):
    reader = grant_local(dsn, "scale_reader")
    with psycopg.connect(reader) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT run_month_partitions('2003-03-03')")
    with psycopg.connect(dsn) as conn:
        assert not conn.execute("SELECT 1 FROM run_months WHERE month < '2004-01-01'").fetchone()
