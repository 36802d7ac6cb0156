"""What a campaign could have shown: the detectable effect (the smallest shift flagged in POWER of the campaigns
resampled from a series' baseline, by the gate's own tests) and the fewest runs a night that would show a given
shift. Plain lists of values where larger is worse; numpy draws every resampled campaign at once."""
from __future__ import annotations

import functools
import math
import statistics

from commscope.gate.pvalues import MANN_WHITNEY_FROM, MIN_BASELINE, MIN_CAMPAIGNS, monotone, runs_of, sample_variance

POWER = 0.8               # the share of resampled campaigns the detectable effect is flagged in
DRAWS = 400               # resampled campaigns per detectable effect
RUNS_A_NIGHT = (3, 4, 5, 6, 8, 10, 15, 20, 30, 50)   # run counts a "cannot tell" looks at


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
    """(threshold, sd): the monotone value above which campaign_p of a new median falls below LEVEL."""
    y = monotone(list(base_medians))
    k = len(y)
    sd = math.sqrt(sample_variance(y))
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
    if new.shape[1] < MANN_WHITNEY_FROM:   # the robust z-score of the new median (robust_z_p)
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
    flat = np.asarray(runs_of(base), dtype=float)
    if n_new < MANN_WHITNEY_FROM or len(night) * n_new * len(flat) > ALL_NIGHTS_AT_ONCE:
        return None
    starts = np.cumsum([0, *lengths[:-1]])
    new = flat[starts[night][:, None] + runs]
    k = len(base)
    floor, need, threshold, eps = (np.full(k, np.nan) for _ in range(4))
    above, below = np.zeros(k, dtype=bool), np.zeros(k, dtype=bool)
    raised = np.full(k, np.nan)
    for j in sorted(set(night.tolist())):
        rest = runs_of(base[:j] + base[j + 1:])
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
    if n_new < 1 or len(runs_of(base)) < MIN_BASELINE or (not pooled and len(base) < MIN_CAMPAIGNS + 1):
        return None
    flat = runs_of(base)
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
                parts.append(_shifts_needed(np.asarray(base[j], dtype=float)[mine], runs_of(rest),
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
