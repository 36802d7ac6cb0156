-- Ingest as fast on the ten-thousandth run of a series and day as on the first.
--
-- 0006 recomputed every (series, day) group a statement touched from the base
-- tables: right, but each batch of runs then rescanned its whole group, so
-- ingest slowed as a group filled (8 batches of 250 runs of one series went in
-- at 111 down to 30 runs/s). Arriving rows now ADD their own counts and sums to
-- the groups they touch, which costs what the batch costs, whatever the group
-- holds. Counts and sums are additive, "the newest traced run" is a max, and a
-- run's rows of each table arrive in one statement (the loader COPYs a batch's
-- runs, then each table once), so a run is never counted twice. The rollups
-- still equal the on-the-fly aggregates (panels.ON_THE_FLY_VIEWS; the tests
-- compare them up to floating-point summation order).
--
-- Deleting runs and updating them still recompute their groups in full
-- (0006's *_rebuild functions), so nothing can leave a rollup stale.
--
-- halo_daily, io_daily and collectives_daily keep 0006's recompute: they hold
-- one row per run and night of a few workloads, never thousands per group.

-- NULL + x = x for sums that are NULL while nothing was summed.
CREATE FUNCTION rollup_sum(a double precision, b double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE a + b END $$;
CREATE FUNCTION rollup_sum(a numeric, b numeric) RETURNS numeric
LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN a IS NULL THEN b WHEN b IS NULL THEN a ELSE a + b END $$;

-- New runs: their series and day (as 0006), then their fractions and wall
-- times added to their groups. Their rank rows and matrices come later, in
-- their own statements.
CREATE OR REPLACE FUNCTION run_series_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_series (system, app, workload, variant, stack, interconnect, ranks)
    SELECT DISTINCT coalesce(s.name, 'unknown'), n.app, n.workload, coalesce(n.variant, ''),
           coalesce(st.name, 'unknown'), coalesce(n.interconnect, 'default'), n.ranks
    FROM new_runs n
    LEFT JOIN systems s ON s.id = n.system_id
    LEFT JOIN stacks st ON st.id = n.stack_id
    ON CONFLICT DO NOTHING;

    INSERT INTO run_day (run_id, series_id, day)
    SELECT n.id, rs.id, date_trunc('day', n.started_at, 'UTC')
    FROM new_runs n
    LEFT JOIN systems s ON s.id = n.system_id
    LEFT JOIN stacks st ON st.id = n.stack_id
    JOIN run_series rs ON (rs.system, rs.app, rs.workload, rs.variant, rs.stack, rs.interconnect, rs.ranks)
       = (coalesce(s.name, 'unknown'), n.app, n.workload, coalesce(n.variant, ''), coalesce(st.name, 'unknown'),
          coalesce(n.interconnect, 'default'), n.ranks);

    INSERT INTO runs_daily AS d
    SELECT rd.series_id, rd.day,
           count(*) FILTER (WHERE r.status = 'ok' AND r.mpi_fraction_avg IS NOT NULL),
           sum(r.mpi_fraction_avg) FILTER (WHERE r.status = 'ok'),
           count(r.mpi_fraction_slowest) FILTER (WHERE r.status = 'ok' AND r.mpi_fraction_avg IS NOT NULL),
           sum(r.mpi_fraction_slowest) FILTER (WHERE r.status = 'ok' AND r.mpi_fraction_avg IS NOT NULL),
           0, NULL, NULL, NULL, NULL
    FROM new_runs r JOIN run_day rd ON rd.run_id = r.id
    GROUP BY rd.series_id, rd.day
    ORDER BY rd.day, rd.series_id
    ON CONFLICT (day, series_id) DO UPDATE SET
        fraction_runs = d.fraction_runs + excluded.fraction_runs,
        mpi_fraction_avg_sum = rollup_sum(d.mpi_fraction_avg_sum, excluded.mpi_fraction_avg_sum),
        slowest_runs = d.slowest_runs + excluded.slowest_runs,
        mpi_fraction_slowest_sum = rollup_sum(d.mpi_fraction_slowest_sum, excluded.mpi_fraction_slowest_sum);

    INSERT INTO wall_time_daily AS d
    SELECT rd.series_id, rd.day, coalesce(r.global_size, ''), count(*), sum(r.wall_time)
    FROM new_runs r JOIN run_day rd ON rd.run_id = r.id
    WHERE r.status = 'ok' AND r.wall_time > 0
    GROUP BY rd.series_id, rd.day, coalesce(r.global_size, '')
    ORDER BY rd.day, rd.series_id
    ON CONFLICT (day, series_id, global_size) DO UPDATE SET
        runs = d.runs + excluded.runs, wall_time_sum = d.wall_time_sum + excluded.wall_time_sum;
    RETURN NULL;
END $$;

-- Rank rows of ok runs: the USER/MPI/MPI_SYNC sums.
CREATE FUNCTION runs_daily_add_ranks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs_daily d
    SET rank_rows = d.rank_rows + g.rank_rows,
        user_time_sum = rollup_sum(d.user_time_sum, g.user_time),
        mpi_time_sum = rollup_sum(d.mpi_time_sum, g.mpi_time),
        mpi_sync_time_sum = rollup_sum(d.mpi_sync_time_sum, g.mpi_sync_time)
    FROM (SELECT rd.series_id, rd.day, count(*) AS rank_rows, sum(n.user_time) AS user_time,
                 sum(n.mpi_time) AS mpi_time, sum(n.mpi_sync_time) AS mpi_sync_time
          FROM new_rows n JOIN runs r ON r.id = n.run_id AND r.status = 'ok'
          JOIN run_day rd ON rd.run_id = n.run_id
          GROUP BY rd.series_id, rd.day) g
    WHERE d.series_id = g.series_id AND d.day = g.day;
    RETURN NULL;
END $$;

-- Matrix rows: the newest run with a matrix is the largest run id that has one.
CREATE FUNCTION runs_daily_add_traced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs_daily d SET last_traced_run = greatest(d.last_traced_run, g.run_id)
    FROM (SELECT rd.series_id, rd.day, max(n.run_id) AS run_id
          FROM new_rows n JOIN run_day rd ON rd.run_id = n.run_id
          GROUP BY rd.series_id, rd.day) g
    WHERE d.series_id = g.series_id AND d.day = g.day;
    RETURN NULL;
END $$;

-- MPI routine rows of ok runs: each function's runs, time and calls, and every
-- row of the group counts the group's new runs with any routine.
CREATE FUNCTION routines_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE routines_daily d SET group_runs = d.group_runs + g.runs
    FROM (SELECT rd.series_id, rd.day, count(DISTINCT n.run_id) AS runs
          FROM new_rows n JOIN runs r ON r.id = n.run_id AND r.status = 'ok' JOIN run_day rd ON rd.run_id = n.run_id
          GROUP BY 1, 2) g
    WHERE d.series_id = g.series_id AND d.day = g.day;

    WITH m AS (
        SELECT rd.series_id, rd.day, n.run_id, n.function, n.time_total, n.calls
        FROM new_rows n JOIN runs r ON r.id = n.run_id AND r.status = 'ok' JOIN run_day rd ON rd.run_id = n.run_id
    ), g AS (
        SELECT series_id, day, count(DISTINCT run_id) AS runs FROM m GROUP BY 1, 2
    )
    INSERT INTO routines_daily AS d
    SELECT m.series_id, m.day, m.function, count(DISTINCT m.run_id), sum(m.time_total), sum(m.calls),
           -- a function new to the group: the group's total, which the UPDATE above already raised
           coalesce((SELECT max(x.group_runs) FROM routines_daily x WHERE x.series_id = m.series_id AND x.day = m.day),
                    g.runs)
    FROM m JOIN g ON g.series_id = m.series_id AND g.day = m.day
    GROUP BY m.series_id, m.day, m.function, g.runs
    ORDER BY m.day, m.series_id
    ON CONFLICT (day, series_id, function) DO UPDATE SET
        runs = d.runs + excluded.runs, time_total = d.time_total + excluded.time_total,
        calls = rollup_sum(d.calls, excluded.calls);
    RETURN NULL;
END $$;

DROP TRIGGER rank_metrics_rollups ON rank_metrics;
CREATE TRIGGER rank_metrics_rollups AFTER INSERT ON rank_metrics REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION runs_daily_add_ranks();
DROP TRIGGER comm_matrix_rollups ON comm_matrix;
CREATE TRIGGER comm_matrix_rollups AFTER INSERT ON comm_matrix REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION runs_daily_add_traced();
DROP TRIGGER mpi_metrics_rollups ON mpi_metrics;
CREATE TRIGGER mpi_metrics_rollups AFTER INSERT ON mpi_metrics REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION routines_daily_add();

-- An UPDATE of runs: the updated runs get their series and day again, and every
-- group they left or joined is recomputed from the base tables.
CREATE FUNCTION runs_rollups_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sids integer[];
    days timestamptz[];
BEGIN
    SELECT array_agg(rd.series_id), array_agg(rd.day) INTO sids, days
    FROM run_day rd JOIN old_runs o ON o.id = rd.run_id;
    DELETE FROM run_day rd USING old_runs o WHERE rd.run_id = o.id;

    INSERT INTO run_series (system, app, workload, variant, stack, interconnect, ranks)
    SELECT DISTINCT coalesce(s.name, 'unknown'), n.app, n.workload, coalesce(n.variant, ''),
           coalesce(st.name, 'unknown'), coalesce(n.interconnect, 'default'), n.ranks
    FROM new_runs n LEFT JOIN systems s ON s.id = n.system_id LEFT JOIN stacks st ON st.id = n.stack_id
    ON CONFLICT DO NOTHING;
    INSERT INTO run_day (run_id, series_id, day)
    SELECT n.id, rs.id, date_trunc('day', n.started_at, 'UTC')
    FROM new_runs n
    LEFT JOIN systems s ON s.id = n.system_id
    LEFT JOIN stacks st ON st.id = n.stack_id
    JOIN run_series rs ON (rs.system, rs.app, rs.workload, rs.variant, rs.stack, rs.interconnect, rs.ranks)
       = (coalesce(s.name, 'unknown'), n.app, n.workload, coalesce(n.variant, ''), coalesce(st.name, 'unknown'),
          coalesce(n.interconnect, 'default'), n.ranks);
    SELECT array_agg(series_id), array_agg(day) INTO sids, days
    FROM (SELECT DISTINCT * FROM (SELECT unnest(sids) AS series_id, unnest(days) AS day
                                  UNION SELECT rd.series_id, rd.day FROM run_day rd JOIN new_runs n ON n.id = rd.run_id) u) g;
    IF sids IS NOT NULL THEN
        PERFORM runs_daily_rebuild(sids, days), wall_time_daily_rebuild(sids, days), routines_daily_rebuild(sids, days),
                collectives_daily_rebuild(sids, days), halo_daily_rebuild(sids, days), io_daily_rebuild(sids, days);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_rollups_update AFTER UPDATE ON runs REFERENCING OLD TABLE AS old_runs NEW TABLE AS new_runs
    FOR EACH STATEMENT EXECUTE FUNCTION runs_rollups_update();

-- The gate and the pipelines select runs by campaign.
CREATE INDEX IF NOT EXISTS runs_campaign ON runs (campaign_id);
