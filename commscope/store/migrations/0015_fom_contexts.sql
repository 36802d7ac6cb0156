-- FOM contexts (issue 15, item 2). Ramble reports an application's FOMs per context
-- (figure_of_merit_context): Intel MPI Benchmarks' "Latency min" once per message size, in
-- contexts named "Bytes: 4 (Latency)", "Bytes: 8 (Latency)", ... One run then has many FOMs of
-- one name, told apart only by their context. The context is stored as Ramble names it; NULL is
-- Ramble's "null" context (a FOM outside every context, as all of commscope's own workloads' are).
-- The key becomes (run, name, repeat, context), a NULL context counting as one value.
ALTER TABLE foms ADD COLUMN context text;
ALTER TABLE foms DROP CONSTRAINT foms_pkey;
CREATE UNIQUE INDEX foms_run_name_repeat_context ON foms (run_id, name, repeat, context) NULLS NOT DISTINCT;

-- v_foms as migration 0002 made it, plus the context.
CREATE OR REPLACE VIEW v_foms AS
SELECT v.run_id, v.started_at AS "time", v.system, v.app, v.workload, v.variant, v.stack, v.interconnect, v.ranks,
       v.experiment, v.status, f.name, f.repeat, f.value, f.unit, f.context
FROM foms f JOIN v_runs v ON v.run_id = f.run_id;
