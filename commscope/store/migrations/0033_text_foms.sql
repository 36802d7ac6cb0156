-- Text FOMs: a FOM that Ramble reports without a number (HPCG's "Status VALID", the workloads' MPI library and
-- VERIFY results) is kept in runs.metadata.ramble_text_foms. v_text_foms shows each as a row with the run's
-- selection columns, as v_foms shows the numeric ones; the report lists both together.
CREATE VIEW v_text_foms AS
SELECT v.run_id, v.started_at AS "time", v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks,
       v.experiment, v.status, t->>'name' AS name, t->>'value' AS text, t->>'unit' AS unit, t->>'context' AS context
FROM runs r
JOIN v_runs v ON v.run_id = r.id
CROSS JOIN LATERAL jsonb_array_elements(r.metadata->'ramble_text_foms') AS t
WHERE jsonb_typeof(r.metadata->'ramble_text_foms') = 'array';
