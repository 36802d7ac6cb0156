"""The gate's reads and writes of the store: which values a metric is, the judged campaign's rows and its series'
baseline window (selected in SQL: older history never leaves the database), each run's wait for a core, the
series' descriptions, the dashboard annotations; each series' change points and what they were computed from
(gate/changepoints.py); and what attribution compares between runs (gate/attribution.py)."""
from __future__ import annotations

import psycopg
from psycopg import sql

# What a selection may filter on: v_runs columns (the dashboards' template variables).
FILTERS = ("system", "app", "workload", "variant", "stack", "interconnect", "ranks")
# What a finding says about its series (v_runs columns of its newest run), for the label and the annotation.
DESCRIBE = FILTERS + ("global_size",)


def _fom_and_context(conn: psycopg.Connection, spec: str) -> tuple[str, str | None]:
    """(FOM name, context) of fom:NAME or fom:NAME@CONTEXT. A FOM stored in several contexts (migration 0015:
    one IMB latency per message size) must name one; values of different contexts are no one series."""
    name, at, context = spec, "", None
    if "@" in spec and not conn.execute("SELECT 1 FROM foms WHERE name = %s LIMIT 1", (spec,)).fetchone():
        name, at, context = spec.partition("@")
    contexts = sorted((r[0] for r in conn.execute("SELECT DISTINCT context FROM foms WHERE name = %s", (name,))),
                      key=lambda c: (c is not None, str(c)))
    if at and context not in contexts:
        raise ValueError(f"FOM {name!r} has no context {context!r} in the store"
                         + (f" (it has: {', '.join(map(str, contexts[:8]))})" if contexts else ""))
    if not at and len(contexts) > 1:
        raise ValueError(f"FOM {name!r} is stored in {len(contexts)} contexts ({', '.join(map(str, contexts[:8]))}"
                         f"{', ...' if len(contexts) > 8 else ''}); name one: fom:{name}@{contexts[-1]}")
    if not at and contexts:
        context = contexts[0]   # its one context
    return name, context


def measurements(conn: psycopg.Connection, metric: str, where: dict) -> tuple[sql.Composable, dict, set | None]:
    """A SELECT of (series_id, window, campaign_id, started_at, run_id, value, system_id) over the ok runs with a
    series in the selection, not run (the callers narrow it to the rows they need), its named parameters, and for
    a FOM (fom:NAME) the units it is stored in (None for a v_run_metrics column). v_runs is joined only when the
    selection filters on its columns."""
    clauses, params = [sql.SQL("r.status = 'ok'"), sql.SQL("r.series_id IS NOT NULL")], {}
    for k, v in where.items():
        if v is not None:
            clauses.append(sql.SQL("v.{} = {}").format(sql.Identifier(k), sql.Placeholder(f"f_{k}")))
            params[f"f_{k}"] = v
    selected = sql.SQL(" AND ").join(clauses)
    described = sql.SQL("JOIN v_runs v ON v.run_id = r.id" if params else "")
    if metric.startswith("fom:"):
        name, context = _fom_and_context(conn, metric[4:])
        units = {r[0] for r in conn.execute("SELECT DISTINCT unit FROM foms WHERE name = %s AND context IS NOT "
                                            "DISTINCT FROM %s", (name, context))}
        if not units:
            raise ValueError(f"no FOM named {name!r} in the store")
        # A FOM is the workload's own figure: no window of commscope's.
        q = sql.SQL("SELECT r.series_id, 'fom'::text AS \"window\", r.campaign_id, r.started_at, r.id AS run_id, "
                    "f.value, r.system_id FROM runs r {} JOIN foms f ON f.run_id = r.id "
                    "WHERE f.name = %(fom)s AND f.context IS NOT DISTINCT FROM %(fom_context)s AND {}"
                    ).format(described, selected)
        return q, {**params, "fom": name, "fom_context": context}, units
    q = sql.SQL("SELECT r.series_id, w.\"window\", r.campaign_id, r.started_at, r.id AS run_id, w.{col} AS value, "
                "r.system_id FROM runs r JOIN run_windows w ON w.run_id = r.id {described} "
                "WHERE {selected}").format(col=sql.Identifier(metric), described=described, selected=selected)
    return q, params, None


