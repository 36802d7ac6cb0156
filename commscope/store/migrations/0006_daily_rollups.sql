-- Daily rollups for the dashboards: per series and UTC day, the counts and sums
-- the panels average, kept by statement-level triggers as runs and their rows
-- arrive, so a panel over 30 nights reads one small row per series and night
-- (and per routine, collective size, I/O method) instead of joining every run
-- to its FOMs, routines and ranks. dashboards/bench/panel_queries.py measures it.
--
-- One rule keeps them right: when rows arrive for a run, or runs are deleted,
-- every (series, day) group they touch is recomputed from the base tables
-- (the *_rebuild functions below). Nothing is added incrementally, so a rollup
-- row is always exactly what the on-the-fly aggregate of its group gives
-- (panels.ON_THE_FLY_VIEWS, which the tests compare against). A run's rows are
-- written with it by the loader; deleting a run (or its campaign) is followed.
--
-- Every rollup's key starts with the day: a panel reads a range of days, then
-- keeps the selected series (a hash join on run_series).
--
-- Readers use the v_*_daily views: "time" is the day's start (UTC), then the
-- series keys, then counts and sums. A panel averages as sum(..._sum) / sum(count).

-- Series get a small id, so rollup rows carry 4 bytes of key instead of seven texts.
ALTER TABLE run_series ADD COLUMN id integer GENERATED ALWAYS AS IDENTITY;
ALTER TABLE run_series ADD CONSTRAINT run_series_id UNIQUE (id);

-- The series and UTC day of every run. No foreign key: the runs delete trigger
-- reads it to find the groups to recompute, then removes the rows.
CREATE TABLE run_day (
    run_id        bigint PRIMARY KEY,
    series_id     integer NOT NULL,
    day           timestamptz NOT NULL
);
CREATE INDEX run_day_group ON run_day (series_id, day);

-- Per series and day: the runs' MPI time fraction (v_mpi_fraction's rows: ok
-- runs with a fraction), the USER/MPI/MPI_SYNC split over rank rows, and the
-- newest run with a communication matrix.
CREATE TABLE runs_daily (
    series_id     integer NOT NULL,
    day           timestamptz NOT NULL,
    fraction_runs integer NOT NULL,
    mpi_fraction_avg_sum double precision,
    slowest_runs  integer NOT NULL,
    mpi_fraction_slowest_sum double precision,
    rank_rows     integer NOT NULL,
    user_time_sum double precision,
    mpi_time_sum  double precision,
    mpi_sync_time_sum double precision,
    last_traced_run bigint,
    PRIMARY KEY (day, series_id)
);

-- Per series, day and global size: wall time of ok runs (wall_time > 0), for the
-- scaling and procurement panels.
CREATE TABLE wall_time_daily (
    series_id     integer NOT NULL,
    day           timestamptz NOT NULL,
    global_size   text NOT NULL,             -- '' when unknown
    runs          integer NOT NULL,
    wall_time_sum double precision NOT NULL,
    PRIMARY KEY (day, series_id, global_size)
);

-- Per series, day and MPI function (over every region it was called in).
CREATE TABLE routines_daily (
    series_id     integer NOT NULL,
    day           timestamptz NOT NULL,
    function      text NOT NULL,
    runs          integer NOT NULL,          -- ok runs that called it
    time_total    double precision NOT NULL,
    calls         numeric,
    group_runs    integer NOT NULL,          -- ok runs of the series and day with any MPI routine row
    PRIMARY KEY (day, series_id, function)
);

-- Per series, day, collective, algorithm, message size and statistic (collective_latency).
CREATE TABLE collectives_daily (
    series_id     integer NOT NULL,
    day           timestamptz NOT NULL,
    collective    text NOT NULL,
    algorithm     text NOT NULL,
    bytes         bigint NOT NULL,
    stat          text NOT NULL,
    n             integer NOT NULL,
    value_sum     double precision NOT NULL,
    PRIMARY KEY (day, series_id, collective, algorithm, bytes, stat)
);

