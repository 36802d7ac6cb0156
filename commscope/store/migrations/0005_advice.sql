-- What the advisors conclude (commscope advise ...), kept with the run it was
-- computed from, so reports and dashboards can show it next to the data.
CREATE TABLE advice (
    id            bigserial PRIMARY KEY,
    created_at    timestamptz NOT NULL DEFAULT now(),
    kind          text NOT NULL,            -- placement, barriers, collectives, overlap
    run_id        bigint REFERENCES runs ON DELETE CASCADE,
    source        text NOT NULL,            -- what it was computed from (a run, a profile path)
    summary       jsonb NOT NULL,           -- the figures (predicted and measured)
    text          text NOT NULL             -- the advice in one paragraph
);
CREATE INDEX advice_kind ON advice (kind, created_at);
