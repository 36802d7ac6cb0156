"""The gate's verdict on one campaign against the campaigns before it (judge), on plain lists of values where
larger is worse, by the tests of pvalues.py; "no change" only where detectable.py's effect is small enough.
No database here: store/queries/gate.py reads the values, regressions.py turns verdicts into findings."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from commscope.gate.detectable import detectable
from commscope.gate.pvalues import (MANN_WHITNEY_FROM, MIN_BASELINE, MIN_CAMPAIGNS, campaign_p, confirm_p,
                                    confirm_smallest_p, mann_whitney_greater, mean_night_p, robust_z_p, runs_of,
                                    sample_variance, smallest_p, unchecked)

CONFIRM = 5             # campaigns a shift must hold, the judged one included, before it is a regression
# What the confirmation test summarises each campaign by (values signed so that larger is worse): its median, the
# typical run, and its best run, the least disturbed one. Interference on a shared machine (another job, a busy
# core) only ever slows a run down, so a campaign's best run is the steadiest estimate of what the code costs:
# BenchmarkTools.jl judges on the minimum for this reason (Chen and Revels, "Robust benchmarking in noisy
# environments", 2016). The median is kept for shifts that slow most runs but not the best one. Each summary is
# tested at alpha / len(CAMPAIGN_SUMMARIES) (Bonferroni), so the pair stays within alpha.
CAMPAIGN_SUMMARIES = {"median": statistics.median, "best": min}
# Where the runs say how long they waited for a core, the best run is taken on their discounted times: each run's
# time less the share of it that its most-delayed rank spent runnable but waiting for a core (the workloads' FOM
# runqueue_wait_share_max, from Linux's schedstat, over the timed loop: the focus window). A busy machine slows a
# run by descheduling its ranks; the discounted time is what the run would have taken with the cores to itself.
# The median stays on the times as measured, so a change that makes the code wait for cores is still judged on
# the time it takes.
UNLOADED = "best unloaded"
EXCHANGEABLE_P = 0.05     # Kruskal-Wallis p at or above which the baseline nights are pooled (not shown to differ)
TWO_NIGHTS_ALPHA = 0.9   # the share of alpha the two-night test gets (the judged night alone: the rest)
MAX_UNDETECTABLE = 0.20   # "no change" only where the detectable effect is at most this


def _moved(new: list[float], base: list[list[float]], min_effect: float, alpha: float,
           quick: bool = False, pooled: bool = False) -> tuple[str | None, dict]:
    """Whether NEW's runs are significantly worse ('worse') or better ('better') than the BASE campaigns' runs,
    at both levels (runs, campaign medians; POOLED: the runs alone), by at least min_effect; None when neither;
    with the numbers of the side the medians moved to (the only side that can pass). QUICK: only the verdict is
    needed, so a change below min_effect is not tested."""
    flat = runs_of(base)
    nm, bm = statistics.median(new), statistics.median(flat)
    effect = (nm - bm) / abs(bm) if bm else (math.inf if nm > bm else 0.0)
    worse = effect >= 0
    out = {"effect": effect, "p": None, "campaign_p": None}
    if quick and abs(effect) < min_effect:
        return None, out
    sign = 1.0 if worse else -1.0
    signed_new, signed_flat = [sign * x for x in new], [sign * x for x in flat]
    if len(new) >= MANN_WHITNEY_FROM:
        out["p"] = mann_whitney_greater(signed_new, signed_flat)
    else:
        out["p"] = robust_z_p(sign * nm, signed_flat)
    if len(base) >= MIN_CAMPAIGNS:
        out["campaign_p"] = campaign_p(sign * nm, [sign * statistics.median(c) for c in base])
    nights_agree = pooled or (out["campaign_p"] is not None and out["campaign_p"] < alpha)
    if nights_agree and out["p"] < alpha and abs(effect) >= min_effect:
        return ("worse" if worse else "better"), out
    return None, out


@dataclass
class Judgement:
    verdict: str
    effect: float | None
    p_value: float | None           # the runs' test of the judged campaign (the larger of its two levels' p)
    campaign_p: float | None = None
    n_campaigns: int = 0            # baseline campaigns
    previous: str | None = None     # the campaign before, against its own baseline: worse, better, same
    confirm_p: float | None = None  # the last `confirm` campaigns against the baseline campaigns before them
    confirm_effect: float | None = None   # the median of their summaries against the baseline's (positive = worse)
    confirm_summary: str | None = None    # the campaign summary (CAMPAIGN_SUMMARIES, or UNLOADED) confirm_p and
    #                                       _effect are of
    n_confirm: int = 0              # campaigns in the confirmation test's recent side (the judged one included)
    baseline_of: tuple[int, int] = (0, 0)   # (start, end) of the baseline campaigns in EARLIER (baseline_window)
    pooled: bool = False            # the baseline nights' runs were pooled (nights_exchangeable)
    nights_p: float | None = None   # nights_exchangeable's p
    two_night_p: float | None = None   # pooled: this campaign and the one before, together, against the baseline
    level: float | None = None      # the level the judged campaign's own test was held to
    detectable: float | None = None    # the smallest shift flagged with POWER (detectable); None: none is
    moved: str | None = None        # regression, improvement, suspect: which way, "worse" or "better"
    alert_p: float | None = None    # the p of the test that raised it, on alpha's scale (_raise)
    nights_alert_p: float | None = None   # the same evidence with nights as units, on alpha's scale (_raise)
    two_nights_units_p: float | None = None   # the two nights' mean median against the nights before (mean_night_p)
    confirm_units_p: float | None = None   # the confirmation's summary by Student's t, nights as units (_confirmed)
    confirm_floor: float | None = None     # the smallest confirm_p its run counts allow (_confirmed)


def confirm_level(alpha: float, summaries: tuple[str, ...] = tuple(CAMPAIGN_SUMMARIES)) -> float:
    """The level each summary's rank test must reach: alpha shared among the summaries (Bonferroni)."""
    return alpha / len(summaries)


