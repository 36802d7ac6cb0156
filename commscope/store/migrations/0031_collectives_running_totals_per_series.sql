-- The collectives panels' running totals kept per series instead of per key: one index probe per series, not
-- one per (series, collective, algorithm, size, statistic).
--
-- 0008 keeps running totals by day per key, so a range is one or two probes per key. One system's collsweep is
-- 120 series of 20 keys each in the benchmark: 2,400 probes per panel query (16 of its 27 ms in EXPLAIN), 45-50 ms
-- alone and 190-221 ms p95 under 16 paced readers beside an ingest (dashboards/README.md, 2026-11-26); a real
-- sweep of 20 sizes, 6 collectives and 3 statistics is 360 keys per series. Here a series keeps its keys in
-- arrays (collective, algorithm, bytes, stat, in the order they first arrived) and, per day, its running totals
-- as arrays in the same order, so a range costs one or two probes per series and the keys come out of one row:
--     n(range)[i] = n_cum(last row <= end)[i] - n_cum(last row <= start - 1 day)[i].
-- A key that arrived after a row was written is past that row's arrays: 0 there. Any selection still works: the
-- series (system, application, workload, variant, stack, interconnect, ranks) is what a panel selects.
--
-- collectives_between(from, to) keeps its signature and result: what summing v_collectives_daily over the days
-- that overlap [from, to] gives, per series and key, keys with no run in the range left out (its on-the-fly twin
-- in panels.ON_THE_FLY_VIEWS is unchanged). The totals are the same sums in the same order as 0008's.
--
-- Kept as 0008's were: collectives_daily_rebuild (0006, 0008), which every insert, delete, update and backfill of
-- collectives_daily goes through, calls collectives_cum_rebuild, replaced here: the touched series' totals are
-- recomputed from their earliest touched day on (the nightly ingest appends one day). TRUNCATE empties them.
-- 0008's per-key tables and views are dropped.

CREATE TABLE collectives_series (
    series_id     integer PRIMARY KEY,                  -- run_series
    collective    text[] NOT NULL,                      -- the keys, one per position
    algorithm     text[] NOT NULL,
    bytes         bigint[] NOT NULL,
    stat          text[] NOT NULL,
    first_day     timestamptz,                          -- NULL when every row of the series was deleted
    last_day      timestamptz,
    n_total       bigint[],                             -- the running totals at last_day
    value_total   double precision[]
);

CREATE TABLE collectives_series_cum (
    series_id     integer NOT NULL,
    day           timestamptz NOT NULL,
    n_cum         bigint[] NOT NULL,
    value_cum     double precision[] NOT NULL,
    PRIMARY KEY (series_id, day)
);

