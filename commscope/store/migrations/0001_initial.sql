-- commscope store, version 1. One record shape: run -> call-tree nodes -> metrics.
-- Dashboards and reports read the views at the end, never these tables.

CREATE TABLE systems (
    id            serial PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    cpu_model     text,
    cores_per_node integer,
    interconnect  text,
    hardware      jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE stacks (
    id            serial PRIMARY KEY,
    name          text NOT NULL,            -- e.g. debian-openmpi4, or the vendor when no name is known
    library       text NOT NULL,            -- MPI_Get_library_version, first line
    UNIQUE (name, library)
);

-- One ingest batch or one Ramble workspace run.
CREATE TABLE campaigns (
    id            bigserial PRIMARY KEY,
    kind          text NOT NULL CHECK (kind IN ('ingest', 'ramble')),
    source        text NOT NULL,
    git_commit    text,
    ci_pipeline   text,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE runs (
    id            bigserial PRIMARY KEY,
    content_hash  text NOT NULL UNIQUE,     -- sha256 of the profile file(s): re-ingesting is a no-op
    campaign_id   bigint NOT NULL REFERENCES campaigns ON DELETE CASCADE,
    system_id     integer REFERENCES systems,
    stack_id      integer REFERENCES stacks,
    status        text NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'failed')),
    profile_kind  text NOT NULL,            -- runtime-profile, per-rank, spot, json-split, msgtrace
    app           text NOT NULL,
    workload      text NOT NULL,
    variant       text,
    decomposition text,
    interconnect  text,
    ranks         integer NOT NULL,
    nodes         integer,
    global_size   text,
    local_size    text,
    iterations    integer,
    compiler      text,
    spack_hash    text,
    caliper_version text,
    started_at    timestamptz NOT NULL,
    wall_time     double precision,         -- slowest rank's total exclusive time over the tree
    mpi_time_avg  double precision,         -- mean over ranks of time in MPI functions
    mpi_time_max  double precision,
    mpi_fraction_avg double precision,      -- sum(mpi) / sum(total) over ranks
    mpi_fraction_slowest double precision,  -- mpi / total on the rank with the largest total
    source        text NOT NULL,
    metadata      jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX runs_series ON runs (app, workload, variant, stack_id, interconnect, ranks, started_at);

-- Interned call paths: 'main/timestep/halo_exchange/MPI_Sendrecv'.
CREATE TABLE nodes (
    id            bigserial PRIMARY KEY,
    path          text NOT NULL UNIQUE,
    name          text NOT NULL,
    parent_path   text,
    depth         integer NOT NULL,
    is_mpi        boolean NOT NULL
);

CREATE TABLE node_metrics (
    run_id        bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    node_id       bigint NOT NULL REFERENCES nodes,
    excl_min      double precision, excl_avg double precision, excl_max double precision,
    incl_min      double precision, incl_avg double precision, incl_max double precision,
    calls         bigint,                   -- summed over ranks, when region.count was on
    imbalance     double precision,         -- excl_max / excl_avg
    PRIMARY KEY (run_id, node_id)
);

-- Per MPI function under each region: the MPI leaf nodes, summed over ranks.
CREATE TABLE mpi_metrics (
    run_id        bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    node_id       bigint NOT NULL REFERENCES nodes,   -- the region the call was made in
    function      text NOT NULL,
    time_total    double precision NOT NULL,
    time_max      double precision,
    calls         bigint,
    bytes         bigint,
    PRIMARY KEY (run_id, node_id, function)
);

CREATE TABLE rank_metrics (
    run_id        bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    rank          integer NOT NULL,
    total_time    double precision NOT NULL,
    user_time     double precision NOT NULL,   -- the groundwater study's USER
    mpi_time      double precision NOT NULL,   -- MPI, excluding MPI_SYNC
    mpi_sync_time double precision NOT NULL,   -- barrier and wait-type time
    PRIMARY KEY (run_id, rank)
);

CREATE TABLE comm_matrix (
    run_id        bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    src           integer NOT NULL,
    dst           integer NOT NULL,
    messages      bigint NOT NULL,
    bytes         bigint NOT NULL,
    PRIMARY KEY (run_id, src, dst)
);

CREATE TABLE foms (
    run_id        bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    name          text NOT NULL,
    repeat        integer NOT NULL DEFAULT 0,
    value         double precision NOT NULL,
    unit          text,
    PRIMARY KEY (run_id, name, repeat)
);

-- ---- views -------------------------------------------------------------

CREATE VIEW v_runs AS
SELECT r.id AS run_id, r.started_at, r.status, r.app, r.workload, r.variant, r.decomposition,
       coalesce(r.interconnect, 'default') AS interconnect, r.ranks, r.nodes,
       s.name AS system, st.name AS stack, st.library AS mpi_library,
       r.global_size, r.local_size, r.iterations, r.wall_time,
       r.mpi_time_avg, r.mpi_time_max, r.mpi_fraction_avg, r.mpi_fraction_slowest,
       c.id AS campaign_id, c.git_commit, c.ci_pipeline, r.profile_kind, r.caliper_version
FROM runs r
JOIN campaigns c ON c.id = r.campaign_id
LEFT JOIN systems s ON s.id = r.system_id
LEFT JOIN stacks st ON st.id = r.stack_id;

CREATE VIEW v_mpi_fraction AS
SELECT started_at AS "time", system, app, workload, variant, stack, interconnect, ranks,
       mpi_fraction_avg, mpi_fraction_slowest, wall_time, run_id
FROM v_runs
WHERE status = 'ok' AND mpi_fraction_avg IS NOT NULL;

-- Speedup and efficiency against the smallest rank count of the same series.
CREATE VIEW v_scaling AS
WITH series AS (
    SELECT system, app, workload, variant, stack, interconnect, global_size, ranks,
           avg(wall_time) AS wall_time, count(*) AS samples
    FROM v_runs WHERE status = 'ok' AND wall_time > 0
    GROUP BY system, app, workload, variant, stack, interconnect, global_size, ranks
), base AS (
    SELECT DISTINCT ON (system, app, workload, variant, stack, interconnect, global_size)
           system, app, workload, variant, stack, interconnect, global_size, ranks AS base_ranks, wall_time AS base_time
    FROM series ORDER BY system, app, workload, variant, stack, interconnect, global_size, ranks
)
SELECT s.*, b.base_ranks, b.base_time / s.wall_time AS speedup,
       (b.base_time / s.wall_time) / (s.ranks::double precision / b.base_ranks) AS efficiency
FROM series s JOIN base b USING (system, app, workload, variant, stack, interconnect, global_size);

CREATE VIEW v_stack_comparison AS
SELECT system, app, workload, variant, interconnect, ranks, stack,
       avg(wall_time) AS wall_time, avg(mpi_fraction_avg) AS mpi_fraction_avg, count(*) AS samples
FROM v_runs WHERE status = 'ok'
GROUP BY system, app, workload, variant, interconnect, ranks, stack;

CREATE VIEW v_mpi_routines AS
SELECT m.run_id, n.path AS region, m.function, m.time_total, m.time_max, m.calls, m.bytes
FROM mpi_metrics m JOIN nodes n ON n.id = m.node_id;

CREATE VIEW v_node_metrics AS
SELECT nm.run_id, n.path, n.name, n.depth, n.is_mpi, nm.excl_min, nm.excl_avg, nm.excl_max,
       nm.incl_min, nm.incl_avg, nm.incl_max, nm.calls, nm.imbalance
FROM node_metrics nm JOIN nodes n ON n.id = nm.node_id;

CREATE VIEW v_rank_groups AS
SELECT run_id, rank, total_time, user_time, mpi_time, mpi_sync_time FROM rank_metrics;

CREATE VIEW v_comm_matrix AS
SELECT run_id, src, dst, messages, bytes FROM comm_matrix;
