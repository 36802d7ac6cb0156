"""The measurement model's numbers for one run, per window (docs/measurement-model.md).

A window is an interval every rank spends: `run`, everything the profile
recorded including the time outside every region; `focus`, the subtrees of the
one region a study is about (for commscope's workloads their timed loop, the
`loop` region; records.focus_windows says what stands in for it in a profile
without one). Per window and rank: time, MPI time (exclusive time of MPI
functions, barrier and wait-type ones apart as MPI_SYNC) and useful time (the
rest). Over ranks:

- time: the slowest rank's;
- MPI time: mean and max; MPI fraction: over the mean rank (sum MPI / sum time)
  and on the slowest rank;
- POP's efficiencies, multiplicative form: load balance = mean(useful) /
  max(useful), communication efficiency = max(useful) / time, parallel
  efficiency = mean(useful) / time = their product.

What the data cannot give is None (NULL in the store): every MPI figure when
Caliper did not wrap MPI; the slowest rank and POP from spot, which keeps only
aggregates across ranks; a focus time from spot when the focus region sits at
more than one call path (a max of sums is not a sum of maxes)."""
from __future__ import annotations

import math

import numpy as np

from commscope.read.files import BadProfile
from commscope.read.profiles import Profile
from commscope.read.rank_stats import MPI_SYNC, distributions, is_mpi

# The workloads' timed loop (workloads/README.md, "Caliper regions"): the `loop` region is exactly
# cs_loop_begin..cs_loop_end, the interval of the FOM total_time. Profiles made before it existed have
# only the `timestep` regions inside it, a different interval (halo3d's first halo exchange, inside the
# loop, is outside them), so they are no stand-in for it (records.focus_windows).
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
    "spread" holds the distribution over ranks of time, MPI time and useful time (rank_stats.distributions)."""
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


def _per_rank(prof: Profile, focus: str | None) -> tuple[np.ndarray, ...] | None:
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


def _spot_mean_excl(prof: Profile) -> dict[tuple, float]:
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


def _spot(prof: Profile, focus: str | None) -> dict | None:
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


def profile_windows(prof: Profile, focus: str | tuple | None) -> list[dict]:
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


def _check_possible(prof: Profile, row: dict) -> None:
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
