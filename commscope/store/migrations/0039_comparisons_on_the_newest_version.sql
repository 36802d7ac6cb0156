-- The procurement panels compare each stack on its newest version, and say which (docs/measurement-model.md).
-- A series goes on across versions (0038), so comparison_daily, keyed by series and day, mixed the runs of every
-- version a series ran in the time range. Its groups are now also keyed by the runs' MPI library string
-- (runs.stack_id's library; NULL where none was recorded), and each row carries its group's newest run start
-- (last_run): the panels keep, of each series, the rows of the library of its newest run in the range.
-- v_comparison_daily names the version as "family version" (mpi_version_label: "Open MPI 4.1.6").

-- The version a library string names: its family and its first word that starts with a digit (or v and a digit),
-- "Open MPI v4.1.6, package: ..." -> "Open MPI 4.1.6"; the family alone where no word has a version; NULL for NULL.
CREATE FUNCTION mpi_version_label(library text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT mpi_family(library)
       || coalesce(' ' || (regexp_match(library, '(^|[ \t\n\r\f\v:,(])[vV]?([0-9]+(\.[0-9A-Za-z]+)*)'))[2], '')
$$;

DROP VIEW IF EXISTS v_comparison_daily CASCADE;
DROP INDEX comparison_daily_by_app;
DROP INDEX comparison_daily_by_system;
ALTER TABLE comparison_daily ADD COLUMN mpi_library text, ADD COLUMN last_run timestamptz;

CREATE OR REPLACE FUNCTION comparison_daily_rebuild(sids integer[], days timestamptz[], leaving bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM comparison_daily c
    USING (SELECT DISTINCT * FROM unnest(sids, days)) AS g(series_id, day)
    WHERE c.series_id = g.series_id AND c.day = g.day;
    INSERT INTO comparison_daily (day, series_id, app, ranks, "window", system, stack, interconnect, parameters,
                                  mpi_library, runs, time_sum, time_min, time_max, last_run)
    SELECT date_trunc('day', r.started_at, 'UTC'), r.series_id, r.app, r.ranks, w."window",
           s.environment->>'system', s.environment->>'stack', s.environment->>'interconnect', s.parameters,
           st.library, count(*)::integer, sum(w.time_s), min(w.time_s), max(w.time_s), max(r.started_at)
    FROM (SELECT DISTINCT * FROM unnest(sids, days)) AS g(series_id, day)
    JOIN runs r ON r.series_id = g.series_id AND date_trunc('day', r.started_at, 'UTC') = g.day
               AND r.started_at >= g.day AND r.started_at < g.day + interval '24 hours'
    JOIN series s ON s.id = r.series_id
    LEFT JOIN stacks st ON st.id = r.stack_id
    CROSS JOIN LATERAL (SELECT w."window", w.time_s FROM run_windows w
                        WHERE w.run_id = r.id AND w.time_s > 0
                        ORDER BY w."window" = 'focus' DESC LIMIT 1) w
    WHERE r.status = 'ok' AND NOT (r.id = ANY(coalesce(leaving, '{}')))
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10;
END $$;

CREATE INDEX comparison_daily_by_app ON comparison_daily (app, day)
    INCLUDE (system, stack, interconnect, ranks, series_id, parameters, "window", runs, time_sum, time_min, time_max,
             mpi_library, last_run);
CREATE INDEX comparison_daily_by_system ON comparison_daily (system, stack, day)
    INCLUDE (app, interconnect, ranks, series_id, parameters, "window", runs, time_sum, time_min, time_max,
             mpi_library, last_run);

-- What the stores already hold, regrouped by library.
SELECT comparison_daily_rebuild(array_agg(series_id), array_agg(day), NULL)
FROM (SELECT DISTINCT series_id, date_trunc('day', started_at, 'UTC') AS day FROM runs WHERE series_id IS NOT NULL) g;
