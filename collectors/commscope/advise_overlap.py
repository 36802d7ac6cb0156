"""The overlap and imbalance advisor (the seismic study): per halo variant,
how much communication stays exposed, how much of it overlapping hides, and
whether the waiting that is left comes from load imbalance or from the network.

It reads one run's call tree as stored (v_node_metrics: per call path,
exclusive and inclusive time min/avg/max over ranks and the rank with the most
inclusive time), its comm.stats (v_comm_stats) and its per-rank groups
(v_rank_groups). All times are per rank, in seconds, inside the loop region
(`timestep`).

- Exposed communication time: the time ranks spend inside MPI calls in the
  loop (average over ranks). For `blocking` that is all of the communication;
  for `overlap` and `rma` it is only posting and completing the exchange.
- Overlap efficiency against `blocking` (same workload, size, ranks, stack,
  interconnect, absorbing layer and fusion, in the same campaign):
      1 - exposed(variant) / exposed(blocking),
  i.e. the share of blocking's communication time the variant hides
  (= (comm_blocking - exposed_variant) / comm_blocking, since blocking exposes
  all of it). Medians over repeats. Negative means the variant exposes more.
- Irecv gap: comm.stats' average time from posting a receive to its data
  arriving (present when profiled with comm.stats).
- Per region (each child of the loop): max/avg imbalance of inclusive time and
  the slowest rank (the one with the most time in it). A region is a
  communication region when it calls MPI other than polls (MPI_Test*,
  MPI_Iprobe, MPI_Win_test), otherwise a compute region.
- Why the loop waits. In a bulk-synchronous step a rank waits for its
  slowest partner: wait(r) ~ (compute of the slowest - compute(r)) + floor,
  where the floor is what even the slowest rank waits (the transfer itself,
  and on a shared machine the partner's descheduled time). Over the loop
  every rank's total is the same, so with USER the non-MPI time
  (v_rank_groups) and W the loop's MPI time:
      mean W = excess + floor,   excess = max - mean over ranks of USER.
  The wait the imbalance causes is `excess`; it is compared with all of the
  loop's MPI time (`exposed`), not one region's: overlap and rma move the
  transfer into the polls inside their interior compute (MPI_Testall,
  MPI_Win_test), so the completing region alone holds only part of the wait
  while the excess is loop-wide (comparing the two gave shares above 100%).
  Only without per-rank groups (spot profiles) is excess the sum of each
  compute region's (max - avg), which overcounts when different ranks are
  slow in different regions.
  explained = excess / exposed. When it is at least IMBALANCE_SHARE (the
  imbalance is the larger part, excess >= floor) and the imbalance is
  material, POP load balance below MATERIAL_BALANCE (POP's usual 0.8 line:
  an efficiency under 80% is worth fixing), the loop's communication
  regions are flagged `imbalance` (balancing the load would remove most of
  the wait); otherwise `network` (the transfer, or waiting for descheduled
  partners on an oversubscribed or shared machine, dominates). Without the
  materiality test a quiet machine blamed balanced runs: the loop's MPI time
  is then so small that chance differences between ranks with the same work
  (load balance 0.85-0.96) outweigh it. Spot profiles, without per-rank
  USER times, have no load balance and use the share alone. This is the
  POP methodology's split of parallel efficiency: load balance
  mean(USER)/max(USER) loses `excess`, communication efficiency
  max(USER)/loop loses `floor` (loop - max USER ~ the least-waiting rank's
  wait), and the verdict names the larger loss; `load_balance` is in the
  summary. On a shared machine the floor also holds the time a partner was
  descheduled, which wall-clock profiles cannot tell from the transfer (see
  collectors/README.md for what that did to the measured verdicts). The
  run-level check beside it: across ranks, the correlation of USER time with
  MPI time is strongly negative when the ranks that compute most wait least.
- Descheduled ranks. The workloads record, per run, the largest share of the
  timed loop that any rank spent runnable but waiting for a core (Adiak
  `runqueue_wait_share_max`, from Linux's schedstat). With a core each it is
  under 2% here; beside one `yes` process on 2 cores it is 35-45%. At or above
  DESCHEDULED_SHARE the waits are flagged `descheduled` instead: a partner's
  lost core time then sits in the MPI wait, and neither the excess nor the
  floor can be trusted (measured: with the `yes` process the rule above
  called 23 of 32 imbalanced runs `network`). Runs without the value (older
  profiles) get the rule above.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from . import db
from .advise_barriers import SERIES, stored_runs

POLLS = {"MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome", "MPI_Iprobe", "MPI_Win_test"}
IMBALANCE_SHARE = 0.5   # excess / wait at or above which a wait is blamed on imbalance
MATERIAL_BALANCE = 0.8  # POP load balance below which an imbalance is worth fixing
DESCHEDULED_SHARE = 0.05  # a rank waited for a core this share of the run or more: no verdict on the cause


class NoOverlapData(LookupError):
    """A run without the call tree the advisor needs (no loop region)."""


@dataclass
class Node:
    path: str
    excl_min: float | None
    excl_avg: float | None
    excl_max: float | None
    incl_avg: float | None
    incl_max: float | None
    slowest_rank: int | None


@dataclass
class Region:
    path: str
    kind: str                     # compute | comm
    time_avg: float               # inclusive, per rank
    time_max: float
    imbalance: float | None       # max / avg
    slowest_rank: int | None
    mpi_avg: float = 0.0          # time in MPI calls inside it (avg over ranks)
    mpi_min: float = 0.0          # the rank that waits least (sum of per-call-path minima)
    excess: float | None = None   # comm only: the loop's compute excess, max - mean USER over ranks
    explained: float | None = None   # excess / the loop's MPI time (avg over ranks)
    cause: str | None = None      # comm only: imbalance | network | descheduled

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class RunOverlap:
    run_id: int | None
    label: str                    # variant, with -fused
    info: dict
    loop: str
    loop_time: float
    exposed: float                # per rank avg
    compute: float
    regions: list
    irecv_gap: float | None
    rank_corr: float | None       # corr(USER, MPI) across ranks
    load_balance: float | None = None   # POP: mean / max over ranks of USER time
    runqueue_share: float | None = None  # most-delayed rank's share of the run waiting for a core
    efficiency: float | None = None
    baseline_exposed: float | None = None
    baseline_runs: list = field(default_factory=list)

    def summary(self) -> dict:
        return {"variant": self.label, "loop": self.loop, "loop_time_avg": self.loop_time,
                "exposed_comm_avg": self.exposed, "compute_avg": self.compute,
                "exposed_share": self.exposed / self.loop_time if self.loop_time else None,
                "overlap_efficiency": self.efficiency, "blocking_exposed_comm_avg": self.baseline_exposed,
                "blocking_run_ids": self.baseline_runs, "irecv_gap_avg": self.irecv_gap,
                "rank_corr_user_mpi": self.rank_corr, "load_balance": self.load_balance,
                "runqueue_wait_share_max": self.runqueue_share,
                "waits": {r.path: r.cause for r in self.regions if r.kind == "comm"},
                "regions": [r.as_dict() for r in self.regions],
                "model": "efficiency = 1 - exposed/exposed_blocking; the waits are 'imbalance' when max - mean over "
                         f"ranks of USER time is >= {IMBALANCE_SHARE} of the loop's average MPI time and the POP load "
                         f"balance mean/max of USER time is below {MATERIAL_BALANCE}; 'descheduled' (no verdict) when a "
                         f"rank spent >= {DESCHEDULED_SHARE} of the run waiting for a core"}

    def text(self) -> str:
        i = self.info
        head = (f"{i['app']} {self.label} ({i['ranks']} ranks, {i['stack']}): exposed communication "
                f"{self.exposed * 1e3:.3g} ms per rank"
                + (f", {self.exposed / self.loop_time:.0%} of the loop" if self.loop_time else ""))
        if self.efficiency is not None:
            head += f"; overlap efficiency {self.efficiency:.0%} against blocking ({self.baseline_exposed * 1e3:.3g} ms)"
        if self.irecv_gap is not None:
            head += f"; Irecv gap {self.irecv_gap * 1e6:.3g} us"
        parts = [head + "."]
        comp = [r for r in self.regions if r.kind == "compute" and r.imbalance is not None]
        if comp:
            worst = max(comp, key=lambda r: r.imbalance)
            parts.append(f"Most imbalanced compute region {worst.path.rsplit('/', 1)[-1]}: max/avg "
                         f"{worst.imbalance:.2f}, slowest rank {worst.slowest_rank}.")
        for r in self.regions:
            if r.kind != "comm" or not r.mpi_avg:
                continue
            parts.append(f"{r.path.rsplit('/', 1)[-1]} waits {r.mpi_avg * 1e3:.3g} ms per rank "
                         f"(the least-waiting rank {r.mpi_min * 1e3:.3g} ms); compute imbalance explains "
                         f"{r.explained:.0%} of the loop's {self.exposed * 1e3:.3g} ms of MPI time: {CAUSE_TEXT[r.cause]}.")
        if self.runqueue_share is not None and self.runqueue_share >= DESCHEDULED_SHARE:
            parts.append(f"A rank waited for a core {self.runqueue_share:.0%} of the run (another task shared it): its "
                         "lost time sits in its partners' MPI waits, so imbalance cannot be told from the network.")
        if self.rank_corr is not None:
            parts.append(f"Across ranks, USER and MPI time correlate at {self.rank_corr:+.2f}.")
        return " ".join(parts)


CAUSE_TEXT = {"imbalance": "IMBALANCE, not the network", "network": "network",
              "descheduled": "DESCHEDULED ranks, no verdict"}


def _corr(xs: list, ys: list) -> float | None:
    if len(xs) < 3:
        return None
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:   # constant input
        return None


def analyse(nodes: list[Node], rank_groups: list[tuple], comm_gaps: dict, run_id=None, info=None,
            label="", runqueue_share: float | None = None) -> RunOverlap:
    """rank_groups: (rank, user, mpi + sync) per rank; comm_gaps: comm region path -> Irecv gap avg;
    runqueue_share: the most-delayed rank's share of the run spent waiting for a core, if known."""
    info = info or {}
    by_path = {n.path: n for n in nodes}
    loops = sorted((p for p in by_path if p.rsplit("/", 1)[-1] == "timestep"), key=len)
    if not loops:
        raise NoOverlapData("no timestep region in the profile (not a loop of compute and exchange)")
    loop = loops[0]
    inside = {p: n for p, n in by_path.items() if p.startswith(loop + "/")}
    leaves = {p: n for p, n in inside.items() if p.rsplit("/", 1)[-1].startswith("MPI_")}
    exposed = sum(n.excl_avg or 0.0 for n in leaves.values())
    loop_time = by_path[loop].incl_avg or 0.0
    regions = []
    for p, n in sorted(inside.items()):
        if p.count("/") != loop.count("/") + 1 or p in leaves:
            continue
        mine = {q: m for q, m in leaves.items() if q.startswith(p + "/")}
        mpi_avg = sum(m.excl_avg or 0.0 for m in mine.values())
        # Polling inside a compute loop (overlap's MPI_Testall, rma's MPI_Win_test) keeps it a compute region.
        kind = "comm" if {q.rsplit("/", 1)[-1] for q in mine} - POLLS else "compute"
        regions.append(Region(p, kind, n.incl_avg or 0.0, n.incl_max or 0.0,
                              n.incl_max / n.incl_avg if n.incl_avg else None, n.slowest_rank, mpi_avg,
                              sum(m.excl_min or 0.0 for m in mine.values())))
    # The compute excess from the per-rank USER time (v_rank_groups) when there is one: summing each region's
    # max - avg instead would count twice when different ranks are slow in different regions (overlap's
    # boundary and interior passes split the same work differently between end and middle ranks).
    users = [g[1] for g in rank_groups]
    if len(users) > 1:
        excess = max(users) - statistics.mean(users)
    else:
        excess = sum(r.time_max - r.time_avg for r in regions if r.kind == "compute")
    # The excess is loop-wide, so it is set against the loop's whole MPI time: in overlap and rma the transfer
    # progresses inside the interior's polls, and the completing region alone holds only what is left of it.
    balance = statistics.mean(users) / max(users) if len(users) > 1 and max(users) > 0 else None
    material = balance is None or balance < MATERIAL_BALANCE
    descheduled = runqueue_share is not None and runqueue_share >= DESCHEDULED_SHARE
    for r in regions:
        if r.kind == "comm" and r.mpi_avg and exposed:
            r.excess = excess
            r.explained = excess / exposed
            r.cause = ("descheduled" if descheduled else
                       "imbalance" if r.explained >= IMBALANCE_SHARE and material else "network")
    gaps = [g for p, g in comm_gaps.items() if p.startswith(loop + "/") and g is not None]
    ranks = sorted(rank_groups)
    corr = _corr([g[1] for g in ranks], [g[2] for g in ranks])
    return RunOverlap(run_id, label, info, loop, loop_time, exposed, loop_time - exposed, regions,
                      statistics.mean(gaps) if gaps else None, corr, balance, runqueue_share)


