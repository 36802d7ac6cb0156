-- What each change point is called (gate/changepoints.verdict: no baseline, cannot tell, suspect, or its direction,
-- by the gate's own minimums on the levels it separates), stored with it when its series is recomputed, so the
-- dashboards' table and annotations call it as `commscope check`, the report and `commscope changepoints` do.
-- Stored change points have none yet: every series' state is forgotten, so the next `commscope changepoints` (or
-- an ingest, for its series) recomputes them; until then their verdict is NULL, shown as not judged.
ALTER TABLE change_points ADD COLUMN verdict text
    CHECK (verdict IN ('no baseline', 'cannot tell', 'suspect', 'regression', 'improvement'));
DELETE FROM change_point_state;
