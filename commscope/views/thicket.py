"""The store back into notebooks: any selection of runs as a Thicket, or one
run as a Hatchet GraphFrame, rebuilt from the stored call-tree metrics. The
profiles need not exist any more on the machine that reads.

    import commscope
    tk = commscope.load_thicket(app="halo3d", stack="debian-openmpi4", since="2026-11-01")
    tk.metadata[["variant", "ranks", "mpi_fraction_avg"]]
    tk.dataframe.loc[:, ["time", "time (inc)"]]

Metrics per node (over ranks): `time` and `time (inc)` are the averages of
exclusive and inclusive seconds, as Hatchet reads a Caliper profile; `time
(min)`, `time (max)`, `time (inc) (min)`, `time (inc) (max)`, `calls`
(summed over ranks) and `imbalance` (max / avg of exclusive time) complete
them. The metadata table has one row per run: the v_runs columns plus the
profile's Adiak and Ramble metadata.
"""
from __future__ import annotations

import datetime as dt
import warnings
from typing import Any

import psycopg

from commscope.store import db
from commscope.store.queries import views as queries

# v_runs columns a selection may name; a list value matches any of its items.
SELECTABLE = ("run_id", "app", "workload", "variant", "decomposition", "interconnect", "ranks", "nodes", "system",
              "stack", "status", "campaign_id", "git_commit", "ci_pipeline", "profile_kind", "experiment",
              "cpu_model", "global_size")
METRICS = {"time": "excl_avg", "time (inc)": "incl_avg", "time (min)": "excl_min", "time (max)": "excl_max",
           "time (inc) (min)": "incl_min", "time (inc) (max)": "incl_max", "calls": "calls", "imbalance": "imbalance"}


def as_utc(bound: Any) -> dt.datetime:
    """A since/until bound as an aware datetime: ISO text or a datetime or date; one without a zone is UTC
    (never the server's or the session's time zone)."""
    if isinstance(bound, str):
        bound = dt.datetime.fromisoformat(bound)
    elif isinstance(bound, dt.date) and not isinstance(bound, dt.datetime):
        bound = dt.datetime(bound.year, bound.month, bound.day)
    return bound if bound.tzinfo else bound.replace(tzinfo=dt.timezone.utc)


def select_runs(conn: psycopg.Connection, since: Any = None, until: Any = None, status: str | None = "ok",
                **where) -> list[dict]:
    """Rows of v_runs (with the run's metadata) matching the selection, oldest first."""
    unknown = sorted(set(where) - set(SELECTABLE))
    if unknown:
        raise ValueError(f"cannot select runs by {', '.join(unknown)}; choose from {', '.join(SELECTABLE)}")
    match = {}
    if status is not None:
        where["status"] = status
    for col, value in where.items():
        if value is None:
            continue
        values = list(value) if isinstance(value, (list, tuple, set)) else [value]
        match[col] = [str(v) if col not in ("run_id", "ranks", "nodes", "campaign_id") else int(v) for v in values]
    return queries.runs_with_metadata(conn, match, as_utc(since) if since is not None else None,
                                      as_utc(until) if until is not None else None)


def _graphframe(run: dict, rows: list[tuple]):
    """A GraphFrame from one run's (path, metrics...) rows."""
    import pandas as pd
    from hatchet import GraphFrame
    from hatchet.frame import Frame
    from hatchet.graph import Graph
    from hatchet.node import Node

    by_path: dict[str, Node] = {}
    roots, records = [], []
    for path, *values in sorted(rows, key=lambda r: (r[0].count("/"), r[0])):
        parent_path, _, name = path.rpartition("/")
        parent = by_path.get(parent_path) if parent_path else None
        node = Node(Frame({"name": name, "type": "function" if name.startswith("MPI_") else "region"}),
                    parent=parent, depth=path.count("/"))
        if parent is None:
            roots.append(node)
        else:
            parent.add_child(node)
        by_path[path] = node
        records.append({"node": node, "name": name, **dict(zip(METRICS, values))})
    graph = Graph(roots)
    graph.enumerate_traverse()
    df = pd.DataFrame.from_records(records).set_index("node")
    meta = {k: v for k, v in run.items() if k != "metadata"}
    for k, v in (run.get("metadata") or {}).items():
        meta.setdefault(k, v)
    return GraphFrame(graph, df, exc_metrics=["time", "time (min)", "time (max)"],
                      inc_metrics=["time (inc)", "time (inc) (min)", "time (inc) (max)"],
                      default_metric="time (inc)", metadata=meta)


def _node_rows(conn: psycopg.Connection, run_ids: list[int]) -> dict[int, list[tuple]]:
    return queries.node_metric_rows(conn, run_ids, METRICS.values())


def load_graphframe(run_id: int, conn: psycopg.Connection | None = None):
    """One stored run as a Hatchet GraphFrame."""
    with _conn(conn) as c:
        runs = select_runs(c, run_id=run_id, status=None)
        if not runs:
            raise LookupError(f"no run {run_id} in the store")
        return _graphframe(runs[0], _node_rows(c, [run_id])[run_id])


def load_thicket(conn: psycopg.Connection | None = None, since: Any = None, until: Any = None,
                 status: str | None = "ok", intersection: bool = False, **where):
    """The selected runs as one Thicket, one profile per run (profile_mapping names each `run-<id>`).

    Selection keywords are v_runs columns (see SELECTABLE); `since`/`until`
    bound started_at (datetime or ISO string); status="ok" by default, None
    for all. Connects with COMMSCOPE_DB_URL / PG* / the embedded server
    unless a connection is given."""
    import thicket as th
    with _conn(conn) as c:
        runs = select_runs(c, since=since, until=until, status=status, **where)
        if not runs:
            raise LookupError(f"no stored runs match {where or 'the selection'}"
                              f"{f' since {since}' if since else ''}{f' until {until}' if until else ''}")
        rows = _node_rows(c, [r["run_id"] for r in runs])
    # Message-trace-only runs have a matrix but no call tree.
    treeless = [r["run_id"] for r in runs if not rows[r["run_id"]]]
    if treeless:
        warnings.warn(f"runs without a call tree left out of the Thicket: {treeless}", stacklevel=2)
        runs = [r for r in runs if rows[r["run_id"]]]
        if not runs:
            raise LookupError("the selected runs have no call tree (message-trace profiles only)")
    parts = []
    for run in runs:
        tk = th.Thicket.thicketize_graphframe(_graphframe(run, rows[run["run_id"]]), f"run-{run['run_id']}")
        parts.append(tk)
    if len(parts) == 1:
        return parts[0]
    return th.Thicket.concat_thickets(parts, axis="index", calltree="intersection" if intersection else "union",
                                      disable_tqdm=True)


class _conn:
    """Use the given connection, or open (and close) one to the store in use."""

    def __init__(self, conn):
        self.given, self.conn = conn, conn

    def __enter__(self) -> psycopg.Connection:
        if self.conn is None:
            self.conn = db.connect()
        return self.conn

    def __exit__(self, *exc):
        if self.given is None:
            self.conn.close()
