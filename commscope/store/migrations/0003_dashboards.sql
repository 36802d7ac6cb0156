-- What the dashboards and the static report need beyond the first views:
-- regression annotations, the series list for template variables, views over
-- the workloads' own FOMs (collectives, halo exchange, I/O), and what keeps
-- the panel queries fast (dashboards/bench/panel_queries.py measures them):
-- time indexes, and small tables kept by triggers as runs and FOMs arrive.
-- Existing views keep their columns. Readers use the views only.

-- Regression annotations. Issue 7's detector writes them; the dashboards show
-- them when present. NULL series keys mean "every series".
CREATE TABLE annotations (
    id            bigserial PRIMARY KEY,
    "time"        timestamptz NOT NULL,
    time_end      timestamptz,
    system        text,
    app           text,
    workload      text,
    variant       text,
    stack         text,
    interconnect  text,
    ranks         integer,
    text          text NOT NULL,
    tags          text[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX annotations_time ON annotations ("time");

-- The distinct series, kept by a trigger as runs arrive, so the template
-- variables' queries read a few hundred rows instead of every run.
CREATE TABLE run_series (
    system        text NOT NULL,
    app           text NOT NULL,
    workload      text NOT NULL,
    variant       text NOT NULL,
    stack         text NOT NULL,
    interconnect  text NOT NULL,
    ranks         integer NOT NULL,
    PRIMARY KEY (system, app, workload, variant, stack, interconnect, ranks)
);

CREATE FUNCTION run_series_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_series
    SELECT DISTINCT coalesce(s.name, 'unknown'), n.app, n.workload, coalesce(n.variant, ''),
           coalesce(st.name, 'unknown'), coalesce(n.interconnect, 'default'), n.ranks
    FROM new_runs n
    LEFT JOIN systems s ON s.id = n.system_id
    LEFT JOIN stacks st ON st.id = n.stack_id
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_series_add AFTER INSERT ON runs
    REFERENCING NEW TABLE AS new_runs FOR EACH STATEMENT EXECUTE FUNCTION run_series_add();

INSERT INTO run_series
SELECT DISTINCT coalesce(s.name, 'unknown'), r.app, r.workload, coalesce(r.variant, ''),
       coalesce(st.name, 'unknown'), coalesce(r.interconnect, 'default'), r.ranks
FROM runs r LEFT JOIN systems s ON s.id = r.system_id LEFT JOIN stacks st ON st.id = r.stack_id
ON CONFLICT DO NOTHING;

-- The workloads' own FOMs, pivoted once as they arrive: collective latency per
-- algorithm and message size (collsweep, the reservoir study), halo exchange
-- times (halo3d and stencil2d, the seismic study), I/O bandwidth per method and
-- group size (pio, the groundwater study). A trigger on foms keeps these
-- tables, so a panel reads a few typed rows per run instead of parsing FOM
-- names and run metadata on every refresh. They go with their runs (cascade).
CREATE TABLE collective_latency (
    run_id        bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    repeat        integer NOT NULL,
    collective    text NOT NULL,
    bytes         bigint NOT NULL,          -- 0 for barrier
    stat          text NOT NULL,            -- t_min, t_avg, t_max (us), busbw (MB/s)
    algorithm     text NOT NULL,
    value         double precision NOT NULL,
    unit          text,
    PRIMARY KEY (run_id, repeat, collective, bytes, stat)
);

CREATE TABLE halo_times (
    run_id        bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    repeat        integer NOT NULL,
    comm_time_avg double precision NOT NULL,
    comm_time_max double precision,
    compute_time_avg double precision,
    compute_time_max double precision,
    total_time    double precision,
    PRIMARY KEY (run_id, repeat)
);

CREATE TABLE io_bandwidth (
    run_id        bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    repeat        integer NOT NULL,
    method        text,
    group_size    integer,                  -- two-phase only
    write_mbs     double precision,
    read_mbs      double precision,
    io_time_avg   double precision,
    io_time_max   double precision,
    PRIMARY KEY (run_id, repeat)
);

-- The algorithm is the Ramble study's `algorithm` variable, else the control
-- the workload echoed for this collective (PARAM env.<NAME>, kept in
-- metadata.params by the stdout reader), else 'default'. pio's method and group
-- size come from Ramble's variables, the PARAM lines, or the profile's Adiak
-- values (variant, group_size).
CREATE FUNCTION workload_foms_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO collective_latency
    SELECT f.run_id, f.repeat, c.collective,
           coalesce(substring(f.name FROM '^[a-z]+_([0-9]+)B_')::bigint, 0),
           substring(f.name FROM '(t_min|t_avg|t_max|busbw)$'),
           coalesce(r.metadata -> 'ramble_variables' ->> 'algorithm',
                    r.metadata -> 'params' ->> ('env.MPIR_CVAR_' || upper(c.collective) || '_INTRA_ALGORITHM'),
                    'tuned ' || (r.metadata -> 'params' ->> ('env.OMPI_MCA_coll_tuned_' || c.collective || '_algorithm')),
                    'I_MPI_ADJUST ' || (r.metadata -> 'params' ->> ('env.I_MPI_ADJUST_' || upper(c.collective))),
                    'default'),
           f.value, f.unit
    FROM new_foms f
    JOIN runs r ON r.id = f.run_id
    CROSS JOIN LATERAL (SELECT substring(f.name FROM '^([a-z]+)') AS collective) c
    WHERE r.app = 'collsweep' AND f.name ~ '^[a-z]+(_[0-9]+B)?_(t_min|t_avg|t_max|busbw)$'
    ON CONFLICT DO NOTHING;

    INSERT INTO halo_times
    SELECT f.run_id, f.repeat,
           max(f.value) FILTER (WHERE f.name = 'comm_time_avg'), max(f.value) FILTER (WHERE f.name = 'comm_time_max'),
           max(f.value) FILTER (WHERE f.name = 'compute_time_avg'), max(f.value) FILTER (WHERE f.name = 'compute_time_max'),
           max(f.value) FILTER (WHERE f.name = 'total_time')
    FROM new_foms f JOIN runs r ON r.id = f.run_id
    WHERE r.app IN ('halo3d', 'stencil2d')
      AND f.name IN ('comm_time_avg', 'comm_time_max', 'compute_time_avg', 'compute_time_max', 'total_time')
    GROUP BY f.run_id, f.repeat
    HAVING max(f.value) FILTER (WHERE f.name = 'comm_time_avg') IS NOT NULL
    ON CONFLICT DO NOTHING;

    INSERT INTO io_bandwidth
    SELECT f.run_id, f.repeat, m.method, CASE WHEN m.method = 'two-phase' THEN m.group_size END,
           max(f.value) FILTER (WHERE f.name = 'write_bandwidth'), max(f.value) FILTER (WHERE f.name = 'read_bandwidth'),
           max(f.value) FILTER (WHERE f.name = 'io_time_avg'), max(f.value) FILTER (WHERE f.name = 'io_time_max')
    FROM new_foms f
    JOIN runs r ON r.id = f.run_id
    CROSS JOIN LATERAL (SELECT
        coalesce(r.metadata -> 'ramble_variables' ->> 'method', r.metadata -> 'params' ->> 'method', r.variant) AS method,
        nullif(coalesce(r.metadata -> 'ramble_variables' ->> 'group_size', r.metadata -> 'params' ->> 'group-size',
                        r.metadata ->> 'group_size'), '')::integer AS group_size) m
    WHERE r.app = 'pio' AND f.name IN ('write_bandwidth', 'read_bandwidth', 'io_time_avg', 'io_time_max')
    GROUP BY f.run_id, f.repeat, m.method, m.group_size
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER foms_workload_add AFTER INSERT ON foms
    REFERENCING NEW TABLE AS new_foms FOR EACH STATEMENT EXECUTE FUNCTION workload_foms_add();

-- The FOMs stored before this migration. (Same SQL as the trigger: a no-op
-- UPDATE cannot fire an insert trigger, so insert them through a copy.)
CREATE TEMP TABLE foms_before AS SELECT * FROM foms;
DELETE FROM foms;
INSERT INTO foms SELECT * FROM foms_before;
DROP TABLE foms_before;

-- Panel queries select a time range first, then series keys.
CREATE INDEX runs_started_at ON runs (started_at);
CREATE INDEX runs_app_started_at ON runs (app, started_at);
-- v_runs shows coalesce(interconnect, 'default'); without statistics on that
-- expression the planner takes a filter on it for very selective and picks
-- sort-based plans that spill to disk.
CREATE STATISTICS runs_interconnect_shown ON (coalesce(interconnect, 'default')) FROM runs;
