-- Every view of the store, and the SQL functions only views use: one definition each, in dependency order (a view
-- after the views it reads). `db.migrate` applies this file after the versioned migrations (migrations/), whenever
-- its content differs from the one the store last applied (schema_repeatable holds its SHA-256): it drops every
-- view and creates them again from here, then grants them to the read-only roles. Versioned migrations hold
-- tables, indexes, triggers and data changes; a change to a view is a change to this file alone.
--
-- Each view's columns are its readers' contract: the panels (views/panels.py), dashboards/ and the report read
-- them by name.

-- A series as the dashboards name it: system, application, its workload where that is not the application's own
-- name (a Ramble application's input), its variant (an application's parameters when it has no variant), stack,
-- interconnect, rank count, global size, and the series id, which makes the label unique whatever else is alike.
-- STABLE, as its body is (a number joined to text): so the planner inlines it into each view.
CREATE OR REPLACE FUNCTION series_label(system text, app text, workload text, variant text, stack text,
                                        interconnect text, ranks bigint, global_size text, series_id bigint)
RETURNS text LANGUAGE sql STABLE AS $$
SELECT system || ' ' || app || coalesce(' ' || nullif(nullif(workload, app), ''), '')
       || coalesce(' ' || nullif(variant, ''), '') || ' ' || stack || ' ' || interconnect || ' n' || ranks
       || coalesce(' ' || global_size, '') || ' #' || series_id
$$;

-- Each run with its system, stack, campaign and the hardware it ran on.
CREATE VIEW v_runs AS
SELECT r.id AS run_id, r.started_at, r.status, r.app, r.workload, r.variant, r.decomposition,
       coalesce(r.interconnect, 'default') AS interconnect, r.ranks, r.nodes,
       s.name AS system, st.name AS stack, st.library AS mpi_library,
       r.global_size, r.local_size, r.iterations, r.wall_time,
       r.mpi_time_avg, r.mpi_time_max, r.mpi_fraction_avg, r.mpi_fraction_slowest,
       c.id AS campaign_id, c.git_commit, c.ci_pipeline, r.profile_kind, r.caliper_version,
       r.experiment, r.compiler, r.spack_hash, h.cpu_model, h.cores_per_node,
       h.interconnect AS system_interconnect, c.kind AS campaign_kind
FROM runs r
JOIN campaigns c ON c.id = r.campaign_id
LEFT JOIN systems s ON s.id = r.system_id
LEFT JOIN stacks st ON st.id = r.stack_id
LEFT JOIN hardware_versions h ON h.id = r.hardware_id;

CREATE VIEW v_mpi_fraction AS
SELECT started_at AS "time", system, app, workload, variant, stack, interconnect, ranks,
       mpi_fraction_avg, mpi_fraction_slowest, wall_time, run_id
FROM v_runs
WHERE status = 'ok' AND mpi_fraction_avg IS NOT NULL;

CREATE VIEW v_mpi_routines AS
SELECT m.run_id, n.path AS region, m.function, m.time_total, m.time_max, m.calls, m.bytes
FROM mpi_metrics m JOIN nodes n ON n.id = m.node_id;

CREATE VIEW v_rank_groups AS
SELECT run_id, rank, total_time, user_time, mpi_time, mpi_sync_time FROM rank_metrics;

CREATE VIEW v_comm_matrix AS
SELECT run_id, src, dst, messages, bytes FROM comm_matrix;

CREATE VIEW v_annotations AS
SELECT id, "time", time_end, system, app, workload, variant, stack, interconnect, ranks, text, tags
FROM annotations;

CREATE VIEW v_series AS
SELECT system, app, workload, variant, stack, interconnect, ranks FROM run_series;

CREATE VIEW v_collectives AS
SELECT v.run_id, v.started_at AS "time", v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks,
       c.repeat, c.algorithm, c.collective, c.bytes, c.stat, c.value, c.unit
FROM collective_latency c JOIN v_runs v ON v.run_id = c.run_id
WHERE v.status = 'ok';

-- skew = slowest / average communication; imbalance = slowest / average
-- compute; exposed = slowest-rank communication / total time.
CREATE VIEW v_halo AS
SELECT v.run_id, v.started_at AS "time", v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks,
       h.repeat, h.comm_time_avg, h.comm_time_max, h.compute_time_avg, h.compute_time_max, h.total_time,
       h.comm_time_max / nullif(h.comm_time_avg, 0) AS skew,
       h.compute_time_max / nullif(h.compute_time_avg, 0) AS imbalance,
       h.comm_time_max / nullif(h.total_time, 0) AS exposed_fraction
