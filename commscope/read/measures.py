"""The measurement model's numbers for one run (docs/measurement-model.md), made from what the parsers read (a
profiles.Profile, or a workload's output alone) and handed to records (measure_profile, measure_output: Measured).

Per call path (node_stats): exclusive and inclusive time over the measured ranks (min/avg/max, the slowest rank's).
Per rank (rank_groups): USER / MPI / MPI_SYNC time. Over ranks: distributions as rank_spread stores them.
Per window: a window is an interval every rank spends: `run`, everything the profile recorded including the time
outside every region; `focus`, the subtrees of the one region a study is about (for commscope's workloads their
timed loop, the `loop` region; focus_windows says what stands in for it in a profile without one). Per window and
rank: time, MPI time (exclusive time of MPI functions, barrier and wait-type ones apart as MPI_SYNC) and useful time
(the rest). Over ranks:

- time: the slowest rank's;
- MPI time: mean and max; MPI fraction: over the mean rank (sum MPI / sum time) and on the slowest rank;
- POP's efficiencies, multiplicative form: load balance = mean(useful) / max(useful), communication efficiency =
  max(useful) / time, parallel efficiency = mean(useful) / time = their product.

What the data cannot give is None (NULL in the store): every MPI figure when Caliper did not wrap MPI; the slowest
rank and POP from spot, which keeps only aggregates across ranks; a focus time from spot when the focus region sits
at more than one call path (a max of sums is not a sum of maxes)."""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from commscope.read.files import BadProfile

# The groundwater study's MPI_SYNC group: barrier and wait-type time.
MPI_SYNC = {"MPI_Barrier", "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome",
            "MPI_Win_wait", "MPI_Win_fence", "MPI_Win_complete", "MPI_Ibarrier"}


@dataclass
class NodeStats:
    excl_min: float
    excl_avg: float
    excl_max: float
    incl_min: float
    incl_avg: float
    incl_max: float
    calls: int | None
    incl_max_rank: int | None = None   # the rank with the most inclusive time (unknown for spot)
    incl_spread: dict | None = None    # inclusive time over ranks: distribution() (unknown for spot)
    # on the run's slowest rank (slowest_rank: the most time in the call tree), so one rank's whole tree
    excl_slowest: float | None = None
    incl_slowest: float | None = None
    slowest_rank: int | None = None


def is_mpi(path: tuple) -> bool:
    return bool(path) and path[-1].startswith("MPI_")


