-- Measurement model version 4 (docs/measurement-model.md, "Model versions"). From version 4 a one-rank spot
-- profile's windows carry the slowest rank's figures (its one rank is the mean rank and the slowest): time,
-- MPI max, the slowest rank's MPI fraction and the POP efficiencies, which version 3 left NULL as for any spot
-- profile; and pio's PARAM dir and file (where the run put its files) are no longer parameters, which made
-- every run folder a series of its own. Runs of version 3 are listed for re-ingest only where that changes
-- them: one rank and a window without its time, or those parameters. The version here must equal
-- ingest.MODEL_VERSION.
CREATE OR REPLACE VIEW v_runs_needing_reingest AS
SELECT id AS run_id, source, started_at, model_version,
       CASE WHEN model_version IS NULL
            THEN 'stored before the measurement model: no windows and no series'
            WHEN model_version = 1
            THEN 'measured under model version 1: its wall_time, MPI columns on runs and '
                 'rank_metrics leave out regions named verify and the time outside every region, and MPI calls '
                 'outside every region are missing from mpi_metrics'
            WHEN model_version = 2
            THEN 'measured under model version 2: a profile without a loop region has '
                 'its focus window over the timestep regions instead of the workload''s timed loop, a message '
                 'trace has none, a spot profile''s mean-rank numbers average per-node averages, and a spot profile '
                 'without exclusive time (Caliper before 2.11) subtracts its children''s means'
            ELSE 'measured under model version ' || model_version || ': a one-rank spot profile has no time, '
                 'MPI max, slowest-rank MPI fraction or POP efficiency, which its one rank gives, and pio''s dir '
                 'and file (where a run put its files) are parameters, so each run folder is a series'
       END AS reason
FROM runs r
WHERE model_version IS NULL OR model_version < 3
   OR model_version = 3 AND (
          ranks = 1 AND EXISTS (SELECT 1 FROM run_windows w WHERE w.run_id = r.id AND w.time_s IS NULL)
       OR EXISTS (SELECT 1 FROM series s WHERE s.id = r.series_id AND s.parameters ?| '{param.dir,param.file}'));
