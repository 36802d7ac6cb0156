"""The panels: one catalog of SQL over the views, read by the Grafana
dashboards (grafana.py), the static report (report.py), the tests and the
benchmark (dashboards/bench/panel_queries.py). Each panel's SQL is written for Grafana's PostgreSQL datasource:
template variables ($system, ...) and macros ($__timeFilter, ...).
`expand()` does to it what Grafana does before the SQL reaches PostgreSQL (grafana_macros.py),
so everything outside Grafana runs the very text Grafana would.
"""
from __future__ import annotations

import datetime as dt

from commscope.views import grafana_macros
from commscope.views.panel_types import Dashboard, Panel  # the catalog's parts, as P.Panel and P.Dashboard

# Template variables on every dashboard: (name, label, column of v_series).
VARIABLES = [("system", "System", "system"), ("app", "Application", "app"), ("workload", "Workload", "workload"),
             ("stack", "MPI stack", "stack"), ("interconnect", "Interconnect", "interconnect"),
             ("ranks", "Ranks", "ranks")]

# Every panel restricts its rows to the selected series.
SERIES = ("system IN ($system) AND app IN ($app) AND workload IN ($workload) AND stack IN ($stack) "
          "AND interconnect IN ($interconnect) AND ranks IN ($ranks)")


# Panels over the daily rollups (migration 0006) select whole UTC days: every day
# that overlaps the time range. Their "time" is the day's start.
DAYS = "\"time\" > $__timeFrom()::timestamptz - interval '1 day' AND \"time\" <= $__timeTo()"


# The collectives panels sum v_collectives_daily over the same whole days, from
# running totals per series (migrations 0008, 0031): two index probes per series, whatever the range.
COLLECTIVES_IN_RANGE = "collectives_between($__timeFrom(), $__timeTo())"
# What a collectives series is: runs of other systems, applications, stacks, interconnects or rank counts are
# other lines and rows, never averaged together (a TCP run's latency is not a shared-memory one's).
COLLECTIVES_LABEL = "system || ' ' || app || ' ' || stack || ' ' || interconnect || ' n' || ranks"


# ---- 1. MPI time fraction over time ------------------------------------------------

def html_text(expr: str) -> str:
    """EXPR escaped as HTML text. Grafana renders an annotation's text as HTML (sanitized, but links and images
    kept), so a name holding `<a href=...>` would be a link there; escaped, it shows as the name."""
    return f"replace(replace(replace({expr}, '&', '&amp;'), '<', '&lt;'), '>', '&gt;')"


ANNOTATIONS_SQL = f"""SELECT extract(epoch FROM "time") * 1000 AS "time", extract(epoch FROM coalesce(time_end, "time")) * 1000 AS "timeEnd",
  {html_text("text")} AS text, array_to_string(tags, ',') AS tags
FROM v_annotations
WHERE $__timeFilter("time")
  AND (system IS NULL OR system IN ($system)) AND (app IS NULL OR app IN ($app))
  AND (workload IS NULL OR workload IN ($workload)) AND (stack IS NULL OR stack IN ($stack))
  AND (interconnect IS NULL OR interconnect IN ($interconnect)) AND (ranks IS NULL OR ranks IN ($ranks))
ORDER BY 1"""

# Change points over each series' whole history (migration 0024, changepoints.py), drawn as a second
# annotation layer: one mark at the first run of the new level, spanning back to the last run before it. Each is
# called by its stored verdict (migration 0043), as check, the report and `commscope changepoints` call it
# (changepoints.called): its direction only when the gate's minimums hold on both sides.
CHANGE_POINT_CALLED = """CASE WHEN verdict = direction THEN direction ELSE coalesce(verdict, 'not judged') || ', '
    || CASE WHEN direction = 'regression' THEN 'worse' ELSE 'better' END END"""
CHANGE_POINT_TEXT = f"""'change point (' || {CHANGE_POINT_CALLED} || '): ' || series_label || ' [' || "window" || '] '
    || metric || ' ' || coalesce(to_char(change * 100, 'SG990.0') || '%', '?') || ', p=' || to_char(p_value, '9.9EEEE')
    || coalesce('; versions changed: ' || versions_changed, '')"""
CHANGE_POINTS_ANNOTATION_SQL = f"""SELECT extract(epoch FROM coalesce(previous_time, "time")) * 1000 AS "time",
  extract(epoch FROM "time") * 1000 AS "timeEnd",
  {html_text(CHANGE_POINT_TEXT)} AS text,
  'commscope-changepoint,' || metric || ',' || coalesce(verdict, 'not judged') || ',series:' || series_id AS tags
FROM v_change_points
WHERE $__timeFilter("time") AND {SERIES}
ORDER BY 1"""

# A version that changed along a series (migration 0038: an MPI upgrade, a new compiler, a Spack rebuild), drawn as
# a third annotation layer at the first run with the new version: the series goes on across it, as one line.
VERSION_CHANGE_TEXT = """'version change: ' || series_label || ': ' || what || ' ' || previous || ' -> ' || value
    || ' (campaign ' || campaign_id || ')'"""
VERSION_CHANGES_ANNOTATION_SQL = f"""SELECT extract(epoch FROM "time") * 1000 AS "time",
  extract(epoch FROM "time") * 1000 AS "timeEnd",
  {html_text(VERSION_CHANGE_TEXT)} AS text,
  'commscope-version,' || what || ',series:' || series_id AS tags
FROM v_version_changes
WHERE $__timeFilter("time") AND {SERIES}
ORDER BY 1"""

# The measurement model's panels (docs/measurement-model.md) read v_run_metrics summed per day, series and
# window (migration 0013). Each series shows its focus window where it has one, else its run window; the line's
# name says which. A series is the runs of equal application, parameters and environment, so runs of another
# problem size, Caliper mode or stack are never one line.
SHOWN = "shown AND " + DAYS.replace('"time"', "day") + " AND " + SERIES
# v_shown_metrics_daily (migration 0029) holds only the shown row of each series and day, with the columns the
# MPI-fraction and USER / MPI / MPI_SYNC panels read: the same rows as v_run_metrics_daily WHERE shown.
SHOWN_DAYS = DAYS.replace('"time"', "day") + " AND " + SERIES
SHOWN_LABEL = "series_label || ' [' || \"window\" || ']'"


