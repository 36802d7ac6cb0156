"""The gate's statistics, on plain lists of values where larger is worse: the tests, their smallest p-values, the
verdict of one campaign against the campaigns before it (judge), and what a campaign could have shown (detectable).
No database here: store/queries/gate.py reads the values, regressions.py turns verdicts into findings."""
from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass

MANN_WHITNEY_FROM = 3   # new runs from which the Mann-Whitney test is used (else the robust z-score)
MIN_BASELINE = 3        # earlier runs below which there is no baseline
MIN_CAMPAIGNS = 3       # baseline campaigns the between-campaign test needs (its spread has MIN_CAMPAIGNS - 1 df)
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
SEARCH_LIMIT = 1000     # the largest run count runs_needed looks at
EXCHANGEABLE_P = 0.05     # Kruskal-Wallis p at or above which the baseline nights are pooled (not shown to differ)
TWO_NIGHTS_ALPHA = 0.9   # the share of alpha the two-night test gets (the judged night alone: the rest)
MAX_UNDETECTABLE = 0.20   # "no change" only where the detectable effect is at most this
POWER = 0.8               # the share of resampled campaigns the detectable effect is flagged in
DRAWS = 400               # resampled campaigns per detectable effect
RUNS_A_NIGHT = (3, 4, 5, 6, 8, 10, 15, 20, 30, 50)   # run counts a "cannot tell" looks at


def _variance(values) -> float:
    """The sample variance (n - 1) in floats, the sums by math.fsum: statistics.variance's figure to rounding,
    without its exact fractions, which cost more than the gate's tests on the many series a check judges; 0 exactly
    where all values are equal."""
    xs = list(values)
    if all(x == xs[0] for x in xs):
        return 0.0
    mean = math.fsum(xs) / len(xs)
    return math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)


def _unchecked(name: str):
    """scipy.stats' test NAME without the wrapper that checks its inputs and handles NaN (the same arithmetic, its
    p-values equal): the gate's values are finite 1-D lists, and the wrapper costs more than the test."""
    import scipy.stats
    test = getattr(scipy.stats, name)
    return getattr(test, "__wrapped__", test)


_MWU_NULLS: dict = {}   # (smaller, larger sample size) -> scipy's exact null distribution of U, as far as built


def _mannwhitneyu(x, y, **kw):
    """scipy's Mann-Whitney U test (_unchecked), with the exact null distribution it builds for a pair of sample
    sizes kept per pair: scipy keeps only the last pair's (a thread-local _MWU it rebuilds whenever the sizes
    change), and the gate alternates between a few pairs (the night against its baseline runs, the two nights,
    the confirmation's campaigns) for every series, so scipy rebuilt it a few times per series (a third of the
    test's time on a 1,300-series night). The same scipy object computes the same distribution, so the p-values are
    scipy's own, bit for bit; where this scipy keeps its state otherwise, the test is called as it is."""
    import scipy.stats._mannwhitneyu as mwu
    state, null = getattr(mwu, "_mwu_state", None), getattr(mwu, "_MWU", None)
    if state is not None and null is not None:
        sizes = (min(len(x), len(y)), max(len(x), len(y)))
        kept = _MWU_NULLS.get(sizes)
        if kept is None:
            try:
                kept = _MWU_NULLS[sizes] = null(*sizes)
            except TypeError:
                kept = None
        if kept is not None:
            previous, state.s = getattr(state, "s", None), kept
            try:
                return _unchecked("mannwhitneyu")(x, y, **kw)
            finally:   # other callers of scipy's test get their own state back, and never reshape a kept one
                if previous is None:
                    del state.s
                else:
                    state.s = previous
    return _unchecked("mannwhitneyu")(x, y, **kw)


def _mann_whitney_greater(new: list[float], base: list[float]) -> float:
    import numpy as np
    return float(_mannwhitneyu(np.asarray(new, dtype=float), np.asarray(base, dtype=float),
                               alternative="greater").pvalue)


