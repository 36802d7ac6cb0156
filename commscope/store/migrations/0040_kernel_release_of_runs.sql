-- The kernel a run ran on is one of its versions (docs/measurement-model.md): runs.kernel holds the release the
-- node reported (`uname -r`, recorded by `commscope run`'s experiment script, or given to ingest as --kernel),
-- NULL where nothing recorded it. v_run_versions lists it, v_version_changes names its changes like the others'
-- ("kernel 6.1.0-18-amd64 -> 6.1.0-21-amd64"), and so the gate's findings and v_change_points do.
ALTER TABLE runs ADD COLUMN kernel text;

CREATE OR REPLACE VIEW v_run_versions AS
SELECT r.id AS run_id, r.series_id, r.campaign_id, r.started_at, r.status, st.library AS mpi_library, r.compiler,
       r.spack_hash, r.caliper_version, r.metadata->>'commscope_version' AS commscope_version,
       h.digest AS hardware, r.kernel
FROM runs r
LEFT JOIN stacks st ON st.id = r.stack_id
LEFT JOIN hardware_versions h ON h.id = r.hardware_id;

CREATE OR REPLACE VIEW v_version_changes AS
WITH recorded AS (
    SELECT v.run_id, v.series_id, v.campaign_id, v.started_at, a.what, a.value
    FROM v_run_versions v
    CROSS JOIN LATERAL (VALUES ('MPI library', v.mpi_library), ('compiler', v.compiler),
                               ('Spack spec hash', v.spack_hash), ('Caliper version', v.caliper_version),
                               ('commscope version', v.commscope_version), ('hardware', v.hardware),
                               ('kernel', v.kernel)) AS a(what, value)
    WHERE v.status = 'ok' AND v.series_id IS NOT NULL AND a.value IS NOT NULL
), ordered AS (
    SELECT *, lag(value) OVER (PARTITION BY series_id, what ORDER BY started_at, run_id) AS previous
    FROM recorded
)
SELECT o.series_id, o.what, o.previous, o.value, o.run_id, o.campaign_id, o.started_at AS "time",
       v.system, v.app, v.workload, coalesce(v.variant, '') AS variant, v.stack, v.interconnect, v.ranks,
       v.global_size,
       v.system || ' ' || v.app || coalesce(' ' || nullif(v.variant, ''), '') || ' ' || v.stack || ' '
         || v.interconnect || ' n' || v.ranks || coalesce(' ' || v.global_size, '') || ' #' || o.series_id
         AS series_label
FROM ordered o JOIN v_runs v ON v.run_id = o.run_id
WHERE o.previous IS DISTINCT FROM o.value AND o.previous IS NOT NULL;
