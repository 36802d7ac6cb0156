"""The regression gate: for every series (docs/measurement-model.md: runs of equal application, parameters and
environment, one series_id) in the judged campaign, compare its runs with the runs of the same series in the
campaigns before it. Runs of another problem size, Caliper configuration or stack are other series, so they are
never each other's baseline.

The measurement is a column of v_run_metrics on the series' focus window where its judged runs have one (the
workloads' timed loop), else on its run window, as the dashboards show a series (v_run_metrics_daily's `shown`); or
a FOM (fom:NAME, or fom:NAME@CONTEXT for a FOM Ramble reports per context). Only runs with status 'ok' count:
partial runs (ranks missing) and failed runs are neither baseline nor judged.

The test has two levels, because runs of one night are not independent: a loaded night (another job, a
slow node) slows all its runs together, so a test on runs alone reads one bad night as strong evidence (measured
in bench/results/regression_accuracy.md: 2.9-7.3 % false alarms per series-night where 1 % was meant).
- Runs: with three or more new samples a one-sided Mann-Whitney U test of the new runs against the baseline
  window's runs, else a robust z-score (median and MAD of the baseline) of the new median.
- Campaigns: the new campaign's median against the medians of the baseline campaigns (the between-night
  spread), by Student's t for one new value against a sample (scipy.stats.ttest_ind of [new median] against
  the baseline medians: the prediction interval of the next campaign), on log values (timings are skewed).
A campaign is significantly worse when both levels give p < alpha AND the change is at least min_effect, so tiny
but consistent shifts on a quiet machine do not fail a pipeline (Benchpark's gate is a fixed baseline x 1.05;
min_effect=0.05 with alpha plays that role while ignoring noise).

A shift must persist: the verdict is a regression (or improvement) only when the last CONFIRM campaigns (the judged
one and the CONFIRM - 1 before it) lie above (below) the `baseline` campaigns before them, by a one-sided
Mann-Whitney test of the campaigns ranked by a summary of their runs (confirm_p: exact, ties counted against the
shift), with their median summary at least min_effect away and the judged campaign's own at least min_effect the
same way. Two summaries are ranked, each at alpha / 2 (Bonferroni; CAMPAIGN_SUMMARIES): the campaign's median, and
its best run. Interference on a shared machine only slows runs down, so a loaded night's best run often escaped the
load while its median did not; ranking best runs finds shifts that a few loaded baseline nights hide from the
medians (BenchmarkTools.jl judges on the minimum for this reason), and the medians still find a shift that slows
most runs but spares the best. Where every ranked run says how long it waited for a core (runqueue_wait_share_max,
time_s on the focus window), the best run is taken on each run's time less that wait (UNLOADED): on a machine
loaded for a whole night every run is slowed and none escapes, but each one's discounted time is close to what it
would have taken alone. The test ranks nights against nights, so it needs no model of how far nights move:
when nights are exchangeable its false alarms are at most alpha per campaign, whatever the shape of the noise
(measured in bench/results/regression_accuracy.md, on this machine's heavy-tailed, bimodal nights, where the t
prediction interval of one night gave 2.2 %: 0.30-0.47 % per series-night pooled at alpha 0.01,
at most 1.00 % in every one of 36 noise cells). A shift that has not held for CONFIRM campaigns yet is
"suspect" while the judged campaign moved alone (both levels above): one loaded night is what a shared machine
gives now and then, and it cannot be told from a software change by its times alone.
A series with too few campaigns for the rank test to reach alpha / 2 (fewer than CONFIRM - 1 + 5 at alpha 0.01) is
judged by the stricter 2-campaign rule instead: the judged campaign and the one before it both moved at both
levels.
Ranking a run of nights rather than testing each night on its own is what gives the gate its power (the earlier
rule, two nights each significant at both levels, detected 2-26 % of +50 % shifts in 10 nights; ranking medians
alone 48-86 %; medians and best runs 58-98 %; with the best runs discounted for their wait for a core 80-100 %).

Verdicts: regression, improvement, suspect (significant in the judged campaign alone), no change, no baseline
(fewer than 3 earlier runs), and cannot tell: with these run counts the test cannot reach alpha at all (3 new
against 6 baseline runs: Mann-Whitney's smallest one-sided p is 1/84 > 0.01), or the baseline has fewer than
MIN_CAMPAIGNS campaigns, so the between-night spread is unknown; "no change" would be a claim the data cannot
support, and the finding says how many runs or campaigns would make the level reachable.

Which campaign: the one given (pipelines pass the id `commscope ingest` printed). Without one, the newest campaign
with runs in the selection is judged only when every such campaign has one origin (the same kind of input and the
same systems); on a store shared by pipelines of several systems or kinds the newest campaign may be another
pipeline's, so the gate refuses and names --campaign (narrowing with --system also makes it one origin).

Reading: only the judged campaign's runs and, per series, its `baseline` + CONFIRM - 1 most recent earlier
campaigns with a value (the baseline and the campaigns ranked with the judged one; `baseline` + 1 when that
baseline is too short for the rank test to reach alpha) are read from the store, selected in SQL; history beyond
that window never leaves the database."""
from __future__ import annotations