def _mean(measure: str) -> str:
    """The mean of a measure over the selected runs: NULL where none measured it (not 0)."""
    return f"sum({measure}_sum) / nullif(sum({measure}_n), 0)"


# Grafana's $__timeGroupAlias gives a numeric epoch (PostgreSQL's extract is numeric), which every row then
# groups, sorts and sends as a decimal. date_bin makes the same buckets (floor(epoch / interval) * interval) as a
# timestamptz, which Grafana reads as time too: a fifth less time for a panel of 3,700 points (dashboards/README.md).
TIME_BUCKET = "date_bin(make_interval(secs => $__interval_ms / 1000.0), \"time\", timestamptz 'epoch')"

# The MPI-fraction dashboard's three time series read the same rows: one query, five measures (a panel's measure
# is NULL where its runs did not measure it), which the three panels share.
MPI_FRACTION_SQL = f"""SELECT {TIME_BUCKET} AS "time",
  metric, {_mean("mpi_fraction_avg")} AS mpi_fraction, {_mean("mpi_fraction_slowest")} AS mpi_fraction_slowest,
  {_mean("parallel_efficiency")} AS parallel_efficiency, {_mean("load_balance")} AS load_balance,
  {_mean("communication_efficiency")} AS communication_efficiency
FROM (SELECT day AS "time", {SHOWN_LABEL} AS metric, * FROM v_shown_metrics_daily) d
WHERE {SHOWN_DAYS}
GROUP BY 1, 2
HAVING sum(mpi_fraction_avg_n) + sum(mpi_fraction_slowest_n) + sum(parallel_efficiency_n) > 0
ORDER BY 1, 2"""


MPI_FRACTION = Dashboard(
    "commscope-mpi-fraction", "MPI time fraction over time",
    "Share of time spent in MPI and POP's efficiencies, per series (same application, parameters and environment), "
    "night after night, on each series' focus window (else its whole run); regressions marked when the detector "
    "wrote them.",
    [
        Panel("MPI time fraction, mean over ranks", "timeseries", MPI_FRACTION_SQL, ["time", "metric", "mpi_fraction"],
              "percentunit",
              "Σ MPI time / Σ time over ranks in the window (Caliper profile.mpi); series without MPI wrapping have "
              "no line (not measured, not 0).",
              {"kind": "line", "x": "time", "y": "mpi_fraction", "series": "metric"}, long=True),
        Panel("MPI time fraction on the slowest rank", "timeseries", MPI_FRACTION_SQL,
              ["time", "metric", "mpi_fraction_slowest"], "percentunit",
              "MPI time / time on the rank slowest in the window.",
              {"kind": "line", "x": "time", "y": "mpi_fraction_slowest", "series": "metric"},
              reuses="MPI time fraction, mean over ranks", long=True),
        Panel("POP efficiencies", "timeseries", MPI_FRACTION_SQL,
              ["time", "metric", "parallel_efficiency", "load_balance", "communication_efficiency"], "percentunit",
              "POP's multiplicative model from per-rank useful (non-MPI) time: load balance = mean / max useful, "
              "communication efficiency = max useful / time, parallel efficiency = their product.",
              {"kind": "line", "x": "time", "y": ["parallel_efficiency", "load_balance", "communication_efficiency"],
               "series": "metric"}, reuses="MPI time fraction, mean over ranks", long=True),
        Panel("Regressions", "table", """SELECT "time", coalesce(system, 'all') AS system, coalesce(app, 'all') AS app,
  coalesce(stack, 'all') AS stack, coalesce(interconnect, 'all') AS interconnect, ranks, text, array_to_string(tags, ',') AS tags
FROM v_annotations
WHERE $__timeFilter("time")
  AND (system IS NULL OR system IN ($system)) AND (app IS NULL OR app IN ($app))
  AND (stack IS NULL OR stack IN ($stack)) AND (ranks IS NULL OR ranks IN ($ranks))
ORDER BY "time" DESC
LIMIT 200""", ["time", "system", "app", "stack", "interconnect", "ranks", "text", "tags"], "",
              "Written by the regression detector; empty until it runs.", {"kind": "table"}),
        Panel("Series too noisy to gate", "table", f"""SELECT "time", series_label AS series, "window", metric, verdict,
  detectable, max_undetectable, runs_a_night, n_new, n_baseline, campaign_id AS campaign, reason
FROM v_noisy_series
WHERE $__timeFilter("time") AND {SERIES}
ORDER BY detectable DESC NULLS FIRST, "time" DESC
LIMIT 200""", ["time", "series", "window", "metric", "verdict", "detectable", "max_undetectable", "runs_a_night",
               "n_new", "n_baseline", "campaign", "reason"], "",
              "Series whose last commscope check could not have shown a shift of --max-undetectable (default 20 %): "
              "detectable is the smallest shift its campaign would have flagged in 80 % of campaigns resampled "
              "from its baseline (empty: none would); runs_a_night, the runs a night that would show "
              "max_undetectable. Their 'no change' reads 'cannot tell'. Empty until commscope check runs.",
              {"kind": "table"}),
        Panel("Change points", "table", f"""SELECT "time", series_label AS series, "window", metric,
  {CHANGE_POINT_CALLED} AS verdict, mean_before, mean_after, change, n_before, n_after, p_value,
  campaign_id AS campaign, run_id AS run
FROM v_change_points
WHERE $__timeFilter("time") AND {SERIES}
ORDER BY "time" DESC
LIMIT 200""", ["time", "series", "window", "metric", "verdict", "mean_before", "mean_after", "change", "n_before",
               "n_after", "p_value", "campaign", "run"], "",
              "Where each series' level moved over its whole history (Apache Otava's E-divisive with its t-test, "
              "commscope changepoints or check): the run that starts the new level, what check calls it (no "
              "baseline, cannot tell or suspect, with the way it moved, until the gate's minimum runs and "
              "campaigns hold on both sides), the means before and after, the relative change and the p-value. "
              "Empty until change points are computed.",
              {"kind": "table"}),
    ],
    annotations=True)

