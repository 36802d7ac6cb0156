#!/usr/bin/env python3
"""Every dashboard panel query against two years of nightly history.

    .venv/bin/python dashboards/bench/panel_queries.py            # about 1M runs
    .venv/bin/python dashboards/bench/panel_queries.py --runs 50000 --repeat 5
    .venv/bin/python dashboards/bench/panel_queries.py --systems 3 --runs 1500000 --baseline-repeat 0 --keep
    .venv/bin/python dashboards/bench/panel_queries.py --home KEPT --baseline-repeat 0 --paced --duration 600

A private PostgreSQL under a temporary COMMSCOPE_HOME gets the project's schema
(every migration), then synthetic history for the full study matrix: systems x
MPI stacks x interconnects x workload variants x rank counts, one run of each
every night for 730 nights. The runs go in through COPY; their FOMs, MPI
routine rows, per-rank groups and communication matrices (commgraph only) are
generated server-side from the runs with the same tables and columns.

Each panel query (panels.py) is expanded as Grafana expands it, for a realistic
view: one system, the dashboard's own application, every other variable
"All", the dashboard's default time range ending at the last night. It prints
p50/p95 per query, then the same query text without what the project adds for
speed, measured in the same run: no indexes on runs besides its keys (0001's
runs_series, 0003's time indexes), v_series, v_collectives, v_halo, v_io
computed on the fly from runs and foms instead of from 0003's trigger-kept
tables, and the daily rollup views of 0006 computed on the fly from those
(tests/rollup_oracle.py) instead of from their trigger-kept tables
(BASELINE_VIEWS, rolled back afterwards); and the ratio.

Then, unless --readers 0, the same queries under load (issue 19): --readers
dashboard readers (16 by default), each a process, while a real ingest runs
beside them (`commscope ingest`'s code on fresh copies of a real fixture
profile, one campaign of --ingest-batch profiles after another, until the
readers are done). Two reader models:

- closed loop (the default, the worst case): each reader has one connection
  and runs every query --reader-repeat times in its own random order, back to
  back with no pause: 16 readers never leave the 2 cores of the VM idle.
- --paced: each reader is a Grafana user. Every --refresh seconds (5 by
  default: Grafana's [dashboards] min_refresh_interval, 5s in its
  conf/defaults.ini, the shortest auto-refresh a user may set) it opens a
  dashboard picked at random (seeded): the dashboard's template-variable
  queries, then its panel and annotation queries, as the browser sends them:
  concurrently, each its own request, at most 5 in flight (Grafana's frontend
  fetch queue over HTTP/1.1, public/app/core/services/FetchQueueWorker.ts;
  1000 over HTTP/2, more than any dashboard here has), and Grafana's server
  runs each on a connection of the data source's pool. So a reader is 5
  threads with a connection each. The readers' first loads fall at random
  within the first interval; they run for --duration seconds. Every load
  reruns the variables: ours refresh on dashboard load (grafana.py), which an
  auto-refresh is not, so this is a little heavier than users each watching
  one dashboard refresh.

Either way it prints each query's p95 alone and under load and their ratio
(the alone figures, same run, are the baseline of the loaded ones), the
ingest's rate, and the load average while the readers ran; paced, also each
dashboard load's time (first query sent to last answered) and how many
refreshes started late. Target: p95 < 100 ms for every panel query.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import datetime as dt
import queue
import random
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from commscope.store import db  # noqa: E402
from commscope.views import panels as P  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from rollup_oracle import ON_THE_FLY_VIEWS  # noqa: E402  (the rollups on the fly, the tests' oracle)

SYSTEMS = ["cluster-a", "cluster-b"]
STACKS = ["debian-openmpi4", "debian-mpich4", "pypi-openmpi5", "pypi-mpich5", "pypi-impi2021"]
INTERCONNECTS = ["shm", "tcp"]
RANKS = [2, 4, 8]
VARIANTS = ([("halo3d", v) for v in ("blocking", "nonblocking", "overlap", "rma")]
            + [("stencil2d", v) for v in ("row-naive-ssend", "row-vector-send", "col-isend", "cart-isend")]
            + [("commgraph", v) for v in ("pairs", "stencil4d", "random-sparse")]
            + [("collsweep", v) for v in ("default", "recursive_doubling", "reduce_scatter_allgather", "binomial")]
            + [("cgsolve", v) for v in ("direct", "hierarchical", "nonblocking")]
            + [("pio", v) for v in ("independent", "collective", "two-phase-g2", "two-phase-g4", "two-phase-g1")])
NIGHTS = 730
APP_OF_DASHBOARD = {"commscope-collectives": "collsweep", "commscope-io": "pio", "commscope-comm-matrix": "commgraph",
                    "commscope-halo": "halo3d"}
BASELINE_DROPS = ["runs_series", "runs_started_at", "runs_app_started_at"]
# Grafana's frontend keeps at most 5 data requests in flight over HTTP/1.1, 1000 over HTTP/2
# (public/app/core/services/FetchQueueWorker.ts: maxParallelRequests = http2Enabled ? 1000 : 5).
BROWSER_PARALLEL_REQUESTS = 5


def fill(conn, n_runs: int, seed: int = 1) -> dict:
    rnd = random.Random(seed)
    matrix = [(s, st, ic, app, v, n) for s in SYSTEMS for st in STACKS for ic in INTERCONNECTS
              for app, v in VARIANTS for n in RANKS]
    nights = max(1, min(NIGHTS, n_runs // len(matrix)))
    per_night = min(len(matrix), n_runs // nights) if n_runs < len(matrix) * nights else len(matrix)
    last = dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.timezone.utc)
    with conn.transaction():
        camp = conn.execute("INSERT INTO campaigns (kind, source) VALUES ('ingest', 'bench') RETURNING id").fetchone()[0]
        sys_ids = {s: conn.execute("INSERT INTO systems (name, cpu_model, cores_per_node, interconnect) VALUES "
                                   "(%s, 'bench CPU', 64, 'bench') RETURNING id", (s,)).fetchone()[0] for s in SYSTEMS}
        st_ids = {s: conn.execute("INSERT INTO stacks (name, library) VALUES (%s, %s) RETURNING id",
                                  (s, f"{s} library")).fetchone()[0] for s in STACKS}
        # One series per cell of the matrix (docs/measurement-model.md): its application, parameters, environment.
        series = {}
        for (sy, st, ic, app, v, n) in matrix:
            params = json.dumps({"ranks": n, "nodes": 1, "param.variant": v, "param.global": "64,64,64"})
            env = json.dumps({"system": sy, "stack": st, "interconnect": ic, "caliper": "runtime-profile,profile.mpi"})
            series[(sy, st, ic, app, v, n)] = conn.execute(
                "INSERT INTO series (key, app, parameters, environment) VALUES (md5(%s || %s || %s), %s, %s, %s) "
                "RETURNING id", (app, params, env, app, params, env)).fetchone()[0]
        t0 = time.monotonic()
        cols = ("series_id, model_version, content_hash, campaign_id, system_id, stack_id, status, profile_kind, app, workload, variant, interconnect, "
                "ranks, nodes, global_size, started_at, wall_time, mpi_time_avg, mpi_time_max, mpi_fraction_avg, "
                "mpi_fraction_slowest, source, metadata")
        k = 0
        with conn.cursor().copy(f"COPY runs ({cols}) FROM STDIN") as cp:
            for night in range(nights):
                day = last - dt.timedelta(days=nights - 1 - night)
                for (s, st, ic, app, v, n) in matrix[:per_night]:
                    k += 1
                    base = 2.0 * (1 + RANKS.index(n)) ** -0.8 * (1.3 if ic == "tcp" else 1.0)
                    wall = base * rnd.lognormvariate(0, 0.05)
                    frac = min(0.95, 0.15 + 0.1 * RANKS.index(n) + (0.15 if ic == "tcp" else 0) + rnd.gauss(0, 0.02))
                    meta = "{}"
                    if app == "collsweep":
                        meta = '{"ramble_variables": {"algorithm": "%s"}}' % v
                    elif app == "pio":
                        m, _, g = v.partition("-g")
                        meta = '{"ramble_variables": {"method": "%s", "group_size": "%s"}}' % (m, g or "2")
                    cp.write_row((series[(s, st, ic, app, v, n)], 1, f"bench-{k}", camp, sys_ids[s], st_ids[st], "failed" if rnd.random() < 0.01 else "ok",
                                  "runtime-profile", app, app, v, ic, n, 1, "64,64,64",
                                  day + dt.timedelta(seconds=rnd.randint(0, 3600)), wall, wall * frac, wall * frac * 1.1,
                                  frac, min(0.99, frac * 1.1), "bench", meta))
        t_runs = time.monotonic() - t0
        t0 = time.monotonic()
        conn.execute("INSERT INTO nodes (path, name, parent_path, depth, is_mpi) VALUES "
                     "('main/timestep/halo_exchange', 'halo_exchange', 'main/timestep', 3, false) ON CONFLICT DO NOTHING")
        node = conn.execute("SELECT id FROM nodes WHERE path = 'main/timestep/halo_exchange'").fetchone()[0]
        conn.execute("""INSERT INTO foms (run_id, name, repeat, value, unit)
            SELECT r.id, f.name, 0, r.wall_time * f.k, 's' FROM runs r
            CROSS JOIN (VALUES ('comm_time_avg', 0.3), ('comm_time_max', 0.4), ('compute_time_avg', 0.5),
                               ('compute_time_max', 0.6), ('total_time', 1.0)) AS f(name, k)
            WHERE r.app IN ('halo3d', 'stencil2d', 'cgsolve', 'commgraph')""")
        conn.execute("""INSERT INTO foms (run_id, name, repeat, value, unit)
            SELECT r.id, c || '_' || b || 'B_t_avg', 0, (1 + b / 1000.0) * r.ranks * (1 + (r.id % 7) / 10.0), 'us'
            FROM runs r, unnest(ARRAY['bcast', 'reduce', 'allreduce', 'allgather', 'alltoall']) c,
                 unnest(ARRAY[8, 1024, 65536, 1048576]) b
            WHERE r.app = 'collsweep'""")
        conn.execute("""INSERT INTO foms (run_id, name, repeat, value, unit)
            SELECT r.id, f.name, 0, f.k / r.wall_time, f.unit FROM runs r
            CROSS JOIN (VALUES ('write_bandwidth', 500.0, 'MB/s'), ('read_bandwidth', 900.0, 'MB/s'),
                               ('io_time_avg', 0.2, 's'), ('io_time_max', 0.3, 's')) AS f(name, k, unit)
            WHERE r.app = 'pio'""")
        # The tables partitioned by their run's month (migration 0022) carry its started_at.
        conn.execute("""INSERT INTO mpi_metrics (run_id, started_at, node_id, function, time_total, time_max, calls, bytes)
            SELECT r.id, r.started_at, %s, f.fn, r.mpi_time_avg * r.ranks * f.k, r.mpi_time_max * f.k, 100 * r.ranks, NULL
            FROM runs r
            CROSS JOIN (VALUES ('MPI_Sendrecv', 0.5), ('MPI_Barrier', 0.2), ('MPI_Allreduce', 0.2), ('MPI_Waitall', 0.1))
                 AS f(fn, k)""", (node,))
        conn.execute("""INSERT INTO rank_metrics (run_id, started_at, rank, total_time, user_time, mpi_time, mpi_sync_time)
            SELECT r.id, r.started_at, g, r.wall_time, r.wall_time - r.mpi_time_avg, r.mpi_time_avg * 0.7, r.mpi_time_avg * 0.3
            FROM runs r, generate_series(0, r.ranks - 1) g""")
        conn.execute("""INSERT INTO comm_matrix (run_id, started_at, src, dst, messages, bytes)
            SELECT r.id, r.started_at, s, d, 20, 65536 * 20 FROM runs r, generate_series(0, r.ranks - 1) s, generate_series(0, r.ranks - 1) d
            WHERE r.app = 'commgraph' AND s <> d""")
        # Each run's two windows (migration 0012): the whole run, and its loop, which leaves setup out.
        conn.execute("""INSERT INTO run_windows (run_id, "window", focus_region, time_s, mpi_time_avg_s, mpi_time_max_s,
                mpi_fraction_avg, mpi_fraction_slowest, user_time_avg_s, mpi_sync_time_avg_s, load_balance,
                communication_efficiency, parallel_efficiency, ranks_measured)
            SELECT r.id, w.name, w.region, r.wall_time * w.k, r.mpi_time_avg * w.k, r.mpi_time_max * w.k,
                   r.mpi_fraction_avg, r.mpi_fraction_slowest, (r.wall_time - r.mpi_time_avg) * w.k,
                   r.mpi_time_avg * w.k * 0.3, 0.9, 1 - r.mpi_fraction_avg, 0.9 * (1 - r.mpi_fraction_avg), r.ranks
            FROM runs r CROSS JOIN (VALUES ('run', NULL, 1.0), ('focus', 'loop', 0.8)) AS w(name, region, k)""")
        conn.execute("""INSERT INTO annotations ("time", system, app, stack, interconnect, ranks, text, tags)
            SELECT started_at, 'cluster-a', app, 'debian-openmpi4', interconnect, ranks, 'regression: wall_time +10 percent',
                   '{commscope-check}' FROM runs WHERE id % 997 = 0""")
        t_children = time.monotonic() - t0
    return {"runs_copy_s": t_runs, "children_s": t_children, "nights": nights, "per_night": per_night}


def queries(conn, last: dt.datetime) -> list[tuple[str, str]]:
    """(label, expanded SQL) of every panel, variable and annotation query."""
    out = []
    everything = P.all_values(conn)
    for board in P.DASHBOARDS:
        days = 7 if board.time_from == "now-7d" else 30
        t1 = last + dt.timedelta(hours=2)
        t0 = t1 - dt.timedelta(days=days)
        values = dict(everything)
        values["system"] = [SYSTEMS[0]]
        values["app"] = [APP_OF_DASHBOARD.get(board.uid, "halo3d")]
        if board.uid == "commscope-procurement":
            values["system"] = list(SYSTEMS)
        values.update(reference_system=SYSTEMS[0], reference_stack=STACKS[0], reference_interconnect=INTERCONNECTS[0])
        for p in board.panels:
            if not p.reuses:   # a panel showing another's results sends no query (Grafana's Dashboard datasource)
                out.append((f"{board.uid}: {p.title}", P.expand(p.sql, t0, t1, values)))
        if board.annotations:
            out.append((f"{board.uid}: annotations", P.expand(P.ANNOTATIONS_SQL, t0, t1, values)))
        for v in board.extra_variables:   # the dashboard's own variables (procurement's, the call tree's)
            out.append((f"variable {v['name']}", P.expand(v["query"], t0, t1, values, set())))
    for name, _, col in P.VARIABLES:
        out.append((f"variable {name}", P.variable_query(col)))
    return out


# The same views computed on the fly from the first migrations' tables, without
# the series table, the trigger-kept FOM tables and the daily rollups (same
# columns, so the panel SQL is unchanged). Applied inside a transaction that is
# rolled back; the rollup views last, as they read the FOM views.
BASELINE_VIEWS = [
    """CREATE OR REPLACE VIEW v_series AS SELECT DISTINCT system, app, workload, coalesce(variant, '') AS variant,
       stack, interconnect, ranks FROM v_runs""",
    r"""CREATE OR REPLACE VIEW v_collectives AS
