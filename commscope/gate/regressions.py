"""The regression gate: for every series (docs/measurement-model.md: runs of equal application, parameters and
environment) in the judged campaign, its ok runs there against its ok runs in the campaigns before it, on one
metric (store/queries/gate.py), judged by stats.judge:
- suspect: this campaign moved against the baseline; regression or improvement: the shift held over the last
  --confirm campaigns; no change: neither, and this campaign would have shown a shift of --max-undetectable;
  cannot tell: it could not have (the finding says what it could have seen and what would do), or the test
  cannot reach alpha with these runs; no baseline: fewer than 3 earlier runs.
- Nights: a campaign whose runs started within 24 hours is one night; a longer one (imported history) is one
  night per UTC day its runs started, so a bulk import is a baseline and its last day the night judged.
What changed behind a finding, and the canaries, are one step up (campaign.py)."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import date, timedelta, timezone

import psycopg

from commscope.store.queries import gate as queries
from commscope.gate.detectable import RUNS_A_NIGHT, runs_a_night
from commscope.gate.pvalues import MIN_BASELINE, MIN_CAMPAIGNS, SEARCH_LIMIT, runs_needed, smallest_p
from commscope.gate.stats import CONFIRM, MAX_UNDETECTABLE, UNLOADED, judge, night_spread, rank_test_reachable
from commscope.gate.metrics import NotMeasured, canonical_metric, direction as direction_of
from commscope.gate.stats import compare  # noqa: F401  (workloads/bench/tuned_vs_default.py names it here)

_UTC = timezone.utc
ONE_NIGHT = timedelta(hours=24)   # a campaign whose runs started within this is one night


@dataclass
class Finding:
    series: dict          # series_id, key, parameters, environment, window, and DESCRIBE's columns
    metric: str
    verdict: str          # regression | improvement | suspect | no change | cannot tell | no baseline
    baseline_median: float | None
    new_median: float | None
    effect: float | None  # relative change, positive = worse
    p_value: float | None
    n_baseline: int
    n_new: int
    time: object = None   # the newest run's start
    campaign: int | None = None          # the campaign judged
    smallest_p: float | None = None      # the smallest p-value the test can give with n_new and n_baseline runs
    needs: dict | None = None            # cannot tell: {"new": runs, "baseline": runs} that make alpha reachable,
    #                                      or {"campaigns": baseline campaigns} the between-campaign test needs
    n_campaigns: int | None = None       # baseline campaigns
    campaign_p: float | None = None      # the judged campaign's median against the baseline campaigns' medians
    previous: str | None = None          # the campaign before: "worse", "better" or "same" against its own baseline
    confirm_p: float | None = None       # the last n_confirm campaigns against the baseline campaigns before them,
    #                                      ranked by confirm_summary; times the summaries tested (_confirmed)
    confirm_effect: float | None = None  # the median of their summaries against the baseline campaigns' median
    confirm_summary: str | None = None   # what the campaigns were summarised by there: "median", "best" (run) or
    #                                      "best unloaded" (the best run, its time discounted for its wait for a core)
    n_confirm: int = 0                   # campaigns ranked by the confirmation test (0: too few to test yet)
    confirm: int = CONFIRM               # campaigns a shift must hold before it is a regression
    attribution: dict | None = None      # regression, improvement, suspect: what differs, regions moved, cause
    #                                      (attribution.py)
    detectable: float | None = None      # the smallest shift this campaign would have flagged (stats.detectable)
    max_undetectable: float = MAX_UNDETECTABLE   # no change only where detectable is at most this
    runs_a_night: int | None = None      # cannot tell for noise: runs a night that would show max_undetectable
    pooled: bool = False                 # the baseline nights' runs were pooled (stats.nights_exchangeable)
    nights_p: float | None = None        # the Kruskal-Wallis p of the baseline nights
    night_spread: dict | None = None     # {"between", "within"}: relative spreads of the baseline (stats.night_spread)
    two_night_p: float | None = None     # pooled: this campaign with the one before against the baseline
    night: object = None                 # the day judged, when the campaign spans several days
    runs: dict | None = None             # {"baseline": run ids, "new": run ids}: what attribution reads
    baseline_campaign: int | None = None  # the last baseline night's campaign (outputs.diff_url compares with it)
    moved: str | None = None             # regression, improvement, suspect: "worse" or "better" (stats._raise)
    alert_p: float | None = None         # the p of the test that raised it, on alpha's scale (stats._raise)
    nights_alert_p: float | None = None  # that p with nights as units too (stats._raise): what a budget weighs
    confirm_units_p: float | None = None  # a regression's confirmation by Student's t, nights as units (stats)
    confirm_floor: float | None = None   # the smallest confirm_p its run counts allow (stats._confirmed)
    direction: str = "lower"             # the metric's better side: "lower" or "higher"
    held: str | None = None              # why an alert is held back by the campaign's budget (campaign.hold)
    group: object = None                 # the campaign.Group of alerts with one cause this alert is part of

    @property
    def way(self) -> str | None:
        """Which way a regression, improvement or suspect moved: slower or faster where lower is better, else worse
        or better."""
        if self.moved is None:
            return None
        if self.direction == "lower":
            return "slower" if self.moved == "worse" else "faster"
        return self.moved

    @property
    def leads(self) -> bool:
        """An alert that stands for itself, or leads the group of alerts with its cause (campaign.Group)."""
        return self.alert and (self.group is None or self.group.members[0] is self)

    @property
    def alert(self) -> bool:
        """An alarm or an early warning the facility acts on: a regression, or a suspect on the worse side, that
        the campaign's budget did not hold back."""
        worse = self.verdict == "regression" or (self.verdict == "suspect" and self.moved == "worse")
        return worse and self.held is None

    def label(self) -> str:
        """As the dashboards name a series (v_run_metrics_daily.series_label) and the window judged."""
        s = self.series
        variant = f" {s['variant']}" if s["variant"] else ""
        size = f" {s['global_size']}" if s["global_size"] else ""
        return (f"{s['system'] or 'unknown'} {s['app']}{variant} {s['stack'] or 'unknown'} {s['interconnect']} "
                f"n{s['ranks']}{size} #{s['series_id']} [{s['window']}]")

    def reason(self, alpha: float, min_effect: float) -> str:
        """One sentence: why this verdict."""
        if self.verdict == "no baseline":
            return (f"{self.n_baseline} earlier runs of this series; the gate needs at least {MIN_BASELINE}")
        change = f"{self.effect:+.1%}" if self.effect is not None and math.isfinite(self.effect) else "?"
        said = (f"{self.metric} {change} against the median of {self.n_baseline} earlier runs "
                f"({self.n_new} new, p={self.p_value:.2g})")
        if self.verdict == "cannot tell" and self.needs and self.needs.get("campaigns"):
            return (f"cannot tell: the baseline has {self.n_campaigns} campaigns; the between-campaign test needs "
                    f"{self.needs['campaigns']} (the spread between nights is unknown before); {said}")
        if self.verdict == "cannot tell" and not self.needs:
            return f"cannot tell: {self.could_not_show()}; {said}"
        if self.verdict == "cannot tell":
            more = []
            if self.needs and self.needs.get("new"):
                more.append(f"{self.needs['new']} new runs")
            if self.needs and self.needs.get("baseline"):
                more.append(f"{self.needs['baseline']} baseline runs")
            need = (" or ".join(more) if more else f"more than {SEARCH_LIMIT} runs")
            return (f"cannot tell: with {self.n_new} new and {self.n_baseline} baseline runs the test's smallest "
                    f"p-value is {self.smallest_p:.3g}, not below alpha={alpha:g}; it needs {need}; {said}")
        between = (f"; campaign median against {self.n_campaigns} baseline campaigns' p={self.campaign_p:.2g}"
                   if self.campaign_p is not None else "")
        if self.verdict == "suspect":
            way = self.moved or ("worse" if (self.effect or 0) > 0 else "better")
            plain = f" ({self.way})" if self.way not in (None, way) else ""
            held = (f"; the last {self.n_confirm} campaigns together ({self._summarised()}): "
                    f"{self.confirm_effect:+.1%}, p={self.confirm_p:.2g}" if self.confirm_p is not None else "")
            return (f"suspect: {way} in this campaign alone{plain}, not yet over {self.confirm} campaigns (a shift "
                    f"counts when it persists): {said}{between}{held}")
        if self.verdict == "no change":
            return (f"no change of at least {min_effect:.0%} that is significant at alpha={alpha:g} (this campaign "
                    f"would have shown a shift of {self.detectable:+.0%}): {said}{between}")
        if self.verdict in ("regression", "improvement") and self.confirm_effect is None:
            # too little history to rank a run of campaigns: this one and the one before moved the same way
            return (f"{self.verdict}: this campaign and the one before both moved {self.moved} against the "
                    f"campaigns before them (too few to rank a run of {self.confirm} campaigns); this campaign: "
                    f"{said}{between}" + (f"; {self.way}" if self.way else ""))
        if self.verdict in ("regression", "improvement"):
            return (f"{self.verdict}: held over the last {self.n_confirm} campaigns, whose {self._summarised()} "
                    f"are {self.confirm_effect:+.1%} against the {self.n_campaigns} campaigns before them "
                    f"(p={self.confirm_p:.2g}); this campaign: {said}{between}"
                    + (f"; {self.way}" if self.way else ""))
        return f"{self.verdict}: {said}"

    def could_not_show(self) -> str:
        """Why noise leaves a campaign undecided: the detectable effect, and the runs a night that would do."""
        if self.detectable is None and (self.n_campaigns or 0) <= MIN_CAMPAIGNS and not self.pooled:
            return (f"with {self.n_campaigns} baseline nights that differ, what this series could show is unknown: "
                    f"a night left out of the baseline leaves too few to judge it against ({MIN_CAMPAIGNS + 1} "
                    f"nights would do)")
        seen = (f"this series could not show shifts below {self.detectable:.0%}" if self.detectable is not None
                else "no shift this series could show was found")
        more = (f"{self.runs_a_night} runs a night would" if self.runs_a_night else
                f"no run count up to {RUNS_A_NIGHT[-1]} a night would")
        spread = (f" (its nights differ by {self.night_spread['between']:.0%}, its runs within a night by "
                  f"{self.night_spread['within']:.0%})" if self.night_spread else "")
        return f"{seen}; {more} show {self.max_undetectable:.0%}{spread}"

    def _summarised(self) -> str:
        return {"median": "medians", "best": "best runs",
                UNLOADED: "best runs, discounted for their wait for a core"}.get(self.confirm_summary,
                                                                                 str(self.confirm_summary))