import functools
import json
import math
import statistics
from dataclasses import dataclass

import psycopg
from psycopg import sql

# v_run_metrics columns the gate can judge, and which way is worse.
METRICS = {"time_s": "lower", "mpi_time_avg_s": "lower", "mpi_time_max_s": "lower", "mpi_fraction_avg": "lower",
           "mpi_fraction_slowest": "lower", "user_time_avg_s": "lower", "mpi_sync_time_avg_s": "lower",
           "load_balance": "higher", "communication_efficiency": "higher", "parallel_efficiency": "higher"}
# The names the gate had before the measurement model, for pipelines that still pass them.
ALIASES = {"wall_time": "time_s", "mpi_time_avg": "mpi_time_avg_s"}
# What a selection may filter on: v_runs columns (the dashboards' template variables).
FILTERS = ("system", "app", "workload", "variant", "stack", "interconnect", "ranks")
# What a finding says about its series (v_runs columns of its newest run), for the label and the annotation.
DESCRIBE = FILTERS + ("global_size",)
LOWER_BETTER_UNITS = {"s", "ms", "us", "ns", "sec", "msec", "usec", "nsec", "seconds"}  # usec: IMB through Ramble


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
# Here it is nearly the same at every load (cgsolve's median 12.7-12.8 ms discounted at three loads, 15.7-20.3 ms as
# measured) and its spread is 1.7-5x smaller (bench/results/regression_accuracy.md). The median stays on the times
# as measured, so a change that makes the code wait for cores (more threads than cores, say) is still judged on
# the time it takes.
UNLOADED = "best unloaded"
SEARCH_LIMIT = 1000     # the largest run count runs_needed looks at


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
            way = "worse" if (self.effect or 0) > 0 else "better"
            held = (f"; the last {self.n_confirm} campaigns together ({self._summarised()}): "
                    f"{self.confirm_effect:+.1%}, p={self.confirm_p:.2g}" if self.confirm_p is not None else "")
            return (f"suspect: {way} in this campaign alone, not yet over {self.confirm} campaigns (a shift counts "
                    f"when it persists): {said}{between}{held}")
        if self.verdict == "no change":
            return f"no change of at least {min_effect:.0%} that is significant at alpha={alpha:g}: {said}{between}"
        if self.verdict in ("regression", "improvement"):
            return (f"{self.verdict}: held over the last {self.n_confirm} campaigns, whose {self._summarised()} "
                    f"are {self.confirm_effect:+.1%} against the {self.n_campaigns} campaigns before them "
                    f"(p={self.confirm_p:.2g}); this campaign: {said}{between}")
        return f"{self.verdict}: {said}"

    def _summarised(self) -> str:
        return {"median": "medians", "best": "best runs",
                UNLOADED: "best runs, discounted for their wait for a core"}.get(self.confirm_summary,
                                                                                 str(self.confirm_summary))


class NotMeasured(LookupError):
    """The judged campaign has successful runs in the selection, but none of them measured the metric (an MPI
    fraction of runs made without MPI wrapping, say): there is nothing to judge on it, which is not an error
    of the selection."""