# ---- 2. Scaling ---------------------------------------------------------------------
# One point per series (one experiment, as the gate's) and window, paired with the series of its experiment at
# the smallest rank count: series equal once the rank count, a known node count and the declared sizes are set
# aside (strong_key / weak_key, migration 0041; an unknown node count pairs only with unknown ones). Speedup and
# efficiency are against that base, over the days in the time range.

# Weak scaling keeps the grid points per rank: the product of the global grid over ranks.
CELLS_PER_RANK = ("(CASE WHEN global_size ~ '^[0-9]+(,[0-9]+)*$' THEN round((SELECT exp(sum(ln(x::float8))) "
                  "FROM unnest(string_to_array(global_size, ',')) AS x) / ranks)::bigint || ' points/rank' END)")


# Any other application holds what its study or ingest declares (--per-rank, --global: migration 0034's
# v_scaling_declared): weak scaling its per-rank parameters, strong scaling its global ones; a series that declares
# neither has no size, so it is in no scaling panel (the kind of its scaling is unknown).
STRONG_SIZE = "coalesce(global_size, strong_size)"
WEAK_SIZE = f"coalesce({CELLS_PER_RANK}, weak_size)"


def _scaling_sql(key: str, size: str, value: str) -> str:
    return f"""WITH s AS (
  SELECT {key} AS scaling_key, "window", {size} AS size, ranks, series_id,
         min(stack || ' ' || interconnect || ' ' || app || coalesce(' ' || nullif(variant, ''), '')) AS name,
         min(system) AS system, {_mean("time")} AS time_s, {_mean("parallel_efficiency")} AS pop_parallel_efficiency,
         {_mean("load_balance")} AS pop_load_balance, {_mean("communication_efficiency")} AS pop_communication_efficiency
  FROM v_run_metrics_daily LEFT JOIN v_scaling_declared USING (series_id)
  WHERE {SHOWN}
  GROUP BY 1, 2, 3, 4, 5
  HAVING sum(time_n) > 0
), b AS (
  SELECT DISTINCT ON (scaling_key, "window", size) scaling_key, "window", size, ranks AS base_ranks, time_s AS base_time,
         count(*) OVER (PARTITION BY scaling_key, "window", size) AS points
  FROM s ORDER BY scaling_key, "window", size, ranks, series_id
)
SELECT s.name || coalesce(' ' || s.size, '') || CASE WHEN s.system <> '' THEN ' @' || s.system ELSE '' END
         || ' [' || s."window" || '] ' || left(s.scaling_key, 6) AS series,
       s.ranks, {value}
FROM s JOIN b USING (scaling_key, "window", size)
WHERE b.points > 1 AND s.size IS NOT NULL
ORDER BY 1, 2"""


SCALING = Dashboard(
    "commscope-scaling", "Scaling",
    "Strong and weak scaling per stack and interconnect: speedup, parallel efficiency and POP's efficiencies "
    "against ranks, each experiment on its focus window (else its whole run).",
    [
        Panel("Strong scaling: speedup", "xychart",
              _scaling_sql("strong_key", STRONG_SIZE, "b.base_time / s.time_s AS speedup"),
              ["series", "ranks", "speedup"], "x",
              "Same experiment (parameters but the rank count); time of the smallest rank count / time.",
              {"kind": "xy", "x": "ranks", "y": "speedup", "series": "series"}),
        Panel("Strong scaling: parallel efficiency", "xychart",
              _scaling_sql("strong_key", STRONG_SIZE,
                           "(b.base_time / s.time_s) / (s.ranks::double precision / b.base_ranks) AS efficiency"),
              ["series", "ranks", "efficiency"], "percentunit", "Speedup / rank ratio.",
              {"kind": "xy", "x": "ranks", "y": "efficiency", "series": "series"}),
        Panel("Weak scaling: parallel efficiency", "xychart",
              _scaling_sql("weak_key", WEAK_SIZE, "b.base_time / s.time_s AS efficiency"),
              ["series", "ranks", "efficiency"], "percentunit",
              "Same grid points per rank; time at the smallest rank count / time.",
              {"kind": "xy", "x": "ranks", "y": "efficiency", "series": "series"}),
        Panel("POP efficiencies against ranks", "xychart", f"""SELECT p.series || ' ' || m.measure AS series, p.ranks, m.efficiency
FROM ({_scaling_sql("strong_key", STRONG_SIZE, "s.pop_parallel_efficiency, s.pop_load_balance, "
                    "s.pop_communication_efficiency")}) p
CROSS JOIN LATERAL (VALUES ('parallel efficiency', p.pop_parallel_efficiency), ('load balance', p.pop_load_balance),
                           ('communication efficiency', p.pop_communication_efficiency)) m(measure, efficiency)
WHERE m.efficiency IS NOT NULL
ORDER BY 1, 2""",
              ["series", "ranks", "efficiency"], "percentunit",
              "Strong scaling read through POP: where parallel efficiency goes as ranks grow, load balance or "
              "communication, one line per series and efficiency. Empty for runs without per-rank MPI measurements.",
              {"kind": "xy", "x": "ranks", "y": "efficiency", "series": "series"}),
    ], time_from="now-7d")

# ---- 3. MPI routine breakdown -------------------------------------------------------

# The routine panels read Caliper's MPI functions over the whole run (mpi_metrics), per series (migration 0017).
ROUTINES_LABEL = "series_label || ' [run]'"
# They sum v_mpi_routines_daily over the range's whole days from running totals per series and function
# (migration 0030): a probe or two per key, whatever the range. A NULL function is the series' every function.
ROUTINES_IN_RANGE = "routines_between($__timeFrom(), $__timeTo())"

