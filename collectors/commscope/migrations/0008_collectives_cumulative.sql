-- The collectives dashboard over any time range in two index probes per series
-- and (collective, algorithm, size, statistic), however many nights it spans.
--
-- A collsweep run stores one latency per collective, size and statistic, so a
-- 30-night range read from the daily rollup (0006) is 30 rows per such key:
-- 150k rows at 1M runs for one system, 431 ms (dashboards/bench/panel_queries.py).
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

CREATE TABLE collectives_cum (
    series_id     integer NOT NULL,
    collective    text NOT NULL,
    algorithm     text NOT NULL,
    bytes         bigint NOT NULL,
    stat          text NOT NULL,
    day           timestamptz NOT NULL,
    n_cum         bigint NOT NULL,
    value_cum     double precision NOT NULL,
    PRIMARY KEY (series_id, collective, algorithm, bytes, stat, day)
);

-- Every key of a series, with the first and last day it has rows (so a range
-- skips keys that ended before it or start after it without probing them).
CREATE TABLE collectives_keys (
    series_id     integer NOT NULL,
    collective    text NOT NULL,
    algorithm     text NOT NULL,
    bytes         bigint NOT NULL,
    stat          text NOT NULL,
    first_day     timestamptz NOT NULL,
    last_day      timestamptz NOT NULL,
    PRIMARY KEY (series_id, collective, algorithm, bytes, stat)
);

-- The groups (series, day) that changed: each series' running totals from its
-- earliest changed day on, then its keys.
CREATE FUNCTION collectives_cum_rebuild(sids integer[], days timestamptz[]) RETURNS void LANGUAGE sql AS $$
DELETE FROM collectives_cum c
USING (SELECT series_id, min(day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1) s
WHERE c.series_id = s.series_id AND c.day >= s.d0;
INSERT INTO collectives_cum
SELECT d.series_id, d.collective, d.algorithm, d.bytes, d.stat, d.day,
       coalesce(b.n_cum, 0) + sum(d.n) OVER w, coalesce(b.value_cum, 0) + sum(d.value_sum) OVER w
FROM (SELECT series_id, min(day) AS d0 FROM unnest(sids, days) g(series_id, day) GROUP BY 1) s
JOIN collectives_daily d ON d.series_id = s.series_id AND d.day >= s.d0
LEFT JOIN LATERAL (SELECT c.n_cum, c.value_cum FROM collectives_cum c
                   WHERE (c.series_id, c.collective, c.algorithm, c.bytes, c.stat)
                       = (d.series_id, d.collective, d.algorithm, d.bytes, d.stat) AND c.day < s.d0
                   ORDER BY c.day DESC LIMIT 1) b ON true
WINDOW w AS (PARTITION BY d.series_id, d.collective, d.algorithm, d.bytes, d.stat ORDER BY d.day);
DELETE FROM collectives_keys k USING (SELECT DISTINCT unnest(sids) AS series_id) s WHERE k.series_id = s.series_id;
INSERT INTO collectives_keys
SELECT c.series_id, c.collective, c.algorithm, c.bytes, c.stat, min(c.day), max(c.day)
FROM collectives_cum c JOIN (SELECT DISTINCT unnest(sids) AS series_id) s ON s.series_id = c.series_id
GROUP BY 1, 2, 3, 4, 5;
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

-- Readers get the running totals through views (the read-only role is granted
-- SELECT on views only), and collectives_between reads those views.
CREATE VIEW v_collectives_cum AS
SELECT series_id, collective, algorithm, bytes, stat, day, n_cum, value_cum FROM collectives_cum;

CREATE VIEW v_collectives_keys AS
SELECT k.series_id, s.system, s.app, s.workload, s.variant, s.stack, s.interconnect, s.ranks,
       k.collective, k.algorithm, k.bytes, k.stat, k.first_day, k.last_day
FROM collectives_keys k JOIN run_series s ON s.id = k.series_id;

-- One SQL statement, STABLE: the planner inlines it, so a panel's WHERE on the
-- series columns and stat reaches the keys before any probe.
CREATE FUNCTION collectives_between(t_from timestamptz, t_to timestamptz)
RETURNS TABLE (system text, app text, workload text, variant text, stack text, interconnect text, ranks integer,
               collective text, algorithm text, bytes bigint, stat text, n bigint, value_sum double precision)
LANGUAGE sql STABLE AS $$
SELECT k.system, k.app, k.workload, k.variant, k.stack, k.interconnect, k.ranks,
       k.collective, k.algorithm, k.bytes, k.stat,
       e.n_cum - coalesce(b.n_cum, 0), e.value_cum - coalesce(b.value_cum, 0)
FROM v_collectives_keys k
CROSS JOIN LATERAL (SELECT c.n_cum, c.value_cum FROM v_collectives_cum c
                    WHERE (c.series_id, c.collective, c.algorithm, c.bytes, c.stat)
                        = (k.series_id, k.collective, k.algorithm, k.bytes, k.stat) AND c.day <= t_to
                    ORDER BY c.day DESC LIMIT 1) e
LEFT JOIN LATERAL (SELECT c.n_cum, c.value_cum FROM v_collectives_cum c
                   WHERE (c.series_id, c.collective, c.algorithm, c.bytes, c.stat)
                       = (k.series_id, k.collective, k.algorithm, k.bytes, k.stat) AND c.day <= t_from - interval '1 day'
                   ORDER BY c.day DESC LIMIT 1) b ON true
WHERE k.last_day > t_from - interval '1 day' AND k.first_day <= t_to
  AND e.n_cum > coalesce(b.n_cum, 0)
$$;