def _robust_z_p(new_med: float, base: list[float]) -> float:
    med = statistics.median(base)
    mad = statistics.median(abs(x - med) for x in base) * 1.4826
    if mad == 0:
        return 0.0 if new_med > med else 1.0
    z = (new_med - med) / mad
    return 0.5 * math.erfc(z / math.sqrt(2))  # one-sided normal tail


@functools.lru_cache(maxsize=4096)
def smallest_p(n_new: int, n_base: int) -> float:
    """The smallest one-sided p-value the gate's test can give with these run counts: scipy's Mann-Whitney, called
    as the gate calls it, on samples that do not overlap at all (every new value above every baseline value), so
    its own distribution decides; the robust z-score (fewer than 3 new runs) reaches any level."""
    if n_new < MANN_WHITNEY_FROM:
        return 0.0
    return _mann_whitney_greater([float(n_base + i) for i in range(n_new)], [float(i) for i in range(n_base)])


def runs_needed(n_new: int, n_base: int, alpha: float) -> dict:
    """The fewest new runs (with these baseline runs), and the fewest baseline runs (with these new runs), that make
    p < alpha reachable; None where even SEARCH_LIMIT runs would not."""
    new = next((k for k in range(max(n_new, MANN_WHITNEY_FROM), SEARCH_LIMIT + 1) if smallest_p(k, n_base) < alpha),
               None)
    base = next((k for k in range(n_base, SEARCH_LIMIT + 1) if smallest_p(n_new, k) < alpha), None)
    return {"new": new, "baseline": base}


def _monotone(values: list[float]) -> list[float]:
    """Log values where all are positive (timings are skewed: a loaded night is a factor, not an offset), -log(-x)
    where all are negative (a higher-is-better metric, negated), else the values; order is kept, so larger is
    still worse."""
    if all(v > 0 for v in values):
        return [math.log(v) for v in values]
    if all(v < 0 for v in values):
        return [-math.log(-v) for v in values]
    return list(values)


def campaign_p(new_median: float, base_medians: list[float]) -> float:
    """One-sided p that a campaign median this large comes from the baseline campaigns' distribution: Student's t
    for one new value against a sample, the t prediction interval (what scipy.stats.ttest_ind of [new] against
    the baseline medians gives, with len(base) - 1 degrees of freedom; computed here through scipy's Student's t
    (_t_sf), without ttest_ind's input checks, which cost more than the test for the many series a check judges), on
    _monotone values."""
    y = _monotone([new_median, *base_medians])
    base = y[1:]
    sd = math.sqrt(_variance(base))
    if sd == 0:
        return 0.0 if y[0] > base[0] else 1.0
    k = len(base)
    return _t_sf((y[0] - statistics.fmean(base)) / (sd * math.sqrt(1 + 1 / k)), k - 1)


def _t_sf(t: float, df: int) -> float:
    """scipy.stats.t.sf(t, df): for a finite t and df >= 1 what it computes, scipy.special.stdtr(df, -t), without
    the distribution method's argument handling (which costs more than the function for the many series a check
    judges); anything else through scipy.stats.t itself."""
    if df >= 1 and math.isfinite(t):
        from scipy.special import stdtr
        return float(stdtr(df, -t))
    from scipy.stats import t as student_t
    return float(student_t.sf(t, df))


def mean_night_p(new_medians: list[float], base_medians: list[float]) -> float:
    """campaign_p for the mean of several new nights' medians: Student's t of their mean against the baseline
    nights' medians, sd * sqrt(1 / len(new) + 1 / len(base)), on _monotone values."""
    y = _monotone([*new_medians, *base_medians])
    new, base = y[:len(new_medians)], y[len(new_medians):]
    sd = math.sqrt(_variance(base))
    if sd == 0:
        return 0.0 if min(new) > base[0] else 1.0
    k = len(base)
    return _t_sf((statistics.fmean(new) - statistics.fmean(base)) / (sd * math.sqrt(1 / len(new) + 1 / k)), k - 1)


def _flat(campaigns: list[list[float]]) -> list[float]:
    return [v for c in campaigns for v in c]


