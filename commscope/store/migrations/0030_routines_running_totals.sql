-- The MPI routine panels over any time range from running totals, as 0008 does for the collectives.
--
-- The top-routines and MPI_Barrier panels read v_mpi_routines_daily: every (function, day) row of the selected
-- series over the range (14,700 entries of 0028's covering index for one system's 30 days at a million runs),
-- building a label per row, then aggregating per series and function: 33-47 ms p50 alone, 113-133 ms p95 under
-- 16 paced readers beside an ingest (dashboards/README.md, 2026-11-26). Here each (series, function) keeps
-- running totals by day, so a range costs one or two index probes per key, whatever the days it spans:
--     x(range) = x_cum(last row <= end) - x_cum(last row <= start - 1 day).
--
-- A key is a routines_daily group: run_series, the measurement model's series and its global size (the parts of
-- series_label), and a function. The key whose function is NULL is the group itself, all functions together,
-- which the MPI_Barrier panel reads: per day its runs are the group's runs (group_runs), its time and calls the
-- sums over the functions. Calls stay NULL where Caliper did not count them: each key also counts the days with
-- counted calls, and a range without one gives NULL, never 0.
--
-- routines_between(from, to) gives what summing v_mpi_routines_daily over the days that overlap [from, to]
-- gives (panels.DAYS), per key; keys with no row in the range left out. panels.ON_THE_FLY_VIEWS has that sum, and
-- tests/test_dashboards.py compares the two, and both with the profiles' own records.
--
-- Kept by statement triggers on routines_daily: whatever inserts, updates or deletes its rows (0017's rebuild,
-- the per-batch add, deletes of runs), the running totals of each touched series are recomputed from its
-- earliest touched day on (the nightly ingest appends: one day); TRUNCATE empties them.
CREATE TABLE routines_keys (
    key_id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    series_id       integer NOT NULL,            -- run_series
    model_series_id integer NOT NULL,
    global_size     text,
    function        text,                        -- NULL: every function of the group
    first_day       timestamptz,                 -- NULL when every row of the key was deleted
    last_day        timestamptz,
    runs_total      bigint NOT NULL DEFAULT 0,
    time_total      double precision NOT NULL DEFAULT 0,
    calls_total     numeric NOT NULL DEFAULT 0,
    calls_days      bigint NOT NULL DEFAULT 0,   -- days with counted calls
    UNIQUE NULLS NOT DISTINCT (series_id, model_series_id, global_size, function)
);

-- The index carries the totals: a probe is an index-only scan.
CREATE TABLE routines_cum (
    key_id          integer NOT NULL,
    day             timestamptz NOT NULL,
    runs_cum        bigint NOT NULL,
    time_cum        double precision NOT NULL,
    calls_cum       numeric NOT NULL,
    calls_days_cum  bigint NOT NULL,
    PRIMARY KEY (key_id, day) INCLUDE (runs_cum, time_cum, calls_cum, calls_days_cum)
);

-- The daily rows of each key of the given series from the given day on: the functions' rows as stored, and per
-- group and day its runs and the sums over its functions.
CREATE FUNCTION routines_key_days(sids integer[], days timestamptz[])
RETURNS TABLE (series_id integer, d0 timestamptz, model_series_id integer, global_size text, function text,
               day timestamptz, runs integer, time_total double precision, calls numeric, calls_days integer)