def rank_test_reachable(n_base: int, confirm: int, alpha: float,
                        summaries: tuple[str, ...] = tuple(CAMPAIGN_SUMMARIES)) -> bool:
    """Whether the confirmation test can rank CONFIRM campaigns against N_BASE baseline campaigns: the baseline has
    the MIN_CAMPAIGNS the campaign-level test needs, and the smallest rank-test p is below confirm_level."""
    return n_base >= MIN_CAMPAIGNS and confirm_smallest_p(confirm, n_base) < confirm_level(alpha, summaries)


def _confirmed(recent: list[list[float]], before: list[list[float]], min_effect: float, alpha: float,
               summaries: tuple[str, ...] = tuple(CAMPAIGN_SUMMARIES), unloaded: tuple | None = None) -> tuple:
    """('worse' | 'better' | None, p, effect, summary, units_p, floor): whether the RECENT campaigns (the judged one
    last) moved together against the BEFORE campaigns, by one of the SUMMARIES (CAMPAIGN_SUMMARIES): the recent
    campaigns' summaries ranked against the baseline's by confirm_p at p < confirm_level, the median of the recent
    ones at least min_effect from the baseline's, and the judged campaign's own summary at least min_effect the same
    way. UNLOADED, if given, is (recent, before) again with each run's value discounted for its wait for a core
    (None where the run did not say): when every run of both has one, the best run is taken on these (the summary
    UNLOADED). P is the rank test's p times the number of summaries (capped at 1), so it is compared with alpha
    itself; it and EFFECT are those of the summary that moved (the smaller p when both did), else of the one with
    the smaller p. Campaigns of one run each without discounted values have one value to summarise, so every summary
    is the same test: it is made once, at alpha. UNITS_P, for a shift only, is that summary's Student's t of the
    recent campaigns' mean against the baseline's (mean_night_p, times the number of summaries), and FLOOR the
    smallest P the rank test can give (1 / C(recent + baseline, recent), times the summaries): a campaign's budget
    over thousands of series can ask for less (campaign.budget_p)."""
    told = unloaded is not None and all(v is not None for c in (*unloaded[0], *unloaded[1]) for v in c)
    if all(len(c) == 1 for c in (*recent, *before)) and not told:
        summaries = summaries[:1]
    ranked = []
    for name in summaries:
        if name == "best" and told:
            ranked.append((UNLOADED, [min(c) for c in unloaded[0]], [min(c) for c in unloaded[1]]))
        else:
            ranked.append((name, [CAMPAIGN_SUMMARIES[name](c) for c in recent],
                           [CAMPAIGN_SUMMARIES[name](c) for c in before]))
    level = alpha / len(ranked)
    tested = []
    for name, rs, bs in ranked:
        base = statistics.median(bs)
        if not base:
            continue
        effect = (statistics.median(rs) - base) / abs(base)
        last = (rs[-1] - base) / abs(base)
        sign = 1.0 if effect >= 0 else -1.0
        signed = ([sign * v for v in rs], [sign * v for v in bs])
        p = confirm_p(*signed)
        moved = p < level and abs(effect) >= min_effect and sign * last >= min_effect
        tested.append((not moved, p, ("worse" if sign > 0 else "better") if moved else None, effect, name, signed))
    if not tested:
        return None, None, None, None, None, None
    _, p, shift, effect, name, (signed_recent, signed_base) = min(tested, key=lambda t: t[:2])
    units = (min(1.0, mean_night_p(signed_recent, signed_base) * len(ranked))
             if shift is not None and len(signed_base) >= MIN_CAMPAIGNS else None)
    return (shift, min(1.0, p * len(ranked)), effect, name, units,
            min(1.0, confirm_smallest_p(len(recent), len(before)) * len(ranked)))