# ---- the store ---------------------------------------------------------------------

def _label(variant, metadata: dict) -> str:
    fused = str(metadata.get("fused", "0")).lower() in ("1", "true", "yes")
    return f"{variant or 'default'}{'-fused' if fused else ''}"


def _share(metadata: dict) -> float | None:
    try:
        return float(metadata["runqueue_wait_share_max"])
    except (KeyError, TypeError, ValueError):
        return None


def load(conn, run_id: int) -> RunOverlap:
    cols = [c.strip() for c in SERIES.split(",")]
    row = conn.execute(f"SELECT {', '.join('v.' + c for c in cols)}, v.campaign_id, r.metadata "
                       "FROM v_runs v JOIN runs r ON r.id = v.run_id WHERE v.run_id = %s", (run_id,)).fetchone()
    info = dict(zip(cols + ["campaign_id", "metadata"], row))
    meta = info.pop("metadata") or {}
    info["pml_width"], info["pml_faces"], info["fused"] = meta.get("pml_width"), meta.get("pml_faces"), meta.get("fused")
    nodes = [Node(*r) for r in conn.execute(
        "SELECT path, excl_min, excl_avg, excl_max, incl_avg, incl_max, incl_max_rank FROM v_node_metrics "
        "WHERE run_id = %s", (run_id,))]
    if not nodes:
        raise NoOverlapData(f"run {run_id}: no call-tree times (a run stored from its output alone, or a "
                           "message-tracing profile)")
    groups = [(r, u, m + s) for r, u, m, s in conn.execute(
        "SELECT rank, user_time, mpi_time, mpi_sync_time FROM v_rank_groups WHERE run_id = %s", (run_id,))]
    gaps = dict(conn.execute("SELECT region, irecv_gap_avg FROM v_comm_stats WHERE run_id = %s", (run_id,)).fetchall())
    try:
        return analyse(nodes, groups, gaps, run_id, info, _label(info["variant"], meta), _share(meta))
    except NoOverlapData as e:
        raise NoOverlapData(f"run {run_id}: {e}") from None