def node_stats(prof) -> dict[tuple, NodeStats]:
    """Exclusive and inclusive time, min/avg/max over the measured ranks, per call path (a rank without
    a record at a path counts 0 there, as Hatchet zero-fills), and both on the slowest rank: the measured rank
    with the most time in the call tree (its exclusive times summed over every path), the lowest among equals."""
    if prof.spot:
        return _spot_stats(prof)
    columns = np.flatnonzero(prof.measured)   # the measured ranks' columns (prof.rank_ids)
    ranks = prof.rank_ids[columns]
    incl = _inclusive(prof.excl)
    zero = np.zeros(len(prof.measured))
    tree = sum(prof.excl.values(), zero)[columns]
    # the slowest rank's column: the most time, the lowest rank among equals (columns follow first appearance)
    at = int(min(np.flatnonzero(tree == tree.max()), key=lambda c: ranks[c])) if len(ranks) else None
    paths = list(incl)
    step = max(1, 1_000_000 // max(len(ranks), 1))
    stats = {}
    for first in range(0, len(paths), step):
        chunk = paths[first:first + step]
        inc = np.stack([incl[p][columns] for p in chunk])
        ex = np.stack([prof.excl.get(p, zero)[columns] for p in chunk])
        spreads = distributions(inc, ranks)
        # one numpy call per statistic for the whole chunk, not one per path
        cols = zip(*(a.tolist() for a in (ex.min(axis=1), ex.mean(axis=1), ex.max(axis=1), inc.min(axis=1),
                                          inc.mean(axis=1), inc.max(axis=1), ranks[np.argmax(inc, axis=1)])))
        on = (ex[:, at].tolist(), inc[:, at].tolist()) if at is not None else ([None] * len(chunk),) * 2
        for p, spread, (ex_min, ex_avg, ex_max, in_min, in_avg, in_max, slowest), ex_on, in_on in zip(
                chunk, spreads, cols, *on):
            stats[p] = NodeStats(ex_min, ex_avg, ex_max, in_min, in_avg, in_max, prof.calls.get(p), slowest, spread,
                                 ex_on, in_on, int(ranks[at]) if at is not None else None)
    return stats


def _inclusive(excl: dict) -> dict:
    """Inclusive time per call path from EXCL (path -> per-rank exclusive time): every prefix is a node, even one
    that only has children. Each path's time is added to its parent's only, deepest paths first, so the cost is
    linear in the paths' total length (not quadratic in a path's depth, as adding it to every prefix was)."""
    incl = {p: arr.copy() for p, arr in excl.items()}
    for p in list(incl):   # the prefixes that have no time of their own
        q = p[:-1]
        while q and q not in incl:
            incl[q] = np.zeros_like(incl[p])
            q = q[:-1]
    for p in sorted(incl, key=len, reverse=True):
        if len(p) > 1:
            incl[p[:-1]] += incl[p]
    return {p: incl[p] for p in _first_seen(excl)}


def _first_seen(excl: dict) -> list:
    """Every prefix of EXCL's paths, in the order adding each path's prefixes in turn would make them."""
    seen: dict = {}
    for p in excl:
        missing = []
        q = p
        while q and q not in seen:
            missing.append(q)
            q = q[:-1]
        for q in reversed(missing):
            seen[q] = None
    return list(seen)


TOP_K = 10          # the slowest ranks kept by name, per node and window
HIST_BINS = 16      # equal-width bins between the minimum and the maximum
PERCENTILES = (50, 90, 99)


def distributions(values: np.ndarray, ranks: np.ndarray) -> list[dict]:
    """Per row of VALUES (one column per rank of RANKS): the percentiles (numpy's linear interpolation),
    a histogram of HIST_BINS equal bins from min to max, and the TOP_K largest values with their ranks,
    largest first. What a store keeps of a rank distribution when it does not keep every rank. Rows go
    in chunks of about a million values, so the temporaries stay small however many ranks there are."""
    rows, n = values.shape
    step = max(1, 1_000_000 // max(n, 1))
    out: list[dict] = []
    for first in range(0, rows, step):
        out += _distributions(values[first:first + step], ranks)
    return out


def _distributions(values: np.ndarray, ranks: np.ndarray) -> list[dict]:
    rows, n = values.shape
    pct = np.percentile(values, PERCENTILES, axis=1)
    lo, hi = values.min(axis=1), values.max(axis=1)
    width = np.where(hi > lo, hi - lo, 1.0)
    bins = np.minimum(((values - lo[:, None]) / width[:, None] * HIST_BINS).astype(np.int64), HIST_BINS - 1)
    counts = np.zeros((rows, HIST_BINS), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(rows), n), bins.ravel()), 1)
    del bins
    k = min(TOP_K, n)
    top = np.argpartition(-values, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (rows, 1))
    # the TOP_K largest, largest first (a stable sort keeps the lower rank first among equals)
    order = np.take_along_axis(top, np.argsort(-np.take_along_axis(values, top, axis=1), axis=1, kind="stable"),
                               axis=1)
    cols = zip(lo.tolist(), values.mean(axis=1).tolist(), hi.tolist(), *pct.tolist(), counts.tolist(),
               ranks[order].tolist(), np.take_along_axis(values, order, axis=1).tolist())
    return [{"n": int(n), "min": mn, "mean": mean, "max": mx, "p50": p50, "p90": p90, "p99": p99,
             "hist_lo": mn, "hist_hi": mx, "hist_counts": hist, "top_ranks": top_ranks, "top_values": top_values}
            for mn, mean, mx, p50, p90, p99, hist, top_ranks, top_values in cols]


