"""The oracle of the daily rollups: what each rollup view of migration 0006 (and 0008's and 0031's
collectives_between) equals, the same columns computed on the fly from the per-run views. The tests
(test_dashboards.py) compare the two on real data; the benchmark (dashboards/bench/panel_queries.py) uses these
as its baseline, the panels' SQL unchanged.
"""
from __future__ import annotations

_DAY_SERIES = ("date_trunc('day', r.started_at, 'UTC') AS \"time\", r.system, r.app, r.workload, "
               "coalesce(r.variant, '') AS variant, r.stack, r.interconnect, r.ranks")
_DAY_SERIES_OF = ("date_trunc('day', \"time\", 'UTC') AS \"time\", system, app, workload, "
                  "coalesce(variant, '') AS variant, stack, interconnect, ranks")
# v_run_metrics_daily's series_label, from v_runs' columns: the store's one label rule (views.sql).
_OTF_LABEL = ("series_label(coalesce(system, 'unknown'), app, workload, variant, coalesce(stack, 'unknown'), "
              "interconnect, ranks, {gs}, {sid})")
ON_THE_FLY_VIEWS = [
    # 0013's (0027's) run_metrics_daily, from v_run_metrics and v_runs.
    """CREATE OR REPLACE VIEW v_run_metrics_daily AS
WITH d AS (
SELECT date_trunc('day', m.started_at, 'UTC') AS day, m.series_id, m."window",
       min(coalesce(r.system, 'unknown')) AS system, min(m.app) AS app, min(r.workload) AS workload,
       min(coalesce(r.variant, '')) AS variant, min(coalesce(r.stack, 'unknown')) AS stack,
       min(r.interconnect) AS interconnect, min(m.ranks) AS ranks, min(r.global_size) AS global_size,
       min(strong_scaling_key(m.app, m.parameters, m.environment)) AS strong_key,
       min(weak_scaling_key(m.app, m.parameters, m.environment)) AS weak_key, count(*)::integer AS runs,
       count(m.time_s)::integer AS time_n, sum(m.time_s) AS time_sum,
       count(m.mpi_time_avg_s)::integer AS mpi_time_avg_n, sum(m.mpi_time_avg_s) AS mpi_time_avg_sum,
       count(m.mpi_fraction_avg)::integer AS mpi_fraction_avg_n, sum(m.mpi_fraction_avg) AS mpi_fraction_avg_sum,
       count(m.mpi_fraction_slowest)::integer AS mpi_fraction_slowest_n, sum(m.mpi_fraction_slowest) AS mpi_fraction_slowest_sum,
       count(m.user_time_avg_s)::integer AS user_time_avg_n, sum(m.user_time_avg_s) AS user_time_avg_sum,
       count(m.mpi_sync_time_avg_s)::integer AS mpi_sync_time_avg_n, sum(m.mpi_sync_time_avg_s) AS mpi_sync_time_avg_sum,
       count(m.load_balance)::integer AS load_balance_n, sum(m.load_balance) AS load_balance_sum,
       count(m.communication_efficiency)::integer AS communication_efficiency_n, sum(m.communication_efficiency) AS communication_efficiency_sum,
       count(m.parallel_efficiency)::integer AS parallel_efficiency_n, sum(m.parallel_efficiency) AS parallel_efficiency_sum
FROM v_run_metrics m JOIN v_runs r ON r.run_id = m.run_id
WHERE m.status = 'ok' AND m.series_id IS NOT NULL
GROUP BY 1, 2, 3   -- one row per series, day and window; its labels the least of its runs' (0027)
)
SELECT d.*, (d."window" = 'focus' OR NOT EXISTS (
           SELECT 1 FROM d f WHERE f.day = d.day AND f.series_id = d.series_id AND f."window" = 'focus')) AS shown,
       series_label(d.system, d.app, d.workload, d.variant, d.stack, d.interconnect, d.ranks, d.global_size,
                    d.series_id) AS series_label
FROM d""",
    # 0029's shown_metrics_daily: the shown row of each series and day, from the view above.
    """CREATE OR REPLACE VIEW v_shown_metrics_daily AS
SELECT day, series_id, "window", system, app, workload, stack, interconnect, ranks, series_label,
       mpi_fraction_avg_n, mpi_fraction_avg_sum, mpi_fraction_slowest_n, mpi_fraction_slowest_sum,
       parallel_efficiency_n, parallel_efficiency_sum, load_balance_n, load_balance_sum,
       communication_efficiency_n, communication_efficiency_sum, user_time_avg_n, user_time_avg_sum,
       mpi_time_avg_n, mpi_time_avg_sum, mpi_sync_time_avg_n, mpi_sync_time_avg_sum
FROM v_run_metrics_daily WHERE shown""",
    f"""CREATE OR REPLACE VIEW v_mpi_fraction_daily AS
SELECT {_DAY_SERIES_OF}, count(*)::integer AS runs, sum(mpi_fraction_avg) AS mpi_fraction_avg_sum,
       count(mpi_fraction_slowest)::integer AS slowest_runs, sum(mpi_fraction_slowest) AS mpi_fraction_slowest_sum
FROM v_mpi_fraction
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8""",
    f"""CREATE OR REPLACE VIEW v_wall_time_daily AS
SELECT {_DAY_SERIES}, r.global_size, count(*)::integer AS runs, sum(r.wall_time) AS wall_time_sum
FROM v_runs r
WHERE r.status = 'ok' AND r.wall_time > 0
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9""",
    f"""CREATE OR REPLACE VIEW v_rank_groups_daily AS
SELECT {_DAY_SERIES}, count(*)::integer AS rank_rows, sum(g.user_time) AS user_time_sum,
       sum(g.mpi_time) AS mpi_time_sum, sum(g.mpi_sync_time) AS mpi_sync_time_sum
FROM v_rank_groups g JOIN v_runs r ON r.run_id = g.run_id
WHERE r.status = 'ok'
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8""",
    # 0017's v_mpi_routines_daily: per run_series, day and series.
    f"""CREATE OR REPLACE VIEW v_mpi_routines_daily AS
WITH m AS (
  SELECT {_DAY_SERIES}, rr.series_id, rr.global_size AS gs, m.run_id, m.function, m.time_total, m.calls
  FROM v_mpi_routines m JOIN v_runs r ON r.run_id = m.run_id JOIN runs rr ON rr.id = m.run_id
  WHERE r.status = 'ok' AND rr.series_id IS NOT NULL
)
SELECT f."time", f.system, f.app, f.workload, f.variant, f.stack, f.interconnect, f.ranks, f.function, f.runs,
       f.time_total, f.calls, g.group_runs, f.series_id, g.global_size,
       {_OTF_LABEL.format(gs="g.global_size", sid="f.series_id")} AS series_label
FROM (SELECT "time", system, app, workload, variant, stack, interconnect, ranks, series_id, function,
             count(DISTINCT run_id)::integer AS runs, sum(time_total) AS time_total, sum(calls) AS calls
      FROM m GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10) f
JOIN (SELECT "time", system, app, workload, variant, stack, interconnect, ranks, series_id,
             count(DISTINCT run_id)::integer AS group_runs, max(gs) AS global_size
      FROM m GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9) g
  USING ("time", system, app, workload, variant, stack, interconnect, ranks, series_id)""",
    # routines_between (0030) as the sum of the daily rows in the range: per function, and per series all
    # functions together (its runs the group's, its time and calls the functions' sums, per day).
    """CREATE OR REPLACE FUNCTION routines_between(t_from timestamptz, t_to timestamptz)
RETURNS TABLE (system text, app text, workload text, variant text, stack text, interconnect text, ranks integer,
               series_label text, function text, runs bigint, time_total double precision, calls numeric)
LANGUAGE sql STABLE AS $$
WITH d AS (SELECT * FROM v_mpi_routines_daily WHERE "time" > t_from - interval '1 day' AND "time" <= t_to)
SELECT system, app, workload, variant, stack, interconnect, ranks, series_label, function,
       sum(runs)::bigint, sum(time_total), sum(calls)
FROM d GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
UNION ALL
SELECT system, app, workload, variant, stack, interconnect, ranks, series_label, NULL,
       sum(group_runs)::bigint, sum(time_total), sum(calls)
FROM (SELECT system, app, workload, variant, stack, interconnect, ranks, series_label, "time",
             max(group_runs) AS group_runs, sum(time_total) AS time_total, sum(calls) AS calls
      FROM d GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9) g
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
$$""",
    f"""CREATE OR REPLACE VIEW v_comm_matrix_daily AS
SELECT {_DAY_SERIES}, max(r.run_id) AS last_traced_run
FROM v_runs r
WHERE r.status = 'ok' AND EXISTS (SELECT 1 FROM v_comm_matrix c WHERE c.run_id = r.run_id)
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8""",
    f"""CREATE OR REPLACE VIEW v_collectives_daily AS
SELECT {_DAY_SERIES_OF}, collective, algorithm, bytes, stat, count(*)::integer AS n, sum(value) AS value_sum
FROM v_collectives
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12""",
    # collectives_between (0008, 0031) as the sum of the daily rows in the range.
    """CREATE OR REPLACE FUNCTION collectives_between(t_from timestamptz, t_to timestamptz)
RETURNS TABLE (system text, app text, workload text, variant text, stack text, interconnect text, ranks integer,
               collective text, algorithm text, bytes bigint, stat text, n bigint, value_sum double precision)
LANGUAGE sql STABLE AS $$
SELECT system, app, workload, variant, stack, interconnect, ranks, collective, algorithm, bytes, stat,
       sum(n)::bigint, sum(value_sum)
FROM v_collectives_daily
WHERE "time" > t_from - interval '1 day' AND "time" <= t_to
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
$$""",
    # 0017's v_halo_daily: per run_series, day and series.
    f"""CREATE OR REPLACE VIEW v_halo_daily AS
SELECT d.*, {_OTF_LABEL.format(gs="d.global_size", sid="d.series_id")} AS series_label
FROM (SELECT {_DAY_SERIES_OF}, count(*)::integer AS n, sum(comm_time_avg) AS comm_time_avg_sum,
       count(comm_time_max)::integer AS comm_time_max_n, sum(comm_time_max) AS comm_time_max_sum,
       count(skew)::integer AS skew_n, sum(skew) AS skew_sum, count(imbalance)::integer AS imbalance_n,
       sum(imbalance) AS imbalance_sum, count(exposed_fraction)::integer AS exposed_fraction_n,
       sum(exposed_fraction) AS exposed_fraction_sum, series_id, max(global_size) AS global_size
      FROM (SELECT h.*, r.series_id, r.global_size FROM v_halo h JOIN runs r ON r.id = h.run_id
            WHERE r.series_id IS NOT NULL) h
      GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, series_id) d""",
    # 0029's v_comparison_daily: each ok run once, on its focus window where that has a time, else its run window
    # (0014's v_run_compared, with the time > 0 the procurement panels ask), per day, series, window and (0039) the
    # run's MPI library string, with the group's newest run start.
    """CREATE OR REPLACE VIEW v_comparison_daily AS
SELECT date_trunc('day', c.started_at, 'UTC') AS "time", c.series_id, c.environment->>'system' AS system,
       c.environment->>'stack' AS stack, c.environment->>'interconnect' AS interconnect, c.app, c.ranks,
       c.parameters, c."window", count(*)::integer AS runs, sum(c.time_s) AS time_sum, min(c.time_s) AS time_min,
       max(c.time_s) AS time_max, st.library AS mpi_library, mpi_version_label(st.library) AS mpi_version,
       max(c.started_at) AS last_run
FROM (SELECT DISTINCT ON (run_id) * FROM v_run_metrics
      WHERE status = 'ok' AND series_id IS NOT NULL AND time_s > 0
      ORDER BY run_id, "window" = 'focus' DESC) c
JOIN runs r ON r.id = c.run_id LEFT JOIN stacks st ON st.id = r.stack_id
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, st.library""",
    f"""CREATE OR REPLACE VIEW v_io_daily AS
SELECT {_DAY_SERIES_OF}, method, group_size, count(write_mbs)::integer AS write_n, sum(write_mbs) AS write_mbs_sum,
       count(read_mbs)::integer AS read_n, sum(read_mbs) AS read_mbs_sum
FROM v_io
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10""",
]
