-- What each series' last gate verdict could have seen (commscope check, issue 35): its detectable effect, the
-- smallest shift the judged campaign would have flagged in 80 % of campaigns resampled from its baseline (NULL:
-- none would), and the --max-undetectable it was held to. One row per series, metric and window, replaced when a
-- campaign as new or newer is checked. v_noisy_series lists the series too noisy to gate: detectable effect above
-- max_undetectable, or none, with the dashboards' variables and the series label.
CREATE TABLE gate_detectable (
    series_id         integer NOT NULL REFERENCES series (id) ON DELETE CASCADE,
    metric            text NOT NULL,
    "window"          text NOT NULL CHECK ("window" IN ('run', 'focus')),
    campaign_id       bigint NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,   -- the campaign judged
    run_id            bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,        -- its newest run of the series
    "time"            timestamptz NOT NULL,          -- that run's start
    verdict           text NOT NULL,
    detectable        double precision,              -- NULL: no shift would have been flagged
    max_undetectable  double precision NOT NULL,
    runs_a_night      integer,                       -- runs a night that would show max_undetectable (NULL: none)
    n_new             integer NOT NULL,
    n_baseline        integer NOT NULL,
    reason            text NOT NULL,
    checked_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (series_id, metric, "window")
);
CREATE INDEX gate_detectable_time ON gate_detectable ("time");

CREATE VIEW v_noisy_series AS
SELECT g.series_id, g.metric, g."window", g.campaign_id, g.run_id, g."time", g.verdict, g.detectable,
       g.max_undetectable, g.runs_a_night, g.n_new, g.n_baseline, g.reason, g.checked_at,
       coalesce(s.name, 'unknown') AS system, r.app, r.workload, coalesce(r.variant, '') AS variant,
       coalesce(st.name, 'unknown') AS stack, coalesce(r.interconnect, 'default') AS interconnect, r.ranks,
       r.global_size,
       coalesce(s.name, 'unknown') || ' ' || r.app || coalesce(' ' || nullif(r.variant, ''), '') || ' '
         || coalesce(st.name, 'unknown') || ' ' || coalesce(r.interconnect, 'default') || ' n' || r.ranks
         || coalesce(' ' || r.global_size, '') || ' #' || g.series_id AS series_label
FROM gate_detectable g
JOIN runs r ON r.id = g.run_id
LEFT JOIN systems s ON s.id = r.system_id
LEFT JOIN stacks st ON st.id = r.stack_id
WHERE g.detectable IS NULL OR g.detectable > g.max_undetectable;
