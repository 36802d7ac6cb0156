-- ReFrame results (a run report or perflogs, collectors/commscope/reframe_results.py) are a campaign kind of their
-- own, as Ramble workspaces are: v_runs.campaign_kind tells which tool ran a run.
ALTER TABLE campaigns DROP CONSTRAINT IF EXISTS campaigns_kind_check;
ALTER TABLE campaigns ADD CONSTRAINT campaigns_kind_check CHECK (kind IN ('ingest', 'ramble', 'reframe'));
