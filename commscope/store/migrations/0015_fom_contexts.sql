-- FOM contexts (issue 15, item 2). Ramble reports an application's FOMs per context
-- (figure_of_merit_context): Intel MPI Benchmarks' "Latency min" once per message size, in
-- contexts named "Bytes: 4 (Latency)", "Bytes: 8 (Latency)", ... One run then has many FOMs of
-- one name, told apart only by their context. The context is stored as Ramble names it; NULL is
-- Ramble's "null" context (a FOM outside every context, as all of commscope's own workloads' are).
-- The key becomes (run, name, repeat, context), a NULL context counting as one value.
ALTER TABLE foms ADD COLUMN context text;
ALTER TABLE foms DROP CONSTRAINT foms_pkey;
CREATE UNIQUE INDEX foms_run_name_repeat_context ON foms (run_id, name, repeat, context) NULLS NOT DISTINCT;
