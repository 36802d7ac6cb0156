"""Per-rank data of a profile: as it is read (PerRank, one float per call path and rank with data) and its statistics
once read (prof: a profiles.Profile): per call path, exclusive and inclusive time over the
measured ranks (min/avg/max, the slowest rank's), distributions over ranks as rank_spread stores them, and each
rank's USER / MPI / MPI_SYNC split. Spot profiles carry only Caliper's aggregates across ranks."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

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


class PerRank:
    """Per call path, one float per rank that has a record, in the order ranks first appear (COLUMNS,
    shared by a run's accumulators), so memory follows the data, not the rank numbers a file claims."""

    def __init__(self, columns: dict[int, int]):
        self.columns = columns          # rank -> column, shared
        self.values: dict[tuple, np.ndarray] = {}
        self.present: dict[tuple, np.ndarray] = {}

    def has(self, path: tuple, rank: int) -> bool:
        """Whether a record of PATH on RANK was added already."""
        col, pres = self.columns.get(rank), self.present.get(path)
        return col is not None and pres is not None and col < len(pres) and bool(pres[col])

    def add(self, path: tuple, rank: int, t: float) -> None:
        col = self.columns.setdefault(rank, len(self.columns))
        arr = self.values.get(path)
        if arr is None or col >= len(arr):
            arr = self._grow(path, col)
        arr[col] += t
        self.present[path][col] = True

    def _grow(self, path: tuple, col: int) -> np.ndarray:
        old, had = self.values.get(path), self.present.get(path)
        size = max(8, col + 1, 2 * (len(old) if old is not None else 0))
        arr, pres = np.zeros(size), np.zeros(size, dtype=bool)
        if old is not None:
            arr[:len(old)], pres[:len(had)] = old, had
        self.values[path], self.present[path] = arr, pres
        return arr

    def aligned(self, rank_ids: np.ndarray) -> tuple[dict, dict]:
        """Every array with one column per rank of RANK_IDS (ascending, holding every rank in COLUMNS), one
        array at a time: memory follows the ranks with data, never a claimed rank count."""
        ranks = np.full(len(self.columns), -1, dtype=np.int64)
        for rank, col in self.columns.items():
            ranks[col] = rank
        where = np.searchsorted(rank_ids, ranks)
        for d in (self.values, self.present):
            for p, a in d.items():
                out = np.zeros(len(rank_ids), dtype=a.dtype)
                m = min(len(a), len(where))
                out[where[:m]] = a[:m]
                d[p] = out
        return self.values, self.present