-- Per series and day (halo_times). Each ratio is summed per row, as v_halo shows it.
CREATE TABLE halo_daily (
    series_id     integer NOT NULL,
    day           timestamptz NOT NULL,
    n             integer NOT NULL,
    comm_time_avg_sum double precision NOT NULL,
    comm_time_max_n integer NOT NULL,
    comm_time_max_sum double precision,
    skew_n        integer NOT NULL,
    skew_sum      double precision,
    imbalance_n   integer NOT NULL,
    imbalance_sum double precision,
    exposed_fraction_n integer NOT NULL,
    exposed_fraction_sum double precision,
    PRIMARY KEY (day, series_id)
);

-- Per series, day, I/O method and group size (io_bandwidth).
CREATE TABLE io_daily (
    series_id     integer NOT NULL,
    day           timestamptz NOT NULL,
    method        text NOT NULL,             -- '' when unknown
    group_size    integer NOT NULL,          -- 0 when not two-phase
    write_n       integer NOT NULL,
    write_mbs_sum double precision,
    read_n        integer NOT NULL,
    read_mbs_sum  double precision,
    PRIMARY KEY (day, series_id, method, group_size)
);

-- ---- recomputing groups ----------------------------------------------------
-- Each takes the groups as two parallel arrays (series ids, days), deletes their
-- rows and inserts what the base tables give now, in day order (as nightly
-- ingests append them), so a panel's range of days is a contiguous stretch of
-- the table even after a bulk rebuild.

CREATE FUNCTION runs_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM runs_daily d USING unnest(sids, days) g(series_id, day) WHERE d.series_id = g.series_id AND d.day = g.day;
INSERT INTO runs_daily
SELECT rd.series_id, rd.day,
       count(*) FILTER (WHERE r.status = 'ok' AND r.mpi_fraction_avg IS NOT NULL),
       sum(r.mpi_fraction_avg) FILTER (WHERE r.status = 'ok'),
       count(r.mpi_fraction_slowest) FILTER (WHERE r.status = 'ok' AND r.mpi_fraction_avg IS NOT NULL),
       sum(r.mpi_fraction_slowest) FILTER (WHERE r.status = 'ok' AND r.mpi_fraction_avg IS NOT NULL),
       coalesce(sum(g.rank_rows) FILTER (WHERE r.status = 'ok'), 0),
       sum(g.user_time) FILTER (WHERE r.status = 'ok'), sum(g.mpi_time) FILTER (WHERE r.status = 'ok'),
       sum(g.mpi_sync_time) FILTER (WHERE r.status = 'ok'),
       max(r.id) FILTER (WHERE EXISTS (SELECT 1 FROM comm_matrix c WHERE c.run_id = r.id))
FROM unnest(sids, days) k(series_id, day)
JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
JOIN runs r ON r.id = rd.run_id
LEFT JOIN LATERAL (SELECT count(*) AS rank_rows, sum(user_time) AS user_time, sum(mpi_time) AS mpi_time,
                          sum(mpi_sync_time) AS mpi_sync_time
                   FROM rank_metrics WHERE run_id = r.id) g ON true
GROUP BY rd.series_id, rd.day
ORDER BY rd.day, rd.series_id;
$$;

CREATE FUNCTION wall_time_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM wall_time_daily d USING unnest(sids, days) g(series_id, day) WHERE d.series_id = g.series_id AND d.day = g.day;
INSERT INTO wall_time_daily
SELECT rd.series_id, rd.day, coalesce(r.global_size, ''), count(*), sum(r.wall_time)
FROM unnest(sids, days) k(series_id, day)
JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
JOIN runs r ON r.id = rd.run_id AND r.status = 'ok' AND r.wall_time > 0
GROUP BY rd.series_id, rd.day, coalesce(r.global_size, '')
ORDER BY rd.day, rd.series_id;
$$;