def measured_values(conn: psycopg.Connection, measured: sql.Composable, params: dict) -> list[tuple]:
    """Every measured row (series_id, window, campaign_id, started_at, run_id, value) of MEASURED."""
    q = sql.SQL("SELECT series_id, \"window\", campaign_id, started_at, run_id, value FROM ({}) m "
                "WHERE value IS NOT NULL").format(measured)
    return conn.execute(q, params).fetchall()


def runs_of(conn: psycopg.Connection, measured: sql.Composable, params: dict, campaign: int) -> int:
    """How many ok runs of the selection the campaign has, measured or not."""
    q = sql.SQL("SELECT count(DISTINCT run_id) FROM ({}) m WHERE m.campaign_id = %(campaign)s").format(measured)
    return conn.execute(q, {**params, "campaign": campaign}).fetchone()[0]


def campaign_ran(conn: psycopg.Connection, campaign: int, apps) -> bool:
    """Whether the campaign has a run of any of APPS."""
    return conn.execute("SELECT 1 FROM runs WHERE campaign_id = %s AND app = ANY(%s) LIMIT 1",
                        (campaign, list(apps))).fetchone() is not None


def newest_campaign(conn: psycopg.Connection, measured: sql.Composable, params: dict, metric: str) -> int:
    """The campaign to judge when none is named: the newest with a value in the selection, if every campaign with
    one has the same origin (campaign kind and systems); else LookupError naming --campaign and the candidates."""
    q = sql.SQL("""SELECT m.campaign_id, c.kind, c.created_at, c.ci_pipeline, c.git_commit,
       array_agg(DISTINCT coalesce(s.name, 'unknown') ORDER BY coalesce(s.name, 'unknown'))
FROM ({measured}) m JOIN campaigns c ON c.id = m.campaign_id LEFT JOIN systems s ON s.id = m.system_id
WHERE m.value IS NOT NULL
GROUP BY m.campaign_id, c.kind, c.created_at, c.ci_pipeline, c.git_commit
ORDER BY m.campaign_id DESC""").format(measured=measured)
    rows = conn.execute(q, params).fetchall()
    if not rows:
        (old,) = conn.execute("SELECT count(*) FROM runs WHERE series_id IS NULL").fetchone()
        hint = (f" ({old} runs stored before the measurement model have no series: re-ingest their files, "
                f"v_runs_needing_reingest lists them)" if old else "")
        raise LookupError(f"no successful runs with {metric} match; nothing to check{hint}")
    newest_of: dict[tuple, tuple] = {}
    for row in rows:   # newest first
        newest_of.setdefault((row[1], tuple(row[5])), row)
    if len(newest_of) > 1:
        shown = "; ".join(f"campaign {cid} ({kind} on {', '.join(systems)}, stored {created:%Y-%m-%d %H:%M %Z}"
                          f"{', pipeline ' + pipeline if pipeline else ''})"
                          for cid, kind, created, pipeline, _commit, systems in list(newest_of.values())[:6])
        raise LookupError(f"the store holds campaigns of {len(newest_of)} origins with {metric} in this selection, "
                          f"so the newest need not be yours: name it with --campaign ID (the id `commscope ingest` "
                          f"printed), or narrow the selection with --system. Newest of each: {shown}")
    return rows[0][0]


def measured_rows(conn: psycopg.Connection, measured: sql.Composable, params: dict, campaign: int,
                  baseline: int) -> list[tuple]:
    """Rows (series_id, window, campaign_id, started_at, run_id, value) of the judged campaign, and per series of
    it the rows of its `baseline` most recent earlier campaigns with a value, none before the series' newest
    accepted level (accepted_levels, migration 0038): nothing older is returned. Each series on one window: focus
    where its judged runs measured the metric there, else run. (A focus window taken from a workload's timers has
    a time but no MPI fraction; the profile's run window may have one.) The history is read in one pass (a hash
    join and a window function), not once per series: per-series lookups cost a scan of run_windows each. In run
    id order: the detectable effect resamples a night's runs by their place, so their order must not depend on
    the query plan."""
    q = sql.SQL("""WITH new AS (
  SELECT * FROM ({measured}) m WHERE m.campaign_id = %(campaign)s
), shown AS (
  SELECT series_id, CASE WHEN bool_or("window" = 'focus' AND value IS NOT NULL) THEN 'focus'
                         WHEN bool_or("window" = 'run') THEN 'run' ELSE min("window") END AS "window"
  FROM new GROUP BY series_id
), since AS (
  SELECT s.series_id, s."window", coalesce((
    SELECT max(a.campaign_id) FROM accepted_levels a
    WHERE a.series_id = s.series_id AND a.campaign_id <= %(campaign)s), 0) AS level
  FROM shown s
), earlier AS (
  SELECT m.series_id, m."window", m.campaign_id, m.started_at, m.run_id, m.value,
         dense_rank() OVER (PARTITION BY m.series_id ORDER BY m.campaign_id DESC) AS back
  FROM ({measured}) m JOIN since s ON s.series_id = m.series_id AND s."window" = m."window"
  WHERE m.campaign_id < %(campaign)s AND m.campaign_id >= s.level AND m.value IS NOT NULL
)
SELECT n.series_id, n."window", n.campaign_id, n.started_at, n.run_id, n.value
FROM new n JOIN shown USING (series_id, "window") WHERE n.value IS NOT NULL
UNION ALL
SELECT series_id, "window", campaign_id, started_at, run_id, value FROM earlier
WHERE back <= %(baseline)s
ORDER BY run_id""").format(measured=measured)
    return conn.execute(q, {**params, "campaign": campaign, "baseline": baseline}).fetchall()