def _mann_whitney_greater(new: list[float], base: list[float]) -> float:
    from scipy.stats import mannwhitneyu
    return float(mannwhitneyu(new, base, alternative="greater").pvalue)


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
    the baseline medians gives, with len(base) - 1 degrees of freedom; computed here through scipy.stats.t,
    without ttest_ind's input checks, which cost more than the test for the many series a check judges), on
    _monotone values."""
    from scipy.stats import t as student_t
    y = _monotone([new_median, *base_medians])
    base = y[1:]
    sd = statistics.stdev(base)
    if sd == 0:
        return 0.0 if y[0] > base[0] else 1.0
    k = len(base)
    return float(student_t.sf((y[0] - statistics.fmean(base)) / (sd * math.sqrt(1 + 1 / k)), k - 1))


def _flat(campaigns: list[list[float]]) -> list[float]:
    return [v for c in campaigns for v in c]


def _moved(new: list[float], base: list[list[float]], min_effect: float, alpha: float,
           quick: bool = False) -> tuple[str | None, dict]:
    """Whether NEW's runs are significantly worse ('worse') or better ('better') than the BASE campaigns' runs,
    at both levels (runs, campaign medians), by at least min_effect; None when neither; with the numbers of the
    side the medians moved to (the only side that can pass). QUICK: only the verdict is needed, so a change below
    min_effect is not tested."""
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
    if (out["campaign_p"] is not None and out["p"] < alpha and out["campaign_p"] < alpha
            and abs(effect) >= min_effect):
        return ("worse" if worse else "better"), out
    return None, out


def confirm_p(recent: list[float], base: list[float]) -> float:
    """One-sided p that the RECENT campaign medians lie above the BASE campaign medians: scipy's exact
    Mann-Whitney test on their ranks, where a recent value equal to a baseline value ranks below it (a tie counts
    against the shift, so the p-value is never smaller than with ties broken at random: the test stays within
    alpha on quantized timings such as pingpong's latency)."""
    from scipy.stats import mannwhitneyu
    order = sorted([(v, 0, i) for i, v in enumerate(recent)] + [(v, 1, i) for i, v in enumerate(base)])
    rank = {(side, i): r for r, (_, side, i) in enumerate(order)}
    return float(mannwhitneyu([rank[(0, i)] for i in range(len(recent))], [rank[(1, i)] for i in range(len(base))],
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
    """('worse' | 'better' | None, p, effect, summary): whether the RECENT campaigns (the judged one last) moved
    together against the BEFORE campaigns, by one of the SUMMARIES (CAMPAIGN_SUMMARIES): the recent campaigns'
    summaries ranked against the baseline's by confirm_p at p < confirm_level, the median of the recent ones at
    least min_effect from the baseline's, and the judged campaign's own summary at least min_effect the same way.
    UNLOADED, if given, is (recent, before) again with each run's value discounted for its wait for a core (None
    where the run did not say): when every run of both has one, the best run is taken on these (the summary
    UNLOADED). P is the rank test's p times the number of summaries (capped at 1), so it is compared with alpha
    itself; it and EFFECT are those of the summary that moved (the smaller p when both did), else of the one with
    the smaller p. Campaigns of one run each without discounted values have one value to summarise, so every
    summary is the same test: it is made once, at alpha."""
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
        p = confirm_p([sign * v for v in rs], [sign * v for v in bs])
        moved = p < level and abs(effect) >= min_effect and sign * last >= min_effect
        tested.append((not moved, p, ("worse" if sign > 0 else "better") if moved else None, effect, name))
    if not tested:
        return None, None, None, None
    _, p, shift, effect, name = min(tested, key=lambda t: t[:2])
    return shift, min(1.0, p * len(ranked)), effect, name


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
          summaries: tuple[str, ...] = tuple(CAMPAIGN_SUMMARIES), unloaded: tuple | None = None) -> Judgement:
    """The verdict on NEW (one campaign's values, larger is worse) given EARLIER campaigns' values (oldest first,
    the newest last; up to baseline + confirm - 1 are used), against the baseline_window campaigns. UNLOADED, if
    given, is (new, earlier) with each value discounted for the run's wait for a core (None where not measured):
    _confirmed takes the best runs on these. NEW moved alone against them is suspect. A regression (improvement)
    is a shift that persists: NEW and the confirm - 1 campaigns before it, against the baseline before those, pass
    _confirmed; while the series has too few campaigns for that test to reach alpha, NEW and the campaign before it
    each moved at both levels against the baseline before that one (the 2-campaign rule: stricter, and 2-26 %
    detection where the rank test has 48-86 %, but it needs only 4 campaigns)."""
    start, end = baseline_window(len(earlier), baseline, confirm, alpha, summaries)
    base = earlier[start:end] if baseline else []
    flat = _flat(base)
    if len(flat) < MIN_BASELINE or not new:
        return Judgement("no baseline", None, None, n_campaigns=len(base), baseline_of=(start, end))
    moved, x = _moved(new, base, min_effect, alpha)
    c = x["campaign_p"]
    j = Judgement("no change", x["effect"], max(x["p"], c) if c is not None else x["p"], c, len(base),
                  baseline_of=(start, end))
    if smallest_p(len(new), len(flat)) >= alpha:
        j.verdict, j.p_value = "cannot tell", x["p"]
        return j
    if len(base) < MIN_CAMPAIGNS:
        j.verdict = "cannot tell"
        return j
    if len(earlier) >= 2 and len(earlier[:-1][-baseline:]) >= MIN_CAMPAIGNS:
        prev, _ = _moved(earlier[-1], earlier[:-1][-baseline:], min_effect, alpha, quick=True)
        j.previous = prev or "same"
    shift = None
    if end < len(earlier) or confirm == 1:   # the window leaves room for the campaigns the shift must hold
        both = ([*unloaded[1][end:], unloaded[0]], unloaded[1][start:end]) if unloaded is not None else None
        shift, j.confirm_p, j.confirm_effect, j.confirm_summary = _confirmed([*earlier[end:], new], base,
                                                                             min_effect, alpha, summaries, both)
        j.n_confirm = confirm
    else:   # too little history to rank a run of campaigns: this one and the one before, each at both levels
        before = earlier[:-1][-baseline:]
        if j.previous not in (None, "same") and _moved(new, before, min_effect, alpha, quick=True)[0] == j.previous:
            shift = j.previous
    if shift is not None:
        j.verdict = "regression" if shift == "worse" else "improvement"
    elif moved is not None:
        j.verdict = "suspect"
    return j


def compare(new: list[float], earlier: list[list[float]], min_effect: float, alpha: float,
            baseline: int = 10, confirm: int = CONFIRM,
            summaries: tuple[str, ...] = tuple(CAMPAIGN_SUMMARIES),
            unloaded: tuple | None = None) -> tuple[str, float | None, float | None]:
    """(verdict, effect, p) for values where larger is worse: judge's, for callers that need only those."""
    j = judge(new, earlier, min_effect, alpha, baseline, confirm, summaries, unloaded)
    return j.verdict, j.effect, j.p_value


def canonical_metric(metric: str) -> str:
    """The v_run_metrics column (or fom:NAME) a --metric names."""
    metric = ALIASES.get(metric, metric)
    if metric.startswith("fom:") or metric in METRICS:
        return metric
    raise ValueError(f"unknown metric {metric!r}; choose a v_run_metrics column ({', '.join(METRICS)}), "
                     f"{', '.join(f'{a} (= {c})' for a, c in ALIASES.items())}, or fom:NAME")


def _fom_and_context(conn: psycopg.Connection, spec: str) -> tuple[str, str | None]:
    """(FOM name, context) of fom:NAME or fom:NAME@CONTEXT. A FOM stored in several contexts (migration 0015:
    one IMB latency per message size) must name one; values of different contexts are no one series."""
    name, at, context = spec, "", None
    if "@" in spec and not conn.execute("SELECT 1 FROM foms WHERE name = %s LIMIT 1", (spec,)).fetchone():
        name, at, context = spec.partition("@")
    contexts = sorted((r[0] for r in conn.execute("SELECT DISTINCT context FROM foms WHERE name = %s", (name,))),
                      key=lambda c: (c is not None, str(c)))
    if at and context not in contexts:
        raise ValueError(f"FOM {name!r} has no context {context!r} in the store"
                         + (f" (it has: {', '.join(map(str, contexts[:8]))})" if contexts else ""))
    if not at and len(contexts) > 1:
        raise ValueError(f"FOM {name!r} is stored in {len(contexts)} contexts ({', '.join(map(str, contexts[:8]))}"
                         f"{', ...' if len(contexts) > 8 else ''}); name one: fom:{name}@{contexts[-1]}")
    if not at and contexts:
        context = contexts[0]   # its one context
    return name, context


def _measurements(conn: psycopg.Connection, metric: str, where: dict) -> tuple[sql.Composable, dict, str]:
    """A SELECT of (series_id, window, campaign_id, started_at, run_id, value, system_id) over the ok runs with a
    series in the selection, not run (the callers narrow it to the rows they need), its named parameters, and the
    metric's direction. v_runs is joined only when the selection filters on its columns."""
    clauses, params = [sql.SQL("r.status = 'ok'"), sql.SQL("r.series_id IS NOT NULL")], {}
    for k, v in where.items():
        if v is not None:
            clauses.append(sql.SQL("v.{} = {}").format(sql.Identifier(k), sql.Placeholder(f"f_{k}")))
            params[f"f_{k}"] = v
    selected = sql.SQL(" AND ").join(clauses)
    described = sql.SQL("JOIN v_runs v ON v.run_id = r.id" if params else "")
    if metric.startswith("fom:"):
        name, context = _fom_and_context(conn, metric[4:])
        units = {r[0] for r in conn.execute("SELECT DISTINCT unit FROM foms WHERE name = %s AND context IS NOT "
                                            "DISTINCT FROM %s", (name, context))}
        if not units:
            raise ValueError(f"no FOM named {name!r} in the store")
        direction = "lower" if units <= LOWER_BETTER_UNITS else "higher" if all("/s" in (u or "") for u in units) else None
        if direction is None:
            raise ValueError(f"FOM {name!r} has units {sorted(map(str, units))}: cannot tell whether larger is worse")
        # A FOM is the workload's own figure: no window of commscope's.
        q = sql.SQL("SELECT r.series_id, 'fom'::text AS \"window\", r.campaign_id, r.started_at, r.id AS run_id, "
                    "f.value, r.system_id FROM runs r {} JOIN foms f ON f.run_id = r.id "
                    "WHERE f.name = %(fom)s AND f.context IS NOT DISTINCT FROM %(fom_context)s AND {}"
                    ).format(described, selected)
        return q, {**params, "fom": name, "fom_context": context}, direction
    q = sql.SQL("SELECT r.series_id, w.\"window\", r.campaign_id, r.started_at, r.id AS run_id, w.{col} AS value, "
                "r.system_id FROM runs r JOIN run_windows w ON w.run_id = r.id {described} "
                "WHERE {selected}").format(col=sql.Identifier(metric), described=described, selected=selected)
    return q, params, METRICS[metric]


def _values(conn: psycopg.Connection, metric: str, where: dict) -> tuple[list[tuple], str]:
    """Every row (series_id, window, campaign_id, started_at, run_id, value) of the metric in the selection, and its
    direction: for inspecting what the gate would compare (the gate itself reads measured_rows' window only)."""
    measured, params, direction = _measurements(conn, canonical_metric(metric), where)
    q = sql.SQL("SELECT series_id, \"window\", campaign_id, started_at, run_id, value FROM ({}) m "
                "WHERE value IS NOT NULL").format(measured)
    return conn.execute(q, params).fetchall(), direction


def newest_campaign(conn: psycopg.Connection, measured: sql.Composable, params: dict, metric: str) -> int:
    """The campaign to judge when none is named: the newest with a value in the selection, if every campaign with
    one has the same origin (campaign kind and systems); else LookupError naming --campaign and the candidates."""
    q = sql.SQL("""SELECT m.campaign_id, c.kind, c.created_at, c.ci_pipeline, c.git_commit,
       array_agg(DISTINCT coalesce(s.name, 'unknown') ORDER BY coalesce(s.name, 'unknown'))
FROM ({measured}) m JOIN campaigns c ON c.id = m.campaign_id LEFT JOIN systems s ON s.id = m.system_id
WHERE m.value IS NOT NULL
GROUP BY m.campaign_id, c.kind, c.created_at, c.ci_pipeline, c.git_commit
ORDER BY m.campaign_id DESC""").format(measured=measured)
    rows = conn.execute(q, params).fetchall()
    if not rows:
        (old,) = conn.execute("SELECT count(*) FROM runs WHERE series_id IS NULL").fetchone()
        hint = (f" ({old} runs stored before the measurement model have no series: re-ingest their files, "
                f"v_runs_needing_reingest lists them)" if old else "")
        raise LookupError(f"no successful runs with {metric} match; nothing to check{hint}")
    newest_of: dict[tuple, tuple] = {}
    for row in rows:   # newest first
        newest_of.setdefault((row[1], tuple(row[5])), row)
    if len(newest_of) > 1:
        shown = "; ".join(f"campaign {cid} ({kind} on {', '.join(systems)}, stored {created:%Y-%m-%d %H:%M %Z}"
                          f"{', pipeline ' + pipeline if pipeline else ''})"
                          for cid, kind, created, pipeline, _commit, systems in list(newest_of.values())[:6])
        raise LookupError(f"the store holds campaigns of {len(newest_of)} origins with {metric} in this selection, "
                          f"so the newest need not be yours: name it with --campaign ID (the id `commscope ingest` "
                          f"printed), or narrow the selection with --system. Newest of each: {shown}")
    return rows[0][0]


def measured_rows(conn: psycopg.Connection, measured: sql.Composable, params: dict, campaign: int,
                  baseline: int) -> list[tuple]:
    """Rows (series_id, window, campaign_id, started_at, run_id, value) of the judged campaign, and per series of
    it the rows of its `baseline` most recent earlier campaigns with a value: nothing older is read. Each series
    on one window: focus where its judged runs measured the metric there, else run. (A focus window taken from
    a workload's timers has a time but no MPI fraction; the profile's run window may have one.)"""
    q = sql.SQL("""WITH new AS (
  SELECT * FROM ({measured}) m WHERE m.campaign_id = %(campaign)s
), shown AS (
  SELECT series_id, CASE WHEN bool_or("window" = 'focus' AND value IS NOT NULL) THEN 'focus'
                         WHEN bool_or("window" = 'run') THEN 'run' ELSE min("window") END AS "window"
  FROM new GROUP BY series_id
), earlier AS (
  SELECT s.series_id, s."window", e.campaign_id
  FROM shown s CROSS JOIN LATERAL (
    SELECT DISTINCT m.campaign_id FROM ({measured}) m
    WHERE m.series_id = s.series_id AND m."window" = s."window" AND m.campaign_id < %(campaign)s
      AND m.value IS NOT NULL
    ORDER BY m.campaign_id DESC LIMIT %(baseline)s) e
)
SELECT n.series_id, n."window", n.campaign_id, n.started_at, n.run_id, n.value
FROM new n JOIN shown USING (series_id, "window") WHERE n.value IS NOT NULL
UNION ALL
SELECT m.series_id, m."window", m.campaign_id, m.started_at, m.run_id, m.value
FROM earlier e CROSS JOIN LATERAL (
  SELECT * FROM ({measured}) m
  WHERE m.series_id = e.series_id AND m.campaign_id = e.campaign_id AND m."window" = e."window"
    AND m.value IS NOT NULL) m""").format(measured=measured)
    return conn.execute(q, {**params, "campaign": campaign, "baseline": baseline}).fetchall()


def check(conn: psycopg.Connection, metric: str = "time_s", campaign: int | None = None, baseline: int = 10,
          min_effect: float = 0.05, alpha: float = 0.01, confirm: int = CONFIRM, **where) -> list[Finding]:
    """Findings for every series of the given campaign (or, without one, of the newest when it is unambiguous:
    newest_campaign): its ok runs there against its ok runs in the `baseline` campaigns before it that have any."""
    metric = canonical_metric(metric)
    unknown = set(where) - set(FILTERS)
    if unknown:
        raise ValueError(f"cannot filter series by {', '.join(sorted(unknown))}; choose from {', '.join(FILTERS)}")
    measured, params, direction = _measurements(conn, metric, where)
    judged = campaign if campaign is not None else newest_campaign(conn, measured, params, metric)
    # the baseline, and the campaigns ranked with the judged one when this baseline lets that test reach alpha
    # (else the one campaign before, for the 2-campaign rule)
    ranked = confirm > 1 and rank_test_reachable(baseline, confirm, alpha)
    rows = measured_rows(conn, measured, params, judged, baseline + (confirm - 1 if ranked else 1))
    if not any(r[2] == judged for r in rows):
        q = sql.SQL("SELECT count(DISTINCT run_id) FROM ({}) m WHERE m.campaign_id = %(campaign)s").format(measured)
        (unmeasured,) = conn.execute(q, {**params, "campaign": judged}).fetchone()
        if unmeasured:
            raise NotMeasured(f"campaign {judged}: none of its {unmeasured} successful runs in the selection measured "
                              f"{metric} (NULL: not measured), so nothing is judged on it")
        raise LookupError(f"campaign {judged} has no successful runs of {metric} matching the selection")
    series: dict[tuple, dict[int, list]] = {}
    unloaded: dict[tuple, dict[int, list]] = {}   # the same values discounted for the run's wait for a core
    last: dict[tuple, tuple] = {}   # the series' newest run in the judged campaign: (started_at, run_id)
    shares = wait_shares(conn, [r[4] for r in rows if r[1] == "focus"]) if metric == "time_s" else {}
    for sid, window, cid, started, run_id, value in rows:
        key = (sid, window)
        series.setdefault(key, {}).setdefault(cid, []).append(float(value))
        share = shares.get(run_id) if window == "focus" else None
        unloaded.setdefault(key, {}).setdefault(cid, []).append(
            float(value) * (1.0 - share) if share is not None else None)
        if cid == judged:
            last[key] = max(last.get(key, (started, run_id)), (started, run_id))
    described = _describe(conn, [run_id for _, run_id in last.values()])
    sign = 1.0 if direction == "lower" else -1.0
    findings = []
    base_ids: dict[tuple, list[int]] = {}   # per series, the baseline campaigns (baseline_window)
    for key, by_campaign in sorted(series.items()):
        earlier_ids = sorted(c for c in by_campaign if c != judged)
        earlier = [[sign * v for v in by_campaign[c]] for c in earlier_ids]
        new = by_campaign[judged]
        told = [[sign * v if v is not None else None for v in unloaded[key][c]] for c in [*earlier_ids, judged]]
        j = judge([sign * v for v in new], earlier, min_effect, alpha, baseline, confirm,
                  unloaded=(told[-1], told[:-1]))
        base_ids[key] = earlier_ids[slice(*j.baseline_of)] if baseline else []
        base = [v for c in base_ids[key] for v in by_campaign[c]]
        started, run_id = last[key]
        f = Finding({"series_id": key[0], "window": key[1], **described[run_id]}, metric, j.verdict,
                    statistics.median(base) if base else None, statistics.median(new),
                    j.effect, j.p_value, len(base), len(new), started, judged, n_campaigns=j.n_campaigns,
                    campaign_p=j.campaign_p, previous=j.previous, confirm_p=j.confirm_p,
                    confirm_effect=j.confirm_effect, confirm_summary=j.confirm_summary, n_confirm=j.n_confirm,
                    confirm=confirm)
        if j.verdict != "no baseline":
            f.smallest_p = smallest_p(len(new), len(base))
        if j.verdict == "cannot tell":
            f.needs = (runs_needed(len(new), len(base), alpha) if f.smallest_p >= alpha
                       else {"campaigns": MIN_CAMPAIGNS})
        findings.append(f)
    # attribution compares the judged campaign with its baseline, not with the campaigns read for the confirmation
    window = {key: {judged, *base_ids[key]} for key in series}
    shown = [r for r in rows if r[2] in window[(r[0], r[1])]]
    from commscope.gate import attribution
    attribution.attach(conn, findings, shown, judged, baseline=baseline, min_effect=min_effect, alpha=alpha,
                       confirm=confirm)
    return findings


def wait_shares(conn: psycopg.Connection, run_ids: list[int]) -> dict[int, float]:
    """Each run's share of its timed loop that its most-delayed rank spent waiting for a core, where it says: the
    workload's FOM runqueue_wait_share_max, else the Adiak value of that name its profile carried. Runs without
    one, or with a value that is not a share (0 <= share < 1), are left out: not measured."""
    out = {}
    for run_id, fom, adiak in conn.execute(
            "SELECT r.id, (SELECT f.value FROM foms f WHERE f.run_id = r.id AND f.name = 'runqueue_wait_share_max' "
            "AND f.context IS NULL ORDER BY f.repeat LIMIT 1), r.metadata->>'runqueue_wait_share_max' "
            "FROM runs r WHERE r.id = ANY(%s)", (run_ids,)):
        try:
            share = float(fom if fom is not None else adiak)
        except (TypeError, ValueError):
            continue
        if 0.0 <= share < 1.0:
            out[run_id] = share
    return out


def _describe(conn: psycopg.Connection, run_ids: list[int]) -> dict[int, dict]:
    """DESCRIBE's columns of each run, and its series' key, parameters and environment."""
    cols = sql.SQL(", ").join(sql.SQL("v.{}").format(sql.Identifier(c)) for c in DESCRIBE)
    q = sql.SQL("SELECT v.run_id, s.key, s.parameters, s.environment, {} FROM v_runs v JOIN runs r ON r.id = v.run_id "
                "JOIN series s ON s.id = r.series_id WHERE v.run_id = ANY(%s)").format(cols)
    return {r[0]: {"key": r[1], "parameters": r[2], "environment": r[3], **dict(zip(DESCRIBE, r[4:]))}
            for r in conn.execute(q, (run_ids,))}


def annotate(conn: psycopg.Connection, findings: list[Finding]) -> int:
    """One annotation per regression or improvement, shown by the dashboards; re-checking the same campaign
    replaces its annotations (one per series, metric and time: tag series:ID)."""
    n = 0
    with conn.transaction():
        for f in findings:
            if f.verdict not in ("regression", "improvement"):
                continue
            tag = f"series:{f.series['series_id']}"
            conn.execute("DELETE FROM annotations WHERE \"time\" = %s AND tags @> %s",
                         (f.time, ["commscope-check", f.metric, tag]))
            conn.execute("INSERT INTO annotations (\"time\", system, app, workload, variant, stack, interconnect, ranks, "
                         "text, tags) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                         (f.time, *(f.series[k] for k in FILTERS),
                          f"{f.verdict}: {f.metric} [{f.series['window']}] {f.effect:+.1%} against the median of "
                          f"{f.n_baseline} earlier runs of series #{f.series['series_id']} (p={f.p_value:.2g})",
                          ["commscope-check", f.metric, f.verdict, tag]))
            n += 1
    return n


# ---- what a pipeline reads: JSON, JUnit XML, Markdown --------------------------------------------------------

def _number(v):
    """A JSON number, or None for what was not measured or is not finite."""
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def as_dict(f: Finding, alpha: float, min_effect: float) -> dict:
    """One finding, machine-readable; its series identified by key and parameters."""
    s = f.series
    return {"series_id": s["series_id"], "series_key": s["key"], "app": s["app"], "parameters": s["parameters"],
            "environment": s["environment"], "window": s["window"], "label": f.label(),
            **{k: s[k] for k in DESCRIBE if k != "app"},
            "campaign": f.campaign, "metric": f.metric, "verdict": f.verdict,
            "baseline_median": _number(f.baseline_median), "new_median": _number(f.new_median),
            "effect": _number(f.effect), "p_value": _number(f.p_value), "smallest_p": _number(f.smallest_p),
            "n_new": f.n_new, "n_baseline": f.n_baseline, "runs_needed": f.needs,
            "n_baseline_campaigns": f.n_campaigns, "campaign_p": _number(f.campaign_p), "previous": f.previous,
            "confirm_campaigns": f.n_confirm or None, "confirm_p": _number(f.confirm_p),
            "confirm_effect": _number(f.confirm_effect), "confirm_summary": f.confirm_summary,
            "newest_run_started_at": f.time.isoformat() if f.time else None, "reason": f.reason(alpha, min_effect),
            "attribution": f.attribution}


SKIPPED = ("cannot tell", "no baseline", "suspect")


def junit_xml(findings: list[Finding], alpha: float, min_effect: float) -> bytes:
    """JUnit XML: one test suite per metric, one test case per series judged. A regression is a failure; cannot
    tell and no baseline are skipped (not judged), and so is suspect (not confirmed yet: the next campaign
    decides); no change and improvement pass."""
    import xml.etree.ElementTree as ET
    root = ET.Element("testsuites", name="commscope check")
    metrics = list(dict.fromkeys(f.metric for f in findings))
    for metric in metrics:
        mine = [f for f in findings if f.metric == metric]
        campaigns = sorted({str(f.campaign) for f in mine})
        suite = ET.SubElement(root, "testsuite", name=f"commscope check {metric} campaign {', '.join(campaigns)}",
                              tests=str(len(mine)), failures=str(sum(f.verdict == "regression" for f in mine)),
                              skipped=str(sum(f.verdict in SKIPPED for f in mine)),
                              errors="0")
        props = ET.SubElement(suite, "properties")
        for name, value in (("campaign", ", ".join(campaigns)), ("metric", metric), ("alpha", f"{alpha:g}"),
                            ("min_effect", f"{min_effect:g}")):
            ET.SubElement(props, "property", name=name, value=value)
        for f in mine:
            case = ET.SubElement(suite, "testcase", classname=f"commscope.check.{metric}", name=f.label())
            reason = f.reason(alpha, min_effect)
            if f.verdict == "regression":
                from commscope.gate.attribution import lines
                cause = f"; cause: {f.attribution['cause']}" if f.attribution and f.attribution.get("cause") else ""
                ET.SubElement(case, "failure", type="regression", message=reason + cause).text = "\n".join(
                    [reason, *lines(f)])
            elif f.verdict == "suspect":
                from commscope.gate.attribution import lines
                cause = f"; cause: {f.attribution['cause']}" if f.attribution and f.attribution.get("cause") else ""
                ET.SubElement(case, "skipped", message=reason + cause).text = "\n".join([reason, *lines(f)])
            elif f.verdict in SKIPPED:
                ET.SubElement(case, "skipped", message=reason)
            out = ET.SubElement(case, "system-out")
            out.text = json.dumps(as_dict(f, alpha, min_effect), default=str, indent=1)
    total = sum(1 for _ in root.iter("testcase"))
    root.set("tests", str(total))
    root.set("failures", str(sum(f.verdict == "regression" for f in findings)))
    root.set("skipped", str(sum(f.verdict in SKIPPED for f in findings)))
    root.set("errors", "0")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


ORDER = {"regression": 0, "suspect": 1, "cannot tell": 2, "improvement": 3, "no baseline": 4, "no change": 5}


def markdown(findings: list[Finding], alpha: float, min_effect: float) -> str:
    """A summary for a merge request comment or a job summary: counts, then every series, regressions first."""
    counts = {v: sum(f.verdict == v for f in findings) for v in ORDER}
    campaigns = ", ".join(sorted({str(f.campaign) for f in findings}))
    metrics = ", ".join(dict.fromkeys(f.metric for f in findings))
    head = "regressions" if counts["regression"] else "no regressions"
    lines = [f"### commscope check: {head} in campaign {campaigns}", "",
             f"{len(findings)} series on {metrics} (alpha {alpha:g}, smallest effect {min_effect:.0%}): "
             + ", ".join(f"{n} {v}" for v, n in counts.items() if n), "",
             "| verdict | series | metric | baseline median | new median | change | p | runs new / baseline |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    cell = lambda v: f"{v:.6g}" if v is not None else "–"  # noqa: E731
    for f in sorted(findings, key=lambda f: (ORDER[f.verdict], f.metric, f.series["series_id"])):
        change = f"{f.effect:+.1%}" if f.effect is not None and math.isfinite(f.effect) else "–"
        p = f"{f.p_value:.2g}" if f.p_value is not None else "–"
        label = f.label().replace("|", "\\|")
        lines.append(f"| **{f.verdict}** | `{label}` | {f.metric} | {cell(f.baseline_median)} | {cell(f.new_median)} "
                     f"| {change} | {p} | {f.n_new} / {f.n_baseline} |")
    from commscope.gate.attribution import lines as attributed
    moved = [f for f in findings if f.verdict in ("regression", "improvement", "suspect") and f.attribution]
    if moved:
        lines += ["", "What changed:"]
        for f in sorted(moved, key=lambda f: (ORDER[f.verdict], f.metric, f.series["series_id"])):
            lines += [f"- **{f.verdict}** `{f.label()}` ({f.metric}):"] + [f"  - {a}" for a in attributed(f)]
    unsure = [f for f in findings if f.verdict in ("suspect", "cannot tell")]
    if unsure:
        lines += ["", "Suspect or cannot tell:"] + [f"- `{f.label()}`: {f.reason(alpha, min_effect)}"
                                                     for f in unsure]
    return "\n".join(lines) + "\n"