CREATE FUNCTION routines_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM routines_daily d USING unnest(sids, days) g(series_id, day) WHERE d.series_id = g.series_id AND d.day = g.day;
WITH m AS (
    SELECT rd.series_id, rd.day, m.run_id, m.function, m.time_total, m.calls
    FROM unnest(sids, days) k(series_id, day)
    JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
    JOIN runs r ON r.id = rd.run_id AND r.status = 'ok'
    JOIN mpi_metrics m ON m.run_id = r.id
), g AS (
    SELECT series_id, day, count(DISTINCT run_id) AS group_runs FROM m GROUP BY series_id, day
)
INSERT INTO routines_daily
SELECT m.series_id, m.day, m.function, count(DISTINCT m.run_id), sum(m.time_total), sum(m.calls), g.group_runs
FROM m JOIN g USING (series_id, day)
GROUP BY m.series_id, m.day, m.function, g.group_runs
ORDER BY m.day, m.series_id;
$$;

CREATE FUNCTION collectives_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM collectives_daily d USING unnest(sids, days) g(series_id, day) WHERE d.series_id = g.series_id AND d.day = g.day;
INSERT INTO collectives_daily
SELECT rd.series_id, rd.day, c.collective, c.algorithm, c.bytes, c.stat, count(*), sum(c.value)
FROM unnest(sids, days) k(series_id, day)
JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
JOIN runs r ON r.id = rd.run_id AND r.status = 'ok'
JOIN collective_latency c ON c.run_id = r.id
GROUP BY rd.series_id, rd.day, c.collective, c.algorithm, c.bytes, c.stat
ORDER BY rd.day, rd.series_id;
$$;

CREATE FUNCTION halo_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM halo_daily d USING unnest(sids, days) g(series_id, day) WHERE d.series_id = g.series_id AND d.day = g.day;
INSERT INTO halo_daily
SELECT rd.series_id, rd.day, count(*), sum(h.comm_time_avg),
       count(h.comm_time_max), sum(h.comm_time_max),
       count(x.skew), sum(x.skew), count(x.imbalance), sum(x.imbalance), count(x.exposed), sum(x.exposed)
FROM unnest(sids, days) k(series_id, day)
JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
JOIN runs r ON r.id = rd.run_id AND r.status = 'ok'
JOIN halo_times h ON h.run_id = r.id
CROSS JOIN LATERAL (SELECT h.comm_time_max / nullif(h.comm_time_avg, 0) AS skew,
                           h.compute_time_max / nullif(h.compute_time_avg, 0) AS imbalance,
                           h.comm_time_max / nullif(h.total_time, 0) AS exposed) x
GROUP BY rd.series_id, rd.day
ORDER BY rd.day, rd.series_id;
$$;

CREATE FUNCTION io_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM io_daily d USING unnest(sids, days) g(series_id, day) WHERE d.series_id = g.series_id AND d.day = g.day;
INSERT INTO io_daily
SELECT rd.series_id, rd.day, coalesce(b.method, ''), coalesce(b.group_size, 0),
       count(b.write_mbs), sum(b.write_mbs), count(b.read_mbs), sum(b.read_mbs)
FROM unnest(sids, days) k(series_id, day)
JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
JOIN runs r ON r.id = rd.run_id AND r.status = 'ok'
JOIN io_bandwidth b ON b.run_id = r.id
GROUP BY rd.series_id, rd.day, coalesce(b.method, ''), coalesce(b.group_size, 0)
ORDER BY rd.day, rd.series_id;
$$;

-- ---- triggers ------------------------------------------------------------------

-- Runs arrive: their series (as 0003 did), their group, and the groups' run rows.
CREATE OR REPLACE FUNCTION run_series_add() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sids integer[];
    days timestamptz[];
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

    SELECT array_agg(series_id), array_agg(day) INTO sids, days
    FROM (SELECT DISTINCT rd.series_id, rd.day FROM run_day rd JOIN new_runs n ON n.id = rd.run_id) g;
    IF sids IS NOT NULL THEN
        PERFORM runs_daily_rebuild(sids, days), wall_time_daily_rebuild(sids, days);
    END IF;
    RETURN NULL;
END $$;