ROUTINES = Dashboard(
    "commscope-mpi-routines", "MPI routine breakdown",
    "Top MPI routines by time, MPI_Barrier's share and call counts (the reservoir study's tables 1-3), "
    "and the USER / MPI / MPI_SYNC split per rank (the groundwater study).",
    [
        Panel("Top MPI routines by time", "table", f"""WITH f AS (
  SELECT {ROUTINES_LABEL} AS series, function, sum(time_total) / sum(runs) AS time_per_run,
    100 * sum(time_total) / nullif(sum(sum(time_total)) OVER (PARTITION BY series_label), 0) AS share_percent,
    sum(calls) / sum(runs) AS calls_per_run,
    row_number() OVER (PARTITION BY series_label ORDER BY sum(time_total) / sum(runs) DESC, function) AS place
  FROM {ROUTINES_IN_RANGE}
  WHERE function IS NOT NULL AND {SERIES}
  GROUP BY series_label, function
)
SELECT series, function, time_per_run, share_percent, calls_per_run
FROM f
WHERE place <= 15
ORDER BY series, time_per_run DESC, function""", ["series", "function", "time_per_run", "share_percent", "calls_per_run"],
              "s", "Per series (same application, parameters and environment), over the whole run: the 15 routines "
              "with the most time, summed over ranks and averaged over the runs that called them; share of the "
              "series' MPI time.", {"kind": "table"}),
        Panel("MPI_Barrier share and call counts", "table", f"""SELECT {ROUTINES_LABEL} AS series,
  100 * sum(time_total) FILTER (WHERE function = 'MPI_Barrier')
    / nullif(sum(time_total) FILTER (WHERE function IS NULL), 0) AS barrier_share_percent,
  sum(calls) FILTER (WHERE function = 'MPI_Barrier') / sum(runs) FILTER (WHERE function IS NULL) AS barrier_calls_per_run,
  sum(calls) FILTER (WHERE function IS NULL) / sum(runs) FILTER (WHERE function IS NULL) AS mpi_calls_per_run,
  (sum(runs) FILTER (WHERE function IS NULL))::bigint AS runs
FROM {ROUTINES_IN_RANGE}
WHERE (function IS NULL OR function = 'MPI_Barrier') AND {SERIES}
GROUP BY series_label
ORDER BY barrier_share_percent DESC NULLS LAST, 1""",
              ["series", "barrier_share_percent", "barrier_calls_per_run", "mpi_calls_per_run", "runs"], "",
              "Per series, over the whole run: share of MPI time in MPI_Barrier, and calls per run (empty where "
              "Caliper did not count calls: region.count).", {"kind": "table"}),
        Panel("USER / MPI / MPI_SYNC split", "barchart", f"""SELECT series_label || ' [' || "window" || ']' AS series,
  {_mean("user_time_avg")} AS "USER",
  (sum(mpi_time_avg_sum) - sum(mpi_sync_time_avg_sum)) / nullif(sum(mpi_time_avg_n), 0) AS "MPI",
  {_mean("mpi_sync_time_avg")} AS "MPI_SYNC"
FROM v_shown_metrics_daily
WHERE {SHOWN_DAYS}
GROUP BY 1
HAVING sum(mpi_time_avg_n) > 0
ORDER BY 1""", ["series", "USER", "MPI", "MPI_SYNC"], "s",
              "The mean rank's time in the window: useful (non-MPI) time, MPI other than MPI_SYNC, and MPI_SYNC "
              "(barrier and wait-type calls); averaged over runs.",
              {"kind": "bar", "x": "series", "y": ["USER", "MPI", "MPI_SYNC"], "stacked": True}),
    ])

# ---- 4. Collectives ------------------------------------------------------------------

COLLECTIVES = Dashboard(
    "commscope-collectives", "Collectives",
    "Latency against message size per algorithm on each system, stack and interconnect, and the best algorithm "
    "per size band (the reservoir study's figures 3-6), from collsweep.",
    [
        Panel("Latency against message size", "xychart", f"""SELECT collective || ' ' || algorithm || ' ' || {COLLECTIVES_LABEL} AS series,
  bytes, latency_us
FROM (SELECT collective, algorithm, system, app, stack, interconnect, ranks, bytes,
             sum(value_sum) / sum(n) AS latency_us
      FROM {COLLECTIVES_IN_RANGE}
      WHERE stat = 't_avg' AND collective <> 'barrier' AND {SERIES}
      GROUP BY 1, 2, 3, 4, 5, 6, 7, 8) t
ORDER BY 1, 2""", ["series", "bytes", "latency_us"], "µs",
              "Mean over ranks of the time per call, averaged over the runs of one system, application, stack, "
              "interconnect and rank count.",
              {"kind": "xy", "x": "bytes", "y": "latency_us", "series": "series", "log_x": True, "log_y": True}),
        Panel("Best algorithm per size band", "table", f"""WITH lat AS (
  SELECT collective, system, app, stack, interconnect, ranks, bytes, algorithm, sum(value_sum) / sum(n) AS latency_us
  FROM {COLLECTIVES_IN_RANGE}
  WHERE stat = 't_avg' AND {SERIES}
  GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
), ranked AS (
  SELECT *, count(*) OVER w AS algorithms, max(latency_us) OVER w AS worst_us,
         max(latency_us) FILTER (WHERE algorithm = 'default') OVER w AS default_us
  FROM lat WINDOW w AS (PARTITION BY collective, system, app, stack, interconnect, ranks, bytes)
), best AS (
  SELECT DISTINCT ON (collective, system, app, stack, interconnect, ranks, bytes) *
  FROM ranked ORDER BY collective, system, app, stack, interconnect, ranks, bytes, latency_us
)
SELECT collective, system, app, stack, interconnect, ranks,
  CASE WHEN bytes = 0 THEN '-' WHEN bytes < 1024 THEN bytes || ' B' WHEN bytes < 1048576 THEN (bytes / 1024) || ' KiB'
       ELSE (bytes / 1048576) || ' MiB' END AS size_band,
  bytes, algorithm AS best_algorithm, latency_us, default_us / nullif(latency_us, 0) AS gain_over_default,
  worst_us / nullif(latency_us, 0) AS gain_over_worst, algorithms
FROM best
ORDER BY algorithm = 'default', default_us / nullif(latency_us, 0) DESC NULLS LAST, collective, system, app, stack,
  interconnect, ranks, bytes""",
              ["collective", "system", "app", "stack", "interconnect", "ranks", "size_band", "bytes",
               "best_algorithm", "latency_us", "gain_over_default", "gain_over_worst", "algorithms"], "",
              "The fastest algorithm measured for each size on one system, application, stack, interconnect and "
              "rank count, where it beats the library's default first (by its gain over the default), then the "
              "sizes where the default is fastest.", {"kind": "table"}),
    ])