def _spot_stats(prof) -> dict[tuple, NodeStats]:
    """spot keeps min/max/avg across ranks of inclusive time and, with
    time.exclusive (an option from Caliper 2.10, the default for spot from 2.11), of exclusive time. Without
    the latter (older spot files), the exclusive avg is the node's sum less its
    children's sums, over the ranks that have the node (sum/avg of them): a child
    only some ranks reached counts for those ranks only. Exact up to the file's
    printed precision; exclusive min/max are unknown."""
    children: dict = defaultdict(list)
    for p in prof.spot:
        if len(p) > 1:
            children[p[:-1]].append(p)
    stats = {}
    for p, s in prof.spot.items():
        if "excl_avg" in s:
            ex_min, ex_avg, ex_max = s["excl_min"], s["excl_avg"], s["excl_max"]
        else:
            kids = children.get(p, [])
            kid_sum = sum(prof.spot[k]["sum"] for k in kids)
            ex_avg = (s["sum"] - kid_sum) * s["avg"] / s["sum"] if s["sum"] else s["avg"] - kid_sum
            ex_min, ex_max = (s["min"], s["max"]) if not kids else (None, None)
        stats[p] = NodeStats(ex_min, ex_avg, ex_max, s["min"], s["avg"], s["max"], prof.calls.get(p))
    return stats


def rank_groups(prof) -> dict[str, np.ndarray]:
    """Per measured rank over the run window: total, USER, MPI (not sync) and MPI_SYNC exclusive time,
    as arrays aligned with prof.measured_ranks. The total includes the time outside every region, so it
    is the rank's run-window time (docs/measurement-model.md); without MPI wrapping the MPI groups are
    None, not 0."""
    ranks = prof.measured_ranks
    n = len(prof.measured) if prof.measured is not None else 0
    cols = np.flatnonzero(prof.measured) if n else np.zeros(0, dtype=np.int64)
    total, mpi, sync = np.zeros(n), np.zeros(n), np.zeros(n)
    for p, arr in prof.excl.items():
        total += arr
        if is_mpi(p):
            (sync if p[-1] in MPI_SYNC else mpi).__iadd__(arr)
    if prof.outside is not None:
        total += prof.outside
    out = {"rank": ranks, "total": total[cols]}
    if prof.mpi_profiled:
        out.update(user=(total - mpi - sync)[cols], mpi=mpi[cols], sync=sync[cols])
    else:
        out.update(user=None, mpi=None, sync=None)
    return out


# The workloads' timed loop (workloads/README.md, "Caliper regions"): the `loop` region is exactly
# cs_loop_begin..cs_loop_end, the interval of the FOM total_time. Profiles made before it existed have
# only the `timestep` regions inside it, a different interval (halo3d's first halo exchange, inside the
# loop, is outside them), so they are no stand-in for it (focus_windows).
WORKLOAD_FOCUS = "loop"
COLUMNS = ("window", "focus_region", "time_s", "mpi_time_avg_s", "mpi_time_max_s", "mpi_fraction_avg",
           "mpi_fraction_slowest", "user_time_avg_s", "mpi_sync_time_avg_s", "load_balance",
           "communication_efficiency", "parallel_efficiency", "ranks_measured")


def in_focus(path: tuple, focus: str) -> bool:
    return focus in path


def _focus_roots(paths, focus: str) -> set[tuple]:
    """The call paths where the focus region starts (its outermost occurrences)."""
    return {p[:p.index(focus) + 1] for p in paths if focus in p}


def _summarise(window: str, focus: str | None, ranks: np.ndarray, time: np.ndarray, mpi: np.ndarray,
               sync: np.ndarray, mpi_measured: bool) -> dict:
    """time, mpi (not sync), sync: one value per rank of RANKS, the window's measured ranks. The row's
    "spread" holds the distribution over ranks of time, MPI time and useful time (distributions)."""
    n = len(time)
    mpi = mpi + sync
    slowest = int(np.argmax(time))
    t = float(time[slowest])
    row = dict.fromkeys(COLUMNS)
    row.update(window=window, focus_region=focus, time_s=t, ranks_measured=n)
    if not mpi_measured:
        row["spread"] = dict(zip(["time"], distributions(time[None, :], ranks)))
        return row
    useful = time - mpi
    row["spread"] = dict(zip(["time", "mpi", "useful"], distributions(np.stack([time, mpi, useful]), ranks)))
    mean_useful, max_useful = float(useful.mean()), float(useful.max())
    total = float(time.sum())
    row.update(mpi_time_avg_s=float(mpi.mean()), mpi_time_max_s=float(mpi.max()),
               mpi_fraction_avg=float(mpi.sum()) / total if total else None,
               mpi_fraction_slowest=float(mpi[slowest]) / t if t else None,
               user_time_avg_s=mean_useful, mpi_sync_time_avg_s=float(sync.mean()),
               load_balance=mean_useful / max_useful if max_useful > 0 else None,
               communication_efficiency=max_useful / t if t else None,
               parallel_efficiency=mean_useful / t if t else None)
    return row