def wait_shares(conn: psycopg.Connection, run_ids: list[int]) -> dict[int, float]:
    """Each run's share of its timed loop that its most-delayed rank spent waiting for a core, where it says: the
    workload's FOM runqueue_wait_share_max, else the Adiak value of that name its profile carried. Runs without
    one, or with a value that is not a share (0 <= share < 1), are left out: not measured."""
    out = {}
    for run_id, fom, adiak in conn.execute(
            "SELECT r.id, (SELECT f.value FROM foms f WHERE f.run_id = r.id AND f.name = 'runqueue_wait_share_max' "
            "AND f.context IS NULL ORDER BY f.repeat LIMIT 1), r.metadata->>'runqueue_wait_share_max' "
            "FROM runs r WHERE r.id = ANY(%s)", (run_ids,)):
        try:
            share = float(fom if fom is not None else adiak)
        except (TypeError, ValueError):
            continue
        if 0.0 <= share < 1.0:
            out[run_id] = share
    return out


def describe(conn: psycopg.Connection, run_ids: list[int]) -> dict[int, dict]:
    """DESCRIBE's columns of each run, and its series' key, parameters and environment."""
    cols = sql.SQL(", ").join(sql.SQL("v.{}").format(sql.Identifier(c)) for c in DESCRIBE)
    q = sql.SQL("SELECT v.run_id, s.key, s.parameters, s.environment, {} FROM v_runs v JOIN runs r ON r.id = v.run_id "
                "JOIN series s ON s.id = r.series_id WHERE v.run_id = ANY(%s)").format(cols)
    return {r[0]: {"key": r[1], "parameters": r[2], "environment": r[3], **dict(zip(DESCRIBE, r[4:]))}
            for r in conn.execute(q, (run_ids,))}