SELECT f.run_id, f."time", f.system, f.app, f.workload, f.variant, f.stack, f.interconnect, f.ranks, f.repeat,
       coalesce(r.metadata -> 'ramble_variables' ->> 'algorithm',
                r.metadata -> 'params' ->> ('env.MPIR_CVAR_' || upper(c.collective) || '_INTRA_ALGORITHM'),
                'tuned ' || (r.metadata -> 'params' ->> ('env.OMPI_MCA_coll_tuned_' || c.collective || '_algorithm')),
                'I_MPI_ADJUST ' || (r.metadata -> 'params' ->> ('env.I_MPI_ADJUST_' || upper(c.collective))),
                'default') AS algorithm,
       c.collective, coalesce(substring(f.name FROM '^[a-z]+_([0-9]+)B_')::bigint, 0) AS bytes,
       substring(f.name FROM '(t_min|t_avg|t_max|busbw)$') AS stat, f.value, f.unit
FROM v_foms f JOIN runs r ON r.id = f.run_id
CROSS JOIN LATERAL (SELECT substring(f.name FROM '^([a-z]+)') AS collective) c
WHERE f.app = 'collsweep' AND f.status = 'ok' AND f.name ~ '^[a-z]+(_[0-9]+B)?_(t_min|t_avg|t_max|busbw)$'""",
    """CREATE OR REPLACE VIEW v_halo AS
