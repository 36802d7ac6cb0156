-- The rank that spends the most inclusive time in each call-tree node (the
-- overlap and imbalance advisor's "slowest rank" per region). NULL for
-- profiles that keep only across-rank aggregates (spot) and for runs stored
-- before this migration.
ALTER TABLE node_metrics ADD COLUMN incl_max_rank integer;