def annotate(conn: psycopg.Connection, notes: list[tuple[dict, str, str, object, str]]) -> int:
    """NOTES as dashboard annotations: (series, metric, verdict, time, text) each, SERIES a finding's series (its
    id and FILTERS' columns). Annotating the same series, metric and time again replaces it (tag series:ID)."""
    with conn.transaction():
        for series, metric, verdict, time, text in notes:
            tag = f"series:{series['series_id']}"
            conn.execute("DELETE FROM annotations WHERE \"time\" = %s AND tags @> %s",
                         (time, ["commscope-check", metric, tag]))
            conn.execute("INSERT INTO annotations (\"time\", system, app, workload, variant, stack, interconnect, "
                         "ranks, text, tags) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                         (time, *(series[k] for k in FILTERS), text, ["commscope-check", metric, verdict, tag]))
    return len(notes)


def record_detectable(conn: psycopg.Connection, rows: list[tuple]) -> int:
    """What each judged series could have seen (gate_detectable, migration 0036; v_noisy_series lists the ones
    too noisy to gate): ROWS of (series_id, metric, window, campaign_id, run_id, time, verdict, detectable,
    max_undetectable, runs_a_night, n_new, n_baseline, reason), one per series, metric and window, each replacing
    the stored one unless a newer campaign's is stored."""
    n = 0
    with conn.transaction():
        for row in rows:
            n += conn.execute(
                "INSERT INTO gate_detectable (series_id, metric, \"window\", campaign_id, run_id, \"time\", verdict, "
                "detectable, max_undetectable, runs_a_night, n_new, n_baseline, reason) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (series_id, metric, \"window\") DO UPDATE SET campaign_id = EXCLUDED.campaign_id, "
                "run_id = EXCLUDED.run_id, \"time\" = EXCLUDED.\"time\", verdict = EXCLUDED.verdict, "
                "detectable = EXCLUDED.detectable, max_undetectable = EXCLUDED.max_undetectable, "
                "runs_a_night = EXCLUDED.runs_a_night, n_new = EXCLUDED.n_new, n_baseline = EXCLUDED.n_baseline, "
                "reason = EXCLUDED.reason, checked_at = now() "
                "WHERE gate_detectable.campaign_id <= EXCLUDED.campaign_id", row).rowcount
    return n


# ---- accepted levels (gate/levels.py) ---------------------------------------------------------------------------

def level_series(conn: psycopg.Connection, campaign: int, series_ids: list[int] | None, where: dict) -> list[tuple]:
    """(series_id, its first run's start in CAMPAIGN, FILTERS' columns) of the series of the campaign's ok runs:
    those of SERIES_IDS, or all matching WHERE (v_runs columns)."""
    clauses, params = ["r.campaign_id = %(campaign)s", "r.status = 'ok'", "r.series_id IS NOT NULL"], {}
    for k, v in where.items():
        if v is not None:
            clauses.append(sql.SQL("v.{} = {}").format(sql.Identifier(k), sql.Placeholder(f"f_{k}")).as_string(conn))
            params[f"f_{k}"] = v
    if series_ids:
        clauses.append("r.series_id = ANY(%(series)s)")
    cols = ", ".join(f"min(v.{c})" for c in FILTERS)
    q = (f"SELECT r.series_id, min(r.started_at), {cols} FROM runs r JOIN v_runs v ON v.run_id = r.id "
         f"WHERE {' AND '.join(clauses)} GROUP BY r.series_id ORDER BY r.series_id")
    return conn.execute(q, {**params, "campaign": campaign, "series": series_ids}).fetchall()


def record_levels(conn: psycopg.Connection, campaign: int, reason: str, rows: list[tuple], texts: list[str]) -> None:
    """CAMPAIGN as the new level of each series of ROWS (level_series), with one annotation each (TEXTS, in
    ROWS' order) tagged accepted-level at the campaign's first run of the series, in one transaction; accepting
    again replaces both."""
    with conn.transaction():
        for (sid, time, *label), text in zip(rows, texts, strict=True):
            conn.execute("INSERT INTO accepted_levels (series_id, campaign_id, reason) VALUES (%s, %s, %s) "
                         "ON CONFLICT (series_id, campaign_id) DO UPDATE SET reason = EXCLUDED.reason, "
                         "accepted_by = current_user, accepted_at = now()", (sid, campaign, reason))
            tag = f"series:{sid}"
            conn.execute("DELETE FROM annotations WHERE \"time\" = %s AND tags @> %s", (time, ["accepted-level", tag]))
            conn.execute("INSERT INTO annotations (\"time\", system, app, workload, variant, stack, interconnect, "
                         "ranks, text, tags) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                         (time, *label, text, ["commscope-accept", "accepted-level", tag]))


# ---- change points (gate/changepoints.py) ----------------------------------------------------------------------

CHANGE_POINT_LOCK = "commscope.gate.changepoints"   # advisory lock key: one recompute of a series at a time


def ok_run_fingerprints(conn: psycopg.Connection, series_ids: list[int] | None) -> dict[int, tuple[int, int]]:
    """series_id -> (ok runs, largest ok run id), in SQL; for the given series or every series."""
    where = "AND series_id = ANY(%(ids)s)" if series_ids is not None else ""
    rows = conn.execute(f"SELECT series_id, count(*), max(id) FROM runs WHERE status = 'ok' "
                        f"AND series_id IS NOT NULL {where} GROUP BY series_id", {"ids": series_ids})
    return {sid: (n, mx) for sid, n, mx in rows}


def change_point_states(conn: psycopg.Connection, metric: str,
                        series_ids: list[int] | None) -> dict[int, tuple[int, int, str]]:
    """series_id -> (ok runs, largest ok run id, method) its stored change points of METRIC were computed from."""
    where = "AND series_id = ANY(%(ids)s)" if series_ids is not None else ""
    return {sid: (n, mx, m) for sid, n, mx, m in conn.execute(
        f"SELECT series_id, runs, max_run_id, method FROM change_point_state WHERE metric = %(metric)s {where}",
        {"metric": metric, "ids": series_ids})}


def change_point_series(conn: psycopg.Connection, metric: str) -> set[int]:
    """The series that have stored change points of METRIC."""
    return {r[0] for r in conn.execute("SELECT series_id FROM change_point_state WHERE metric = %s", (metric,))}


def change_point_metrics(conn: psycopg.Connection) -> set[str]:
    """The metrics the store keeps change points of."""
    return {r[0] for r in conn.execute("SELECT DISTINCT metric FROM change_point_state")}


def campaign_series(conn: psycopg.Connection, campaign_id: int) -> list[int]:
    """The series the campaign's runs belong to."""
    return [r[0] for r in conn.execute("SELECT DISTINCT series_id FROM runs WHERE campaign_id = %s "
                                       "AND series_id IS NOT NULL ORDER BY 1", (campaign_id,))]


def window_values(conn: psycopg.Connection, series_id: int, metric: str) -> list[tuple]:
    """(window, run_id, campaign_id, started_at, value) of one series' ok runs that measured METRIC (a run_windows
    column), in start-time order (run id breaks ties), on every window."""
    return windows_values(conn, [series_id], metric).get(series_id, [])


def windows_values(conn: psycopg.Connection, series_ids: list[int], metric: str) -> dict[int, list[tuple]]:
    """window_values of each of SERIES_IDS (those with no such run left out), in one query."""
    q = sql.SQL("""SELECT r.series_id, w."window", r.id, r.campaign_id, r.started_at, w.{col}
FROM runs r JOIN run_windows w ON w.run_id = r.id
WHERE r.series_id = ANY(%s) AND r.status = 'ok' AND w.{col} IS NOT NULL
ORDER BY r.series_id, r.started_at, r.id""").format(col=sql.Identifier(metric))
    out: dict[int, list[tuple]] = {}
    for sid, *row in conn.execute(q, (series_ids,)):
        out.setdefault(sid, []).append(tuple(row))
    return out


def change_point_runs(conn: psycopg.Connection, series_ids: list[int], metric: str) -> dict[int, list[int]]:
    """The run of each stored change point (v_change_points) of METRIC, per series of SERIES_IDS."""
    out: dict[int, list[int]] = {}
    for sid, run_id in conn.execute("SELECT series_id, run_id FROM v_change_points WHERE metric = %s "
                                    "AND series_id = ANY(%s)", (metric, series_ids)):
        out.setdefault(sid, []).append(run_id)
    return out


def lock_series(conn: psycopg.Connection, series_id: int) -> None:
    """Hold the series' change-point lock until the transaction ends."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s), %s)", (CHANGE_POINT_LOCK, series_id))


def first_detections(conn: psycopg.Connection, series_id: int, metric: str) -> dict[int, tuple]:
    """run_id -> (detected_at, detected_campaign) of the series' stored change points of METRIC."""
    return {r[0]: (r[1], r[2]) for r in conn.execute(
        "SELECT run_id, detected_at, detected_campaign FROM change_points WHERE series_id = %s AND metric = %s",
        (series_id, metric))}


def replace_change_points(conn: psycopg.Connection, series_id: int, metric: str, rows: list[tuple]) -> None:
    """The series' change points of METRIC become ROWS: (window, run_id, campaign_id, time, previous_time,
    n_before, n_after, mean_before, mean_after, stddev_before, stddev_after, change, direction, p_value, method,
    detected_at (None: now), detected_campaign, verdict)."""
    conn.execute("DELETE FROM change_points WHERE series_id = %s AND metric = %s", (series_id, metric))
    for row in rows:
        conn.execute(
            "INSERT INTO change_points (series_id, metric, \"window\", run_id, campaign_id, \"time\", "
            "previous_time, n_before, n_after, mean_before, mean_after, stddev_before, stddev_after, change, "
            "direction, p_value, method, detected_at, detected_campaign, verdict) VALUES (%s, %s, %s, %s, %s, %s, "
            "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), %s, %s)", (series_id, metric, *row))


def save_change_point_state(conn: psycopg.Connection, series_id: int, metric: str,
                            fingerprint: tuple[int, int] | None, points: int, method: str) -> None:
    """Record which ok runs (FINGERPRINT: count, largest id) the series' change points were computed from, with
    how many points and which method; no fingerprint (the series has no ok runs) forgets the series."""
    if fingerprint:
        conn.execute(
            "INSERT INTO change_point_state (series_id, metric, runs, max_run_id, points, method) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (series_id, metric) DO UPDATE SET runs = EXCLUDED.runs, "
            "max_run_id = EXCLUDED.max_run_id, points = EXCLUDED.points, method = EXCLUDED.method, "
            "computed_at = now()", (series_id, metric, fingerprint[0], fingerprint[1], points, method))
    else:
        conn.execute("DELETE FROM change_point_state WHERE series_id = %s AND metric = %s", (series_id, metric))


# ---- attribution (gate/attribution.py) -------------------------------------------------------------------------

# (label, SQL expression over runs r, campaigns c, stacks st, hardware_versions h, series s, whether the key holds it).
# The versions a run ran on are not in the key (migration 0038): a series goes on across them.
RUN_ATTRIBUTES = (
    ("git commit", "c.git_commit", False),
    ("git commit (recorded by the run)", "r.metadata->>'git_commit'", False),
    ("commscope version", "r.metadata->>'commscope_version'", False),
    ("Spack spec hash", "r.spack_hash", False),
    ("MPI library", "st.library", False),
    ("MPI library (Adiak)", "nullif(concat_ws(' ', r.metadata->>'mpi_library_vendor', "
                            "r.metadata->>'mpi_library_version'), '')", False),
    ("interconnect", "r.interconnect", True),
    ("interconnect (printed by the run)", "coalesce(r.metadata->'params'->>'interconnect', "
                                          "r.metadata->>'interconnect')", False),
    ("hardware", "CASE WHEN h.id IS NOT NULL THEN concat_ws(' ', h.cpu_model, 'digest ' || left(h.digest, 12)) END",
     False),
    ("Caliper configuration", "s.environment->>'caliper'", True),
    ("Caliper version", "r.caliper_version", False),
    ("compiler", "r.compiler", False),
    ("kernel", "r.kernel", False),
    ("hosts", "coalesce(r.metadata->>'hostlist', r.metadata->>'hostname')", False),
)


def version_changes(conn: psycopg.Connection, series_ids: list[int]) -> list[tuple]:
    """(series_id, what, previous, value, campaign_id, time) of every version change along the series
    (v_version_changes, migration 0038), oldest first."""
    return conn.execute("SELECT series_id, what, previous, value, campaign_id, \"time\" FROM v_version_changes "
                        "WHERE series_id = ANY(%s) ORDER BY \"time\", run_id", (series_ids,)).fetchall()


def run_attributes(conn: psycopg.Connection, run_ids: list[int]) -> dict[int, tuple]:
    """run_id -> its RUN_ATTRIBUTES values, in that order (None: not recorded)."""
    cols = ", ".join(expr for _, expr, _ in RUN_ATTRIBUTES)
    q = (f"SELECT r.id, {cols} FROM runs r JOIN campaigns c ON c.id = r.campaign_id "
         f"LEFT JOIN stacks st ON st.id = r.stack_id LEFT JOIN hardware_versions h ON h.id = r.hardware_id "
         f"LEFT JOIN series s ON s.id = r.series_id WHERE r.id = ANY(%s)")
    return {row[0]: row[1:] for row in conn.execute(q, (run_ids,))}


def focus_regions(conn: psycopg.Connection, run_ids: list[int]) -> list[tuple[int, str | None]]:
    """(run_id, focus region) of the runs that have a focus window."""
    return conn.execute("SELECT run_id, focus_region FROM run_windows WHERE \"window\" = 'focus' "
                        "AND run_id = ANY(%s)", (run_ids,)).fetchall()


def exclusive_times(conn: psycopg.Connection, run_ids: list[int]) -> list[tuple[int, str, float | None]]:
    """(run_id, call-tree path, exclusive time averaged over ranks) of every node the runs measured."""
    return conn.execute("SELECT nm.run_id, n.path, nm.excl_avg FROM node_metrics nm "
                        "JOIN nodes n ON n.id = nm.node_id WHERE nm.run_id = ANY(%s)", (run_ids,)).fetchall()
