-- The comparison views outside tools read (notebooks, site scripts) follow the
-- measurement model (docs/measurement-model.md), as the dashboards do: each run
-- on its focus window when it has one, else its run window (the "window"
-- column says which), time the window's slowest rank's, partial and failed
-- runs left out, and runs compared only with runs that differ in exactly the
-- dimension compared. Before, they averaged runs.wall_time, which meant
-- Caliper's whole-run total for profiled runs and the timed loop for
-- unprofiled ones, over runs of any problem size.

-- Each ok run once, on the window it is compared on.
CREATE VIEW v_run_compared AS
SELECT DISTINCT ON (m.run_id) m.*
FROM v_run_metrics m
WHERE m.status = 'ok' AND m.series_id IS NOT NULL
ORDER BY m.run_id, m."window" = 'focus' DESC;

-- Strong scaling: the same experiment (application, environment, parameters but the rank count) against its
-- smallest rank count, on the same window.
DROP VIEW v_scaling;
CREATE VIEW v_scaling AS
WITH per_ranks AS (
    SELECT strong_scaling_key(c.app, c.parameters, c.environment) AS scaling_key, c."window", c.app,
           min(r.variant) AS variant, min(r.global_size) AS global_size, c.environment, c.ranks,
           avg(c.time_s) AS time_s, count(*) AS samples
    FROM v_run_compared c JOIN runs r ON r.id = c.run_id
    WHERE c.time_s > 0
    GROUP BY 1, 2, 3, 6, 7
), base AS (
    SELECT DISTINCT ON (scaling_key, "window") scaling_key, "window", ranks AS base_ranks, time_s AS base_time
    FROM per_ranks ORDER BY scaling_key, "window", ranks
)
SELECT p.*, b.base_ranks, b.base_time / p.time_s AS speedup,
       (b.base_time / p.time_s) / (p.ranks::double precision / b.base_ranks) AS efficiency
FROM per_ranks p JOIN base b USING (scaling_key, "window");

-- The environment with the MPI stack, its build and the Caliper configuration taken out. Interconnect
-- configurations are named per stack in the site's interconnects.yaml (openmpi4/tcp, impi2021/tcp): the stack's
-- prefix goes too, so both stacks' tcp runs stay comparable.
CREATE FUNCTION environment_but_stack(environment jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
SELECT (environment - ARRAY['stack', 'mpi_library', 'spack_hash', 'compiler', 'caliper'])
       || jsonb_build_object('interconnect', regexp_replace(environment->>'interconnect', '^[^/]*/', ''))
$$;

-- Stacks on the same experiment: equal application, parameters and environment but the MPI stack (its library,
-- its build and compiler) and the Caliper configuration: each run is compared on its focus window, the interval
-- the workloads time themselves whether Caliper profiled them or not. stacks_compared counts the stacks that ran it.
DROP VIEW v_stack_comparison;
CREATE VIEW v_stack_comparison AS
SELECT c.app, c.parameters, environment_but_stack(c.environment) AS environment_but_stack,
       c."window", c.environment->>'stack' AS stack, c.environment->>'mpi_library' AS mpi_library,
       avg(c.time_s) AS time_s, min(c.time_s) AS time_min, max(c.time_s) AS time_max,
       avg(c.mpi_fraction_avg) AS mpi_fraction_avg, count(*) AS samples,
       count(*) OVER (PARTITION BY c.app, c.parameters, environment_but_stack(c.environment),
                      c."window") AS stacks_compared
FROM v_run_compared c
GROUP BY c.app, c.parameters, environment_but_stack(c.environment), c."window",
         c.environment->>'stack', c.environment->>'mpi_library';

-- Procurement: systems on the same experiment, equal application, parameters and environment but the system and
-- its hardware (and the Spack build and Caliper configuration that go with a system), with the hardware each
-- system had. systems_compared counts the systems that ran it.
DROP VIEW v_system_comparison;
CREATE VIEW v_system_comparison AS
SELECT c.app, c.parameters, c.environment - ARRAY['system', 'hardware', 'spack_hash', 'caliper'] AS environment_but_system, c."window",
       c.environment->>'system' AS system, h.cpu_model, h.cores_per_node, h.interconnect AS system_interconnect,
       avg(c.time_s) AS time_s, min(c.time_s) AS time_min, max(c.time_s) AS time_max,
       avg(c.mpi_fraction_avg) AS mpi_fraction_avg, count(*) AS samples,
       count(*) OVER (PARTITION BY c.app, c.parameters, c.environment - ARRAY['system', 'hardware', 'spack_hash', 'caliper'], c."window")
         AS systems_compared
FROM v_run_compared c
JOIN runs r ON r.id = c.run_id
LEFT JOIN hardware_versions h ON h.id = r.hardware_id
GROUP BY c.app, c.parameters, c.environment - ARRAY['system', 'hardware', 'spack_hash', 'caliper'], c."window", c.environment->>'system',
         h.cpu_model, h.cores_per_node, h.interconnect;
