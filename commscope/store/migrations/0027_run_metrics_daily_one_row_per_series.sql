-- run_metrics_daily (0013) keeps one row per (day, series, window), but grouped the runs by the series'
-- descriptive columns too, as if they could not differ within a series. They can: two experiments of a study
-- with equal parameters under different Ramble variant labels (or workload names) are one series, and an
-- ingest holding both failed ("ON CONFLICT DO UPDATE command cannot affect row a second time"), as did the
-- rebuild after a run was relabelled. Now the group is (day, series, window) alone and each descriptive column
-- is the least value among its runs (min() here, least() when runs are added), NULLs ignored as both do. The
-- on-the-fly aggregate the tests compare with (panels.ON_THE_FLY_VIEWS) does the same.
CREATE OR REPLACE FUNCTION run_metrics_daily_of(run_ids bigint[]) RETURNS SETOF run_metrics_daily
LANGUAGE sql STABLE AS $$
SELECT date_trunc('day', r.started_at, 'UTC'), r.series_id, w."window",
       min(coalesce(sy.name, 'unknown')), min(r.app), min(r.workload), min(coalesce(r.variant, '')),
       min(coalesce(st.name, 'unknown')), min(coalesce(r.interconnect, 'default')), min(r.ranks), min(r.global_size),
       min(strong_scaling_key(s.app, s.parameters, s.environment)),
       min(weak_scaling_key(s.app, s.parameters, s.environment)),
       count(*)::integer,
       count(w.time_s)::integer, sum(w.time_s),
       count(w.mpi_time_avg_s)::integer, sum(w.mpi_time_avg_s),
       count(w.mpi_fraction_avg)::integer, sum(w.mpi_fraction_avg),
       count(w.mpi_fraction_slowest)::integer, sum(w.mpi_fraction_slowest),
       count(w.user_time_avg_s)::integer, sum(w.user_time_avg_s),
       count(w.mpi_sync_time_avg_s)::integer, sum(w.mpi_sync_time_avg_s),
       count(w.load_balance)::integer, sum(w.load_balance),
       count(w.communication_efficiency)::integer, sum(w.communication_efficiency),
       count(w.parallel_efficiency)::integer, sum(w.parallel_efficiency)
FROM runs r
JOIN run_windows w ON w.run_id = r.id
JOIN series s ON s.id = r.series_id
LEFT JOIN systems sy ON sy.id = r.system_id
LEFT JOIN stacks st ON st.id = r.stack_id
WHERE r.id = ANY(run_ids) AND r.status = 'ok'
GROUP BY 1, 2, 3
$$;

CREATE OR REPLACE FUNCTION run_metrics_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_metrics_daily AS d
    SELECT * FROM run_metrics_daily_of((SELECT array_agg(DISTINCT run_id) FROM new_rows))
    ORDER BY 1, 2, 3
    ON CONFLICT (day, series_id, "window") DO UPDATE SET
        system = least(d.system, excluded.system), app = least(d.app, excluded.app),
        workload = least(d.workload, excluded.workload), variant = least(d.variant, excluded.variant),
        stack = least(d.stack, excluded.stack), interconnect = least(d.interconnect, excluded.interconnect),
        ranks = least(d.ranks, excluded.ranks), global_size = least(d.global_size, excluded.global_size),
        strong_key = least(d.strong_key, excluded.strong_key), weak_key = least(d.weak_key, excluded.weak_key),
        runs = d.runs + excluded.runs,
        time_n = d.time_n + excluded.time_n, time_sum = rollup_sum(d.time_sum, excluded.time_sum),
        mpi_time_avg_n = d.mpi_time_avg_n + excluded.mpi_time_avg_n,
        mpi_time_avg_sum = rollup_sum(d.mpi_time_avg_sum, excluded.mpi_time_avg_sum),
        mpi_fraction_avg_n = d.mpi_fraction_avg_n + excluded.mpi_fraction_avg_n,
        mpi_fraction_avg_sum = rollup_sum(d.mpi_fraction_avg_sum, excluded.mpi_fraction_avg_sum),
        mpi_fraction_slowest_n = d.mpi_fraction_slowest_n + excluded.mpi_fraction_slowest_n,
        mpi_fraction_slowest_sum = rollup_sum(d.mpi_fraction_slowest_sum, excluded.mpi_fraction_slowest_sum),
        user_time_avg_n = d.user_time_avg_n + excluded.user_time_avg_n,
        user_time_avg_sum = rollup_sum(d.user_time_avg_sum, excluded.user_time_avg_sum),
        mpi_sync_time_avg_n = d.mpi_sync_time_avg_n + excluded.mpi_sync_time_avg_n,
        mpi_sync_time_avg_sum = rollup_sum(d.mpi_sync_time_avg_sum, excluded.mpi_sync_time_avg_sum),
        load_balance_n = d.load_balance_n + excluded.load_balance_n,
        load_balance_sum = rollup_sum(d.load_balance_sum, excluded.load_balance_sum),
        communication_efficiency_n = d.communication_efficiency_n + excluded.communication_efficiency_n,
        communication_efficiency_sum = rollup_sum(d.communication_efficiency_sum, excluded.communication_efficiency_sum),
        parallel_efficiency_n = d.parallel_efficiency_n + excluded.parallel_efficiency_n,
        parallel_efficiency_sum = rollup_sum(d.parallel_efficiency_sum, excluded.parallel_efficiency_sum);
    RETURN NULL;
END $$;
