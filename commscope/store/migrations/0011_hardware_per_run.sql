-- A system's hardware description is versioned per run. Before, ingesting with
-- a new description (a new node type) overwrote the system's row, so every past
-- run of that system showed the new hardware. Now each distinct description of
-- a system is a row of hardware_versions, a run points at the one it was
-- ingested with, and v_runs reads the run's own.

CREATE TABLE hardware_versions (
    id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    system_id     integer NOT NULL REFERENCES systems (id) ON DELETE CASCADE,
    digest        text NOT NULL,               -- md5 of the description's canonical JSON
    cpu_model     text,
    cores_per_node integer,
    interconnect  text,
    hardware      jsonb NOT NULL,
    first_seen    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (system_id, digest)
);

ALTER TABLE runs ADD COLUMN hardware_id integer REFERENCES hardware_versions (id);

-- What the stores before this migration knew: each system's one (latest) description, for its runs.
INSERT INTO hardware_versions (system_id, digest, cpu_model, cores_per_node, interconnect, hardware)
SELECT id, md5(hardware::text), cpu_model, cores_per_node, interconnect, hardware
FROM systems WHERE hardware <> '{}' OR cpu_model IS NOT NULL OR cores_per_node IS NOT NULL OR interconnect IS NOT NULL;
UPDATE runs r SET hardware_id = h.id FROM hardware_versions h WHERE h.system_id = r.system_id;

-- The same columns in the same order as 0002's v_runs: the run's own hardware.
CREATE OR REPLACE VIEW v_runs AS
SELECT r.id AS run_id, r.started_at, r.status, r.app, r.workload, r.variant, r.decomposition,
       coalesce(r.interconnect, 'default') AS interconnect, r.ranks, r.nodes,
       s.name AS system, st.name AS stack, st.library AS mpi_library,
       r.global_size, r.local_size, r.iterations, r.wall_time,
       r.mpi_time_avg, r.mpi_time_max, r.mpi_fraction_avg, r.mpi_fraction_slowest,
       c.id AS campaign_id, c.git_commit, c.ci_pipeline, r.profile_kind, r.caliper_version,
       r.experiment, r.compiler, r.spack_hash, h.cpu_model, h.cores_per_node,
       h.interconnect AS system_interconnect, c.kind AS campaign_kind
FROM runs r
JOIN campaigns c ON c.id = r.campaign_id
LEFT JOIN systems s ON s.id = r.system_id
LEFT JOIN stacks st ON st.id = r.stack_id
LEFT JOIN hardware_versions h ON h.id = r.hardware_id;

CREATE VIEW v_hardware_versions AS
SELECT h.id AS hardware_id, s.name AS system, h.cpu_model, h.cores_per_node, h.interconnect, h.hardware, h.first_seen
FROM hardware_versions h JOIN systems s ON s.id = h.system_id;