FROM halo_times h JOIN v_runs v ON v.run_id = h.run_id
WHERE v.status = 'ok';

CREATE VIEW v_io AS
SELECT v.run_id, v.started_at AS "time", v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks,
       b.repeat, b.method, b.group_size, b.write_mbs, b.read_mbs, b.io_time_avg, b.io_time_max
FROM io_bandwidth b JOIN v_runs v ON v.run_id = b.run_id
WHERE v.status = 'ok';

CREATE VIEW v_comm_stats AS
SELECT c.run_id, n.path AS region, c.sends, c.recvs, c.bytes_sent, c.bytes_recv, c.max_message, c.dest_ranks,
       c.src_ranks, c.collectives, c.irecv_gap_min, c.irecv_gap_avg, c.irecv_gap_max
FROM comm_stats c JOIN nodes n ON n.id = c.node_id;

CREATE VIEW v_advice AS
SELECT a.id, a.created_at, a.kind, a.run_id, v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks,
       a.source, a.summary, a.text
FROM advice a LEFT JOIN v_runs v ON v.run_id = a.run_id;

-- ---- views -----------------------------------------------------------------------

CREATE VIEW v_mpi_fraction_daily AS
SELECT d.day AS "time", s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       d.fraction_runs AS runs, d.mpi_fraction_avg_sum, d.slowest_runs, d.mpi_fraction_slowest_sum
FROM runs_daily d JOIN run_series s ON s.id = d.series_id
WHERE d.fraction_runs > 0;

CREATE VIEW v_wall_time_daily AS
SELECT d.day AS "time", s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       nullif(d.global_size, '') AS global_size, d.runs, d.wall_time_sum
FROM wall_time_daily d JOIN run_series s ON s.id = d.series_id;

CREATE VIEW v_rank_groups_daily AS
SELECT d.day AS "time", s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       d.rank_rows, d.user_time_sum, d.mpi_time_sum, d.mpi_sync_time_sum
FROM runs_daily d JOIN run_series s ON s.id = d.series_id
WHERE d.rank_rows > 0;

CREATE VIEW v_comm_matrix_daily AS
SELECT d.day AS "time", s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks, d.last_traced_run
FROM runs_daily d JOIN run_series s ON s.id = d.series_id
WHERE d.last_traced_run IS NOT NULL;

CREATE VIEW v_collectives_daily AS
SELECT d.day AS "time", s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       d.collective, d.algorithm, d.bytes, d.stat, d.n, d.value_sum
FROM collectives_daily d JOIN run_series s ON s.id = d.series_id;

CREATE VIEW v_io_daily AS
SELECT d.day AS "time", s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       nullif(d.method, '') AS method, nullif(d.group_size, 0) AS group_size,
       d.write_n, d.write_mbs_sum, d.read_n, d.read_mbs_sum
FROM io_daily d JOIN run_series s ON s.id = d.series_id;

CREATE VIEW v_hardware_versions AS
SELECT h.id AS hardware_id, s.name AS system, h.cpu_model, h.cores_per_node, h.interconnect, h.hardware, h.first_seen
FROM hardware_versions h JOIN systems s ON s.id = h.system_id;

CREATE VIEW v_run_metrics AS
SELECT r.id AS run_id, r.series_id, r.started_at, r.app, r.ranks, r.nodes, w."window", w.focus_region,
       w.time_s, w.mpi_time_avg_s, w.mpi_time_max_s, w.mpi_fraction_avg, w.mpi_fraction_slowest,
       w.user_time_avg_s, w.mpi_sync_time_avg_s, w.load_balance, w.communication_efficiency,
       w.parallel_efficiency, w.ranks_measured, s.parameters, s.environment, r.status, r.campaign_id,
       r.profile_kind
FROM runs r
JOIN run_windows w ON w.run_id = r.id
LEFT JOIN series s ON s.id = r.series_id;

CREATE VIEW v_experiment_series AS
SELECT s.id AS series_id, s.app, s.parameters, s.environment, count(r.id) AS runs,
       min(r.started_at) AS first_run, max(r.started_at) AS last_run