-- Rows for existing runs arrive (routines, ranks, matrices, the typed FOM tables):
-- recompute the groups of those runs. TG_ARGV names what to recompute.
CREATE FUNCTION rollups_refresh() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sids integer[];
    days timestamptz[];
    what text;
BEGIN
    SELECT array_agg(series_id), array_agg(day) INTO sids, days
    FROM (SELECT DISTINCT rd.series_id, rd.day FROM run_day rd JOIN (SELECT DISTINCT run_id FROM new_rows) n USING (run_id)) g;
    IF sids IS NULL THEN
        RETURN NULL;
    END IF;
    FOREACH what IN ARRAY TG_ARGV LOOP
        EXECUTE format('SELECT %I($1, $2)', what || '_rebuild') USING sids, days;
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER mpi_metrics_rollups AFTER INSERT ON mpi_metrics REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rollups_refresh('routines_daily');
CREATE TRIGGER rank_metrics_rollups AFTER INSERT ON rank_metrics REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rollups_refresh('runs_daily');
CREATE TRIGGER comm_matrix_rollups AFTER INSERT ON comm_matrix REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rollups_refresh('runs_daily');
CREATE TRIGGER collective_latency_rollups AFTER INSERT ON collective_latency REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rollups_refresh('collectives_daily');
CREATE TRIGGER halo_times_rollups AFTER INSERT ON halo_times REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rollups_refresh('halo_daily');
CREATE TRIGGER io_bandwidth_rollups AFTER INSERT ON io_bandwidth REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rollups_refresh('io_daily');

-- Runs deleted (a campaign removed): their rows went with them (cascade, before
-- this statement trigger runs); recompute their groups from the runs left.
CREATE FUNCTION runs_rollups_remove() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sids integer[];
    days timestamptz[];
BEGIN
    SELECT array_agg(series_id), array_agg(day) INTO sids, days
    FROM (SELECT DISTINCT rd.series_id, rd.day FROM run_day rd JOIN old_runs o ON o.id = rd.run_id) g;
    DELETE FROM run_day rd USING old_runs o WHERE rd.run_id = o.id;
    IF sids IS NOT NULL THEN
        PERFORM runs_daily_rebuild(sids, days), wall_time_daily_rebuild(sids, days), routines_daily_rebuild(sids, days),
                collectives_daily_rebuild(sids, days), halo_daily_rebuild(sids, days), io_daily_rebuild(sids, days);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_rollups_remove AFTER DELETE ON runs REFERENCING OLD TABLE AS old_runs
    FOR EACH STATEMENT EXECUTE FUNCTION runs_rollups_remove();

-- TRUNCATE runs (a benchmark's reset) fires no delete trigger: empty them all.
CREATE FUNCTION runs_rollups_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE run_day, runs_daily, wall_time_daily, routines_daily, collectives_daily, halo_daily, io_daily;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_rollups_clear AFTER TRUNCATE ON runs FOR EACH STATEMENT EXECUTE FUNCTION runs_rollups_clear();

-- The runs stored before this migration.
INSERT INTO run_day (run_id, series_id, day)
SELECT r.id, rs.id, date_trunc('day', r.started_at, 'UTC')
FROM runs r
LEFT JOIN systems s ON s.id = r.system_id
LEFT JOIN stacks st ON st.id = r.stack_id
JOIN run_series rs ON (rs.system, rs.app, rs.workload, rs.variant, rs.stack, rs.interconnect, rs.ranks)
   = (coalesce(s.name, 'unknown'), r.app, r.workload, coalesce(r.variant, ''), coalesce(st.name, 'unknown'),
      coalesce(r.interconnect, 'default'), r.ranks);

SELECT runs_daily_rebuild(sids, days), wall_time_daily_rebuild(sids, days), routines_daily_rebuild(sids, days),
       collectives_daily_rebuild(sids, days), halo_daily_rebuild(sids, days), io_daily_rebuild(sids, days)
FROM (SELECT array_agg(series_id) AS sids, array_agg(day) AS days
      FROM (SELECT DISTINCT series_id, day FROM run_day) g) a
WHERE sids IS NOT NULL;
