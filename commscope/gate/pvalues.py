"""The gate's tests on plain lists of values where larger is worse: each test's one-sided p-value and the smallest
p it can reach with given sample sizes. scipy computes every p; these wrappers skip its input checks and keep its
exact Mann-Whitney null distributions, since a check calls them for thousands of series."""
from __future__ import annotations

import functools
import math
import statistics

MANN_WHITNEY_FROM = 3   # new runs from which the Mann-Whitney test is used (else the robust z-score)
MIN_BASELINE = 3        # earlier runs below which there is no baseline
MIN_CAMPAIGNS = 3       # baseline campaigns the between-campaign test needs (its spread has MIN_CAMPAIGNS - 1 df)
SEARCH_LIMIT = 1000     # the largest run count runs_needed looks at


def sample_variance(values) -> float:
    """The sample variance (n - 1) in floats, the sums by math.fsum: statistics.variance's figure to rounding,
    without its exact fractions, which cost more than the gate's tests on the many series a check judges; 0 exactly
    where all values are equal."""
    xs = list(values)
    if all(x == xs[0] for x in xs):
        return 0.0
    mean = math.fsum(xs) / len(xs)
    return math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)


def unchecked(name: str):
    """scipy.stats' test NAME without the wrapper that checks its inputs and handles NaN (the same arithmetic, its
    p-values equal): the gate's values are finite 1-D lists, and the wrapper costs more than the test."""
    import scipy.stats
    test = getattr(scipy.stats, name)
    return getattr(test, "__wrapped__", test)


_MWU_NULLS: dict = {}   # (smaller, larger sample size) -> scipy's exact null distribution of U, as far as built


def kept_null_mannwhitneyu(x, y, **kw):
    """scipy's Mann-Whitney U test (unchecked), with the exact null distribution it builds for a pair of sample
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
                return unchecked("mannwhitneyu")(x, y, **kw)
            finally:   # other callers of scipy's test get their own state back, and never reshape a kept one
                if previous is None:
                    del state.s
                else:
                    state.s = previous
    return unchecked("mannwhitneyu")(x, y, **kw)


def mann_whitney_greater(new: list[float], base: list[float]) -> float:
    import numpy as np
    return float(kept_null_mannwhitneyu(np.asarray(new, dtype=float), np.asarray(base, dtype=float),
                               alternative="greater").pvalue)


def robust_z_p(new_med: float, base: list[float]) -> float:
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
    return mann_whitney_greater([float(n_base + i) for i in range(n_new)], [float(i) for i in range(n_base)])


def runs_needed(n_new: int, n_base: int, alpha: float) -> dict:
    """The fewest new runs (with these baseline runs), and the fewest baseline runs (with these new runs), that make
    p < alpha reachable; None where even SEARCH_LIMIT runs would not."""
    new = next((k for k in range(max(n_new, MANN_WHITNEY_FROM), SEARCH_LIMIT + 1) if smallest_p(k, n_base) < alpha),
               None)
    base = next((k for k in range(n_base, SEARCH_LIMIT + 1) if smallest_p(n_new, k) < alpha), None)
    return {"new": new, "baseline": base}


def monotone(values: list[float]) -> list[float]:
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
    (t_sf), without ttest_ind's input checks, which cost more than the test for the many series a check judges), on
    monotone values."""
    y = monotone([new_median, *base_medians])
    base = y[1:]
    sd = math.sqrt(sample_variance(base))
    if sd == 0:
        return 0.0 if y[0] > base[0] else 1.0
    k = len(base)
    return t_sf((y[0] - statistics.fmean(base)) / (sd * math.sqrt(1 + 1 / k)), k - 1)


def t_sf(t: float, df: int) -> float:
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
    nights' medians, sd * sqrt(1 / len(new) + 1 / len(base)), on monotone values."""
    y = monotone([*new_medians, *base_medians])
    new, base = y[:len(new_medians)], y[len(new_medians):]
    sd = math.sqrt(sample_variance(base))
    if sd == 0:
        return 0.0 if min(new) > base[0] else 1.0
    k = len(base)
    return t_sf((statistics.fmean(new) - statistics.fmean(base)) / (sd * math.sqrt(1 / len(new) + 1 / k)), k - 1)


def runs_of(campaigns: list[list[float]]) -> list[float]:
    return [v for c in campaigns for v in c]


def confirm_p(recent: list[float], base: list[float]) -> float:
    """One-sided p that the RECENT campaign medians lie above the BASE campaign medians: scipy's exact
    Mann-Whitney test on their ranks, where a recent value equal to a baseline value ranks below it (a tie counts
    against the shift, so the p-value is never smaller than with ties broken at random: the test stays within
    alpha on quantized timings such as pingpong's latency)."""
    import numpy as np
    order = sorted([(v, 0, i) for i, v in enumerate(recent)] + [(v, 1, i) for i, v in enumerate(base)])
    rank = {(side, i): r for r, (_, side, i) in enumerate(order)}
    return float(kept_null_mannwhitneyu(np.array([rank[(0, i)] for i in range(len(recent))], dtype=float),
                               np.array([rank[(1, i)] for i in range(len(base))], dtype=float),
                               alternative="greater", method="exact").pvalue)


def confirm_smallest_p(n_recent: int, n_base: int) -> float:
    """The smallest p confirm_p can give: every recent campaign above every baseline one, 1 / C(n_recent + n_base,
    n_recent)."""
    return 1.0 / math.comb(n_recent + n_base, n_recent)