def nights(rows: list[tuple]) -> dict[tuple, tuple]:
    """Per row (series_id, window, campaign_id, started_at, run_id, value): its night, (campaign_id, day): day 0
    for a campaign whose runs of the series started within ONE_NIGHT, else the ordinal of the UTC day the run
    started."""
    span: dict[tuple, list] = {}
    for sid, window, cid, started, _run, _v in rows:
        if started is not None:
            s = span.setdefault((sid, window, cid), [started, started])
            s[0], s[1] = min(s[0], started), max(s[1], started)
    out = {}
    for sid, window, cid, started, run_id, _v in rows:
        s = span.get((sid, window, cid))
        long = s is not None and s[1] - s[0] > ONE_NIGHT
        out[run_id] = (cid, started.astimezone(_UTC).date().toordinal() if long else 0)
    return out


def values(conn: psycopg.Connection, metric: str, where: dict) -> tuple[list[tuple], str]:
    """Every row (series_id, window, campaign_id, started_at, run_id, value) of METRIC in the WHERE selection, and
    which way is better: what the gate would compare, for inspection (check itself reads each series' window)."""
    metric = canonical_metric(metric)
    measured, params, fom_units = queries.measurements(conn, metric, where)
    return queries.measured_values(conn, measured, params), direction_of(metric, fom_units)


