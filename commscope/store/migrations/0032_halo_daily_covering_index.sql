-- The halo panels read only the selected series' index entries, without the heap, as 0028 made the routines
-- panels do.
--
-- halo_daily has 0009's (series_id, day), but a series' rows lie one per night across the table, so the planner
-- scanned every series' rows of the range (every system's halo3d and stencil2d) and hashed them against the
-- selected series. Carrying the columns v_halo_daily reads in the index lets each selected series be one
-- index-only scan of its days. On a 43-night bench store (dashboards/bench/panel_queries.py --runs 60000, one
-- system's halo3d over 30 days: 3,688 of 14,741 rows), the two bar panels went from about 20 ms to 10 ms p50;
-- imbalance and skew, whose time is mostly its 3,688 labelled points, changed little. It replaces 0009's index,
-- which it serves in full.
CREATE INDEX halo_daily_series_covering ON halo_daily (series_id, day)
    INCLUDE (model_series_id, global_size, n, comm_time_avg_sum, comm_time_max_n, comm_time_max_sum, skew_n, skew_sum,
             imbalance_n, imbalance_sum, exposed_fraction_n, exposed_fraction_sum);
DROP INDEX halo_daily_series;
