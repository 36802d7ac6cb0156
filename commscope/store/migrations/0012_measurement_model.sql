-- The measurement model (docs/measurement-model.md): series by experiment
-- parameters and environment, and per-window measurements, read through
-- v_run_metrics.
--
-- A series is the runs whose application, parameters and environment are
-- equal; the loader computes its key (records.Record.series_key) and interns it
-- here. runs.wall_time and the fractions on runs keep their old meaning for the
-- panels that still read them (0001-0011); v_run_metrics is the one definition
-- new readers use.

CREATE TABLE series (
    id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key           text NOT NULL UNIQUE,       -- sha256 of [app, parameters, environment], canonical JSON
    app           text NOT NULL,
    parameters    jsonb NOT NULL,
    environment   jsonb NOT NULL
);

-- model_version: 1 for runs measured under this model; NULL for runs stored before it, whose
-- windows were never computed (their inputs are not kept): v_runs_needing_reingest lists them.
ALTER TABLE runs ADD COLUMN series_id integer REFERENCES series (id),
                 ADD COLUMN model_version smallint;
CREATE INDEX runs_by_series ON runs (series_id, started_at);

-- A run with ranks missing, stored on request (--allow-partial): kept out of every 'ok' statistic.
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN ('ok', 'failed', 'partial'));

CREATE TABLE run_windows (
    run_id        bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    "window"      text NOT NULL CHECK ("window" IN ('run', 'focus')),
    focus_region  text,
    time_s        double precision,           -- the slowest rank's
    mpi_time_avg_s double precision,          -- NULL: MPI was not measured
    mpi_time_max_s double precision,
    mpi_fraction_avg double precision,        -- sum over ranks of MPI time / of time
    mpi_fraction_slowest double precision,
    user_time_avg_s double precision,         -- useful (non-MPI) time, mean rank
    mpi_sync_time_avg_s double precision,     -- the MPI_SYNC group's part of the MPI time
    load_balance  double precision,           -- POP, multiplicative: mean(useful) / max(useful)
    communication_efficiency double precision, -- max(useful) / time
    parallel_efficiency double precision,     -- mean(useful) / time
    ranks_measured integer,
    PRIMARY KEY (run_id, "window")
);