def check(conn: psycopg.Connection, metric: str = "time_s", campaign: int | None = None, baseline: int = 10,
          min_effect: float = 0.05, alpha: float = 0.01, confirm: int = CONFIRM,
          max_undetectable: float = MAX_UNDETECTABLE, **where) -> list[Finding]:
    """Findings for every series of the given campaign (or, without one, of the newest when it is unambiguous:
    queries.newest_campaign): its last night there against its `baseline` nights before (the module's rule)."""
    metric = canonical_metric(metric)
    unknown = set(where) - set(queries.FILTERS)
    if unknown:
        raise ValueError(f"cannot filter series by {', '.join(sorted(unknown))}; choose from "
                         f"{', '.join(queries.FILTERS)}")
    measured, params, fom_units = queries.measurements(conn, metric, where)
    direction = direction_of(metric, fom_units)
    judged = campaign if campaign is not None else queries.newest_campaign(conn, measured, params, metric)
    ranked = confirm > 1 and rank_test_reachable(baseline, confirm, alpha)
    rows = queries.measured_rows(conn, measured, params, judged, baseline + (confirm - 1 if ranked else 1))
    if not any(r[2] == judged for r in rows):
        unmeasured = queries.runs_of(conn, measured, params, judged)
        if unmeasured:
            raise NotMeasured(f"campaign {judged}: none of its {unmeasured} successful runs in the selection measured "
                              f"{metric} (NULL: not measured), so nothing is judged on it")
        raise LookupError(f"campaign {judged} has no successful runs of {metric} matching the selection")
    night_of = nights(rows)
    series: dict[tuple, dict[tuple, list]] = {}
    unloaded: dict[tuple, dict[tuple, list]] = {}   # the same values discounted for the run's wait for a core
    ids: dict[tuple, dict[tuple, list]] = {}
    last: dict[tuple, tuple] = {}   # the series' newest run in the judged campaign: (started_at, run_id)
    shares = queries.wait_shares(conn, [r[4] for r in rows if r[1] == "focus"]) if metric == "time_s" else {}
    for sid, window, cid, started, run_id, value in rows:
        key, night = (sid, window), night_of[run_id]
        series.setdefault(key, {}).setdefault(night, []).append(float(value))
        ids.setdefault(key, {}).setdefault(night, []).append(run_id)
        share = shares.get(run_id) if window == "focus" else None
        unloaded.setdefault(key, {}).setdefault(night, []).append(
            float(value) * (1.0 - share) if share is not None else None)
        if cid == judged:
            last[key] = max(last.get(key, (started, run_id)), (started, run_id))
    described = queries.describe(conn, [run_id for _, run_id in last.values()])
    sign = 1.0 if direction == "lower" else -1.0
    findings = []
    for key, by_night in sorted(series.items()):
        order = sorted(by_night)
        tonight = max(n for n in order if n[0] == judged)
        earlier_ids = [n for n in order if n != tonight][-(baseline + max(confirm - 1, 1)):]
        earlier = [[sign * v for v in by_night[n]] for n in earlier_ids]
        new = by_night[tonight]
        told = [[sign * v if v is not None else None for v in unloaded[key][n]] for n in [*earlier_ids, tonight]]
        j = judge([sign * v for v in new], earlier, min_effect, alpha, baseline, confirm,
                  unloaded=(told[-1], told[:-1]), max_undetectable=max_undetectable)
        base_nights = earlier_ids[slice(*j.baseline_of)] if baseline else []
        base = [v for n in base_nights for v in by_night[n]]
        started, run_id = last[key]
        f = Finding({"series_id": key[0], "window": key[1], **described[run_id]}, metric, j.verdict,
                    statistics.median(base) if base else None, statistics.median(new),
                    j.effect, j.p_value, len(base), len(new), started, judged, n_campaigns=j.n_campaigns,
                    campaign_p=j.campaign_p, previous=j.previous, confirm_p=j.confirm_p,
                    confirm_effect=j.confirm_effect, confirm_summary=j.confirm_summary, n_confirm=j.n_confirm,
                    confirm=confirm, detectable=j.detectable, max_undetectable=max_undetectable,
                    pooled=j.pooled, nights_p=j.nights_p, two_night_p=j.two_night_p,
                    night=(date.fromordinal(tonight[1]) if tonight[1] else None),
                    runs={"baseline": [r for n in base_nights for r in ids[key][n]], "new": ids[key][tonight]},
                    baseline_campaign=base_nights[-1][0] if base_nights else None,
                    moved=j.moved, alert_p=j.alert_p, nights_alert_p=j.nights_alert_p,
                    confirm_units_p=j.confirm_units_p if j.n_confirm else None,
                    confirm_floor=j.confirm_floor if j.n_confirm else None, direction=direction)
        signed = [[sign * v for v in by_night[n]] for n in base_nights]
        f.night_spread = night_spread(signed)
        if j.verdict != "no baseline":
            f.smallest_p = smallest_p(len(new), len(base))
        if j.verdict == "cannot tell" and f.smallest_p >= (j.level or alpha):
            f.needs = runs_needed(len(new), len(base), j.level or alpha)
        elif j.verdict == "cannot tell" and j.n_campaigns < MIN_CAMPAIGNS:
            f.needs = {"campaigns": MIN_CAMPAIGNS}
        elif j.verdict == "cannot tell":
            f.runs_a_night = runs_a_night(signed, min_effect, j.level, j.pooled, len(new), max_undetectable)
        findings.append(f)
    return findings