def baseline_window(n_earlier: int, baseline: int, confirm: int, alpha: float,
                    summaries: tuple[str, ...] = tuple(CAMPAIGN_SUMMARIES)) -> tuple[int, int]:
    """(start, end): the earlier campaigns (oldest first, end excluded) that are the baseline. Once the series has
    enough of them for the confirmation test to reach its level (confirm_level) with a baseline of at least
    MIN_CAMPAIGNS (the campaign-level test's own need), the baseline ends before the last confirm - 1
    campaigns (the ones ranked with the judged campaign), so the nights of a shift in progress never enter the
    baseline they are judged against, and each stays suspect until the shift is confirmed; before that, it is the
    `baseline` campaigns right before the judged one."""
    end = n_earlier - (confirm - 1)
    if not rank_test_reachable(min(end, baseline), confirm, alpha, summaries):
        end = n_earlier
    return max(0, end - baseline), end


def judge(new: list[float], earlier: list[list[float]], min_effect: float, alpha: float,
          baseline: int = 10, confirm: int = CONFIRM,
          summaries: tuple[str, ...] = tuple(CAMPAIGN_SUMMARIES), unloaded: tuple | None = None,
          max_undetectable: float | None = MAX_UNDETECTABLE) -> Judgement:
    """The verdict on NEW (one campaign's values, larger is worse) given EARLIER campaigns' values (oldest first,
    the newest last; up to baseline + confirm - 1 are used), against the baseline_window campaigns.
    - Suspect: NEW moved against them (_moved): where the baseline nights are exchangeable (nights_exchangeable),
      the runs' test alone on their pooled runs; else the runs' test and the nights' (campaign_p), both at alpha.
      When the campaign before NEW is not in the baseline, NEW with that campaign (runs pooled; with nights as
      units also their mean median by mean_night_p; each night's median at least min_effect the same way) is
      tested at alpha * TWO_NIGHTS_ALPHA, and NEW alone at the rest.
    - Regression (improvement): a shift that persists: NEW and the confirm - 1 campaigns before it, against the
      baseline before those, pass _confirmed (UNLOADED, if given, is (new, earlier) discounted for each run's wait
      for a core, None where not measured); while the series has too few campaigns for that, NEW and the campaign
      before it each moved at both levels against the baseline before that one (the 2-campaign rule).
    - No change only where the detectable effect is at most MAX_UNDETECTABLE (None: not computed, as the bench
      does); else cannot tell."""
    start, end = baseline_window(len(earlier), baseline, confirm, alpha, summaries)
    base = earlier[start:end] if baseline else []
    flat = runs_of(base)
    if len(flat) < MIN_BASELINE or not new:
        return Judgement("no baseline", None, None, n_campaigns=len(base), baseline_of=(start, end))
    pooled, nights_p = nights_exchangeable(base)
    two = end < len(earlier)              # the campaign before is outside the baseline: test the two together
    before = earlier[:-1][-baseline:]     # the two-night test's baseline: the nights right before the two
    level = alpha * (1 - TWO_NIGHTS_ALPHA) if two else alpha
    moved, x = _moved(new, base, min_effect, level, pooled=pooled)
    alone, c = moved is not None, x["campaign_p"]
    j = Judgement("no change", x["effect"], max(x["p"], c) if c is not None and not pooled else x["p"], c,
                  len(base), baseline_of=(start, end), pooled=pooled, nights_p=nights_p, level=level)
    if smallest_p(len(new), len(flat)) >= level:
        j.verdict, j.p_value = "cannot tell", x["p"]
        return j
    if len(base) < MIN_CAMPAIGNS:
        j.verdict = "cannot tell"
        return j
    if two:
        held, y = _moved([*earlier[-1], *new], before, min_effect, alpha * TWO_NIGHTS_ALPHA, pooled=True)
        j.two_night_p = y["p"]
        bm = statistics.median(runs_of(before))
        each = all(abs(statistics.median(c) - bm) >= min_effect * abs(bm) and (statistics.median(c) > bm) ==
                   (y["effect"] > 0) for c in (earlier[-1], new))
        if held is not None and len(before) >= MIN_CAMPAIGNS:   # nights as units: their medians too
            sign = 1.0 if held == "worse" else -1.0
            p2 = mean_night_p([sign * statistics.median(c) for c in (earlier[-1], new)],
                              [sign * statistics.median(c) for c in before])
            j.two_nights_units_p = p2
            if not pooled:
                j.two_night_p = max(j.two_night_p, p2)
                held = held if p2 < alpha * TWO_NIGHTS_ALPHA else None
        if moved is None and held is not None and each:
            moved = held
    if len(earlier) >= 2 and len(earlier[:-1][-baseline:]) >= MIN_CAMPAIGNS:
        prev, _ = _moved(earlier[-1], earlier[:-1][-baseline:], min_effect, alpha, quick=True)
        j.previous = prev or "same"
    shift = None
    if end < len(earlier) or confirm == 1:   # the window leaves room for the campaigns the shift must hold
        both = ([*unloaded[1][end:], unloaded[0]], unloaded[1][start:end]) if unloaded is not None else None
        shift, j.confirm_p, j.confirm_effect, j.confirm_summary, j.confirm_units_p, j.confirm_floor = _confirmed(
            [*earlier[end:], new], base, min_effect, alpha, summaries, both)
        j.n_confirm = confirm
    else:   # too little history to rank a run of campaigns: this one and the one before, each at both levels
        before = earlier[:-1][-baseline:]
        if j.previous not in (None, "same") and _moved(new, before, min_effect, alpha, quick=True)[0] == j.previous:
            shift = j.previous
    _raise(j, shift, moved, alone, alpha)
    if max_undetectable is not None:
        j.detectable = detectable(len(new), base, min_effect, level, pooled)
        if j.verdict == "no change" and (j.detectable is None or j.detectable > max_undetectable):
            j.verdict = "cannot tell"
    return j


