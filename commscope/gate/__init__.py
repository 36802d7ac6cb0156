"""Regressions, read from the store's views: the per-campaign gate (regressions), what changed behind a finding
(attribution) and change points over each series' whole history (changepoints)."""
