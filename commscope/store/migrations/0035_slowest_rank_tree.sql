-- The call tree on the run's slowest rank, beside its mean over ranks (the call-tree dashboard's rank_stat
-- variable): each node's exclusive and inclusive time on that rank, and the rank. The slowest rank is the
-- measured rank with the most time in the call tree (its exclusive times summed over every path), the lowest
-- among equals; the same rank for every node of a run, so its nodes form one rank's tree. NULL for profiles that
-- keep only across-rank aggregates (spot) and for runs stored before this migration.
ALTER TABLE node_metrics ADD COLUMN excl_slowest double precision,
                         ADD COLUMN incl_slowest double precision,
                         ADD COLUMN slowest_rank integer;