SELECT run_id, "time", system, app, workload, variant, stack, interconnect, ranks, repeat,
       max(value) FILTER (WHERE name = 'comm_time_avg') AS comm_time_avg,
       max(value) FILTER (WHERE name = 'comm_time_max') AS comm_time_max,
       max(value) FILTER (WHERE name = 'compute_time_avg') AS compute_time_avg,
       max(value) FILTER (WHERE name = 'compute_time_max') AS compute_time_max,
       max(value) FILTER (WHERE name = 'total_time') AS total_time,
       max(value) FILTER (WHERE name = 'comm_time_max') / nullif(max(value) FILTER (WHERE name = 'comm_time_avg'), 0) AS skew,
       max(value) FILTER (WHERE name = 'compute_time_max') / nullif(max(value) FILTER (WHERE name = 'compute_time_avg'), 0) AS imbalance,
       max(value) FILTER (WHERE name = 'comm_time_max') / nullif(max(value) FILTER (WHERE name = 'total_time'), 0) AS exposed_fraction
FROM v_foms
WHERE status = 'ok' AND app IN ('halo3d', 'stencil2d')
  AND name IN ('comm_time_avg', 'comm_time_max', 'compute_time_avg', 'compute_time_max', 'total_time')
GROUP BY run_id, "time", system, app, workload, variant, stack, interconnect, ranks, repeat
HAVING max(value) FILTER (WHERE name = 'comm_time_avg') IS NOT NULL""",
    """CREATE OR REPLACE VIEW v_io AS
