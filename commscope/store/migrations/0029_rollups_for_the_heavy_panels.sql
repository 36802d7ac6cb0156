-- Rollups for the panels that were over the target (p95 < 100 ms) with 16 paced dashboard readers beside an
-- ingest at a million runs (dashboards/README.md, 2026-11-26): the heavy panels of one dashboard are sent
-- together and wait for each other on 2 cores, so each must cost little alone. Two of them are here.
--
-- 1. The procurement panels.
-- The procurement panels compare every selected system, so they cannot read one system's rows: before this
-- migration they read v_run_metrics, each run's windows of the 7 days, for every system (16,800 windows of
-- halo3d at 10 systems), and took 190-207 ms p50, 257-260 ms p95 alone at 10 systems (193,200 runs;
-- dashboards/README.md, 2026-11-26). comparison_daily is their rollup: per UTC day, series, application, rank
-- count and window, the runs compared on that window and their time's count, sum, least and greatest. A run is
-- compared on its focus window when that window has a time above 0, else on its run window when that one has
-- (v_run_compared, 0014: the panels' "each run on its focus window, else its whole run"); runs with neither,
-- and runs not 'ok', are in no row. So a 7-day panel reads O(systems x series x days) rows, not runs x windows.
--
-- Every key is the series' or the run's, never a label: system, stack and interconnect are the series
-- environment's (what v_run_metrics.environment says, which the panels filter on), parameters the series'
-- (kept here, so the panels join nothing), app and ranks the run's.
-- A (series, day) group is recomputed from the base tables whenever its runs or their windows change, so a
-- row is always what aggregating its group from scratch gives (panels.ON_THE_FLY_VIEWS has that aggregate;
-- tests/test_dashboards.py checks both against the runs' own windows).
CREATE TABLE comparison_daily (
    day           timestamptz NOT NULL,
    series_id     integer NOT NULL REFERENCES series (id),
    app           text NOT NULL,
    ranks         integer,
    "window"      text NOT NULL,
    system        text,
    stack         text,
    interconnect  text,
    parameters    jsonb NOT NULL,             -- the series' (the experiment the panels pair runs by)
    runs          integer NOT NULL,
    time_sum      double precision NOT NULL,
    time_min      double precision NOT NULL,
    time_max      double precision NOT NULL
);
-- The rebuild deletes by (series, day); the panels read one application's systems, or the reference system and
-- stack, over a range of days: each entry carries what they sum, so they need no heap page (all-visible pages).
CREATE INDEX comparison_daily_groups ON comparison_daily (series_id, day);
CREATE INDEX comparison_daily_by_app ON comparison_daily (app, day)
    INCLUDE (system, stack, interconnect, ranks, series_id, parameters, "window", runs, time_sum, time_min, time_max);
CREATE INDEX comparison_daily_by_system ON comparison_daily (system, stack, day)
    INCLUDE (app, interconnect, ranks, series_id, parameters, "window", runs, time_sum, time_min, time_max);

-- The rows of the given (series, day) groups, from the runs and windows stored now, leaving out `leaving` (runs
-- being deleted). The extra equality on the day lets a bulk rebuild hash on (series, day).
CREATE FUNCTION comparison_daily_rebuild(sids integer[], days timestamptz[], leaving bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM comparison_daily c
    USING (SELECT DISTINCT * FROM unnest(sids, days)) AS g(series_id, day)
    WHERE c.series_id = g.series_id AND c.day = g.day;
    INSERT INTO comparison_daily
    SELECT date_trunc('day', r.started_at, 'UTC'), r.series_id, r.app, r.ranks, w."window",
           s.environment->>'system', s.environment->>'stack', s.environment->>'interconnect', s.parameters,
           count(*)::integer, sum(w.time_s), min(w.time_s), max(w.time_s)
    FROM (SELECT DISTINCT * FROM unnest(sids, days)) AS g(series_id, day)
    JOIN runs r ON r.series_id = g.series_id AND date_trunc('day', r.started_at, 'UTC') = g.day
               AND r.started_at >= g.day AND r.started_at < g.day + interval '24 hours'
    JOIN series s ON s.id = r.series_id
    CROSS JOIN LATERAL (SELECT w."window", w.time_s FROM run_windows w
                        WHERE w.run_id = r.id AND w.time_s > 0
                        ORDER BY w."window" = 'focus' DESC LIMIT 1) w
    WHERE r.status = 'ok' AND NOT (r.id = ANY(coalesce(leaving, '{}')))
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9;
END $$;

-- Windows arrive after their run (the loader writes a run, then its windows): their runs' groups are recomputed.
CREATE FUNCTION comparison_daily_windows_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sids integer[];
    days timestamptz[];
BEGIN
    SELECT array_agg(series_id), array_agg(day) INTO sids, days
    FROM (SELECT DISTINCT r.series_id, date_trunc('day', r.started_at, 'UTC') AS day
          FROM runs r WHERE r.id IN (SELECT run_id FROM new_rows) AND r.series_id IS NOT NULL) g;
    IF sids IS NOT NULL THEN
        PERFORM comparison_daily_rebuild(sids, days, NULL);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER run_windows_comparison_daily AFTER INSERT ON run_windows REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION comparison_daily_windows_added();

-- Runs deleted (their windows cascade) or updated (status, day, series): the groups they left and joined.
CREATE FUNCTION comparison_daily_runs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
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
        PERFORM comparison_daily_rebuild(sids, days, leaving);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_comparison_daily_delete AFTER DELETE ON runs REFERENCING OLD TABLE AS old_runs
    FOR EACH STATEMENT EXECUTE FUNCTION comparison_daily_runs_changed();
CREATE TRIGGER runs_comparison_daily_update AFTER UPDATE ON runs REFERENCING OLD TABLE AS old_runs NEW TABLE AS new_runs
    FOR EACH STATEMENT EXECUTE FUNCTION comparison_daily_runs_changed();

-- TRUNCATE runs (a benchmark's reset) fires no delete trigger: empty it too.
CREATE FUNCTION comparison_daily_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE comparison_daily;
    RETURN NULL;
END $$;
CREATE TRIGGER comparison_daily_clear AFTER TRUNCATE ON runs FOR EACH STATEMENT EXECUTE FUNCTION comparison_daily_clear();

-- What the stores already hold.
SELECT comparison_daily_rebuild(array_agg(series_id), array_agg(day), NULL)
FROM (SELECT DISTINCT series_id, date_trunc('day', started_at, 'UTC') AS day FROM runs WHERE series_id IS NOT NULL) g;

-- 2. The MPI-fraction panels and USER / MPI / MPI_SYNC. They read v_run_metrics_daily, both windows of every
-- selected series and day (6,658 rows for one system's halo3d over 30 days), each run-window row probing for a
-- focus row of its day (`shown`), and built a label per row: 47-55 ms alone at a million runs, 169-188 ms under
-- the readers. shown_metrics_daily holds only the shown row of each (day, series): the focus window where the
-- series has one that day, else its run window, with the columns those panels read and the label, and an index
-- that carries them all, so a panel reads half the rows, probes nothing and visits no heap page.
--
-- It is a rollup of run_metrics_daily, kept by triggers on it: whenever rows of a (day, series) are inserted,
-- updated or deleted there (windows arriving, runs deleted or changed: 0013's functions), the group's row here
-- is recomputed from v_run_metrics_daily, so it is always that view's shown row (tests/test_dashboards.py checks
-- it against the runs' own windows). Not-measured measures stay NULL with a count of 0, as there.
CREATE TABLE shown_metrics_daily (
    day           timestamptz NOT NULL,
    series_id     integer NOT NULL,
    "window"      text NOT NULL,
    system        text NOT NULL,
    app           text NOT NULL,
    workload      text,
    stack         text NOT NULL,
    interconnect  text NOT NULL,
    ranks         integer,
    series_label  text,
    mpi_fraction_avg_n integer NOT NULL, mpi_fraction_avg_sum double precision,
    mpi_fraction_slowest_n integer NOT NULL, mpi_fraction_slowest_sum double precision,
    parallel_efficiency_n integer NOT NULL, parallel_efficiency_sum double precision,
    load_balance_n integer NOT NULL, load_balance_sum double precision,
    communication_efficiency_n integer NOT NULL, communication_efficiency_sum double precision,
    user_time_avg_n integer NOT NULL, user_time_avg_sum double precision,
    mpi_time_avg_n integer NOT NULL, mpi_time_avg_sum double precision,
    mpi_sync_time_avg_n integer NOT NULL, mpi_sync_time_avg_sum double precision,
    PRIMARY KEY (day, series_id)
);
-- A dashboard selects one system and one application over a range of days (0028's order).
CREATE INDEX shown_metrics_daily_by_system ON shown_metrics_daily (system, app, day)
    INCLUDE (workload, stack, interconnect, ranks, series_label, "window",
             mpi_fraction_avg_n, mpi_fraction_avg_sum, mpi_fraction_slowest_n, mpi_fraction_slowest_sum,
             parallel_efficiency_n, parallel_efficiency_sum, load_balance_n, load_balance_sum,
             communication_efficiency_n, communication_efficiency_sum, user_time_avg_n, user_time_avg_sum,
             mpi_time_avg_n, mpi_time_avg_sum, mpi_sync_time_avg_n, mpi_sync_time_avg_sum);

CREATE FUNCTION shown_metrics_daily_rebuild(days timestamptz[], sids integer[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM shown_metrics_daily s
    USING (SELECT DISTINCT * FROM unnest(days, sids)) AS g(day, series_id)
    WHERE s.day = g.day AND s.series_id = g.series_id;
    INSERT INTO shown_metrics_daily
    SELECT d.day, d.series_id, d."window", d.system, d.app, d.workload, d.stack, d.interconnect, d.ranks,
           d.series_label,
           d.mpi_fraction_avg_n, d.mpi_fraction_avg_sum, d.mpi_fraction_slowest_n, d.mpi_fraction_slowest_sum,
           d.parallel_efficiency_n, d.parallel_efficiency_sum, d.load_balance_n, d.load_balance_sum,
           d.communication_efficiency_n, d.communication_efficiency_sum, d.user_time_avg_n, d.user_time_avg_sum,
           d.mpi_time_avg_n, d.mpi_time_avg_sum, d.mpi_sync_time_avg_n, d.mpi_sync_time_avg_sum
    FROM (SELECT DISTINCT * FROM unnest(days, sids)) AS g(day, series_id)
    JOIN v_run_metrics_daily d ON d.day = g.day AND d.series_id = g.series_id
    WHERE d.shown;
END $$;

-- One function for the three events; each trigger names the transition tables its event has.
CREATE FUNCTION shown_metrics_daily_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    days timestamptz[];
    sids integer[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(day), array_agg(series_id) INTO days, sids FROM (SELECT DISTINCT day, series_id FROM new_rows) g;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(day), array_agg(series_id) INTO days, sids FROM (SELECT DISTINCT day, series_id FROM old_rows) g;
    ELSE
        SELECT array_agg(day), array_agg(series_id) INTO days, sids
        FROM (SELECT day, series_id FROM old_rows UNION SELECT day, series_id FROM new_rows) g;
    END IF;
    IF days IS NOT NULL THEN
        PERFORM shown_metrics_daily_rebuild(days, sids);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER shown_metrics_daily_insert AFTER INSERT ON run_metrics_daily REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION shown_metrics_daily_changed();
CREATE TRIGGER shown_metrics_daily_update AFTER UPDATE ON run_metrics_daily
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION shown_metrics_daily_changed();
CREATE TRIGGER shown_metrics_daily_delete AFTER DELETE ON run_metrics_daily REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION shown_metrics_daily_changed();

-- run_metrics_daily_clear (0013) truncates run_metrics_daily when runs are truncated.
CREATE FUNCTION shown_metrics_daily_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE shown_metrics_daily;
    RETURN NULL;
END $$;
CREATE TRIGGER shown_metrics_daily_clear AFTER TRUNCATE ON run_metrics_daily
    FOR EACH STATEMENT EXECUTE FUNCTION shown_metrics_daily_clear();

-- What the stores already hold.
INSERT INTO shown_metrics_daily
SELECT day, series_id, "window", system, app, workload, stack, interconnect, ranks, series_label,
       mpi_fraction_avg_n, mpi_fraction_avg_sum, mpi_fraction_slowest_n, mpi_fraction_slowest_sum,
       parallel_efficiency_n, parallel_efficiency_sum, load_balance_n, load_balance_sum,
       communication_efficiency_n, communication_efficiency_sum, user_time_avg_n, user_time_avg_sum,
       mpi_time_avg_n, mpi_time_avg_sum, mpi_sync_time_avg_n, mpi_sync_time_avg_sum
FROM v_run_metrics_daily WHERE shown;
