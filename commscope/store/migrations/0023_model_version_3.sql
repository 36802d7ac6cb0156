-- Measurement model version 3 (docs/measurement-model.md, "Model versions"). From version 3 a workload profile
-- without a `loop` region takes its focus window from the workload's own timers when its output is there, and
-- has none otherwise (version 2 used the `timestep` regions, a shorter interval than the timed loop); a message
-- trace, which records no time, takes its focus window from the timers too; and a spot profile's mean rank is
-- each node's sum across ranks over the job's rank count (version 2 added spot's per-node averages, which cover
-- only the ranks that made a record), and a spot profile without exclusive time (Caliper before 2.11) has each
-- node's exclusive mean as its sum less its children's sums over the ranks that reached it (version 2 subtracted
-- the children's means). Runs of version 2 are listed for re-ingest with that reason. The version
-- here must equal ingest.MODEL_VERSION.
CREATE OR REPLACE VIEW v_runs_needing_reingest AS
SELECT id AS run_id, source, started_at, model_version,
       CASE WHEN model_version IS NULL
            THEN 'stored before the measurement model: no windows and no series'
            WHEN model_version = 1
            THEN 'measured under model version 1: its wall_time, MPI columns on runs and '
                 'rank_metrics leave out regions named verify and the time outside every region, and MPI calls '
                 'outside every region are missing from mpi_metrics'
            ELSE 'measured under model version ' || model_version || ': a profile without a loop region has '
                 'its focus window over the timestep regions instead of the workload''s timed loop, a message '
                 'trace has none, a spot profile''s mean-rank numbers average per-node averages, and a spot profile '
                 'without exclusive time (Caliper before 2.11) subtracts its children''s means'
       END AS reason
FROM runs WHERE model_version IS NULL OR model_version < 3;