# ---- 5. Halo exchange ----------------------------------------------------------------

# The workloads' own timers over their timed loop (FOMs comm_time_*, compute_time_*, total_time), per series
# (migration 0017): runs of another problem size or environment are other bars and lines.
HALO_LABEL = "series_label || ' [loop]'"

HALO = Dashboard(
    "commscope-halo", "Halo exchange",
    "Average against slowest-rank communication time, exposed communication, imbalance and skew per series "
    "(the seismic study), from the workloads' own timers over their timed loop.",
    [
        Panel("Communication time: average against slowest rank", "barchart", f"""SELECT {HALO_LABEL} AS series,
  sum(comm_time_avg_sum) / sum(n) AS comm_time_avg,
  sum(comm_time_max_sum) / nullif(sum(comm_time_max_n), 0) AS comm_time_max
FROM v_halo_daily
WHERE {DAYS} AND {SERIES}
GROUP BY 1
ORDER BY 1""", ["series", "comm_time_avg", "comm_time_max"], "s",
              "The workload's own communication timer over its loop, mean over ranks and on the slowest rank.",
              {"kind": "bar", "x": "series", "y": ["comm_time_avg", "comm_time_max"]}),
        Panel("Exposed communication per series", "barchart", f"""SELECT {HALO_LABEL} AS series,
  sum(exposed_fraction_sum) / nullif(sum(exposed_fraction_n), 0) AS exposed_fraction
FROM v_halo_daily
WHERE {DAYS} AND {SERIES}
GROUP BY 1
ORDER BY 1""", ["series", "exposed_fraction"], "percentunit",
              "Slowest rank's communication time / total time; for overlap and rma it is the exposed time only.",
              {"kind": "bar", "x": "series", "y": ["exposed_fraction"]}),
        Panel("Imbalance and skew", "timeseries", f"""SELECT {TIME_BUCKET} AS "time",
  {HALO_LABEL} AS metric,
  sum(skew_sum) / nullif(sum(skew_n), 0) AS comm_skew,
  sum(imbalance_sum) / nullif(sum(imbalance_n), 0) AS compute_imbalance
FROM v_halo_daily
WHERE {DAYS} AND {SERIES}
GROUP BY 1, 2
ORDER BY 1, 2""", ["time", "metric", "comm_skew", "compute_imbalance"], "",
              "Slowest / average rank: communication (skew) and compute (imbalance), per series.",
              {"kind": "line", "x": "time", "y": ["comm_skew", "compute_imbalance"], "series": "metric"}),
    ])

# ---- 6. Communication matrix ------------------------------------------------------------
# The latest run of the selection that traced messages.

_LATEST_TRACED = f"""(SELECT max(last_traced_run) FROM v_comm_matrix_daily
   WHERE {DAYS} AND {SERIES})"""

COMM_MATRIX = Dashboard(
    "commscope-comm-matrix", "Communication matrix",
    "Bytes from rank to rank and per rank in MPI_COMM_WORLD ranks, for the latest traced run of the selection "
    "(the placement study).",
    [
        Panel("Bytes from rank to rank", "heatmap", f"""WITH run AS (SELECT {_LATEST_TRACED} AS run_id),
r AS (SELECT generate_series(0, greatest((SELECT ranks FROM v_runs WHERE run_id = (SELECT run_id FROM run)) - 1,
                                         (SELECT max(greatest(src, dst)) FROM v_comm_matrix
                                          WHERE run_id = (SELECT run_id FROM run)))) AS rank)
SELECT s.rank AS src, d.rank AS dst, coalesce(c.bytes, 0) AS bytes
FROM r s CROSS JOIN r d
LEFT JOIN v_comm_matrix c ON c.run_id = (SELECT run_id FROM run) AND c.src = s.rank AND c.dst = d.rank
ORDER BY src, dst""", ["src", "dst", "bytes"], "bytes",
              "Message tracing (Caliper's aggregate keyed by mpi.rank and mpi.msg.dst), both in world ranks: a destination "
              "is a rank of the communicator used, translated with the workload's RANK lines (docs/measurement-model.md). "
              "Every pair of the run's ranks, 0 where one sent the other nothing.",
              {"kind": "heatmap", "x": "dst", "y": "src", "z": "bytes"}),
        # A barchart draws against a string or time field: the rank as text, in rank order.
        Panel("Bytes per rank", "barchart", f"""SELECT t.rank::text AS rank, sum(sent) AS bytes_sent, sum(received) AS bytes_received
FROM (SELECT src AS rank, bytes AS sent, 0 AS received FROM v_comm_matrix WHERE run_id = {_LATEST_TRACED}
      UNION ALL
      SELECT dst, 0, bytes FROM v_comm_matrix WHERE run_id = {_LATEST_TRACED}) t
GROUP BY t.rank
ORDER BY t.rank""", ["rank", "bytes_sent", "bytes_received"], "bytes", "",
              {"kind": "bar", "x": "rank", "y": ["bytes_sent", "bytes_received"]}),
    ])

# ---- 7. Parallel I/O -----------------------------------------------------------------------

