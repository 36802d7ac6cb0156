-- A dashboard shows one system, but three of its rollup reads took every system's rows, so its panels grew with
-- the systems in the store, not with the one selected: at 10 systems (193,200 runs, 28 nights;
-- dashboards/bench/panel_queries.py --systems 10 --runs 200000) the MPI-fraction panels took 190-210 ms p95 alone
-- and the routines panels 160-315 ms. dashboards/README.md (2026-11-26) has the figures before and after.

-- run_metrics_daily had only (app, day) besides its key: the MPI-fraction and USER / MPI / MPI_SYNC panels read
-- all systems' rows of their application's days (66k rows to keep 6.6k). Series first, as 0009 did for the other
-- rollups; every panel selects a system and an application.
CREATE INDEX run_metrics_daily_by_system ON run_metrics_daily (system, app, day);

-- routines_daily had 0009's (series_id, day), but a series' rows lie one per night across the table (it fills
-- night by night), so fetching them from the heap looked dearer than scanning every series' rows of the range,
-- and the routines panels did that (765k rows to keep 13k). Carrying the columns the panels read
-- (v_mpi_routines_daily) in the index lets them read only the selected series' entries, without the heap.
-- It replaces 0009's index, which it serves in full (routines_daily_rebuild deletes by series and day).
CREATE INDEX routines_daily_series_covering ON routines_daily (series_id, day)
    INCLUDE (model_series_id, function, runs, time_total, calls, group_runs, global_size);
DROP INDEX routines_daily_series;