def _raise(j: Judgement, shift: str | None, moved: str | None, alone: bool, alpha: float) -> None:
    """J's verdict from the confirmed SHIFT (regression, improvement) or the night's move (suspect), its direction
    (worse or better) and its alert p: the p of the test that raised it on alpha's scale (the night alone's p times
    alpha over its level, the two nights' over TWO_NIGHTS_ALPHA, the confirmation's as it is), so that an alert
    is raised where alert_p < alpha and a campaign's alerts can be held to one budget (campaign.hold). Its
    nights_alert_p is the larger of alert_p and the same move's test with nights as units (the night's median
    against the baseline nights' medians, the two nights' mean median, or the confirmation's rank test): the runs
    of one night are not independent draws, so at the small levels a budget asks for, only the nights' test holds
    its level."""
    if shift is not None:
        j.verdict, j.moved = ("regression" if shift == "worse" else "improvement"), shift
        j.alert_p = j.confirm_p if j.confirm_p is not None else j.p_value
        units = j.confirm_p if j.confirm_p is not None else j.campaign_p
    elif moved is not None:
        j.verdict, j.moved = "suspect", moved
        j.alert_p = (j.p_value * alpha / j.level if alone else j.two_night_p / TWO_NIGHTS_ALPHA)
        units = ((j.campaign_p * alpha / j.level if j.campaign_p is not None else None) if alone else
                 (j.two_nights_units_p / TWO_NIGHTS_ALPHA if j.two_nights_units_p is not None else None))
    else:
        return
    j.nights_alert_p = max(j.alert_p, units) if units is not None else None


