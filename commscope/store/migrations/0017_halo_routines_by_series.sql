-- The halo exchange and MPI routine panels per series of the measurement model (docs/measurement-model.md).
--
-- halo_daily and routines_daily (0006, 0010) were kept per run_series: system, app, workload, variant, stack,
-- interconnect and ranks. Runs of another problem size, Caliper configuration or compiler fell into one row, and
-- the panels averaged them. Each row now also carries the run's series (runs.series_id, 0012) and is one row per
-- (run_series, day, series[, function]). The (run_series, day) groups stay what the triggers of 0006 and 0010
-- recompute, so nothing else changes. The views add series_id, global_size and series_label (the same label as
-- v_run_metrics_daily's), and the panels group by it.
--
-- Runs stored before 0012 have no series: they leave these rollups, as they are out of v_run_metrics_daily,
-- until re-ingested (v_runs_needing_reingest).

TRUNCATE halo_daily, routines_daily;
ALTER TABLE halo_daily ADD COLUMN model_series_id integer NOT NULL, ADD COLUMN global_size text,
    DROP CONSTRAINT halo_daily_pkey, ADD PRIMARY KEY (day, series_id, model_series_id);
ALTER TABLE routines_daily ADD COLUMN model_series_id integer NOT NULL, ADD COLUMN global_size text,
    DROP CONSTRAINT routines_daily_pkey, ADD PRIMARY KEY (day, series_id, model_series_id, function);

CREATE OR REPLACE FUNCTION halo_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM halo_daily d USING unnest(sids, days) g(series_id, day) WHERE d.series_id = g.series_id AND d.day = g.day;
INSERT INTO halo_daily (series_id, day, n, comm_time_avg_sum, comm_time_max_n, comm_time_max_sum, skew_n, skew_sum,
                        imbalance_n, imbalance_sum, exposed_fraction_n, exposed_fraction_sum, model_series_id,
                        global_size)
SELECT rd.series_id, rd.day, count(*), sum(h.comm_time_avg),
       count(h.comm_time_max), sum(h.comm_time_max),
       count(x.skew), sum(x.skew), count(x.imbalance), sum(x.imbalance), count(x.exposed), sum(x.exposed),
       r.series_id, max(r.global_size)
FROM unnest(sids, days) k(series_id, day)
JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
JOIN runs r ON r.id = rd.run_id AND r.status = 'ok' AND r.series_id IS NOT NULL
JOIN halo_times h ON h.run_id = r.id
CROSS JOIN LATERAL (SELECT h.comm_time_max / nullif(h.comm_time_avg, 0) AS skew,
                           h.compute_time_max / nullif(h.compute_time_avg, 0) AS imbalance,
                           h.comm_time_max / nullif(h.total_time, 0) AS exposed) x
GROUP BY rd.series_id, rd.day, r.series_id
ORDER BY rd.day, rd.series_id;
$$;

CREATE OR REPLACE FUNCTION routines_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM routines_daily d USING unnest(sids, days) g(series_id, day) WHERE d.series_id = g.series_id AND d.day = g.day;
WITH m AS (
    SELECT rd.series_id, rd.day, r.series_id AS model_series_id, r.global_size, m.run_id, m.function, m.time_total,
           m.calls
    FROM unnest(sids, days) k(series_id, day)
    JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
    JOIN runs r ON r.id = rd.run_id AND r.status = 'ok' AND r.series_id IS NOT NULL
    JOIN mpi_metrics m ON m.run_id = r.id
), g AS (
    SELECT series_id, day, model_series_id, count(DISTINCT run_id) AS group_runs FROM m GROUP BY 1, 2, 3
)
INSERT INTO routines_daily (series_id, day, function, runs, time_total, calls, group_runs, model_series_id, global_size)
SELECT m.series_id, m.day, m.function, count(DISTINCT m.run_id), sum(m.time_total), sum(m.calls), g.group_runs,
       m.model_series_id, max(m.global_size)
FROM m JOIN g USING (series_id, day, model_series_id)
GROUP BY m.series_id, m.day, m.model_series_id, m.function, g.group_runs
ORDER BY m.day, m.series_id;
$$;

-- MPI routine rows of ok runs with a series, added per batch as 0010 adds them: each function's runs, time and
-- calls, and every row of the (run_series, day, series) group counts the group's new runs with any routine.
CREATE OR REPLACE FUNCTION routines_daily_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE routines_daily d SET group_runs = d.group_runs + g.runs
    FROM (SELECT rd.series_id, rd.day, r.series_id AS model_series_id, count(DISTINCT n.run_id) AS runs
          FROM new_rows n JOIN runs r ON r.id = n.run_id AND r.status = 'ok' AND r.series_id IS NOT NULL
          JOIN run_day rd ON rd.run_id = n.run_id
          GROUP BY 1, 2, 3) g
    WHERE d.series_id = g.series_id AND d.day = g.day AND d.model_series_id = g.model_series_id;

    WITH m AS (
        SELECT rd.series_id, rd.day, r.series_id AS model_series_id, r.global_size, n.run_id, n.function,
               n.time_total, n.calls
        FROM new_rows n JOIN runs r ON r.id = n.run_id AND r.status = 'ok' AND r.series_id IS NOT NULL
        JOIN run_day rd ON rd.run_id = n.run_id
    ), g AS (
        SELECT series_id, day, model_series_id, count(DISTINCT run_id) AS runs FROM m GROUP BY 1, 2, 3
    )
    INSERT INTO routines_daily AS d (series_id, day, function, runs, time_total, calls, group_runs, model_series_id,
                                     global_size)
    SELECT m.series_id, m.day, m.function, count(DISTINCT m.run_id), sum(m.time_total), sum(m.calls),
           -- a function new to the group: the group's total, which the UPDATE above already raised
           coalesce((SELECT max(x.group_runs) FROM routines_daily x WHERE x.series_id = m.series_id AND x.day = m.day
                       AND x.model_series_id = m.model_series_id), g.runs),
           m.model_series_id, max(m.global_size)
    FROM m JOIN g ON g.series_id = m.series_id AND g.day = m.day AND g.model_series_id = m.model_series_id
    GROUP BY m.series_id, m.day, m.model_series_id, m.function, g.runs
    ORDER BY m.day, m.series_id
    ON CONFLICT (day, series_id, model_series_id, function) DO UPDATE SET
        runs = d.runs + excluded.runs, time_total = d.time_total + excluded.time_total,
        calls = rollup_sum(d.calls, excluded.calls);
    RETURN NULL;
END $$;

-- What the stores already hold.
SELECT routines_daily_rebuild(sids, days), halo_daily_rebuild(sids, days)
FROM (SELECT array_agg(series_id) AS sids, array_agg(day) AS days
      FROM (SELECT DISTINCT series_id, day FROM run_day) g) a
WHERE sids IS NOT NULL;
