

-- The communication-matrix panels show a selection's newest traced run (runs_daily.last_traced_run). Like
-- every other rollup it counts only runs with status 'ok': a partial run's matrix lacks the missing ranks'
-- messages, and a failed run's may stop half way.
CREATE OR REPLACE FUNCTION runs_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
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
       max(r.id) FILTER (WHERE r.status = 'ok' AND EXISTS (SELECT 1 FROM comm_matrix c WHERE c.run_id = r.id))
FROM unnest(sids, days) k(series_id, day)
JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
JOIN runs r ON r.id = rd.run_id
LEFT JOIN LATERAL (SELECT count(*) AS rank_rows, sum(user_time) AS user_time, sum(mpi_time) AS mpi_time,
                          sum(mpi_sync_time) AS mpi_sync_time
                   FROM rank_metrics WHERE run_id = r.id) g ON true
GROUP BY rd.series_id, rd.day
ORDER BY rd.day, rd.series_id;
$$;

CREATE OR REPLACE FUNCTION runs_daily_add_traced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs_daily d SET last_traced_run = greatest(d.last_traced_run, g.run_id)
    FROM (SELECT rd.series_id, rd.day, max(n.run_id) AS run_id
          FROM new_rows n JOIN runs r ON r.id = n.run_id AND r.status = 'ok'
          JOIN run_day rd ON rd.run_id = n.run_id
          GROUP BY rd.series_id, rd.day) g
    WHERE d.series_id = g.series_id AND d.day = g.day;
    RETURN NULL;
END $$;

-- What the stores already hold: groups whose newest traced run is not ok get their newest ok one (or none).
UPDATE runs_daily d SET last_traced_run = (
    SELECT max(r.id) FROM run_day rd JOIN runs r ON r.id = rd.run_id AND r.status = 'ok'
    WHERE rd.series_id = d.series_id AND rd.day = d.day
      AND EXISTS (SELECT 1 FROM comm_matrix c WHERE c.run_id = r.id))
WHERE d.last_traced_run IN (SELECT id FROM runs WHERE status <> 'ok');