def _moved(new: list[float], base: list[list[float]], min_effect: float, alpha: float,
           quick: bool = False, pooled: bool = False) -> tuple[str | None, dict]:
    """Whether NEW's runs are significantly worse ('worse') or better ('better') than the BASE campaigns' runs,
    at both levels (runs, campaign medians; POOLED: the runs alone), by at least min_effect; None when neither;
    with the numbers of the side the medians moved to (the only side that can pass). QUICK: only the verdict is
    needed, so a change below min_effect is not tested."""
    flat = _flat(base)
    nm, bm = statistics.median(new), statistics.median(flat)
    effect = (nm - bm) / abs(bm) if bm else (math.inf if nm > bm else 0.0)
    worse = effect >= 0
    out = {"effect": effect, "p": None, "campaign_p": None}
    if quick and abs(effect) < min_effect:
        return None, out
    sign = 1.0 if worse else -1.0
    signed_new, signed_flat = [sign * x for x in new], [sign * x for x in flat]
    if len(new) >= MANN_WHITNEY_FROM:
        out["p"] = _mann_whitney_greater(signed_new, signed_flat)
    else:
        out["p"] = _robust_z_p(sign * nm, signed_flat)
    if len(base) >= MIN_CAMPAIGNS:
        out["campaign_p"] = campaign_p(sign * nm, [sign * statistics.median(c) for c in base])
    nights_agree = pooled or (out["campaign_p"] is not None and out["campaign_p"] < alpha)
    if nights_agree and out["p"] < alpha and abs(effect) >= min_effect:
        return ("worse" if worse else "better"), out
    return None, out


def confirm_p(recent: list[float], base: list[float]) -> float:
    """One-sided p that the RECENT campaign medians lie above the BASE campaign medians: scipy's exact
    Mann-Whitney test on their ranks, where a recent value equal to a baseline value ranks below it (a tie counts
    against the shift, so the p-value is never smaller than with ties broken at random: the test stays within
    alpha on quantized timings such as pingpong's latency)."""
    import numpy as np
    order = sorted([(v, 0, i) for i, v in enumerate(recent)] + [(v, 1, i) for i, v in enumerate(base)])
    rank = {(side, i): r for r, (_, side, i) in enumerate(order)}
    return float(_mannwhitneyu(np.array([rank[(0, i)] for i in range(len(recent))], dtype=float),
                               np.array([rank[(1, i)] for i in range(len(base))], dtype=float),
                               alternative="greater", method="exact").pvalue)


def confirm_smallest_p(n_recent: int, n_base: int) -> float:
    """The smallest p confirm_p can give: every recent campaign above every baseline one, 1 / C(n_recent + n_base,
    n_recent)."""
    return 1.0 / math.comb(n_recent + n_base, n_recent)


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
    flat = _flat(base)
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
        bm = statistics.median(_flat(before))
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
    if len(set(_flat(base))) == 1:
        return True, 1.0
    import numpy as np
    p = float(_unchecked("kruskal")(*(np.asarray(c, dtype=float) for c in base)).pvalue)
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
    within = statistics.fmean(_variance(c) for c in logs)
    size = statistics.fmean(len(c) for c in logs)
    between = max(0.0, _variance([statistics.fmean(c) for c in logs]) - within / size)
    return {"between": math.expm1(math.sqrt(between)), "within": math.expm1(math.sqrt(within))}


@functools.lru_cache(maxsize=4096)
def _pairs_needed(n_new: int, n_base: int, level: float) -> int | None:
    """The fewest pairs (new run above baseline run) that make the Mann-Whitney p of N_NEW against N_BASE runs
    (scipy, as the gate calls it, without ties) fall below LEVEL; None when none do."""
    import numpy as np
    from scipy.stats import mannwhitneyu
    base = np.arange(n_base, dtype=float)

    def p(u: int) -> float:
        c = [min(n_base, max(0, u - n_base * i)) for i in range(n_new)]   # base runs below each new run
        new = np.array(c, dtype=float) - 0.5 + 1e-3 * np.arange(n_new)   # distinct: no ties anywhere
        return float(mannwhitneyu(new, base, alternative="greater").pvalue)

    lo, hi = 0, n_new * n_base
    if p(hi) >= level:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if p(mid) < level:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _shift_to(x, target):
    """The relative shift d that takes X to TARGET, where the shifted value is x + d * |x|."""
    return (target - x) / abs(x) if x else math.inf