FROM series s LEFT JOIN runs r ON r.series_id = s.id
GROUP BY s.id;

-- The comparison views outside tools read (notebooks, site scripts) follow the
-- measurement model (docs/measurement-model.md), as the dashboards do: each run
-- on its focus window when it has one, else its run window (the "window"
-- column says which), time the window's slowest rank's, partial and failed
-- runs left out, and runs compared only with runs that differ in exactly the
-- dimension compared. Before, they averaged runs.wall_time, which meant
-- Caliper's whole-run total for profiled runs and the timed loop for
-- unprofiled ones, over runs of any problem size.

-- Each ok run once, on the window it is compared on.
CREATE VIEW v_run_compared AS
SELECT DISTINCT ON (m.run_id) m.*
FROM v_run_metrics m
WHERE m.status = 'ok' AND m.series_id IS NOT NULL
ORDER BY m.run_id, m."window" = 'focus' DESC;

-- Each numeric FOM with its run's selection columns, unit, repeat and Ramble context.
CREATE VIEW v_foms AS
SELECT v.run_id, v.started_at AS "time", v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks,
       v.experiment, v.status, f.name, f.repeat, f.value, f.unit, f.context
FROM foms f JOIN v_runs v ON v.run_id = f.run_id;

-- series_id is the measurement model's series; series_label names it as v_run_metrics_daily does.
CREATE VIEW v_mpi_routines_daily AS
SELECT d.day AS "time", s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       d.function, d.runs, d.time_total, d.calls, d.group_runs, d.model_series_id AS series_id, d.global_size,
       series_label(s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks, d.global_size,
                    d.model_series_id) AS series_label
FROM routines_daily d JOIN run_series s ON s.id = d.series_id;

CREATE VIEW v_halo_daily AS
SELECT d.day AS "time", s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       d.n, d.comm_time_avg_sum, d.comm_time_max_n, d.comm_time_max_sum, d.skew_n, d.skew_sum,
       d.imbalance_n, d.imbalance_sum, d.exposed_fraction_n, d.exposed_fraction_sum,
       d.model_series_id AS series_id, d.global_size,
       series_label(s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks, d.global_size,
                    d.model_series_id) AS series_label
FROM halo_daily d JOIN run_series s ON s.id = d.series_id;

CREATE VIEW v_rank_spread AS
SELECT s.run_id, s."window", n.path AS node, s.quantity, s.ranks, s.min, s.mean, s.max, s.p50, s.p90, s.p99,
       s.hist_lo, s.hist_hi, s.hist_counts, s.top_ranks, s.top_values
FROM rank_spread s LEFT JOIN nodes n ON n.id = s.node_id;

-- Every month's partition of every history table; partition is NULL where retention dropped it.
CREATE VIEW v_history_partitions AS
SELECT m.month, h.table_name, h.per_rank,
       to_regclass(h.table_name || to_char(m.month AT TIME ZONE 'UTC', '"_y"YYYY"m"MM'))::text AS partition,
       m.per_rank_dropped_at
FROM run_months m CROSS JOIN history_tables h;