def from_store(conn, source: str) -> tuple[list[RunOverlap], list[str]]:
    """Every run SOURCE names that has a loop, with overlap efficiency against
    the blocking runs of the same experiment in the same campaign."""
    ids = stored_runs(conn, source)
    done, skipped = [], []
    for run_id in ids:
        try:
            done.append(load(conn, run_id))
        except NoOverlapData as e:
            skipped.append(str(e))
    if not done:
        raise NoOverlapData(f"{source}: " + "; ".join(skipped))
    same = ("app", "workload", "stack", "interconnect", "ranks", "global_size", "pml_width", "pml_faces", "fused")
    key = lambda o: tuple(o.info[c] for c in same)  # noqa: E731
    campaigns = {o.info["campaign_id"] for o in done}
    # blocking runs of the same campaign, also when SOURCE named a single run
    pool = list(done)
    for cid in campaigns:
        for (rid,) in conn.execute("SELECT id FROM runs WHERE campaign_id = %s AND variant = 'blocking'", (cid,)):
            if rid not in {o.run_id for o in pool}:
                try:
                    pool.append(load(conn, rid))
                except NoOverlapData:
                    pass
    for o in done:
        base = [b for b in pool if b.info["variant"] == "blocking" and key(b) == key(o)
                and b.info["campaign_id"] == o.info["campaign_id"]]
        if base:
            o.baseline_exposed = statistics.median(b.exposed for b in base)
            o.baseline_runs = [b.run_id for b in base]
            if o.baseline_exposed:
                o.efficiency = 1 - statistics.median(
                    x.exposed for x in done if x.label == o.label and key(x) == key(o)) / o.baseline_exposed
    return done, skipped


def table(results: list[RunOverlap]) -> str:
    lines = [f"{'run':>6} {'variant':16}{'ranks':>6}{'loop ms':>10}{'exposed ms':>12}{'efficiency':>11}"
             f"{'Irecv gap us':>13}  waits"]
    for o in results:
        eff = f"{o.efficiency:>11.0%}" if o.efficiency is not None else f"{'-':>11}"
        gap = f"{o.irecv_gap * 1e6:>13.3g}" if o.irecv_gap is not None else f"{'-':>13}"
        waits = ", ".join(f"{r.path.rsplit('/', 1)[-1]}: {r.cause} ({r.explained:.0%})"
                          for r in o.regions if r.cause)
        lines.append(f"{o.run_id:>6} {o.label:16}{o.info['ranks']:>6}{o.loop_time * 1e3:>10.3f}"
                     f"{o.exposed * 1e3:>12.3f}{eff}{gap}  {waits}")
    return "\n".join(lines)


def store(conn, source: str, results: list[RunOverlap]) -> None:
    for o in results:
        db.insert_advice(conn, "overlap", o.run_id, source, o.summary(), o.text())
