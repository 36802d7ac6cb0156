-- A rank's USER/MPI/MPI_SYNC split is not measured when Caliper did not wrap MPI: NULL, never 0
-- (docs/measurement-model.md). Its total stays, and it is now the rank's run-window time (the time
-- outside every region included, nothing left out by name).
ALTER TABLE rank_metrics ALTER COLUMN user_time DROP NOT NULL;
ALTER TABLE rank_metrics ALTER COLUMN mpi_time DROP NOT NULL;
ALTER TABLE rank_metrics ALTER COLUMN mpi_sync_time DROP NOT NULL;
-- Searchable metadata: any key an application recorded (`metadata @> '{"Solver": "PCG"}'`).
CREATE INDEX IF NOT EXISTS runs_metadata ON runs USING gin (metadata jsonb_path_ops);