def _per_rank(prof, focus: str | None) -> tuple[np.ndarray, ...] | None:
    """(ranks, time, mpi, sync) of the window: the run window's ranks are those with any record, the
    focus window's those with a record in it. None when no rank has one."""
    n = len(prof.measured)
    time, mpi, sync = np.zeros(n), np.zeros(n), np.zeros(n)
    if focus is None:
        ranks = prof.measured
        time += prof.outside
    else:
        ranks = np.zeros(n, dtype=bool)
    for p, arr in prof.excl.items():
        if focus is not None:
            if not in_focus(p, focus):
                continue
            ranks = ranks | prof.present[p]
        time += arr
        if is_mpi(p):
            (sync if p[-1] in MPI_SYNC else mpi).__iadd__(arr)
    if not ranks.any():
        return None
    return prof.rank_ids[ranks], time[ranks], mpi[ranks], sync[ranks]


def _spot_mean_excl(prof) -> dict[tuple, float]:
    """The mean rank's exclusive time per call path: spot's sum across ranks over the job's rank count.
    Spot's avg is over the ranks that made the record, so it overstates a node only some ranks reach
    (an MPI_Test on one rank of two). Without time.exclusive, inclusive sums less the children's."""
    children: dict = {}
    for p in prof.spot:
        if len(p) > 1:
            children.setdefault(p[:-1], []).append(p)
    out = {}
    for p, s in prof.spot.items():
        total = s["excl_sum"] if "excl_sum" in s else s["sum"] - sum(prof.spot[k]["sum"] for k in children.get(p, []))
        out[p] = total / prof.ranks
    return out


def _spot(prof, focus: str | None) -> dict | None:
    """Across-rank aggregates: the mean rank's times, and the slowest rank's time only where one
    node's inclusive max is the window, or where there is one rank."""
    stats = prof.stats
    paths = [p for p in stats if focus is None or in_focus(p, focus)]
    if not paths:
        return None
    mean_excl = _spot_mean_excl(prof)
    mean_time = sum(mean_excl[p] for p in paths)
    if focus is None:
        mean_time += (prof.spot_outside or {}).get("sum", 0.0) / prof.ranks
        slowest_time = None
    else:
        roots = _focus_roots(paths, focus)
        slowest_time = stats[next(iter(roots))].incl_max if len(roots) == 1 else None
    window = "focus" if focus else "run"
    if prof.ranks == 1:
        # one rank is the mean rank and the slowest: the window as a per-rank profile's
        sync = sum(mean_excl[p] for p in paths if is_mpi(p) and p[-1] in MPI_SYNC)
        mpi = sum(mean_excl[p] for p in paths if is_mpi(p)) - sync
        return _summarise(window, focus, np.array([0]), np.array([mean_time]), np.array([mpi]), np.array([sync]),
                          prof.mpi_profiled)
    row = dict.fromkeys(COLUMNS)
    row.update(window=window, focus_region=focus, time_s=slowest_time)
    if prof.mpi_profiled:
        mpi = sum(mean_excl[p] for p in paths if is_mpi(p))
        row.update(mpi_time_avg_s=mpi, mpi_fraction_avg=mpi / mean_time if mean_time else None,
                   user_time_avg_s=mean_time - mpi,
                   mpi_sync_time_avg_s=sum(mean_excl[p] for p in paths if is_mpi(p) and p[-1] in MPI_SYNC))
    return row


def profile_windows(prof, focus: str | tuple | None) -> list[dict]:
    """The run window and, when the focus region occurs in the profile, the focus window. FOCUS may
    name regions in order of preference: the first the profile has is the focus."""
    if isinstance(focus, tuple):
        present = {name for p in (list(prof.spot) or list(prof.excl)) for name in p}
        focus = next((f for f in focus if f in present), None)
    if prof.spot:
        rows = [r for r in (_spot(prof, None), _spot(prof, focus) if focus else None) if r]
    elif not prof.excl:
        rows = []   # a message trace: no times
    else:
        rows = [_summarise("run", None, *_per_rank(prof, None), prof.mpi_profiled)]
        if focus and any(in_focus(p, focus) for p in prof.excl):
            rows.append(_summarise("focus", focus, *_per_rank(prof, focus), prof.mpi_profiled))
    for row in rows:
        _check_possible(prof, row)
    return rows


