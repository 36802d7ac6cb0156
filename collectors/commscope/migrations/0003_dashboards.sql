-- What the dashboards and the static report need beyond the first views:
-- regression annotations, the series list for template variables, views over
-- the workloads' own FOMs (collectives, halo exchange, I/O), and indexes for
-- the panel queries (dashboards/bench/panel_queries.py measures them).
-- Existing views keep their columns.

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

CREATE VIEW v_annotations AS
SELECT id, "time", time_end, system, app, workload, variant, stack, interconnect, ranks, text, tags
FROM annotations;

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

CREATE VIEW v_series AS
SELECT system, app, workload, variant, stack, interconnect, ranks FROM run_series;

-- Collective latency per algorithm and message size (the reservoir study),
-- from collsweep's FOMs: <coll>_<bytes>B_t_{min,avg,max} in us, <coll>_<bytes>B_busbw
-- in MB/s, barrier_t_* without a size. The algorithm is the Ramble study's
-- `algorithm` variable, else the control the workload echoed for this
-- collective (PARAM env.<NAME>, kept in metadata.params by the stdout reader),
-- else 'default'.
CREATE VIEW v_collectives AS
SELECT f.run_id, f."time", f.system, f.app, f.workload, f.variant, f.stack, f.interconnect, f.ranks, f.repeat,
       coalesce(r.metadata -> 'ramble_variables' ->> 'algorithm',
                c.p ->> ('env.MPIR_CVAR_' || upper(c.collective) || '_INTRA_ALGORITHM'),
                'tuned ' || (c.p ->> ('env.OMPI_MCA_coll_tuned_' || c.collective || '_algorithm')),
                'I_MPI_ADJUST ' || (c.p ->> ('env.I_MPI_ADJUST_' || upper(c.collective))),
                'default') AS algorithm,
       c.collective,
       coalesce(substring(f.name FROM '^[a-z]+_([0-9]+)B_')::bigint, 0) AS bytes,
       substring(f.name FROM '(t_min|t_avg|t_max|busbw)$') AS stat,
       f.value, f.unit
FROM v_foms f
JOIN runs r ON r.id = f.run_id
CROSS JOIN LATERAL (SELECT substring(f.name FROM '^([a-z]+)') AS collective, r.metadata -> 'params' AS p) c
WHERE f.app = 'collsweep' AND f.status = 'ok'
  AND f.name ~ '^[a-z]+(_[0-9]+B)?_(t_min|t_avg|t_max|busbw)$';

-- Halo exchange (the seismic study; halo3d and stencil2d): the workload's own communication timer
-- averaged over ranks and on the slowest rank, compute time likewise, per run
-- and repeat. skew = slowest / average communication; imbalance = slowest /
-- average compute; exposed = slowest-rank communication / total time.
CREATE VIEW v_halo AS
SELECT run_id, "time", system, app, workload, variant, stack, interconnect, ranks, repeat,
       max(value) FILTER (WHERE name = 'comm_time_avg') AS comm_time_avg,
       max(value) FILTER (WHERE name = 'comm_time_max') AS comm_time_max,
       max(value) FILTER (WHERE name = 'compute_time_avg') AS compute_time_avg,
       max(value) FILTER (WHERE name = 'compute_time_max') AS compute_time_max,
       max(value) FILTER (WHERE name = 'total_time') AS total_time,
       max(value) FILTER (WHERE name = 'comm_time_max') / nullif(max(value) FILTER (WHERE name = 'comm_time_avg'), 0) AS skew,
       max(value) FILTER (WHERE name = 'compute_time_max') / nullif(max(value) FILTER (WHERE name = 'compute_time_avg'), 0) AS imbalance,
       max(value) FILTER (WHERE name = 'comm_time_max') / nullif(max(value) FILTER (WHERE name = 'total_time'), 0) AS exposed_fraction
FROM v_foms
WHERE status = 'ok' AND app IN ('halo3d', 'stencil2d')
  AND name IN ('comm_time_avg', 'comm_time_max', 'compute_time_avg', 'compute_time_max', 'total_time')
GROUP BY run_id, "time", system, app, workload, variant, stack, interconnect, ranks, repeat
HAVING max(value) FILTER (WHERE name = 'comm_time_avg') IS NOT NULL;

-- Parallel I/O (the groundwater study): pio's bandwidths per method and group
-- size. The method and group size come from Ramble's variables, the PARAM
-- lines the stdout reader keeps (metadata.params), or the profile's Adiak
-- values (variant, group_size); a group size only means something for two-phase.
CREATE VIEW v_io AS
SELECT f.run_id, f."time", f.system, f.app, f.workload, f.variant, f.stack, f.interconnect, f.ranks, f.repeat,
       m.method,
       CASE WHEN m.method = 'two-phase' THEN m.group_size END AS group_size,
       max(f.value) FILTER (WHERE f.name = 'write_bandwidth') AS write_mbs,
       max(f.value) FILTER (WHERE f.name = 'read_bandwidth') AS read_mbs,
       max(f.value) FILTER (WHERE f.name = 'io_time_avg') AS io_time_avg,
       max(f.value) FILTER (WHERE f.name = 'io_time_max') AS io_time_max
FROM v_foms f
JOIN runs r ON r.id = f.run_id
CROSS JOIN LATERAL (SELECT
    coalesce(r.metadata -> 'ramble_variables' ->> 'method', r.metadata -> 'params' ->> 'method', r.variant) AS method,
    nullif(coalesce(r.metadata -> 'ramble_variables' ->> 'group_size', r.metadata -> 'params' ->> 'group-size',
                    r.metadata ->> 'group_size'), '')::integer AS group_size) m
WHERE f.app = 'pio' AND f.status = 'ok'
  AND f.name IN ('write_bandwidth', 'read_bandwidth', 'io_time_avg', 'io_time_max')
GROUP BY f.run_id, f."time", f.system, f.app, f.workload, f.variant, f.stack, f.interconnect, f.ranks, f.repeat,
         m.method, m.group_size;

-- Panel queries select a time range first, then series keys.
CREATE INDEX runs_started_at ON runs (started_at);
CREATE INDEX runs_app_started_at ON runs (app, started_at);