@functools.lru_cache(maxsize=1024)
def _t_isf(level: float, df: int) -> float:
    """scipy's Student's t quantile above which LEVEL of its mass lies: a few (level, df) pairs serve every series,
    so each is computed once (scipy's distribution methods cost more than the arithmetic around them)."""
    from scipy.stats import t as student_t
    return float(student_t.isf(level, df))


@functools.lru_cache(maxsize=1024)
def _campaign_threshold(base_medians: tuple, level: float) -> tuple[float, float]:
    """(threshold, sd): the _monotone value above which campaign_p of a new median falls below LEVEL."""
    y = _monotone(list(base_medians))
    k = len(y)
    sd = math.sqrt(_variance(y))
    return statistics.fmean(y) + _t_isf(level, k - 1) * sd * math.sqrt(1 + 1 / k), sd


def _larger(a, b):
    """Elementwise max(a, b) as Python's max takes it (b only where b > a), so a NaN is kept where max keeps it."""
    import numpy as np
    return np.where(b > a, b, a)


def _shifts_to(x, target):
    """_shift_to on each value of the array X."""
    import numpy as np
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x != 0, (target - x) / np.abs(x), math.inf)


def _pair_shifts(new, base_runs, need: int):
    """Per row of NEW, the shift at which NEED (new run, baseline run) pairs have the new run above: the NEED-th
    smallest (b - x) / |x| over its runs x and BASE_RUNS b, plus 1e-9."""
    import numpy as np
    with np.errstate(divide="ignore", invalid="ignore"):
        d = ((np.asarray(base_runs, dtype=float)[None, None, :] - new[:, :, None]) / np.abs(new)[:, :, None])
    return np.partition(d.reshape(len(new), -1), need - 1, axis=1)[:, need - 1] + 1e-9


def _medians(new):
    """Each row's median as statistics.median takes it (the middle value, or the mean of the two middle ones, (a + b)
    / 2), without np.median's overhead, which costs more than the selection for rows this short."""
    import numpy as np
    k = new.shape[1] // 2
    if new.shape[1] % 2:
        return np.partition(new, k, axis=1)[:, k]
    part = np.partition(new, (k - 1, k), axis=1)
    return (part[:, k - 1] + part[:, k]) / 2


def _pairs_within(new, base_runs, need: int, upto: float):
    """Per row of NEW, whether _pair_shifts is at most UPTO: NEED of its (b - x) / |x| are at most the largest
    float t with t + 1e-9 <= UPTO (counted once per distinct value x: the draws repeat the baseline's runs)."""
    import numpy as np
    t = upto - 1e-9
    while t + 1e-9 > upto:
        t = math.nextafter(t, -math.inf)
    while math.nextafter(t, math.inf) + 1e-9 <= upto:
        t = math.nextafter(t, math.inf)
    values, where = np.unique(new, return_inverse=True)   # the runs are drawn from a few values: count per value
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (np.asarray(base_runs, dtype=float)[None, :] - values[:, None]) / np.abs(values)[:, None]
    return np.count_nonzero(d <= t, axis=1)[where.reshape(new.shape)].sum(axis=1) >= need


