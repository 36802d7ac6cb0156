-- The call tree on the run's slowest rank, beside its mean over ranks (the call-tree dashboard's rank_stat
-- variable): each node's exclusive and inclusive time on that rank, and the rank. The slowest rank is the
-- measured rank with the most time in the call tree (its exclusive times summed over every path), the lowest
-- among equals; the same rank for every node of a run, so its nodes form one rank's tree. NULL for profiles that
-- keep only across-rank aggregates (spot) and for runs stored before this migration.
ALTER TABLE node_metrics ADD COLUMN excl_slowest double precision,
                         ADD COLUMN incl_slowest double precision,
                         ADD COLUMN slowest_rank integer;

CREATE OR REPLACE VIEW v_node_metrics AS
SELECT nm.run_id, n.path, n.name, n.depth, n.is_mpi, nm.excl_min, nm.excl_avg, nm.excl_max,
       nm.incl_min, nm.incl_avg, nm.incl_max, nm.calls, nm.imbalance, nm.incl_max_rank,
       nm.excl_slowest, nm.incl_slowest, nm.slowest_rank
FROM node_metrics nm JOIN nodes n ON n.id = nm.node_id;
