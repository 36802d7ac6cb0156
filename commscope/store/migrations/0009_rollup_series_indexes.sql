-- Series first. A dashboard shows one system and one application at a time, a
-- few dozen of the store's series, so a panel over 30 nights is better served
-- by each selected series' range of days than by every series' rows of those
-- days filtered afterwards (0006's keys start with the day): at 1M runs the
-- MPI routines panels read 169k rollup rows to keep 15k
-- (dashboards/bench/panel_queries.py). The planner picks whichever is cheaper.
-- collectives_cum_rebuild (0008) reads collectives_daily by series too.
CREATE INDEX runs_daily_series ON runs_daily (series_id, day);
CREATE INDEX wall_time_daily_series ON wall_time_daily (series_id, day);
CREATE INDEX routines_daily_series ON routines_daily (series_id, day);
CREATE INDEX collectives_daily_series ON collectives_daily (series_id, day);
CREATE INDEX halo_daily_series ON halo_daily (series_id, day);
CREATE INDEX io_daily_series ON io_daily (series_id, day);