-- The runs an older measurement model version measured differently (docs/measurement-model.md, "Model
-- versions"), each with the reason; runs of version 3 only where version 4 changes them (one rank and a window
-- without its time, or pio's dir and file parameters), and runs of versions 3 and 4 where version 5 does: an
-- MPI_Comm_dup outside every region of at most one call per rank, which profiles.drop_calipers_own leaves out as
-- Caliper's own. The newest version here must equal ingest.MODEL_VERSION.
CREATE VIEW v_runs_needing_reingest AS
SELECT id AS run_id, source, started_at, model_version,
       CASE WHEN model_version IS NULL
            THEN 'stored before the measurement model: no windows and no series'
            WHEN model_version = 1
            THEN 'measured under model version 1: its wall_time, MPI columns on runs and '
                 'rank_metrics leave out regions named verify and the time outside every region, and MPI calls '
                 'outside every region are missing from mpi_metrics'
            WHEN model_version = 2
            THEN 'measured under model version 2: a profile without a loop region has '
                 'its focus window over the timestep regions instead of the workload''s timed loop, a message '
                 'trace has none, a spot profile''s mean-rank numbers average per-node averages, and a spot profile '
                 'without exclusive time (Caliper before 2.11) subtracts its children''s means'
            WHEN model_version = 3 AND (ranks = 1 AND EXISTS (SELECT 1 FROM run_windows w WHERE w.run_id = r.id
                                                             AND w.time_s IS NULL)
                                        OR EXISTS (SELECT 1 FROM series s WHERE s.id = r.series_id
                                                   AND s.parameters ?| '{param.dir,param.file}'))
            THEN 'measured under model version 3: a one-rank spot profile has no time, '
                 'MPI max, slowest-rank MPI fraction or POP efficiency, which its one rank gives, and pio''s dir '
                 'and file (where a run put its files) are parameters, so each run folder is a series'
            ELSE 'measured under model version ' || model_version || ': Caliper''s own MPI_Comm_dup (its one call '
                 'per rank outside every region, made inside MPI_Finalize while it merges the ranks'' records) '
                 'counts as the application''s MPI time and run time'
       END AS reason
FROM runs r
WHERE model_version IS NULL OR model_version < 3
   OR model_version = 3 AND (
          ranks = 1 AND EXISTS (SELECT 1 FROM run_windows w WHERE w.run_id = r.id AND w.time_s IS NULL)
       OR EXISTS (SELECT 1 FROM series s WHERE s.id = r.series_id AND s.parameters ?| '{param.dir,param.file}'))
   OR model_version IN (3, 4) AND EXISTS (
          SELECT 1 FROM mpi_metrics m JOIN nodes n ON n.id = m.node_id
          WHERE m.run_id = r.id AND n.path = '(outside regions)' AND m.function = 'MPI_Comm_dup'
            AND (m.calls IS NULL OR m.calls <= r.ranks));

-- `shown` asks, per row, whether its series has a focus window that day. The planner hashed that question for the
-- whole table (every focus window of the history, 191k rows at 10 systems) whenever the hash looked cheaper than
-- a probe per row read, and building it took most of the panel's time (about 100 ms, against 7 ms of probes).
-- The added condition on the outer row alone changes no result (where it is false the OR is already true), but
-- a correlated test that is not an equality cannot be hashed: each row read is one probe of the key instead.
CREATE VIEW v_run_metrics_daily AS
SELECT d.*, (d."window" = 'focus' OR NOT EXISTS (
           SELECT 1 FROM run_metrics_daily f
           WHERE f.day = d.day AND f.series_id = d.series_id AND f."window" = 'focus'
             AND d."window" <> 'focus')) AS shown,
       series_label(d.system, d.app, d.workload, d.variant, d.stack, d.interconnect, d.ranks, d.global_size,
                    d.series_id) AS series_label
FROM run_metrics_daily d;

CREATE VIEW v_shown_metrics_daily AS SELECT * FROM shown_metrics_daily;

-- Readers get the running totals through views (the read-only role reads views only).
CREATE VIEW v_routines_cum AS
SELECT key_id, day, runs_cum, time_cum, calls_cum, calls_days_cum FROM routines_cum;

-- The key's series columns and label as v_mpi_routines_daily gives them.
CREATE VIEW v_routines_keys AS
SELECT k.key_id, s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       series_label(s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks, k.global_size,
                    k.model_series_id) AS series_label,
       k.function, k.first_day, k.last_day, k.runs_total, k.time_total, k.calls_total, k.calls_days
FROM routines_keys k JOIN run_series s ON s.id = k.series_id;

-- One SQL statement, STABLE, so the planner inlines it and a panel's WHERE on the series columns and the function
-- reaches the keys before any probe. A range that ends after the key's last night takes the key's totals; one
-- that starts before its first night subtracts nothing (each probe sits behind that test).
DROP FUNCTION IF EXISTS routines_between(timestamptz, timestamptz);
CREATE FUNCTION routines_between(t_from timestamptz, t_to timestamptz)
RETURNS TABLE (system text, app text, workload text, variant text, stack text, interconnect text, ranks integer,
               series_label text, function text, runs bigint, time_total double precision, calls numeric)
LANGUAGE sql STABLE AS $$
SELECT k.system, k.app, k.workload, k.variant, k.stack, k.interconnect, k.ranks, k.series_label, k.function,
       coalesce(e.runs_cum, k.runs_total) - coalesce(b.runs_cum, 0),
       coalesce(e.time_cum, k.time_total) - coalesce(b.time_cum, 0),
       CASE WHEN coalesce(e.calls_days_cum, k.calls_days) > coalesce(b.calls_days_cum, 0)
            THEN coalesce(e.calls_cum, k.calls_total) - coalesce(b.calls_cum, 0) END
FROM v_routines_keys k
LEFT JOIN LATERAL (SELECT c.runs_cum, c.time_cum, c.calls_cum, c.calls_days_cum FROM v_routines_cum c
                   WHERE k.last_day > t_to AND c.key_id = k.key_id AND c.day <= t_to
                   ORDER BY c.day DESC LIMIT 1) e ON true
LEFT JOIN LATERAL (SELECT c.runs_cum, c.time_cum, c.calls_cum, c.calls_days_cum FROM v_routines_cum c
                   WHERE k.first_day <= t_from - interval '1 day' AND c.key_id = k.key_id
                     AND c.day <= t_from - interval '1 day'
                   ORDER BY c.day DESC LIMIT 1) b ON true
WHERE k.last_day > t_from - interval '1 day' AND k.first_day <= t_to
  AND coalesce(e.runs_cum, k.runs_total) > coalesce(b.runs_cum, 0)
$$;

-- Readers get the running totals through views (the read-only role reads views only).
CREATE VIEW v_collectives_series AS
SELECT c.series_id, s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       c.collective, c.algorithm, c.bytes, c.stat, c.first_day, c.last_day, c.n_total, c.value_total
FROM collectives_series c JOIN run_series s ON s.id = c.series_id;

CREATE VIEW v_collectives_series_cum AS
SELECT series_id, day, n_cum, value_cum FROM collectives_series_cum;

-- One SQL statement, STABLE, so the planner inlines it and a panel's WHERE on the series columns reaches the
-- series before any probe, and its WHERE on the key (stat, collective) the unnested keys. A range that ends
-- after the series' last night takes its totals; one that starts before its first night subtracts nothing (each
-- probe sits behind that test). unnest pads arrays shorter than the keys with NULL: no rows then.
DROP FUNCTION IF EXISTS collectives_between(timestamptz, timestamptz);
CREATE FUNCTION collectives_between(t_from timestamptz, t_to timestamptz)
RETURNS TABLE (system text, app text, workload text, variant text, stack text, interconnect text, ranks integer,
               collective text, algorithm text, bytes bigint, stat text, n bigint, value_sum double precision)
