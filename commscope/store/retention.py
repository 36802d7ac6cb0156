"""Retention of per-rank detail (migration 0022): `commscope db retain --per-rank-older-than 6mo`.

History is partitioned by the month of each run's start (UTC). A month's per-rank partitions (rank_metrics: a
row per rank; comm_matrix: a row per pair of ranks) are dropped whole once the whole month is older than the
age given, which costs no row-by-row delete and leaves no bloat. What the dashboards and reports read is kept:
runs, run_windows (v_run_metrics), rank_spread (the distributions over ranks and the slowest ranks), node_metrics,
mpi_metrics, the FOMs and the daily rollups. The same command makes the coming months' partitions, so that a
nightly ingest does not have to (making a partition locks its table against readers until the ingest commits).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg
from psycopg import sql

from commscope.store import db
from commscope.store.ingest import WRITE_LOCK

AHEAD = 2   # months after this one whose partitions `retain` makes
AGE = re.compile(r"^([0-9]+)(mo|y)$")


def parse_age(text: str) -> int:
    """'6mo' or '2y' as a number of months; a ValueError says what is wrong and what to give."""
    m = AGE.match(text.strip())
    if not m:
        raise ValueError(f"--per-rank-older-than {text!r}: not an age; give months or years, e.g. 6mo or 2y")
    months = int(m.group(1)) * (12 if m.group(2) == "y" else 1)
    if months < 1:
        raise ValueError(f"--per-rank-older-than {text!r}: give an age of at least one month, e.g. 6mo "
                         f"(0 would drop the per-rank rows of the month that has just ended)")
    return months


@dataclass
class Partition:
    month: object          # the month's start, UTC
    table: str
    partition: str
    rows: int
    bytes: int
    runs: int              # runs of the month that have rows in it


def candidates(conn: psycopg.Connection, months: int) -> list[Partition]:
    """The per-rank partitions of every month that ended more than MONTHS months ago."""
    conn.execute("SET LOCAL timezone = 'UTC'")
    rows = conn.execute(
        "SELECT month, table_name, partition FROM v_history_partitions "
        "WHERE per_rank AND partition IS NOT NULL AND month + interval '1 month' <= now() - make_interval(months => %s) "
        "ORDER BY month, table_name", (months,)).fetchall()
    out = []
    for month, table, part in rows:
        ident = sql.Identifier(part)
        n, runs = conn.execute(sql.SQL("SELECT count(*), count(DISTINCT run_id) FROM {}").format(ident)).fetchone()
        size = conn.execute("SELECT pg_total_relation_size(%s::regclass)", (part,)).fetchone()[0]
        out.append(Partition(month, table, part, n, size, runs))
    return out


def make_months_ahead(conn: psycopg.Connection, ahead: int = AHEAD) -> None:
    """This month's partitions and the next AHEAD months', where missing."""
    for k in range(ahead + 1):
        conn.execute("SELECT run_month_partitions(date_trunc('month', now(), 'UTC') + make_interval(months => %s))",
                     (k,))


def retain(conn: psycopg.Connection, months: int, dry_run: bool = False) -> list[Partition]:
    """Drops the per-rank partitions older than MONTHS months (see candidates) in one transaction, after any
    ingest in progress has committed (the ingest's write lock), and makes the coming months' partitions.
    DRY_RUN: only lists them. Returns what was (or would be) dropped."""
    with conn.transaction():
        db.writer_session(conn)
        if not dry_run:
            db.take_write_lock(conn, WRITE_LOCK)
        parts = candidates(conn, months)
        if dry_run:
            return parts
        for p in parts:
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(p.partition)))
        conn.execute("UPDATE run_months SET per_rank_dropped_at = now() WHERE month = ANY(%s)",
                     (sorted({p.month for p in parts}),))
        make_months_ahead(conn)
    if parts:
        # a partitioned table's own statistics are kept by ANALYZE only (autovacuum analyses its partitions)
        with conn.transaction():
            conn.execute("ANALYZE rank_metrics, comm_matrix")
    return parts
