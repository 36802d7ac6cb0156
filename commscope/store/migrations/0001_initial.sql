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