LANGUAGE sql STABLE AS $$
SELECT k.system, k.app, k.workload, k.variant, k.stack, k.interconnect, k.ranks,
       u.collective, u.algorithm, u.bytes, u.stat,
       u.n_end - coalesce(u.n_start, 0), u.value_end - coalesce(u.value_start, 0)
FROM v_collectives_series k
LEFT JOIN LATERAL (SELECT c.n_cum, c.value_cum FROM v_collectives_series_cum c
                   WHERE k.last_day > t_to AND c.series_id = k.series_id AND c.day <= t_to
                   ORDER BY c.day DESC LIMIT 1) e ON true
LEFT JOIN LATERAL (SELECT c.n_cum, c.value_cum FROM v_collectives_series_cum c
                   WHERE k.first_day <= t_from - interval '1 day' AND c.series_id = k.series_id
                     AND c.day <= t_from - interval '1 day'
                   ORDER BY c.day DESC LIMIT 1) b ON true
CROSS JOIN LATERAL unnest(k.collective, k.algorithm, k.bytes, k.stat,
                          coalesce(e.n_cum, k.n_total), coalesce(e.value_cum, k.value_total), b.n_cum, b.value_cum)
      AS u(collective, algorithm, bytes, stat, n_end, value_end, n_start, value_start)
WHERE k.last_day > t_from - interval '1 day' AND k.first_day <= t_to
  AND u.n_end > coalesce(u.n_start, 0)
$$;

-- Text FOMs: a FOM that Ramble reports without a number (HPCG's "Status VALID", the workloads' MPI library and
-- VERIFY results) is kept in runs.metadata.ramble_text_foms. v_text_foms shows each as a row with the run's
-- selection columns, as v_foms shows the numeric ones; the report lists both together.
CREATE VIEW v_text_foms AS
SELECT v.run_id, v.started_at AS "time", v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks,
       v.experiment, v.status, t->>'name' AS name, t->>'value' AS text, t->>'unit' AS unit, t->>'context' AS context
FROM runs r
JOIN v_runs v ON v.run_id = r.id
CROSS JOIN LATERAL jsonb_array_elements(r.metadata->'ramble_text_foms') AS t
WHERE jsonb_typeof(r.metadata->'ramble_text_foms') = 'array';