def compare(new: list[float], earlier: list[list[float]], min_effect: float, alpha: float,
            baseline: int = 10, confirm: int = CONFIRM,
            summaries: tuple[str, ...] = tuple(CAMPAIGN_SUMMARIES),
            unloaded: tuple | None = None) -> tuple[str, float | None, float | None]:
    """(verdict, effect, p) for values where larger is worse: judge's, without the detectable effect (so "no
    change" is never turned into "cannot tell"), for callers that need only the verdict."""
    j = judge(new, earlier, min_effect, alpha, baseline, confirm, summaries, unloaded, max_undetectable=None)
    return j.verdict, j.effect, j.p_value



# ---- pooling nights, and what a campaign could have shown -------------------------------------------------

def nights_exchangeable(base: list[list[float]]) -> tuple[bool, float | None]:
    """(pooled, p): whether the baseline nights look like draws from one distribution, by a Kruskal-Wallis test of
    their runs (rank-based: heavy tails do not fool it). Pooled when p >= EXCHANGEABLE_P; nights stay the units
    when they differ, or when fewer than MIN_CAMPAIGNS nights or a night of one run leave the spread unknown."""
    if len(base) < MIN_CAMPAIGNS or any(len(c) < 2 for c in base):
        return False, None
    if len(set(runs_of(base))) == 1:
        return True, 1.0
    import numpy as np
    p = float(unchecked("kruskal")(*(np.asarray(c, dtype=float) for c in base)).pvalue)
    return p >= EXCHANGEABLE_P, p


def night_spread(base: list[list[float]]) -> dict | None:
    """The between-night and within-night spread of the baseline, as relative standard deviations: within from the
    runs around their night's mean, between from the night means less what the within-night spread explains
    (one-way random effects on log values); None where nights of one run or non-positive values leave it unknown."""
    if len(base) < 2 or any(len(c) < 2 for c in base):
        return None
    logs = [[math.log(abs(v)) for v in c] for c in base if all(v != 0 for v in c)]
    if len(logs) < 2 or len({v > 0 for c in base for v in c}) > 1:
        return None
    within = statistics.fmean(sample_variance(c) for c in logs)
    size = statistics.fmean(len(c) for c in logs)
    between = max(0.0, sample_variance([statistics.fmean(c) for c in logs]) - within / size)
    return {"between": math.expm1(math.sqrt(between)), "within": math.expm1(math.sqrt(within))}
