-- Ramble campaigns name their experiments; sites describe their hardware;
-- read-only roles are remembered so that views added later are granted too.

ALTER TABLE runs ADD COLUMN experiment text;

CREATE TABLE readonly_roles (
    name          text PRIMARY KEY
);

-- New columns go last: the views built on v_runs keep theirs.
CREATE OR REPLACE VIEW v_runs AS
SELECT r.id AS run_id, r.started_at, r.status, r.app, r.workload, r.variant, r.decomposition,
       coalesce(r.interconnect, 'default') AS interconnect, r.ranks, r.nodes,
       s.name AS system, st.name AS stack, st.library AS mpi_library,
       r.global_size, r.local_size, r.iterations, r.wall_time,
       r.mpi_time_avg, r.mpi_time_max, r.mpi_fraction_avg, r.mpi_fraction_slowest,
       c.id AS campaign_id, c.git_commit, c.ci_pipeline, r.profile_kind, r.caliper_version,
       r.experiment, r.compiler, r.spack_hash, s.cpu_model, s.cores_per_node,
       s.interconnect AS system_interconnect, c.kind AS campaign_kind
FROM runs r
JOIN campaigns c ON c.id = r.campaign_id
LEFT JOIN systems s ON s.id = r.system_id
LEFT JOIN stacks st ON st.id = r.stack_id;

-- Procurement: the same workload on different hardware, one row per system.
CREATE VIEW v_system_comparison AS
SELECT system, cpu_model, cores_per_node, system_interconnect, app, workload, variant, stack, interconnect, ranks,
       avg(wall_time) AS wall_time, avg(mpi_fraction_avg) AS mpi_fraction_avg, count(*) AS samples
FROM v_runs WHERE status = 'ok'
GROUP BY system, cpu_model, cores_per_node, system_interconnect, app, workload, variant, stack, interconnect, ranks;

-- Every FOM with its run's series, for Ramble FOM panels and repeat statistics.
CREATE VIEW v_foms AS
SELECT v.run_id, v.started_at AS "time", v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks,
       v.experiment, v.status, f.name, f.repeat, f.value, f.unit
FROM foms f JOIN v_runs v ON v.run_id = f.run_id;