def _shifts_needed(new, base_runs, base_medians, min_effect: float, level: float, pooled: bool,
                   bound: bool = False, upto: float | None = None):
    """The smallest relative shift (each new value x -> x + d|x|) that makes each row of NEW (campaigns x runs, an
    array) flagged against the baseline: the runs' Mann-Whitney p below LEVEL, the median moved at least min_effect
    and, with nights as units, the campaign-level p (campaign_p) below LEVEL too. BOUND: a lower bound, without the
    Mann-Whitney pairs (the costly part; still inf where no pair count reaches LEVEL). UPTO: a shift that is at most
    UPTO exactly where the shift is (the pairs counted, not selected)."""
    import numpy as np
    bm = statistics.median(base_runs)
    med = _medians(new)
    if new.shape[1] < MANN_WHITNEY_FROM:   # the robust z-score of the new median (_robust_z_p)
        from scipy.stats import norm
        mad = statistics.median(abs(v - bm) for v in base_runs) * 1.4826
        shift = _shifts_to(med, bm + float(norm.isf(level)) * mad) + (1e-9 if mad == 0 else 0.0)
    else:
        need = _pairs_needed(new.shape[1], len(base_runs), level)
        if need is None:
            return np.full(len(new), math.inf)
        if bound or upto is not None:
            shift = np.full(len(new), -math.inf)
            if upto is not None:
                shift[~_pairs_within(new, base_runs, need, upto)] = math.inf
        else:
            shift = _pair_shifts(new, base_runs, need)
    shift = _larger(shift, _shifts_to(med, bm + min_effect * abs(bm)))
    if not pooled:
        threshold, sd = _campaign_threshold(tuple(base_medians), level)
        target = np.full(len(new), threshold)
        if all(v > 0 for v in base_medians):
            target = np.where(med > 0, math.exp(threshold), target)
        elif all(v < 0 for v in base_medians):
            target = np.where(med < 0, -math.exp(-threshold), target)
        shift = _larger(shift, _shifts_to(med, target) + (1e-9 if sd == 0 else 0.0))
    return _larger(shift, 0.0)


def _resampled(rng, lengths: list[int], n_new: int, draws: int):
    """(night, run indices) of DRAWS campaigns drawn as `night = rng.integers(len(lengths))`, then
    `rng.choice(that night, n_new)` would draw them one after another: one array of the generator's 32-bit words,
    mapped by the same multiply-shift (Lemire's method) numpy applies to each. None where a draw of numpy's would
    have consumed a different number of words (a night of one run, or a word its method rejects)."""
    import numpy as np
    if min(lengths) < 2:
        return None
    words = rng.integers(0, 2 ** 32, size=draws * (1 + n_new), dtype=np.uint64).reshape(draws, 1 + n_new)
    sizes = np.empty_like(words)
    sizes[:, 0] = len(lengths)
    night = (words[:, 0] * sizes[:, 0]) >> np.uint64(32)
    sizes[:, 1:] = np.asarray(lengths, dtype=np.uint64)[night][:, None]
    product = words * sizes
    low = product & np.uint64(0xFFFFFFFF)
    if np.any((low < sizes) & (low < (np.uint64(2 ** 32) - sizes) % sizes)):
        return None
    return night.astype(np.intp), (product[:, 1:] >> np.uint64(32)).astype(np.intp)


@functools.lru_cache(maxsize=256)
def _draws(lengths: tuple[int, ...], n_new: int, draws: int, seed: int, pooled: bool):
    """The resampled campaigns of detectable: pooled, DRAWS x N_NEW indices into the baseline's runs; with nights as
    units, (night, run indices) as _resampled draws them, else as numpy draws them one after another. They depend
    on the nights' LENGTHS only (the generator is seeded afresh), so series with nights of the same lengths share
    them: drawn once (read-only arrays)."""
    import numpy as np
    if pooled:
        drawn = (np.random.default_rng(seed).integers(0, sum(lengths), (draws, n_new)),)
    else:
        drawn = _resampled(np.random.default_rng(seed), list(lengths), n_new, draws)
        if drawn is None:   # numpy's own draws, one after another
            rng = np.random.default_rng(seed)
            night, rows = [], []
            for _ in range(draws):
                night.append(int(rng.integers(len(lengths))))
                rows.append(rng.choice(lengths[night[-1]], n_new))
            drawn = np.asarray(night, dtype=np.intp), np.asarray(rows, dtype=np.intp)
    for a in drawn:
        a.flags.writeable = False
    return drawn


