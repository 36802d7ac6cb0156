"""The views' reads of the base tables (views/thicket.py): runs with their profile metadata, and their call-tree
nodes' metrics."""
from __future__ import annotations

import datetime as dt

import psycopg
from psycopg import sql


def runs_with_metadata(conn: psycopg.Connection, match: dict[str, list], since: dt.datetime | None,
                       until: dt.datetime | None) -> list[dict]:
    """Rows of v_runs, each with its run's metadata, whose columns in MATCH hold one of its values and that started
    in [SINCE, UNTIL) (None: unbounded), oldest first."""
    clauses, params = [], []
    for col, values in match.items():
        clauses.append(sql.SQL("v.{} = ANY(%s)").format(sql.Identifier(col)))
        params.append(values)
    for bound, op in ((since, ">="), (until, "<")):
        if bound is not None:
            clauses.append(sql.SQL("v.started_at " + op + " %s"))
            params.append(bound)
    query = sql.SQL("SELECT v.*, r.metadata FROM v_runs v JOIN runs r ON r.id = v.run_id {} ORDER BY v.started_at, v.run_id").format(
        sql.SQL("WHERE ") + sql.SQL(" AND ").join(clauses) if clauses else sql.SQL(""))
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(query, params).fetchall()


def node_metric_rows(conn: psycopg.Connection, run_ids: list[int], columns) -> dict[int, list[tuple]]:
    """run_id -> (path, *COLUMNS of node_metrics) of each call-tree node the run measured."""
    cols = sql.SQL(", ").join(sql.Identifier("nm", c) for c in columns)
    out: dict[int, list[tuple]] = {i: [] for i in run_ids}
    for run_id, *row in conn.execute(
            sql.SQL("SELECT nm.run_id, n.path, {} FROM node_metrics nm JOIN nodes n ON n.id = nm.node_id "
                    "WHERE nm.run_id = ANY(%s)").format(cols), (run_ids,)):
        out[run_id].append(tuple(row))
    return out