LANGUAGE sql STABLE AS $$
WITH s AS (SELECT g.series_id, min(g.day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1)
SELECT s.series_id, s.d0, d.model_series_id, d.global_size, d.function, d.day, d.runs, d.time_total, d.calls,
       (d.calls IS NOT NULL)::integer
FROM s JOIN routines_daily d ON d.series_id = s.series_id AND d.day >= s.d0
UNION ALL
SELECT s.series_id, s.d0, d.model_series_id, d.global_size, NULL, d.day, max(d.group_runs), sum(d.time_total),
       sum(d.calls), (count(d.calls) > 0)::integer
FROM s JOIN routines_daily d ON d.series_id = s.series_id AND d.day >= s.d0
GROUP BY s.series_id, s.d0, d.model_series_id, d.global_size, d.day
$$;

CREATE FUNCTION routines_cum_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO routines_keys (series_id, model_series_id, global_size, function)
    SELECT DISTINCT k.series_id, k.model_series_id, k.global_size, k.function FROM routines_key_days(sids, days) k
    ON CONFLICT DO NOTHING;
    DELETE FROM routines_cum c
    USING (SELECT g.series_id, min(g.day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1) s,
          routines_keys k
    WHERE k.series_id = s.series_id AND c.key_id = k.key_id AND c.day >= s.d0;
    INSERT INTO routines_cum
    SELECT k.key_id, d.day,
           coalesce(b.runs_cum, 0) + sum(d.runs) OVER w, coalesce(b.time_cum, 0) + sum(d.time_total) OVER w,
           coalesce(b.calls_cum, 0) + sum(coalesce(d.calls, 0)) OVER w,
           coalesce(b.calls_days_cum, 0) + sum(d.calls_days) OVER w
    FROM routines_key_days(sids, days) d
    JOIN routines_keys k ON k.series_id = d.series_id AND k.model_series_id = d.model_series_id
                        AND k.global_size IS NOT DISTINCT FROM d.global_size
                        AND k.function IS NOT DISTINCT FROM d.function
    LEFT JOIN LATERAL (SELECT c.runs_cum, c.time_cum, c.calls_cum, c.calls_days_cum FROM routines_cum c
                       WHERE c.key_id = k.key_id AND c.day < d.d0 ORDER BY c.day DESC LIMIT 1) b ON true
    WINDOW w AS (PARTITION BY k.key_id ORDER BY d.day)
    ORDER BY k.key_id, d.day;
    UPDATE routines_keys k
    SET first_day = t.first_day, last_day = t.last_day, runs_total = coalesce(t.runs_cum, 0),
        time_total = coalesce(t.time_cum, 0), calls_total = coalesce(t.calls_cum, 0),
        calls_days = coalesce(t.calls_days_cum, 0)
    FROM (SELECT k2.key_id, (SELECT min(c.day) FROM routines_cum c WHERE c.key_id = k2.key_id) AS first_day,
                 l.day AS last_day, l.runs_cum, l.time_cum, l.calls_cum, l.calls_days_cum
          FROM (SELECT DISTINCT unnest(sids) AS series_id) s
          JOIN routines_keys k2 ON k2.series_id = s.series_id
          LEFT JOIN LATERAL (SELECT c.day, c.runs_cum, c.time_cum, c.calls_cum, c.calls_days_cum FROM routines_cum c
                             WHERE c.key_id = k2.key_id ORDER BY c.day DESC LIMIT 1) l ON true) t
    WHERE k.key_id = t.key_id;
END $$;

CREATE FUNCTION routines_cum_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    sids integer[];
    days timestamptz[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(series_id), array_agg(day) INTO sids, days
        FROM (SELECT series_id, min(day) AS day FROM new_rows GROUP BY 1) g;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(series_id), array_agg(day) INTO sids, days
        FROM (SELECT series_id, min(day) AS day FROM old_rows GROUP BY 1) g;
    ELSE
        SELECT array_agg(series_id), array_agg(day) INTO sids, days
        FROM (SELECT series_id, min(day) AS day
              FROM (SELECT series_id, day FROM old_rows UNION ALL SELECT series_id, day FROM new_rows) u
              GROUP BY 1) g;
    END IF;
    IF sids IS NOT NULL THEN
        PERFORM routines_cum_rebuild(sids, days);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER routines_cum_insert AFTER INSERT ON routines_daily REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION routines_cum_changed();
CREATE TRIGGER routines_cum_update AFTER UPDATE ON routines_daily REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION routines_cum_changed();
CREATE TRIGGER routines_cum_delete AFTER DELETE ON routines_daily REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION routines_cum_changed();

-- runs_rollups_clear (0006, 0008) truncates routines_daily when runs are truncated.
CREATE FUNCTION routines_cum_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE routines_cum, routines_keys;
    RETURN NULL;
END $$;
CREATE TRIGGER routines_cum_clear AFTER TRUNCATE ON routines_daily
    FOR EACH STATEMENT EXECUTE FUNCTION routines_cum_clear();

-- What the stores already hold.
SELECT routines_cum_rebuild(array_agg(series_id), array_agg(day))
FROM (SELECT series_id, min(day) AS day FROM routines_daily GROUP BY 1) g
HAVING count(*) > 0;