ALL_NIGHTS_AT_ONCE = 4_000_000   # (run pairs) up to which _nights_shifts_needed takes every drawn campaign at once


def _nights_shifts_needed(base: list[list[float]], medians: list[float], night, runs, min_effect: float,
                          level: float, bound: bool, upto: float | None):
    """_shifts_needed of every campaign drawn with nights as units (NIGHT: the baseline night each was drawn from,
    RUNS: its runs there) against the other nights, all campaigns in one set of array operations instead of one
    call per night: the pairs against all baseline runs, less those against the campaign's own night (set to inf
    before the selection, or subtracted from the counts), and each night's baseline figures (median, pairs needed,
    campaign threshold) by row. The same figures, element for element; None where that cannot be promised (fewer
    than MANN_WHITNEY_FROM runs, a pair's shift that is not finite, or too many pairs at once): the caller then
    calls _shifts_needed night by night."""
    import numpy as np
    n_new = runs.shape[1]
    lengths = [len(c) for c in base]
    flat = np.asarray(_flat(base), dtype=float)
    if n_new < MANN_WHITNEY_FROM or len(night) * n_new * len(flat) > ALL_NIGHTS_AT_ONCE:
        return None
    starts = np.cumsum([0, *lengths[:-1]])
    new = flat[starts[night][:, None] + runs]
    k = len(base)
    floor, need, threshold, eps = (np.full(k, np.nan) for _ in range(4))
    above, below = np.zeros(k, dtype=bool), np.zeros(k, dtype=bool)
    raised = np.full(k, np.nan)
    for j in sorted(set(night.tolist())):
        rest = _flat(base[:j] + base[j + 1:])
        bm = statistics.median(rest)
        floor[j] = bm + min_effect * abs(bm)
        needed = _pairs_needed(n_new, len(rest), level)
        need[j] = math.inf if needed is None else needed
        others = medians[:j] + medians[j + 1:]
        threshold[j], sd = _campaign_threshold(tuple(others), level)
        eps[j] = 1e-9 if sd == 0 else 0.0
        if all(v > 0 for v in others):
            above[j], raised[j] = True, math.exp(threshold[j])
        elif all(v < 0 for v in others):
            below[j], raised[j] = True, -math.exp(-threshold[j])
    if np.any(need[night] < 1):
        return None
    never = ~np.isfinite(need[night])           # no pair count reaches LEVEL: inf (_shifts_needed)
    own = ((np.arange(len(flat))[None, :] >= starts[night][:, None])
           & (np.arange(len(flat))[None, :] < (starts + lengths)[night][:, None]))   # each row's own night's runs
    if bound or upto is not None:
        shift = np.full(len(new), -math.inf)
        if upto is not None:   # _pairs_within: the pairs at most t, counted against all runs less the own night's
            t = upto - 1e-9
            while t + 1e-9 > upto:
                t = math.nextafter(t, -math.inf)
            while math.nextafter(t, math.inf) + 1e-9 <= upto:
                t = math.nextafter(t, math.inf)
            values, where = np.unique(new, return_inverse=True)
            where = where.reshape(new.shape)
            with np.errstate(divide="ignore", invalid="ignore"):
                d = (flat[None, :] - values[:, None]) / np.abs(values)[:, None]
            per_night = np.add.reduceat((d <= t).astype(np.intp), starts, axis=1)
            counted = per_night.sum(axis=1)[where] - per_night[where, night[:, None]]
            within = counted.sum(axis=1) >= np.where(never, 0, need[night])
            shift[~within] = math.inf
    else:   # _pair_shifts: the need-th smallest (b - x) / |x| over the other nights' runs b
        with np.errstate(divide="ignore", invalid="ignore"):
            d = (flat[None, None, :] - new[:, :, None]) / np.abs(new)[:, :, None]
        if not np.isfinite(d).all():
            return None
        d[np.broadcast_to(own[:, None, :], d.shape)] = math.inf
        d = d.reshape(len(new), -1)
        kth = np.where(never, 1, need[night]).astype(np.intp) - 1
        if np.all(kth == kth[0]):
            shift = np.partition(d, kth[0], axis=1)[:, kth[0]] + 1e-9
        else:
            part = np.partition(d, np.unique(kth), axis=1)
            shift = np.take_along_axis(part, kth[:, None], axis=1)[:, 0] + 1e-9
    shift[never] = math.inf
    med = _medians(new)
    shift = _larger(shift, _shifts_to(med, floor[night]))
    target = np.where(above[night] & (med > 0), raised[night],
                      np.where(below[night] & (med < 0), raised[night], threshold[night]))
    shift = _larger(shift, _shifts_to(med, target) + eps[night])
    return _larger(shift, 0.0)