-- The series that declare kinds, and the sizes the Scaling panels hold equal for them: strong_size the declared
-- global parameters (NULL when only per-rank ones are declared), weak_size the per-rank ones. commscope's
-- workloads declare nothing here: the panels hold their global_size column.
CREATE VIEW v_scaling_declared AS
SELECT s.id AS series_id,
       scaling_declared(s.parameters, 'per_rank') AS per_rank_parameters,
       scaling_declared(s.parameters, 'global') AS global_parameters,
       CASE WHEN s.parameters ? 'scaling.global' THEN scaling_label(s.parameters, scaling_declared(s.parameters, 'global'))
       END AS strong_size,
       scaling_label(s.parameters, scaling_declared(s.parameters, 'per_rank')) AS weak_size
FROM series s
WHERE s.parameters ?| ARRAY['scaling.per_rank', 'scaling.global'];

-- Scaling, one point per series (one experiment: docs/measurement-model.md) and window: its runs' mean time. A
-- point pairs with the point of its experiment at the smallest rank count (the first series stored among several
-- there), the experiment being the series less its rank count, its node count where known and its declared sizes
-- (scaling_experiment_key, strong_scaling_key): an unknown node count (NULL) stays in it, so series of unknown
-- node count pair only with each other, and no point pools runs of two series.
CREATE VIEW v_scaling AS
WITH per_ranks AS (
    SELECT c.series_id, scaling_experiment_key(c.app, c.parameters, c.environment) AS experiment_key,
           strong_scaling_key(c.app, c.parameters, c.environment) AS scaling_key, c."window", c.app,
           scaling_values(c.parameters, scaling_declared(c.parameters, 'per_rank')) AS per_rank,
           scaling_values(c.parameters, scaling_declared(c.parameters, 'global')) AS global,
           min(r.variant) AS variant, min(r.global_size) AS global_size, c.environment, c.ranks, c.nodes,
           avg(c.time_s) AS time_s, count(*) AS samples
    FROM v_run_compared c JOIN runs r ON r.id = c.run_id
    WHERE c.time_s > 0
    GROUP BY c.series_id, 2, 3, c."window", c.app, 6, 7, c.environment, c.ranks, c.nodes
), weak_base AS (
    SELECT DISTINCT ON (experiment_key, "window", per_rank) experiment_key, "window", per_rank,
           ranks AS base_ranks, time_s AS base_time
    FROM per_ranks WHERE per_rank <> '{}' ORDER BY experiment_key, "window", per_rank, ranks, series_id
), strong_base AS (
    SELECT DISTINCT ON (experiment_key, "window", global) experiment_key, "window", global, per_rank AS base_per_rank,
           ranks AS base_ranks, time_s AS base_time
    FROM per_ranks WHERE global <> '{}' ORDER BY experiment_key, "window", global, ranks, series_id
), unknown_base AS (
    SELECT DISTINCT ON (scaling_key, "window") scaling_key, "window", ranks AS base_ranks
    FROM per_ranks WHERE per_rank = '{}' AND global = '{}' ORDER BY scaling_key, "window", ranks, series_id
), pairs AS (
    SELECT 'weak' AS kind, p.*, b.base_ranks, NULL::double precision AS speedup, b.base_time / p.time_s AS efficiency
    FROM per_ranks p JOIN weak_base b USING (experiment_key, "window", per_rank)
    UNION ALL
    SELECT 'strong', p.*, b.base_ranks, b.base_time / p.time_s,
           (b.base_time / p.time_s) / (p.ranks::double precision / b.base_ranks)
    FROM per_ranks p JOIN strong_base b USING (experiment_key, "window", global)
    WHERE p.per_rank = '{}' OR p.per_rank <> b.base_per_rank OR p.ranks = b.base_ranks
    UNION ALL
    SELECT NULL, p.*, b.base_ranks, NULL, NULL
    FROM per_ranks p JOIN unknown_base b USING (scaling_key, "window")
    WHERE p.per_rank = '{}' AND p.global = '{}'
)
SELECT kind, scaling_key, "window", app, variant, global_size, per_rank AS per_rank_parameters,
       global AS global_parameters, environment, ranks, time_s, samples, base_ranks, speedup, efficiency,
       series_id, nodes
FROM pairs;

