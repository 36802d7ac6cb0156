-- The collectives dashboard over any time range in two index probes per series
-- and (collective, algorithm, size, statistic), however many nights it spans.
--
-- A collsweep run stores one latency per collective, size and statistic, so a
-- 30-night range read from the daily rollup (0006) is 30 rows per such key:
-- about 74k rows at 1M runs for one system: 431 ms (dashboards/bench/panel_queries.py).
-- Here each key keeps running totals by day instead: the sum over a range of
-- days is the running total at its last day minus the one before its first,
--     n(range) = n_cum(last row <= end) - n_cum(last row <= start - 1 day).
--
-- collectives_between(from, to) gives what summing v_collectives_daily over the
-- days that overlap [from, to] gives (panels.DAYS: "time" > from - 1 day AND
-- "time" <= to), per series and key, keys with no run in the range left out.
-- Sums are differences of running totals, so they equal the direct sums up to
-- floating-point rounding (the tests compare with a relative tolerance).
--
-- Kept by collectives_daily_rebuild, which every insert, delete and backfill of
-- 0006 already calls: after a group changes, the running totals of its series
-- from that day on are recomputed (the nightly ingest appends: one day).

-- Every key of a series: a small id, the first and last day it has rows, and
-- its running totals at the last day, so a range that ends after the key's
-- last night (a dashboard ending now) needs one probe, not two.
CREATE TABLE collectives_keys (
    key_id        integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    series_id     integer NOT NULL,
    collective    text NOT NULL,
    algorithm     text NOT NULL,
    bytes         bigint NOT NULL,
    stat          text NOT NULL,
    first_day     timestamptz,               -- NULL when every row of the key was deleted
    last_day      timestamptz,
    n_total       bigint NOT NULL DEFAULT 0,
    value_total   double precision NOT NULL DEFAULT 0,
    UNIQUE (series_id, collective, algorithm, bytes, stat)
);

-- Running totals per key and day. The index carries the totals, so a probe is
-- an index-only scan on (integer, timestamptz) and never visits the heap.
CREATE TABLE collectives_cum (
    key_id        integer NOT NULL,
    day           timestamptz NOT NULL,
    n_cum         bigint NOT NULL,
    value_cum     double precision NOT NULL,
    PRIMARY KEY (key_id, day) INCLUDE (n_cum, value_cum)
);

-- The groups (series, day) that changed: each series' keys, its running totals
-- from its earliest changed day on, then its keys' days and totals.
CREATE FUNCTION collectives_cum_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
INSERT INTO collectives_keys (series_id, collective, algorithm, bytes, stat)
SELECT DISTINCT d.series_id, d.collective, d.algorithm, d.bytes, d.stat
FROM (SELECT series_id, min(day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1) s
JOIN collectives_daily d ON d.series_id = s.series_id AND d.day >= s.d0
ON CONFLICT DO NOTHING;
DELETE FROM collectives_cum c
USING (SELECT series_id, min(day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1) s, collectives_keys k
WHERE k.series_id = s.series_id AND c.key_id = k.key_id AND c.day >= s.d0;
INSERT INTO collectives_cum
SELECT k.key_id, d.day, coalesce(b.n_cum, 0) + sum(d.n) OVER w, coalesce(b.value_cum, 0) + sum(d.value_sum) OVER w
FROM (SELECT series_id, min(day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1) s
JOIN collectives_daily d ON d.series_id = s.series_id AND d.day >= s.d0
JOIN collectives_keys k ON (k.series_id, k.collective, k.algorithm, k.bytes, k.stat)
                         = (d.series_id, d.collective, d.algorithm, d.bytes, d.stat)
LEFT JOIN LATERAL (SELECT c.n_cum, c.value_cum FROM collectives_cum c WHERE c.key_id = k.key_id AND c.day < s.d0
                   ORDER BY c.day DESC LIMIT 1) b ON true
WINDOW w AS (PARTITION BY k.key_id ORDER BY d.day)
ORDER BY k.key_id, d.day;
UPDATE collectives_keys k
SET first_day = t.first_day, last_day = t.last_day, n_total = coalesce(t.n_cum, 0), value_total = coalesce(t.value_cum, 0)
FROM (SELECT k2.key_id, (SELECT min(c.day) FROM collectives_cum c WHERE c.key_id = k2.key_id) AS first_day,
             l.day AS last_day, l.n_cum, l.value_cum
      FROM (SELECT DISTINCT unnest(sids) AS series_id) s
      JOIN collectives_keys k2 ON k2.series_id = s.series_id
      LEFT JOIN LATERAL (SELECT c.day, c.n_cum, c.value_cum FROM collectives_cum c WHERE c.key_id = k2.key_id
                         ORDER BY c.day DESC LIMIT 1) l ON true) t
WHERE k.key_id = t.key_id;
$$;

-- 0006's function, unchanged, then the running totals.
CREATE OR REPLACE FUNCTION collectives_daily_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM collectives_daily d USING unnest(sids, days) g(series_id, day) WHERE d.series_id = g.series_id AND d.day = g.day;
INSERT INTO collectives_daily
SELECT rd.series_id, rd.day, c.collective, c.algorithm, c.bytes, c.stat, count(*), sum(c.value)
FROM unnest(sids, days) k(series_id, day)
JOIN run_day rd ON rd.series_id = k.series_id AND rd.day = k.day
JOIN runs r ON r.id = rd.run_id AND r.status = 'ok'
JOIN collective_latency c ON c.run_id = r.id
GROUP BY rd.series_id, rd.day, c.collective, c.algorithm, c.bytes, c.stat
ORDER BY rd.day, rd.series_id;
SELECT collectives_cum_rebuild(sids, days);
$$;

CREATE OR REPLACE FUNCTION runs_rollups_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE run_day, runs_daily, wall_time_daily, routines_daily, collectives_daily, halo_daily, io_daily,
             collectives_cum, collectives_keys;
    RETURN NULL;
END $$;

-- The collectives stored before this migration.
SELECT collectives_cum_rebuild(sids, days)
FROM (SELECT array_agg(series_id) AS sids, array_agg(day) AS days
      FROM (SELECT DISTINCT series_id, day FROM collectives_daily) g) a
WHERE sids IS NOT NULL;