TIMES = ("time_s", "mpi_time_avg_s", "mpi_time_max_s", "mpi_sync_time_avg_s")
FRACTIONS = ("mpi_fraction_avg", "mpi_fraction_slowest")


def _check_possible(prof, row: dict) -> None:
    """A window's figures are finite, its times not below zero and its MPI fractions within 0 and 1; a profile
    whose times give anything else (a region's children taking more than it) is refused, naming the figure."""
    for col in COLUMNS:
        v = row[col]
        if not isinstance(v, (int, float)):
            continue
        bad = (not math.isfinite(v) or (col in TIMES and v < 0)
               or (col in FRACTIONS and not -1e-9 <= v <= 1 + 1e-9))
        if bad:
            raise BadProfile(f"{prof.source}: its {row['window']} window's {col} comes out as {v:.6g}, which no "
                             f"run can have; the profile's times are damaged: record or copy it again")


def output_window(foms: dict) -> list[dict]:
    """A run without a profile: the focus window from the workload's own timers (FOMs in seconds).
    The loop's time is total_time; its MPI time the workload's comm_time; POP from compute_time,
    the workload's useful time. Fractions over the mean rank need the mean rank's loop time, which
    the workload does not print: None."""
    def f(name):
        v = foms.get(name)
        return v[0] if v and v[1] == "s" else None
    total = f("total_time")
    if total is None:
        return []
    row = dict.fromkeys(COLUMNS)
    row.update(window="focus", focus_region=WORKLOAD_FOCUS, time_s=total,
               mpi_time_avg_s=f("comm_time_avg"), mpi_time_max_s=f("comm_time_max"),
               user_time_avg_s=f("compute_time_avg"))
    cavg, cmax = f("compute_time_avg"), f("compute_time_max")
    if cavg is not None and cmax:
        row.update(load_balance=cavg / cmax, communication_efficiency=cmax / total if total else None,
                   parallel_efficiency=cavg / total if total else None)
    return [row]


# Where a run's focus window came from (runs.metadata.focus_source, docs/measurement-model.md): the profile's
# call tree (the focus region's subtrees), or the workload's own timers (its FOMs over its timed loop).
FOCUS_FROM_PROFILE, FOCUS_FROM_TIMERS = "profile", "workload timers"


def focus_windows(prof, focus: str | None) -> tuple[list[dict], str | None]:
    """The run's windows and where its focus window came from (None: it has none).

    A FOCUS named at ingest or by the Ramble experiment is that region's subtrees in the profile, or no
    focus window. Without one, or when it names the workloads' timed loop (`loop`, which every commscope
    Ramble application declares), the focus is the loop: the `loop` region where the profile has it; else,
    when the workload's output is beside the profile, the workload's own timers, which time exactly that
    loop (as for a run without a profile): a profile made before the workloads had `loop` (its `timestep`
    regions leave out what the loop does between steps, such as halo3d's first exchange) or one that timed
    nothing (a message trace). Without the output such a profile has
    no focus window rather than one over another interval."""
    if focus is not None and focus != WORKLOAD_FOCUS:
        rows = profile_windows(prof, focus)
        return rows, FOCUS_FROM_PROFILE if any(w["window"] == "focus" for w in rows) else None
    rows = profile_windows(prof, WORKLOAD_FOCUS)
    if any(w["window"] == "focus" for w in rows):
        return rows, FOCUS_FROM_PROFILE
    timers = output_window(prof.output.foms) if prof.output else []
    return rows + timers, FOCUS_FROM_TIMERS if timers else None


@dataclass
class Measured:
    """What the record of a run takes from this module: its windows (COLUMNS, each with its "spread"), where its
    focus window came from (None: it has none) and, for a profile, its measured ranks' times (rank_groups)."""
    windows: list[dict]
    focus_source: str | None
    ranks: dict | None = None


def measure_profile(prof, focus: str | None) -> Measured:
    """A profile's windows (focus_windows; FOCUS as there) and its ranks' times."""
    rows, source = focus_windows(prof, focus)
    return Measured(rows, source, rank_groups(prof))


def measure_output(out) -> Measured:
    """A run without a profile: the focus window of the workload's own timers (OUT, its parsed output)."""
    rows = output_window(out.foms)
    return Measured(rows, FOCUS_FROM_TIMERS if rows else None)