IO = Dashboard(
    "commscope-io", "Parallel I/O",
    "Write and read bandwidth by method and group size (the groundwater study), from pio.",
    [
        Panel("Bandwidth by method and group size", "barchart", f"""SELECT method || CASE WHEN group_size IS NOT NULL THEN ' g' || group_size ELSE '' END
         || ' ' || stack || ' n' || ranks AS series,
  sum(write_mbs_sum) / nullif(sum(write_n), 0) AS write_mbs, sum(read_mbs_sum) / nullif(sum(read_n), 0) AS read_mbs
FROM v_io_daily
WHERE {DAYS} AND {SERIES}
GROUP BY 1
ORDER BY 1""", ["series", "write_mbs", "read_mbs"], "MBs", "MB/s = file bytes / time per write (read-back).",
              {"kind": "bar", "x": "series", "y": ["write_mbs", "read_mbs"]}),
        Panel("Write bandwidth over time", "timeseries", f"""SELECT {TIME_BUCKET} AS "time",
  method || CASE WHEN group_size IS NOT NULL THEN ' g' || group_size ELSE '' END || ' ' || stack || ' n' || ranks AS metric,
  sum(write_mbs_sum) / nullif(sum(write_n), 0) AS write_mbs
FROM v_io_daily
WHERE {DAYS} AND {SERIES}
GROUP BY 1, 2
ORDER BY 1, 2""", ["time", "metric", "write_mbs"], "MBs", "",
              {"kind": "line", "x": "time", "y": "write_mbs", "series": "metric"}),
    ])

# ---- 8. Procurement comparison --------------------------------------------------------------
# Like with like (docs/measurement-model.md): the same application and experiment parameters on each
# (system, stack, interconnect), each run on its focus window when it has one (the workloads' timed loop, whether or
# not Caliper profiled it), else its whole run; the window is shown. Time is the window's slowest rank.
# Runs over another interconnect of the same system and stack (TCP beside shared memory, say) are another row, never
# averaged with it, and the reference is one system, stack and interconnect: the interconnect names each stack's
# transport (openmpi4/default, impi2021/default), so experiments are paired with the reference whatever theirs is.
# The panels compare every selected system, so they read migration 0029's rollup of the runs so compared
# (per day, series, window and MPI library: count, sum, least and greatest time, newest run) over whole UTC days, as
# the other panels do. Each stack is compared on its newest version (0039): of each series, the rows of the library
# of its newest run in the range; `versions` names the versions compared ("Open MPI 4.1.6"; NULL: not recorded).

_NORMALIZED = f"""WITH d AS (
  SELECT system, stack, interconnect, app, parameters, "window", mpi_library, mpi_version, runs, time_sum, time_min,
         time_max, first_value(mpi_library) OVER (PARTITION BY series_id ORDER BY last_run DESC, mpi_library) AS newest
  FROM v_comparison_daily
  WHERE {DAYS} AND app IN ($app) AND ranks IN ($ranks)
    AND ((interconnect IN ($interconnect) AND system IN ($system) AND stack IN ($stack))
         OR (system = '$reference_system' AND stack = '$reference_stack'
             AND interconnect = '$reference_interconnect'))
), t AS (
  SELECT system, stack, interconnect, app, parameters, "window",
         string_agg(DISTINCT mpi_version, ', ' ORDER BY mpi_version) AS versions, sum(time_sum) / sum(runs) AS time_s,
         min(time_min) AS time_min, max(time_max) AS time_max, sum(runs) AS runs
  FROM d WHERE mpi_library IS NOT DISTINCT FROM newest
  GROUP BY 1, 2, 3, 4, 5, 6
), ref AS (
  SELECT app, parameters, "window", time_s AS ref_time, versions AS ref_versions FROM t
  WHERE system = '$reference_system' AND stack = '$reference_stack' AND interconnect = '$reference_interconnect'
)
"""

# The reference variables, chained: each offers only what has runs in the time range with the ones before it, the one
# with most runs first (Grafana takes the first option on first load; the report picks the same: reference_values).
# Over the range only, so a load reads the range's runs (index on started_at), not the whole history.
REFERENCE_VARIABLES = [
    {"name": "reference_system", "label": "Reference system",
     "query": "SELECT system FROM v_runs WHERE $__timeFilter(started_at) GROUP BY 1 ORDER BY count(*) DESC, 1"},
    {"name": "reference_stack", "label": "Reference stack",
     "query": "SELECT stack FROM v_runs WHERE $__timeFilter(started_at) AND system = '$reference_system' "
              "GROUP BY 1 ORDER BY count(*) DESC, 1"},
    {"name": "reference_interconnect", "label": "Reference interconnect",
     "query": "SELECT interconnect FROM v_runs WHERE $__timeFilter(started_at) AND system = '$reference_system' "
              "AND stack = '$reference_stack' GROUP BY 1 ORDER BY count(*) DESC, 1"},
]

PROCUREMENT = Dashboard(
    "commscope-procurement", "Procurement comparison",
    "Systems × stacks × interconnects on the same experiments (application and parameters), the time of each run's "
    "focus window (else its whole run) normalized to a chosen reference system, stack and interconnect (below 1: "
    "faster than the reference).",
    [
        Panel("Normalized time per experiment", "table", _NORMALIZED + """SELECT t.system, t.stack, t.versions, t.interconnect,
  t.app, (t.parameters - 'nodes')::text AS experiment, t."window", t.runs, t.time_s, t.time_min, t.time_max,
  ref.ref_time, ref.ref_versions, t.time_s / ref.ref_time AS normalized
FROM t JOIN ref USING (app, parameters, "window")
ORDER BY t.app, experiment, normalized""",
              ["system", "stack", "versions", "interconnect", "app", "experiment", "window", "runs", "time_s",
               "time_min", "time_max", "ref_time", "ref_versions", "normalized"], "",
              "Mean time of each experiment's runs (min and max beside it) over the reference's, on the same window, "
              "each stack on its newest version in the range (versions: the ones compared).",
              {"kind": "table"}),
        Panel("Geometric mean of normalized time", "barchart", _NORMALIZED + """SELECT t.system || ' ' || t.stack || coalesce(' (' || t.versions || ')', '') || ' '
  || t.interconnect AS system_stack_interconnect,
  exp(avg(ln(t.time_s / ref.ref_time))) AS normalized, count(*) AS experiments
FROM t JOIN ref USING (app, parameters, "window")
GROUP BY 1
ORDER BY 2""", ["system_stack_interconnect", "normalized", "experiments"], "",
              "Over the experiments both ran, each on the same window, each stack on its newest version in the range "
              "(in parentheses).",
              {"kind": "bar", "x": "system_stack_interconnect", "y": ["normalized"]}),
    ],
    extra_variables=REFERENCE_VARIABLES, time_from="now-7d")

