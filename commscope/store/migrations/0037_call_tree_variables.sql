-- The call-tree dashboard's series, campaign and baseline variables offer every series and campaign (a link from
-- the regression gate names them, whatever the time range). Read from the series and campaigns tables, one row
-- each, not by grouping every run (which grows with the history: about 12 ms at 50,000 runs).
CREATE VIEW v_series_ids AS SELECT id AS series_id FROM series;
CREATE VIEW v_campaign_ids AS SELECT id AS campaign_id, created_at, kind FROM campaigns;
