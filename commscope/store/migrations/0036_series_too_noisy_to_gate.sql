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