# ---- 9. Call tree ---------------------------------------------------------------------------
# The run shown: the latest ok run with a call tree (Caliper's regions and MPI functions, v_node_metrics) of the
# selection, in the time range, or in campaign $campaign, and of series $series when one is named (the regression
# gate's findings link here with both: gate/outputs.diff_url). $rank_stat: each node's time as the mean over ranks,
# or on the run's slowest rank (the rank with the most time in the call tree; the same rank for every node).
CALL_TREE_VARIABLES = [
    {"name": "rank_stat", "label": "Time per node",
     "query": "SELECT stat FROM (VALUES (1, 'mean'), (2, 'slowest')) v(o, stat) ORDER BY o"},
    {"name": "series", "label": "Series",
     "query": "SELECT 'any' UNION ALL (SELECT series_id::text FROM v_series_ids ORDER BY series_id DESC)"},
    {"name": "campaign", "label": "Campaign",
     "query": "SELECT 'latest' UNION ALL (SELECT campaign_id::text FROM v_campaign_ids ORDER BY campaign_id DESC)"},
    {"name": "baseline", "label": "Baseline campaign",
     "query": "SELECT 'previous' UNION ALL (SELECT campaign_id::text FROM v_campaign_ids ORDER BY campaign_id DESC)"},
]
CALL_TREE_FIRST = {"rank_stat": "mean", "series": "any", "campaign": "latest", "baseline": "previous"}
_PROFILED = "EXISTS (SELECT 1 FROM v_node_metrics n WHERE n.run_id = m.run_id)"
_SHOWN_RUN = f"""SELECT DISTINCT m.run_id, m.series_id, m.started_at FROM v_run_metrics m
  WHERE m.status = 'ok' AND {_PROFILED}
    AND (('$campaign' = 'latest' AND $__timeFilter(m.started_at)) OR m.campaign_id::text = '$campaign')
    AND ('$series' = 'any' OR m.series_id::text = '$series')
    AND m.run_id IN (SELECT run_id FROM v_runs WHERE {SERIES})
  ORDER BY m.started_at DESC, m.run_id DESC LIMIT 1"""
_NODE_TIME = ("CASE WHEN '$rank_stat' = 'slowest' THEN {0}_slowest ELSE {0}_avg END")

# As Grafana's flame graph reads a tree: a nested set in depth-first order, each node's level (depth; 0 the tree's
# total: its top-level regions and MPI calls), its inclusive time (value) and exclusive time (self), and its name
# (label; MPI functions keep their MPI_ names). Siblings come in name order. Time outside every region that is no
# MPI call is in no node, so not in the tree. A run stored without the slowest rank's times shows no slowest tree.
CALL_TREE_SQL = f"""WITH run AS (
  {_SHOWN_RUN}
), t AS (
  SELECT path, name, depth, {_NODE_TIME.format("incl")} AS incl, {_NODE_TIME.format("excl")} AS excl, slowest_rank
  FROM v_node_metrics WHERE run_id = (SELECT run_id FROM run)
)
SELECT level, value, self, label
FROM (SELECT 0 AS level, sum(incl) AS value, 0::double precision AS self,
             CASE WHEN '$rank_stat' = 'slowest' THEN 'total, rank ' || max(slowest_rank) ELSE 'total' END AS label,
             '{{}}'::text[] AS k
      FROM t WHERE depth = 1 HAVING count(incl) > 0
      UNION ALL
      SELECT depth, incl, excl, name, string_to_array(path, '/') FROM t WHERE incl IS NOT NULL) n
ORDER BY k"""

# What got slower, region by region, like Hatchet's graphframe subtraction (gf1 - gf2): the shown run against the
# series' run in campaign $baseline, or (previous) the run before it in its series (docs/measurement-model.md), each
# call path's exclusive time ($rank_stat; 0 where a run has no such path), the regions that got slower first, and
# each one's share of the change of the call tree's whole time (NULL when that did not grow).
CALL_TREE_DIFF_SQL = f"""WITH latest AS (
  {_SHOWN_RUN}
), base AS (
  SELECT DISTINCT m.run_id, m.started_at FROM v_run_metrics m JOIN latest l USING (series_id)
  WHERE m.status = 'ok' AND {_PROFILED}
    AND CASE WHEN '$baseline' = 'previous' THEN (m.started_at, m.run_id) < (l.started_at, l.run_id)
             ELSE m.campaign_id::text = '$baseline' AND m.run_id <> l.run_id END
  ORDER BY m.started_at DESC, m.run_id DESC LIMIT 1
), d AS (
  SELECT path AS region, a.excl AS now_s, b.excl AS before_s, coalesce(a.excl, 0) - coalesce(b.excl, 0) AS change_s
  FROM (SELECT path, {_NODE_TIME.format("excl")} AS excl FROM v_node_metrics
        WHERE run_id = (SELECT run_id FROM latest)) a
  FULL JOIN (SELECT path, {_NODE_TIME.format("excl")} AS excl FROM v_node_metrics
             WHERE run_id = (SELECT run_id FROM base)) b USING (path)
), s AS (
  SELECT d.*, sum(change_s) OVER () AS total_change_s FROM d
)
SELECT region, now_s, before_s, change_s,
       CASE WHEN total_change_s > 0 THEN 100 * change_s / total_change_s END AS share_percent,
       (SELECT run_id FROM latest) AS run, (SELECT run_id FROM base) AS baseline_run
FROM s
WHERE change_s > 0
ORDER BY change_s DESC, region"""

