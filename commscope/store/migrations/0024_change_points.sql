-- Change points over each series' whole history (collectors/commscope/changepoints.py, issue 18).
-- A change point is where a series' values (one per ok run, in start-time order, on the series' focus window
-- where it has one, else its run window) shift to another level, found by Apache Otava's E-divisive (Hunter's
-- split and merge, each split tested with Student's t-test) over every run of the series. It is stored at the
-- run that starts the new level. The detector replaces a series' rows whenever the series got new runs
-- (change_point_state says from which runs they were computed), so the rows are always those of the whole
-- history as it is now.
CREATE TABLE change_points (
    series_id         integer NOT NULL REFERENCES series (id) ON DELETE CASCADE,
    metric            text NOT NULL,                 -- a v_run_metrics column (time_s, ...)
    "window"          text NOT NULL CHECK ("window" IN ('run', 'focus')),
    run_id            bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,  -- the first run of the new level
    campaign_id       bigint NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,  -- that run's campaign
    "time"            timestamptz NOT NULL,          -- that run's start
    previous_time     timestamptz,                   -- the start of the last run before it
    n_before          integer NOT NULL,              -- runs in the level before (back to the previous change point)
    n_after           integer NOT NULL,              -- runs in the level after (up to the next change point)
    mean_before       double precision NOT NULL,
    mean_after        double precision NOT NULL,
    stddev_before     double precision NOT NULL,
    stddev_after      double precision NOT NULL,
    change            double precision,              -- mean_after / mean_before - 1 (NULL when mean_before is 0)
    direction         text NOT NULL CHECK (direction IN ('regression', 'improvement')),
    p_value           double precision NOT NULL,     -- Otava's t-test of the two levels
    method            text NOT NULL,                 -- library, version and parameters
    detected_at       timestamptz NOT NULL DEFAULT now(),  -- first found (kept while later recomputes find it again)
    detected_campaign bigint,                        -- the series' newest campaign when it was first found
    PRIMARY KEY (series_id, metric, run_id)
);
CREATE INDEX change_points_time ON change_points ("time");
CREATE INDEX change_points_run ON change_points (run_id);
CREATE INDEX change_points_campaign ON change_points (campaign_id);

-- From which runs each series' change points were computed: the count and the largest id of its ok runs. A
-- series whose ok runs no longer match (new runs, re-ingested or deleted runs) is recomputed.
CREATE TABLE change_point_state (
    series_id     integer NOT NULL REFERENCES series (id) ON DELETE CASCADE,
    metric        text NOT NULL,
    runs          integer NOT NULL,
    max_run_id    bigint NOT NULL,
    points        integer NOT NULL,       -- values the detector saw (ok runs that measured the metric)
    method        text NOT NULL,
    computed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (series_id, metric)
);
