-- The rank that spends the most inclusive time in each call-tree node (the
-- overlap and imbalance advisor's "slowest rank" per region). NULL for
-- profiles that keep only across-rank aggregates (spot) and for runs stored
-- before this migration.
ALTER TABLE node_metrics ADD COLUMN incl_max_rank integer;

CREATE OR REPLACE VIEW v_node_metrics AS
SELECT nm.run_id, n.path, n.name, n.depth, n.is_mpi, nm.excl_min, nm.excl_avg, nm.excl_max,
       nm.incl_min, nm.incl_avg, nm.incl_max, nm.calls, nm.imbalance, nm.incl_max_rank
FROM node_metrics nm JOIN nodes n ON n.id = nm.node_id;