CALL_TREE = Dashboard(
    "commscope-call-tree", "Call tree",
    "The call tree of the latest run of the selection that Caliper profiled (or of a campaign and series): regions "
    "and MPI functions, time inclusive and exclusive, mean over ranks or on the slowest rank; and what got slower "
    "since the run before it in its series (or since a baseline campaign).",
    [
        Panel("Call tree of the latest profiled run", "flamegraph", CALL_TREE_SQL, ["level", "value", "self", "label"],
              "s", "Width: a region's time with everything it called (mean over ranks, or on the slowest rank: "
              "Time per node); 'total' is the time of the top-level regions and of MPI calls made outside every "
              "region.", {"kind": "table"}),
        Panel("Regions that got slower than the run before", "table", CALL_TREE_DIFF_SQL,
              ["region", "now_s", "before_s", "change_s", "share_percent", "run", "baseline_run"], "s",
              "The shown run against the run before it in its series (same application, parameters and "
              "environment), or its run in the Baseline campaign: each call path's exclusive time (Time per node) "
              "where it grew, the most first, with its share of the growth of the call tree's whole time.",
              {"kind": "table"}),
    ],
    extra_variables=CALL_TREE_VARIABLES)

DASHBOARDS = [MPI_FRACTION, SCALING, ROUTINES, COLLECTIVES, HALO, COMM_MATRIX, IO, PROCUREMENT, CALL_TREE]

# Why a dashboard's panels can be empty, and what to run so they are not: the static report says it under an
# empty panel instead of a bare "no data".
WHY_EMPTY = {
    MPI_FRACTION.uid: "These panels need runs whose Caliper profile wrapped MPI (profile.mpi). Runs without a "
                      "profile, or profiled without MPI wrapping, have no MPI time (NULL, not 0). commscope setup "
                      "builds Caliper per MPI stack (offline: --source-mirror DIR), and commscope run then profiles "
                      "with --caliper mpi, an application without Caliper by preloading it.",
    SCALING.uid: "Scaling needs the same experiment at two or more rank counts (strong: the same global problem; "
                 "weak: the same problem per rank), as the smoke study runs at 1 and 2 ranks.",
    ROUTINES.uid: "Routine tables need Caliper profiles with MPI wrapping (--caliper mpi); call counts need "
                  "--caliper counts.",
    COLLECTIVES.uid: "These panels read collsweep's per-size FOMs: run a study that has collsweep (smoke, "
                     "collectives).",
    HALO.uid: "These panels read halo3d's communication FOMs: run a study that has halo3d (smoke, overlap).",
    COMM_MATRIX.uid: "The matrix needs a run traced with Caliper's message tracing: --caliper matrix (e.g. "
                     "commscope run placement --caliper matrix).",
    IO.uid: "These panels read pio's bandwidth FOMs: run a study that has pio (io).",
    CALL_TREE.uid: "The call tree needs a run with a Caliper profile (--caliper mpi, or any Caliper profile "
                   "ingested).",
    PROCUREMENT.uid: "The comparison needs the same experiment (application and parameters) on two or more "
                     "systems or stacks; name the systems with commscope report --compare.",
}

# Panels empty for a reason of their own, not their dashboard's: (dashboard uid, panel title) -> why.
WHY_EMPTY_PANEL = {
    (MPI_FRACTION.uid, "Regressions"): "commscope check --annotate writes them when it judges a campaign whose "
                                       "series have earlier campaigns to compare with; no check has written one "
                                       "for this selection.",
    (MPI_FRACTION.uid, "Series too noisy to gate"): "commscope check lists them when it judges a campaign; no "
                                                    "check has judged one in this selection.",
    (MPI_FRACTION.uid, "Change points"): "Computed over each series' history (commscope changepoints, and at "
                                         "ingest): none in this selection, where finding one takes several runs "
                                         "on each side of a move.",
}


def why_empty(board: Dashboard, panel: Panel) -> str:
    """What an empty panel of the static report says: its own reason, else its dashboard's."""
    return WHY_EMPTY_PANEL.get((board.uid, panel.title)) or WHY_EMPTY.get(board.uid, "")


def variable_query(column: str) -> str:
    return f"SELECT DISTINCT {column} FROM v_series ORDER BY 1"


def expand(sql: str, t_from: dt.datetime, t_to: dt.datetime, values: dict, multi: set[str] | None = None,
           interval: float | None = None) -> str:
    """The SQL Grafana sends to PostgreSQL for this panel (grafana_macros.expand), the dashboards' VARIABLES
    multi-valued unless MULTI names others."""
    multi = {n for n, _, _ in VARIABLES} if multi is None else multi
    return grafana_macros.expand(sql, t_from, t_to, values, multi, interval)


def all_values(conn) -> dict[str, list[str] | str]:
    """Every option of every variable, as "All" selects them (the variables' own queries), and the call-tree
    dashboard's own variables at their first option, as Grafana starts them (CALL_TREE_FIRST)."""
    vals = {name: [str(r[0]) for r in conn.execute(variable_query(col)).fetchall()] for name, _, col in VARIABLES}
    for name in vals:
        if not vals[name]:
            vals[name] = [""]   # Grafana sends an empty selection as ''; nothing matches
    return vals | CALL_TREE_FIRST


def reference_values(conn, system: str, stack: str | None = None, t_from: dt.datetime | None = None,
                     t_to: dt.datetime | None = None) -> dict[str, str]:
    """The procurement dashboard's reference variables for SYSTEM, from their own queries (REFERENCE_VARIABLES) over
    runs started from T_FROM to T_TO (default: all): STACK, else the system's stack with the most runs, and the
    interconnect with the most runs of that system and stack (what Grafana shows first)."""
    t_from = t_from or dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    t_to = t_to or dt.datetime(9999, 12, 31, tzinfo=dt.timezone.utc)
    values = {"reference_system": system}
    for v in REFERENCE_VARIABLES[1:]:
        if v["name"] == "reference_stack" and stack is not None:
            values["reference_stack"] = stack
            continue
        row = conn.execute(expand(v["query"], t_from, t_to, values, set())).fetchone()
        values[v["name"]] = row[0] if row else "default"
    return values