CREATE VIEW v_node_metrics AS
SELECT nm.run_id, n.path, n.name, n.depth, n.is_mpi, nm.excl_min, nm.excl_avg, nm.excl_max,
       nm.incl_min, nm.incl_avg, nm.incl_max, nm.calls, nm.imbalance, nm.incl_max_rank,
       nm.excl_slowest, nm.incl_slowest, nm.slowest_rank
FROM node_metrics nm JOIN nodes n ON n.id = nm.node_id;

CREATE VIEW v_noisy_series AS
SELECT g.series_id, g.metric, g."window", g.campaign_id, g.run_id, g."time", g.verdict, g.detectable,
       g.max_undetectable, g.runs_a_night, g.n_new, g.n_baseline, g.reason, g.checked_at,
       coalesce(s.name, 'unknown') AS system, r.app, r.workload, coalesce(r.variant, '') AS variant,
       coalesce(st.name, 'unknown') AS stack, coalesce(r.interconnect, 'default') AS interconnect, r.ranks,
       r.global_size,
       series_label(coalesce(s.name, 'unknown'), r.app, r.workload, r.variant, coalesce(st.name, 'unknown'),
                    coalesce(r.interconnect, 'default'), r.ranks, r.global_size, g.series_id) AS series_label
FROM gate_detectable g
JOIN runs r ON r.id = g.run_id
LEFT JOIN systems s ON s.id = r.system_id
LEFT JOIN stacks st ON st.id = r.stack_id
WHERE g.detectable IS NULL OR g.detectable > g.max_undetectable;

-- The call-tree dashboard's series, campaign and baseline variables offer every series and campaign (a link from
-- the regression gate names them, whatever the time range). Read from the series and campaigns tables, one row
-- each, not by grouping every run (which grows with the history: about 12 ms at 50,000 runs).
CREATE VIEW v_series_ids AS SELECT id AS series_id FROM series;

CREATE VIEW v_campaign_ids AS SELECT id AS campaign_id, created_at, kind FROM campaigns;

CREATE VIEW v_run_versions AS
SELECT r.id AS run_id, r.series_id, r.campaign_id, r.started_at, r.status, st.library AS mpi_library, r.compiler,
       r.spack_hash, r.caliper_version, r.metadata->>'commscope_version' AS commscope_version,
       h.digest AS hardware, r.kernel
FROM runs r
LEFT JOIN stacks st ON st.id = r.stack_id
LEFT JOIN hardware_versions h ON h.id = r.hardware_id;

CREATE VIEW v_version_changes AS
WITH recorded AS (
    SELECT v.run_id, v.series_id, v.campaign_id, v.started_at, a.what, a.value
    FROM v_run_versions v
    CROSS JOIN LATERAL (VALUES ('MPI library', v.mpi_library), ('compiler', v.compiler),
                               ('Spack spec hash', v.spack_hash), ('Caliper version', v.caliper_version),
                               ('commscope version', v.commscope_version), ('hardware', v.hardware),
                               ('kernel', v.kernel)) AS a(what, value)
    WHERE v.status = 'ok' AND v.series_id IS NOT NULL AND a.value IS NOT NULL
), ordered AS (
    SELECT *, lag(value) OVER (PARTITION BY series_id, what ORDER BY started_at, run_id) AS previous
    FROM recorded
)
SELECT o.series_id, o.what, o.previous, o.value, o.run_id, o.campaign_id, o.started_at AS "time",
       v.system, v.app, v.workload, coalesce(v.variant, '') AS variant, v.stack, v.interconnect, v.ranks,
       v.global_size,
       series_label(v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks, v.global_size,
                    o.series_id) AS series_label
FROM ordered o JOIN v_runs v ON v.run_id = o.run_id
WHERE o.previous IS DISTINCT FROM o.value AND o.previous IS NOT NULL;