SELECT f.run_id, f."time", f.system, f.app, f.workload, f.variant, f.stack, f.interconnect, f.ranks, f.repeat,
       m.method, CASE WHEN m.method = 'two-phase' THEN m.group_size END AS group_size,
       max(f.value) FILTER (WHERE f.name = 'write_bandwidth') AS write_mbs,
       max(f.value) FILTER (WHERE f.name = 'read_bandwidth') AS read_mbs,
       max(f.value) FILTER (WHERE f.name = 'io_time_avg') AS io_time_avg,
       max(f.value) FILTER (WHERE f.name = 'io_time_max') AS io_time_max
FROM v_foms f JOIN runs r ON r.id = f.run_id
CROSS JOIN LATERAL (SELECT
    coalesce(r.metadata -> 'ramble_variables' ->> 'method', r.metadata -> 'params' ->> 'method', r.variant) AS method,
    nullif(coalesce(r.metadata -> 'ramble_variables' ->> 'group_size', r.metadata -> 'params' ->> 'group-size',
                    r.metadata ->> 'group_size'), '')::integer AS group_size) m
WHERE f.app = 'pio' AND f.status = 'ok' AND f.name IN ('write_bandwidth', 'read_bandwidth', 'io_time_avg', 'io_time_max')
GROUP BY f.run_id, f."time", f.system, f.app, f.workload, f.variant, f.stack, f.interconnect, f.ranks, f.repeat,
         m.method, m.group_size""",
] + ON_THE_FLY_VIEWS


def measure(conn, qs: list[tuple[str, str]], repeat: int) -> dict[str, list[float]]:
    times = {}
    for label, sql in qs:
        conn.execute(sql).fetchall()   # warm the cache, as a dashboard refresh would be
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            conn.execute(sql).fetchall()
            ts.append((time.perf_counter() - t0) * 1000)
        times[label] = ts
    return times


def p95(ts: list[float]) -> float:
    return sorted(ts)[max(0, int(round(0.95 * len(ts))) - 1)]


def _reader(url: str, qs: list[tuple[str, str]], repeat: int, seed: int, go, out) -> None:
    """A closed-loop reader: its own connection, every query REPEAT times in its own random order, no pause."""
    rnd = random.Random(seed)
    times: dict[str, list[float]] = {label: [] for label, _ in qs}
    with psycopg.connect(url, autocommit=True) as conn:
        for _, sql in qs:    # a dashboard that has been open: plans and pages warm
            conn.execute(sql).fetchall()
        go.wait()
        for _ in range(repeat):
            order = list(qs)
            rnd.shuffle(order)
            for label, sql in order:
                t0 = time.perf_counter()
                conn.execute(sql).fetchall()
                times[label].append((time.perf_counter() - t0) * 1000)
    out.put((times, [], 0))


def dashboards(qs: list[tuple[str, str]]) -> list[tuple[list[tuple[str, str]], list[tuple[str, str]]]]:
    """Each dashboard's (template-variable queries, panel and annotation queries), as opening it sends them:
    the six variables every dashboard has, then its own (procurement's reference, the call tree's)."""
    six = [q for q in qs if q[0] in {f"variable {name}" for name, _, _ in P.VARIABLES}]
    by_label = dict(qs)
    return [(six + [(f"variable {v['name']}", by_label[f"variable {v['name']}"]) for v in board.extra_variables],
             [q for q in qs if q[0].startswith(f"{board.uid}: ")]) for board in P.DASHBOARDS]


def _paced_reader(url: str, boards: list, refresh: float, duration: float, seed: int, go, out) -> None:
    """A Grafana user: every REFRESH seconds (from a random start within the first), opens a dashboard picked at
    random: its variable queries, then its panel queries, each on a connection of its own pool, at most
    BROWSER_PARALLEL_REQUESTS at once. Until DURATION is up. Puts the per-query times, each dashboard's time
    from its first query sent to its last answered, and how many refreshes started late (the previous one ran
    past the interval)."""
    rnd = random.Random(seed)
    times: dict[str, list[float]] = {label: [] for variables, panels in boards for label, _ in variables + panels}
    pool: queue.Queue = queue.Queue()
    for _ in range(BROWSER_PARALLEL_REQUESTS):
        pool.put(psycopg.connect(url, autocommit=True))

    def send(q: tuple[str, str]) -> tuple[str, float]:
        conn = pool.get()
        try:
            t0 = time.perf_counter()
            conn.execute(q[1]).fetchall()
            return q[0], (time.perf_counter() - t0) * 1000
        finally:
            pool.put(conn)

    board_ms, late = [], 0
    with ThreadPoolExecutor(BROWSER_PARALLEL_REQUESTS) as browser:
        for variables, panels in boards:    # dashboards that have been open: plans and pages warm
            list(browser.map(send, variables + panels))
        go.wait()
        start = time.monotonic()
        due = start + rnd.uniform(0, refresh)
        while due < start + duration:
            time.sleep(max(0.0, due - time.monotonic()))
            variables, panels = rnd.choice(boards)
            t0 = time.perf_counter()
            for phase in (variables, panels):    # the panels wait for the variables they expand
                for label, ms in browser.map(send, phase):
                    times[label].append(ms)
            board_ms.append((time.perf_counter() - t0) * 1000)
            due += refresh
            if time.monotonic() > due:
                late += 1
                due = time.monotonic()
    while not pool.empty():
        pool.get().close()
    out.put((times, board_ms, late))


def _ingester(url: str, fixture: str, batch: int, workdir: str, stop, out) -> None:
    """A real ingest beside the readers: campaigns of BATCH fresh copies of FIXTURE (one metadata value varied,
    as tests/corpus.py does, so each is a new run) until STOP is set."""
    os.environ["COMMSCOPE_INGEST_WORKERS"] = "1"   # one reader process: the ingest host's cores are the DB's here
    from commscope.workflow.ingest import Provenance, ingest
    src = Path(fixture).read_bytes()
    token = time.time_ns() // 10**6 % 10**9   # copies new to a store an earlier run (--home) already ingested into
    stored, k, t0 = 0, 0, time.monotonic()
    with psycopg.connect(url) as conn:
        while not stop.is_set():
            d = Path(workdir) / f"batch-{k}"
            d.mkdir()
            for i in range(batch):
                (d / f"copy-{i:05d}.cali").write_bytes(src.replace(b"data=root,", f"data=root{token}-{k:05d}-{i:05d},".encode()))
            stored += len(ingest(conn, [d], Provenance(system="bench-ingest")).inserted)
            shutil.rmtree(d)
            k += 1
    out.put((stored, time.monotonic() - t0))


def loaded(url: str, labels: list[str], reader, reader_args: tuple, readers: int, fixture: Path, batch: int) -> dict:
    """Every query's times from READERS concurrent READER processes while an ingest runs, each dashboard's time
    (paced readers), late refreshes, the ingest's runs and seconds, the readers' wall time, and the 1-minute
    load average sampled every 10 s meanwhile."""
    ctx = multiprocessing.get_context("spawn")   # no inherited connections
    go, stop, out, ing_out = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    work = tempfile.mkdtemp(prefix="commscope-bench-ingest-")
    ing = ctx.Process(target=_ingester, args=(url, str(fixture), batch, work, stop, ing_out)) if batch else None
    if ing:
        ing.start()
    procs = [ctx.Process(target=reader, args=(url, *reader_args, 1000 + i, go, out)) for i in range(readers)]
    for p in procs:
        p.start()
    time.sleep(5)   # the ingest is under way, the readers connected
    t0 = time.monotonic()
    go.set()
    merged: dict[str, list[float]] = {label: [] for label in labels}
    board_ms, late, load, done = [], 0, [], 0
    while done < readers:
        load.append(os.getloadavg()[0])
        try:
            ts, ms, n_late = out.get(timeout=10)
        except queue.Empty:
            if all(p.is_alive() or p.exitcode == 0 for p in procs):
                continue
            for p in procs + [ing] if ing else procs:
                p.terminate()
            raise RuntimeError("a reader failed; see above")
        done += 1
        for label, t in ts.items():
            merged[label] += t
        board_ms += ms
        late += n_late
    wall = time.monotonic() - t0
    stop.set()
    for p in procs:
        p.join()
    stored, secs = ing_out.get() if ing else (0, wall)
    if ing:
        ing.join()
    shutil.rmtree(work, ignore_errors=True)
    if any(p.exitcode for p in procs) or (ing and ing.exitcode):
        raise RuntimeError("a reader or the ingest failed; see above")
    return {"times": merged, "board_ms": board_ms, "late": late, "stored": stored, "ingest_s": secs, "wall": wall,
            "load": load}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1_000_000, help="about this many runs (default 1,000,000)")
    ap.add_argument("--repeat", type=int, default=20, help="timed executions per query (default 20)")
    ap.add_argument("--baseline-repeat", type=int, help="timed executions per query of the baseline (default: --repeat; "
                    "0 skips it, for a quick look only: the figure to report is the ratio)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary COMMSCOPE_HOME")
    ap.add_argument("--home", type=Path, help="measure again on a COMMSCOPE_HOME kept by an earlier --keep run: apply new "
                    "migrations, skip the fill, keep the home")
    ap.add_argument("--systems", type=int, default=2, help="systems in the matrix (default 2: 1,380 runs a night; "
                    "each more adds 690)")
    ap.add_argument("--readers", type=int, default=16, help="concurrent dashboard readers beside an ingest "
                    "(default 16; 0 skips the loaded measurement)")
    ap.add_argument("--reader-repeat", type=int, default=5, help="times each closed-loop reader runs every query "
                    "(default 5)")
    ap.add_argument("--paced", action="store_true", help="readers as Grafana users: one dashboard per --refresh "
                    "seconds for --duration seconds, instead of every query back to back")
    ap.add_argument("--refresh", type=float, default=5.0, help="seconds between a paced reader's dashboard loads "
                    "(default 5: Grafana's min_refresh_interval)")
    ap.add_argument("--duration", type=float, default=300.0, help="seconds the paced readers run (default 300)")
    ap.add_argument("--ingest-fixture", type=Path, default=ROOT / "tests" / "data" / "halo3d-overlap-n4.runtime-profile.cali",
                    help="the real profile the ingest beside the readers copies")
    ap.add_argument("--ingest-batch", type=int, default=200, help="profiles per ingest campaign (default 200; 0: "
                    "the readers without an ingest beside them)")
    args = ap.parse_args()
    if args.baseline_repeat is None:
        args.baseline_repeat = args.repeat
    if (args.runs < 1000 or args.repeat < 1 or args.baseline_repeat < 0 or not 1 <= args.systems <= 26
            or args.readers < 0 or args.reader_repeat < 1 or args.ingest_batch < 0 or args.refresh <= 0
            or args.duration < args.refresh):
        print("panel_queries: error: --runs must be at least 1000, --repeat and --reader-repeat at least 1, "
              "--baseline-repeat, --readers and --ingest-batch at least 0, --systems 1 to 26, --refresh above 0, "
              "--duration at least --refresh", file=sys.stderr)
        return 2
    if args.readers and args.ingest_batch and b"data=root," not in args.ingest_fixture.read_bytes():
        print(f"panel_queries: error: --ingest-fixture {args.ingest_fixture}: no Adiak user 'root' to vary; give a "
              f"fixture profile of tests/data", file=sys.stderr)
        return 2
    SYSTEMS[:] = [f"cluster-{chr(ord('a') + i)}" for i in range(args.systems)]
    if args.home and not (args.home / "postgres").is_dir():
        print(f"panel_queries: error: --home {args.home}: no postgres/ in it; give a home kept by --keep",
              file=sys.stderr)
        return 2
    home = args.home or Path(tempfile.mkdtemp(prefix="commscope-bench-"))
    home.chmod(0o711)
    emb = db.Embedded(home)
    try:
        url = emb.start()
        with psycopg.connect(url) as conn:
            db.migrate(conn)
        if args.home:
            info = {"reused": str(args.home)}
            with psycopg.connect(url) as conn:
                SYSTEMS[:] = [n for (n,) in conn.execute("SELECT name FROM systems WHERE name LIKE 'cluster-_' ORDER BY 1")]
        else:
            with psycopg.connect(url) as conn:
                info = fill(conn, args.runs)
        with psycopg.connect(url, autocommit=True) as conn:
            t0 = time.monotonic()
            conn.execute("VACUUM ANALYZE")
            info["vacuum_analyze_s"] = time.monotonic() - t0
            info.update({t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                         for t in ("runs", "foms", "mpi_metrics", "rank_metrics", "comm_matrix", "annotations", "run_series",
                                   "runs_daily", "routines_daily", "collectives_daily", "halo_daily", "io_daily",
                                   "run_windows", "run_metrics_daily")})
            info["history_partitions"] = conn.execute("SELECT count(*) FROM v_history_partitions").fetchone()[0]
            info["store_GiB"] = conn.execute("SELECT pg_database_size(current_database())::float8 / 2^30").fetchone()[0]
            last = conn.execute("SELECT max(started_at) FROM runs").fetchone()[0]
        print(f"load average before measuring: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        print("data: " + ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in info.items()),
              flush=True)
        with psycopg.connect(url) as conn:
            qs = queries(conn, last)
            conn.rollback()
            project = measure(conn, qs, args.repeat)
            conn.rollback()
            # The baseline, in the same run: no indexes on runs besides its keys, the
            # series and FOM views computed from the base tables (rolled back after).
            base = {label: [float("nan")] for label, _ in qs}
            if args.baseline_repeat:
                with conn.transaction(force_rollback=True):
                    for ix in BASELINE_DROPS:
                        conn.execute(f"DROP INDEX {ix}")
                    for view in BASELINE_VIEWS:
                        conn.execute(view)
                    base = measure(conn, qs, args.baseline_repeat)
        print(f"load average after measuring: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        width = max(len(q[0]) for q in qs)
        print(f"{'query':<{width}}  {'p50 ms':>8} {'p95 ms':>8}  {'baseline p95':>12}  {'ratio':>7}  target")
        worst, under = 0.0, 0
        for label, _ in qs:
            a, b = project[label], base[label]
            worst = max(worst, p95(a))
            under += p95(a) < 100
            print(f"{label:<{width}}  {statistics.median(a):8.2f} {p95(a):8.2f}  {p95(b):12.2f}  {p95(b) / p95(a):6.1f}x  "
                  f"{'ok' if p95(a) < 100 else 'OVER'}")
        tot_a = sum(p95(v) for v in project.values())
        tot_b = sum(p95(v) for v in base.values())
        print(f"all {len(qs)} queries: sum of p95 {tot_a:.1f} ms with the project's indexes and rollups, {tot_b:.1f} ms without "
              f"({tot_b / tot_a:.1f}x); worst p95 {worst:.1f} ms; {under} of {len(qs)} under 100 ms (target: all)",
              flush=True)
        if not args.readers:
            return 0
        beside = "beside an ingest" if args.ingest_batch else "no ingest"
        if args.paced:
            print(f"\npaced: {args.readers} readers, each opening one dashboard (its variables, then its panels, at most "
                  f"{BROWSER_PARALLEL_REQUESTS} queries at once) every {args.refresh:g} s for {args.duration:g} s, "
                  f"{beside}; load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
            run = loaded(url, [q[0] for q in qs], _paced_reader, (dashboards(qs), args.refresh, args.duration),
                         args.readers, args.ingest_fixture, args.ingest_batch)
        else:
            print(f"\nclosed loop: {args.readers} readers x {args.reader_repeat} runs of every query back to back, "
                  f"{beside}; load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
            run = loaded(url, [q[0] for q in qs], _reader, (qs, args.reader_repeat), args.readers,
                         args.ingest_fixture, args.ingest_batch)
        many, stored, secs = run["times"], run["stored"], run["ingest_s"]
        print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}, 1-minute load while the readers "
              f"ran: {min(run['load']):.1f} to {max(run['load']):.1f} (mean {statistics.mean(run['load']):.1f}); "
              f"readers took {run['wall']:.0f} s; the ingest stored {stored} runs in {secs:.0f} s "
              f"({stored / secs:.1f} runs/s) beside them")
        if args.paced:
            ms = run["board_ms"]
            print(f"dashboard loads: {len(ms)}, each from its first query sent to its last answered p50 "
                  f"{statistics.median(ms):.0f} ms, p95 {p95(ms):.0f} ms; {run['late']} started late (the one before "
                  f"ran past its {args.refresh:g} s)")
        print(f"{'query':<{width}}  {'alone p95':>9}  {'loaded n':>8} {'loaded p50':>10} {'loaded p95':>10}  {'ratio':>7}  target")
        worst, under = 0.0, 0
        for label, _ in qs:
            a, b = project[label], many[label]
            worst = max(worst, p95(b))
            under += p95(b) < 100
            print(f"{label:<{width}}  {p95(a):9.2f}  {len(b):8d} {statistics.median(b):10.2f} {p95(b):10.2f}  "
                  f"{p95(b) / p95(a):6.1f}x  {'ok' if p95(b) < 100 else 'OVER'}")
        tot_b = sum(p95(v) for v in many.values())
        print(f"all {len(qs)} queries under load: sum of p95 {tot_b:.1f} ms against {tot_a:.1f} ms alone "
              f"({tot_b / tot_a:.1f}x); worst p95 {worst:.1f} ms; {under} of {len(qs)} under 100 ms (target: all)")
        return 0
    finally:
        emb.stop()
        if args.keep or args.home:
            print(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
