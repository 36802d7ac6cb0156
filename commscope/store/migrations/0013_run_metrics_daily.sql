-- The dashboards read the measurement model (docs/measurement-model.md) at
-- facility scale: v_run_metrics summed per UTC day, series and window.
--
-- One row per (day, series, window) of the runs with status 'ok' (partial and
-- failed runs stay out of every statistic). Each measure has its sum and its
-- count of non-NULL values, because "not measured" is NULL and must not count
-- as 0: a day of a series mean is sum / n, NULL when nothing was measured.
-- The series' descriptive columns (system, app, workload, variant, stack,
-- interconnect, ranks) are the ones the dashboards' template variables filter
-- on (v_series); global_size and the scaling keys let the scaling panels find
-- the same experiment at other rank counts.
--
-- New windows ADD to their group (as 0010's rollups do), so ingest costs what
-- the batch costs; deleting or updating runs recomputes the groups they left
-- or joined from the base tables. v_run_metrics_daily_on_the_fly
-- (panels.ON_THE_FLY_VIEWS) is the same aggregate computed from the base
-- tables; the tests compare the two.

-- The experiment without its rank count: the parameters that change with the
-- rank count by construction (the rank and node counts, and the process grid
-- the workloads derive from them) removed. Strong scaling compares a series
-- with the series of equal strong_scaling_key at other rank counts.
CREATE FUNCTION strong_scaling_key(app text, parameters jsonb, environment jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT md5(jsonb_build_array(app, parameters - ARRAY['ranks', 'nodes', 'n_ranks', 'n_nodes', 'param.process_grid'],
                             environment)::text)
$$;

-- Weak scaling holds the work per rank and lets the global size grow: the
-- global sizes are removed too, and the panel requires equal points per rank.
CREATE FUNCTION weak_scaling_key(app text, parameters jsonb, environment jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT md5(jsonb_build_array(app, parameters - ARRAY['ranks', 'nodes', 'n_ranks', 'n_nodes', 'param.process_grid',
                                                     'param.n', 'param.global', 'global_size'],
                             environment)::text)
$$;

CREATE TABLE run_metrics_daily (
    day           timestamptz NOT NULL,
    series_id     integer NOT NULL REFERENCES series (id),
    "window"      text NOT NULL,
    system        text NOT NULL,
    app           text NOT NULL,
    workload      text,
    variant       text NOT NULL,
    stack         text NOT NULL,
    interconnect  text NOT NULL,
    ranks         integer,
    global_size   text,
    strong_key    text NOT NULL,
    weak_key      text NOT NULL,
    runs          integer NOT NULL,
    time_n        integer NOT NULL, time_sum double precision,
    mpi_time_avg_n integer NOT NULL, mpi_time_avg_sum double precision,
    mpi_fraction_avg_n integer NOT NULL, mpi_fraction_avg_sum double precision,
    mpi_fraction_slowest_n integer NOT NULL, mpi_fraction_slowest_sum double precision,
    user_time_avg_n integer NOT NULL, user_time_avg_sum double precision,
    mpi_sync_time_avg_n integer NOT NULL, mpi_sync_time_avg_sum double precision,
    load_balance_n integer NOT NULL, load_balance_sum double precision,
    communication_efficiency_n integer NOT NULL, communication_efficiency_sum double precision,
    parallel_efficiency_n integer NOT NULL, parallel_efficiency_sum double precision,
    PRIMARY KEY (day, series_id, "window")
);
CREATE INDEX run_metrics_daily_by_app ON run_metrics_daily (app, day);

-- The per-(day, series, window) aggregate of the given runs' windows, with the series' descriptive columns.
CREATE FUNCTION run_metrics_daily_of(run_ids bigint[]) RETURNS SETOF run_metrics_daily
LANGUAGE sql STABLE AS $$
SELECT date_trunc('day', r.started_at, 'UTC'), r.series_id, w."window",
       coalesce(sy.name, 'unknown'), r.app, r.workload, coalesce(r.variant, ''), coalesce(st.name, 'unknown'),
       coalesce(r.interconnect, 'default'), r.ranks, r.global_size,
       strong_scaling_key(s.app, s.parameters, s.environment), weak_scaling_key(s.app, s.parameters, s.environment),
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
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
$$;

-- New windows: their runs' rows added to the groups.
CREATE FUNCTION run_metrics_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_metrics_daily AS d
    SELECT * FROM run_metrics_daily_of((SELECT array_agg(DISTINCT run_id) FROM new_rows))
    ORDER BY 1, 2, 3
    ON CONFLICT (day, series_id, "window") DO UPDATE SET
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

CREATE TRIGGER run_windows_rollups AFTER INSERT ON run_windows REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION run_metrics_daily_add();

-- Groups recomputed in full from the base tables, leaving out the runs being deleted.
CREATE FUNCTION run_metrics_daily_rebuild(sids integer[], days timestamptz[], leaving bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_metrics_daily d
    USING unnest(sids, days) AS g(series_id, day)
    WHERE d.series_id = g.series_id AND d.day = g.day;
    INSERT INTO run_metrics_daily
    SELECT * FROM run_metrics_daily_of((
        SELECT array_agg(r.id) FROM runs r JOIN unnest(sids, days) AS g(series_id, day)
          ON r.series_id = g.series_id AND r.started_at >= g.day AND r.started_at < g.day + interval '24 hours'
        WHERE NOT (r.id = ANY(coalesce(leaving, '{}')))));
END $$;

CREATE FUNCTION run_metrics_daily_runs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sids integer[];
    days timestamptz[];
    leaving bigint[];
BEGIN
    IF TG_OP = 'DELETE' THEN
        SELECT array_agg(id) INTO leaving FROM old_runs;
        SELECT array_agg(series_id), array_agg(day) INTO sids, days
        FROM (SELECT DISTINCT series_id, date_trunc('day', started_at, 'UTC') AS day
              FROM old_runs WHERE series_id IS NOT NULL) g;
    ELSE
        SELECT array_agg(series_id), array_agg(day) INTO sids, days
        FROM (SELECT series_id, date_trunc('day', started_at, 'UTC') AS day FROM old_runs WHERE series_id IS NOT NULL
              UNION
              SELECT series_id, date_trunc('day', started_at, 'UTC') FROM new_runs WHERE series_id IS NOT NULL) g;
    END IF;
    IF sids IS NOT NULL THEN
        PERFORM run_metrics_daily_rebuild(sids, days, leaving);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_metrics_daily_delete AFTER DELETE ON runs REFERENCING OLD TABLE AS old_runs
    FOR EACH STATEMENT EXECUTE FUNCTION run_metrics_daily_runs_changed();
CREATE TRIGGER runs_metrics_daily_update AFTER UPDATE ON runs REFERENCING OLD TABLE AS old_runs NEW TABLE AS new_runs
    FOR EACH STATEMENT EXECUTE FUNCTION run_metrics_daily_runs_changed();

-- What the stores already hold.
INSERT INTO run_metrics_daily
SELECT * FROM run_metrics_daily_of((SELECT array_agg(id) FROM runs WHERE series_id IS NOT NULL));

-- The rollup with its means, and the window each series shows: its focus window where the day has one, else its
-- run window (docs/measurement-model.md: readers use the focus window when a run has one, and say which).
CREATE VIEW v_run_metrics_daily AS
SELECT d.*, (d."window" = 'focus' OR NOT EXISTS (
           SELECT 1 FROM run_metrics_daily f
           WHERE f.day = d.day AND f.series_id = d.series_id AND f."window" = 'focus')) AS shown,
       d.system || ' ' || d.app || coalesce(' ' || nullif(d.variant, ''), '') || ' ' || d.stack || ' ' || d.interconnect
         || ' n' || d.ranks || coalesce(' ' || d.global_size, '') || ' #' || d.series_id AS series_label
FROM run_metrics_daily d;

-- TRUNCATE runs (a benchmark's reset) fires no delete trigger: empty it too.
CREATE FUNCTION run_metrics_daily_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE run_metrics_daily;
    RETURN NULL;
END $$;
CREATE TRIGGER run_metrics_daily_clear AFTER TRUNCATE ON runs FOR EACH STATEMENT EXECUTE FUNCTION run_metrics_daily_clear();