-- Each change point names the versions that changed between the last run before it and its first run.
CREATE VIEW v_change_points AS
SELECT cp.series_id, cp.metric, cp."window", cp.run_id, cp.campaign_id, cp."time", cp.previous_time,
       cp.n_before, cp.n_after, cp.mean_before, cp.mean_after, cp.stddev_before, cp.stddev_after, cp.change,
       cp.direction, cp.p_value, cp.method, cp.detected_at, cp.detected_campaign, cp.verdict,
       coalesce(s.name, 'unknown') AS system, r.app, r.workload, coalesce(r.variant, '') AS variant,
       coalesce(st.name, 'unknown') AS stack, coalesce(r.interconnect, 'default') AS interconnect, r.ranks,
       r.global_size,
       series_label(coalesce(s.name, 'unknown'), r.app, r.workload, r.variant, coalesce(st.name, 'unknown'),
                    coalesce(r.interconnect, 'default'), r.ranks, r.global_size, cp.series_id) AS series_label,
       (SELECT string_agg(vc.what || ' ' || vc.previous || ' -> ' || vc.value || ' (campaign ' || vc.campaign_id
                          || ')', '; ' ORDER BY vc."time", vc.what)
        FROM v_version_changes vc
        WHERE vc.series_id = cp.series_id AND vc."time" <= cp."time"
          AND vc."time" > coalesce(cp.previous_time, '-infinity')) AS versions_changed
FROM change_points cp
JOIN runs r ON r.id = cp.run_id
LEFT JOIN systems s ON s.id = r.system_id
LEFT JOIN stacks st ON st.id = r.stack_id;

-- Stacks and systems compared on each series' newest version only (the MPI library string of its newest ok run),
-- naming the versions compared.
CREATE VIEW v_run_compared_newest AS
SELECT c.*, v.mpi_library
FROM v_run_compared c
JOIN v_run_versions v ON v.run_id = c.run_id
WHERE v.mpi_library IS NOT DISTINCT FROM (
    SELECT n.mpi_library FROM v_run_versions n WHERE n.series_id = c.series_id AND n.status = 'ok'
    ORDER BY n.started_at DESC, n.run_id DESC LIMIT 1);

CREATE VIEW v_stack_comparison AS
SELECT c.app, c.parameters, environment_but_stack(c.environment) AS environment_but_stack,
       c."window", c.environment->>'stack' AS stack, c.mpi_library,
       avg(c.time_s) AS time_s, min(c.time_s) AS time_min, max(c.time_s) AS time_max,
       avg(c.mpi_fraction_avg) AS mpi_fraction_avg, count(*) AS samples,
       count(*) OVER (PARTITION BY c.app, c.parameters, environment_but_stack(c.environment),
                      c."window") AS stacks_compared
FROM v_run_compared_newest c
GROUP BY c.app, c.parameters, environment_but_stack(c.environment), c."window",
         c.environment->>'stack', c.mpi_library;

CREATE VIEW v_system_comparison AS
SELECT c.app, c.parameters, c.environment - ARRAY['system', 'caliper'] AS environment_but_system, c."window",
       c.environment->>'system' AS system, c.mpi_library, h.cpu_model, h.cores_per_node,
       h.interconnect AS system_interconnect,
       avg(c.time_s) AS time_s, min(c.time_s) AS time_min, max(c.time_s) AS time_max,
       avg(c.mpi_fraction_avg) AS mpi_fraction_avg, count(*) AS samples,
       count(*) OVER (PARTITION BY c.app, c.parameters, c.environment - ARRAY['system', 'caliper'], c."window")
         AS systems_compared
FROM v_run_compared_newest c
JOIN runs r ON r.id = c.run_id
LEFT JOIN hardware_versions h ON h.id = r.hardware_id
GROUP BY c.app, c.parameters, c.environment - ARRAY['system', 'caliper'], c."window", c.environment->>'system',
         c.mpi_library, h.cpu_model, h.cores_per_node, h.interconnect;

CREATE VIEW v_accepted_levels AS
SELECT series_id, campaign_id, reason, accepted_by, accepted_at FROM accepted_levels;

-- What the procurement panels read: "time" is the day's start; mpi_version the library's version as it is shown.
CREATE VIEW v_comparison_daily AS
SELECT day AS "time", series_id, system, stack, interconnect, app, ranks, parameters, "window",
       runs, time_sum, time_min, time_max, mpi_library, mpi_version_label(mpi_library) AS mpi_version, last_run
FROM comparison_daily;

-- The one rollup that stores a label (shown_metrics_daily, for its panels' index-only reads) takes it as
-- v_run_metrics_daily spells it now.
UPDATE shown_metrics_daily s SET series_label = d.series_label
FROM v_run_metrics_daily d
WHERE d.day = s.day AND d.series_id = s.series_id AND d."window" = s."window" AND d.shown
  AND s.series_label IS DISTINCT FROM d.series_label;