def detectable(n_new: int, base: list[list[float]], min_effect: float, level: float, pooled: bool,
               draws: int = DRAWS, seed: int = 0, bound: bool = False, upto: float | None = None) -> float | None:
    """The smallest relative shift that a campaign of N_NEW runs is flagged for in POWER of the campaigns resampled
    from the baseline BASE (nights of values, larger is worse): pooled, N_NEW runs drawn from all baseline runs;
    with nights as units, a baseline night drawn, N_NEW runs drawn from it and judged against the other nights.
    Seeded, so the same baseline gives the same figure. None when no shift is ever flagged. BOUND: a lower bound
    of it from the same draws, without the Mann-Whitney pairs (_shifts_needed). UPTO: a figure that is at most UPTO
    exactly where this one is (for runs_a_night, which asks only that)."""
    import numpy as np
    if n_new < 1 or len(_flat(base)) < MIN_BASELINE or (not pooled and len(base) < MIN_CAMPAIGNS + 1):
        return None
    flat = _flat(base)
    medians = [statistics.median(c) for c in base]
    lengths = tuple(len(c) for c in base)
    if pooled:
        (idx,) = _draws((len(flat),), n_new, draws, seed, True)
        needed = _shifts_needed(np.asarray(flat, dtype=float)[idx], flat, medians, min_effect, level, True, bound, upto)
    else:
        night, runs = _draws(lengths, n_new, draws, seed, False)
        needed = _nights_shifts_needed(base, medians, night, runs, min_effect, level, bound, upto)
        if needed is None:   # night by night
            parts = []
            for j in sorted(set(night.tolist())):
                mine = runs[night == j]
                rest = base[:j] + base[j + 1:]
                parts.append(_shifts_needed(np.asarray(base[j], dtype=float)[mine], _flat(rest),
                                            medians[:j] + medians[j + 1:], min_effect, level, False, bound, upto))
            needed = np.concatenate(parts)
    found = float(np.sort(needed)[math.ceil(POWER * draws) - 1])
    return found if math.isfinite(found) else None


def runs_a_night(base: list[list[float]], min_effect: float, level: float, pooled: bool, n_new: int,
                 max_undetectable: float) -> int | None:
    """The fewest runs a night (RUNS_A_NIGHT, above N_NEW) whose campaigns would show a shift of max_undetectable
    against this baseline; None when none would (nights that differ this much need quieter nights, not more
    runs). More runs a night never need a larger shift, so the largest count is tried first (None where it would
    not show it) and the others by bisection."""
    counts = [n for n in RUNS_A_NIGHT if n > n_new]

    def shows(n: int) -> bool:
        least = detectable(n, base, min_effect, level, pooled, bound=True)
        if least is None or least > max_undetectable:   # the figure is at least this: no need to compute it
            return False
        d = detectable(n, base, min_effect, level, pooled, upto=max_undetectable)
        return d is not None and d <= max_undetectable

    if not counts or not shows(counts[-1]):
        return None
    lo, hi = 0, len(counts) - 1   # counts[hi] shows the shift
    while lo < hi:
        mid = (lo + hi) // 2
        if shows(counts[mid]):
            hi = mid
        else:
            lo = mid + 1
    return counts[hi]