CREATE OR REPLACE FUNCTION collectives_cum_rebuild(sids integer[], days timestamptz[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- Keys new to a series go after its others.
    INSERT INTO collectives_series AS c (series_id, collective, algorithm, bytes, stat)
    SELECT s.series_id, array_agg(k.collective ORDER BY k.collective, k.algorithm, k.bytes, k.stat),
           array_agg(k.algorithm ORDER BY k.collective, k.algorithm, k.bytes, k.stat),
           array_agg(k.bytes ORDER BY k.collective, k.algorithm, k.bytes, k.stat),
           array_agg(k.stat ORDER BY k.collective, k.algorithm, k.bytes, k.stat)
    FROM (SELECT g.series_id, min(g.day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1) s
    CROSS JOIN LATERAL (
        SELECT DISTINCT d.collective, d.algorithm, d.bytes, d.stat FROM collectives_daily d
        WHERE d.series_id = s.series_id AND d.day >= s.d0
        EXCEPT
        SELECT u.collective, u.algorithm, u.bytes, u.stat
        FROM collectives_series o, unnest(o.collective, o.algorithm, o.bytes, o.stat) u(collective, algorithm, bytes, stat)
        WHERE o.series_id = s.series_id) k
    GROUP BY s.series_id
    ON CONFLICT (series_id) DO UPDATE
    SET collective = c.collective || excluded.collective, algorithm = c.algorithm || excluded.algorithm,
        bytes = c.bytes || excluded.bytes, stat = c.stat || excluded.stat;

    DELETE FROM collectives_series_cum c
    USING (SELECT g.series_id, min(g.day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1) s
    WHERE c.series_id = s.series_id AND c.day >= s.d0;

    -- Per series, day with rows and key: the total before the series' earliest touched day plus the day's sums
    -- from that day on (0 for a key without a row that day).
    INSERT INTO collectives_series_cum (series_id, day, n_cum, value_cum)
    SELECT t.series_id, t.day, array_agg(t.n_cum ORDER BY t.pos), array_agg(t.value_cum ORDER BY t.pos)
    FROM (SELECT s.series_id, dd.day, k.pos,
                 coalesce(b.n_cum[k.pos], 0) + sum(coalesce(d.n, 0)) OVER w AS n_cum,
                 coalesce(b.value_cum[k.pos], 0) + sum(coalesce(d.value_sum, 0)) OVER w AS value_cum
          FROM (SELECT g.series_id, min(g.day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1) s
          JOIN collectives_series c ON c.series_id = s.series_id
          CROSS JOIN LATERAL unnest(c.collective, c.algorithm, c.bytes, c.stat)
                WITH ORDINALITY k(collective, algorithm, bytes, stat, pos)
          CROSS JOIN LATERAL (SELECT DISTINCT d.day FROM collectives_daily d
                              WHERE d.series_id = s.series_id AND d.day >= s.d0) dd
          LEFT JOIN collectives_daily d
                 ON (d.series_id, d.day, d.collective, d.algorithm, d.bytes, d.stat)
                  = (s.series_id, dd.day, k.collective, k.algorithm, k.bytes, k.stat)
          LEFT JOIN LATERAL (SELECT p.n_cum, p.value_cum FROM collectives_series_cum p
                             WHERE p.series_id = s.series_id AND p.day < s.d0
                             ORDER BY p.day DESC LIMIT 1) b ON true
          WINDOW w AS (PARTITION BY s.series_id, k.pos ORDER BY dd.day)) t
    GROUP BY t.series_id, t.day
    ORDER BY t.series_id, t.day;

    UPDATE collectives_series c
    SET first_day = t.first_day, last_day = t.last_day, n_total = t.n_cum, value_total = t.value_cum
    FROM (SELECT s.series_id,
                 (SELECT min(p.day) FROM collectives_series_cum p WHERE p.series_id = s.series_id) AS first_day,
                 l.day AS last_day, l.n_cum, l.value_cum
          FROM (SELECT DISTINCT unnest(sids) AS series_id) s
          LEFT JOIN LATERAL (SELECT p.day, p.n_cum, p.value_cum FROM collectives_series_cum p
                             WHERE p.series_id = s.series_id ORDER BY p.day DESC LIMIT 1) l ON true) t
    WHERE c.series_id = t.series_id;
END $$;

-- runs_rollups_clear (0006, 0008) without 0008's tables; emptying collectives_daily empties the totals.
CREATE OR REPLACE FUNCTION runs_rollups_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE run_day, runs_daily, wall_time_daily, routines_daily, collectives_daily, halo_daily, io_daily;
    RETURN NULL;
END $$;

CREATE FUNCTION collectives_series_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE collectives_series_cum, collectives_series;
    RETURN NULL;
END $$;
CREATE TRIGGER collectives_series_clear AFTER TRUNCATE ON collectives_daily
    FOR EACH STATEMENT EXECUTE FUNCTION collectives_series_clear();

-- What the stores already hold.
SELECT collectives_cum_rebuild(array_agg(series_id), array_agg(day))
FROM (SELECT series_id, min(day) AS day FROM collectives_daily GROUP BY 1) g
HAVING count(*) > 0;

DROP VIEW IF EXISTS v_collectives_keys, v_collectives_cum;
DROP TABLE collectives_cum, collectives_keys;
