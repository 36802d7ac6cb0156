"""The overlap and imbalance advisor (the seismic study): per halo variant, how much communication stays exposed,
how much of it overlapping hides, and whether the waiting that is left comes from load imbalance or from the
network (docs/advisors.md, "Overlap and imbalance advice").

Every number is the run's focus window (docs/measurement-model.md): its row of v_run_metrics for the loop-wide
figures, the call-tree nodes inside it (v_node_metrics) and its comm.stats (v_comm_stats) per region. Times are
per rank, in seconds. What the profile did not measure is None (NULL): without MPI wrapping there is no exposed
time, efficiency or verdict; spot profiles keep no per-rank times, so no load balance, excess or verdict.

- Exposed communication: the window's mean MPI time over ranks (mpi_time_avg_s).
- Overlap efficiency: 1 - exposed(variant) / exposed(blocking), medians over repeats, against the blocking runs of
  the same experiment (parameters but the variant, environment) in the same campaign.
- Irecv gap: comm.stats' mean time from posting a receive to its data arriving, over the focus's comm regions.
- Per region (each child of the step): max/avg imbalance of inclusive time and the slowest rank. A region that
  calls MPI other than polls (MPI_Test*, MPI_Iprobe, MPI_Win_test) is a communication region.
- Why the loop waits (POP's split of parallel efficiency): mean MPI time = excess + floor, where
  excess = user_time_avg_s / load_balance - user_time_avg_s, set against all of the window's MPI time (overlap
  and rma move the transfer into polls inside their compute). explained = excess / exposed. When it is at least
  IMBALANCE_SHARE and load balance is below MATERIAL_BALANCE (0.8), the comm regions are flagged `imbalance`,
  otherwise `network`.
- Descheduled ranks: when the largest share of the loop any rank spent runnable but waiting for a core
  (`runqueue_wait_share_max`) is at least DESCHEDULED_SHARE, the waits are flagged `descheduled` instead.

Figures behind the loop-only rule and the DESCHEDULED_SHARE line: bench/results/overlap_advice.md.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from commscope.store import db
from commscope.store.queries import advise as queries
from commscope.advise.barriers import experiment_key, stored_runs

POLLS = {"MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome", "MPI_Iprobe", "MPI_Win_test"}
IMBALANCE_SHARE = 0.5   # excess / wait at or above which a wait is blamed on imbalance
MATERIAL_BALANCE = 0.8  # POP load balance below which an imbalance is worth fixing
DESCHEDULED_SHARE = 0.05  # a rank waited for a core this share of the run or more: no verdict on the cause
STEP = "timestep"       # the workloads' per-iteration region, whose children are the regions reported
# The parameters that name a halo3d variant: the PARAM line (output beside the profile) or the Adiak value.
VARIANT_KEYS = ("param.variant", "variant")


class NoOverlapData(LookupError):
    """A run without the call tree the advisor needs (no focus window)."""


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
class Window:
    """The run's focus window, as run_windows stores it (measures.COLUMNS)."""
    focus_region: str
    time_s: float | None               # the slowest rank's
    mpi_time_avg_s: float | None       # None: MPI not measured
    mpi_fraction_avg: float | None
    user_time_avg_s: float | None
    load_balance: float | None         # None: MPI not measured, or spot (no per-rank times)
    communication_efficiency: float | None


@dataclass
class Region:
    path: str
    kind: str | None              # compute | comm; None when MPI was not measured
    time_avg: float               # inclusive, per rank
    time_max: float
    imbalance: float | None       # max / avg
    slowest_rank: int | None
    mpi_avg: float | None = None  # time in MPI calls inside it (avg over ranks)
    mpi_min: float | None = None  # the rank that waits least (sum of per-call-path minima)
    excess: float | None = None   # comm only: the window's compute excess, max - mean useful time over ranks
    explained: float | None = None   # excess / the window's MPI time (avg over ranks)
    cause: str | None = None      # comm only: imbalance | network | descheduled; None: not measured

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class RunOverlap:
    run_id: int | None
    label: str                    # variant, with -fused
    info: dict
    loop: str                     # the focus region's call path
    window: Window
    regions: list
    irecv_gap: float | None
    runqueue_share: float | None = None  # most-delayed rank's share of the loop waiting for a core
    efficiency: float | None = None
    baseline_exposed: float | None = None
    baseline_runs: list = field(default_factory=list)

    @property
    def exposed(self) -> float | None:
        return self.window.mpi_time_avg_s

    @property
    def compute(self) -> float | None:
        return self.window.user_time_avg_s

    @property
    def loop_time(self) -> float | None:
        """The mean rank's time in the window (useful + MPI), None when MPI was not measured."""
        w = self.window
        return None if w.user_time_avg_s is None or w.mpi_time_avg_s is None else w.user_time_avg_s + w.mpi_time_avg_s

    @property
    def load_balance(self) -> float | None:
        return self.window.load_balance

    @property
    def excess(self) -> float | None:
        """max - mean useful time over ranks: mean / load balance - mean."""
        w = self.window
        if w.user_time_avg_s is None or not w.load_balance:
            return None
        return w.user_time_avg_s / w.load_balance - w.user_time_avg_s

    def summary(self) -> dict:
        return {"variant": self.label, "status": self.info.get("status"), "window": "focus",
                "focus_region": self.window.focus_region, "loop": self.loop,
                "loop_time_slowest": self.window.time_s, "loop_time_avg": self.loop_time,
                "exposed_comm_avg": self.exposed, "compute_avg": self.compute,
                "exposed_share": self.window.mpi_fraction_avg,
                "overlap_efficiency": self.efficiency, "blocking_exposed_comm_avg": self.baseline_exposed,
                "blocking_run_ids": self.baseline_runs, "irecv_gap_avg": self.irecv_gap,
                "load_balance": self.load_balance, "communication_efficiency": self.window.communication_efficiency,
                "excess": self.excess, "runqueue_wait_share_max": self.runqueue_share,
                "waits": {r.path: r.cause for r in self.regions if r.kind == "comm"},
                "regions": [r.as_dict() for r in self.regions],
                "model": "over the focus window: efficiency = 1 - exposed/exposed_blocking; the waits are 'imbalance' "
                         f"when max - mean over ranks of useful time is >= {IMBALANCE_SHARE} of the window's average "
                         f"MPI time and the POP load balance mean/max of useful time is below {MATERIAL_BALANCE}; "
                         f"'descheduled' (no verdict) when a rank spent >= {DESCHEDULED_SHARE} of the loop waiting "
                         "for a core; NULL where the profile did not measure it"}

    def text(self) -> str:
        i, w = self.info, self.window
        head = f"{i['app']} {self.label} ({i['ranks']} ranks, {i['stack']}), window {w.focus_region}: "
        if i.get("status") not in (None, "ok"):
            head = f"{head}status {i['status']}, so no baseline and no efficiency; "
        if self.exposed is None:
            return head + ("MPI time not measured (a profile without profile.mpi), so no exposed communication, "
                           "efficiency or verdict.")
        head += f"exposed communication {self.exposed * 1e3:.3g} ms per rank"
        if w.mpi_fraction_avg is not None:
            head += f", {w.mpi_fraction_avg:.0%} of the loop"
        if self.efficiency is not None:
            head += f"; overlap efficiency {self.efficiency:.0%} against blocking ({self.baseline_exposed * 1e3:.3g} ms)"
        if self.irecv_gap is not None:
            head += f"; Irecv gap {self.irecv_gap * 1e6:.3g} us"
        parts = [head + "."]
        if self.load_balance is not None:
            parts.append(f"Load balance {self.load_balance:.2f}.")
        comp = [r for r in self.regions if r.kind == "compute" and r.imbalance is not None]
        if comp:
            worst = max(comp, key=lambda r: r.imbalance)
            slowest = f", slowest rank {worst.slowest_rank}" if worst.slowest_rank is not None else ""
            parts.append(f"Most imbalanced compute region {worst.path.rsplit('/', 1)[-1]}: max/avg "
                         f"{worst.imbalance:.2f}{slowest}.")
        for r in self.regions:
            if r.kind != "comm" or not r.mpi_avg:
                continue
            waits = (f"{r.path.rsplit('/', 1)[-1]} waits {r.mpi_avg * 1e3:.3g} ms per rank "
                     f"(the least-waiting rank {r.mpi_min * 1e3:.3g} ms)")
            if r.explained is None:
                parts.append(f"{waits}; no verdict: the profile keeps no per-rank times (load balance not measured).")
            else:
                parts.append(f"{waits}; compute imbalance explains {r.explained:.0%} of the loop's "
                             f"{self.exposed * 1e3:.3g} ms of MPI time: {CAUSE_TEXT[r.cause]}.")
        if self.runqueue_share is not None and self.runqueue_share >= DESCHEDULED_SHARE:
            parts.append(f"A rank waited for a core {self.runqueue_share:.0%} of the run (another task shared it): its "
                         "lost time sits in its partners' MPI waits, so imbalance cannot be told from the network.")
        return " ".join(parts)


CAUSE_TEXT = {"imbalance": "IMBALANCE, not the network", "network": "network",
              "descheduled": "DESCHEDULED ranks, no verdict"}


def _focus_root(paths, focus: str) -> str | None:
    """The outermost call path of the focus region (the shortest, when it sits at several)."""
    roots = sorted((p for p in paths if p.rsplit("/", 1)[-1] == focus), key=lambda p: (p.count("/"), p))
    return roots[0] if roots else None


def analyse(nodes: list[Node], window: Window, comm_gaps: dict, run_id=None, info=None,
            label="", runqueue_share: float | None = None) -> RunOverlap:
    """window: the run's focus window; nodes: its call tree; comm_gaps: comm region path -> Irecv gap avg;
    runqueue_share: the most-delayed rank's share of the loop spent waiting for a core, if known."""
    info = info or {}
    by_path = {n.path: n for n in nodes}
    loop = _focus_root(by_path, window.focus_region)
    if loop is None:
        raise NoOverlapData(f"the focus region {window.focus_region} is not in the stored call tree")
    inside = {p: n for p, n in by_path.items() if p.startswith(loop + "/")}
    step = loop if window.focus_region == STEP else _focus_root(inside, STEP) or loop
    leaves = {p: n for p, n in inside.items() if p.rsplit("/", 1)[-1].startswith("MPI_")}
    mpi_measured = window.mpi_time_avg_s is not None
    regions = []
    for p, n in sorted(inside.items()):
        if _parent(p) != step or p in leaves:
            continue
        r = Region(p, None, n.incl_avg or 0.0, n.incl_max or 0.0,
                   n.incl_max / n.incl_avg if n.incl_avg and n.incl_max is not None else None, n.slowest_rank)
        if mpi_measured:
            mine = {q: m for q, m in leaves.items() if q.startswith(p + "/")}
            r.mpi_avg = sum(m.excl_avg or 0.0 for m in mine.values())
            r.mpi_min = sum(m.excl_min or 0.0 for m in mine.values())
            # Polling inside a compute loop (overlap's MPI_Testall, rma's MPI_Win_test) keeps it a compute region.
            r.kind = "comm" if {q.rsplit("/", 1)[-1] for q in mine} - POLLS else "compute"
        regions.append(r)
    o = RunOverlap(run_id, label, info, loop, window, regions, None, runqueue_share)
    gaps = [g for p, g in comm_gaps.items() if p.startswith(loop + "/") and g is not None]
    o.irecv_gap = statistics.mean(gaps) if gaps else None
    # The excess is window-wide, so it is set against the window's whole MPI time: in overlap and rma the
    # transfer progresses inside the interior's polls, and the completing region alone holds only part of it.
    excess, exposed = o.excess, o.exposed
    descheduled = runqueue_share is not None and runqueue_share >= DESCHEDULED_SHARE
    for r in regions:
        if r.kind == "comm" and r.mpi_avg and exposed and excess is not None:
            r.excess = excess
            r.explained = excess / exposed
            r.cause = ("descheduled" if descheduled else
                       "imbalance" if r.explained >= IMBALANCE_SHARE and window.load_balance < MATERIAL_BALANCE
                       else "network")
    return o


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


# ---- the store ---------------------------------------------------------------------

def _label(variant, metadata: dict) -> str:
    fused = str(metadata.get("fused", "0")).lower() in ("1", "true", "yes", "on")
    return f"{variant or 'default'}{'-fused' if fused else ''}"


def _share(metadata: dict) -> float | None:
    try:
        return float(metadata["runqueue_wait_share_max"])
    except (KeyError, TypeError, ValueError):
        return None


def _variant(parameters: dict, fallback) -> str | None:
    return next((str(parameters[k]) for k in VARIANT_KEYS if k in parameters), fallback)


def load(conn, run_id: int) -> RunOverlap:
    row = queries.run_description(conn, run_id)
    app, variant, stack, ranks, campaign, meta, params, env, status = row
    meta = meta or {}
    info = {"run_id": run_id, "app": app, "stack": stack, "ranks": ranks, "campaign_id": campaign,
            "variant": _variant(params or {}, variant), "parameters": params, "environment": env, "status": status}
    nodes = [Node(*r) for r in conn.execute(
        "SELECT path, excl_min, excl_avg, excl_max, incl_avg, incl_max, incl_max_rank FROM v_node_metrics "
        "WHERE run_id = %s", (run_id,))]
    if not nodes:
        raise NoOverlapData(f"run {run_id}: no call-tree times (a run stored from its output alone, or a "
                           "message-tracing profile)")
    w = conn.execute(
        "SELECT focus_region, time_s, mpi_time_avg_s, mpi_fraction_avg, user_time_avg_s, load_balance, "
        "communication_efficiency FROM v_run_metrics WHERE run_id = %s AND \"window\" = 'focus'", (run_id,)).fetchone()
    if w is None:
        raise NoOverlapData(f"run {run_id}: no focus window (no loop region in its profile; name one with "
                            "commscope ingest --focus REGION, or ingest a run stored before the measurement model "
                            "again)")
    gaps = dict(conn.execute("SELECT region, irecv_gap_avg FROM v_comm_stats WHERE run_id = %s", (run_id,)).fetchall())
    try:
        return analyse(nodes, Window(*w), gaps, run_id, info, _label(variant, meta), _share(meta))
    except NoOverlapData as e:
        hint = (" (its focus window is the workload's own timers: the profile has no `loop` region, as profiles "
                "made before the workloads had one; to advise on the regions it has, ingest it again with "
                "`commscope ingest --focus timestep`)" if meta.get("focus_source") == "workload timers" else "")
        raise NoOverlapData(f"run {run_id}: {e}{hint}") from None


def baseline_key(o: RunOverlap):
    """The experiment but its variant: blocking runs with this key are the variant's baseline. None for a run
    without a series (stored before the measurement model)."""
    if o.info["parameters"] is None:
        return None
    return (o.info["campaign_id"], experiment_key(o.info["app"], o.info["parameters"], o.info["environment"],
                                                  but=VARIANT_KEYS))


def from_store(conn, source: str) -> tuple[list[RunOverlap], list[str]]:
    """Every run SOURCE names that has a focus window, with overlap efficiency against the blocking runs of
    the same experiment (parameters and environment equal but the variant) in the same campaign. Only runs
    with status 'ok' enter the medians: a partial run (ranks missing) or a failed one is analysed on its
    own but is neither a baseline nor given an efficiency (docs/measurement-model.md)."""
    ids = stored_runs(conn, source)
    done, skipped = [], []
    for run_id in ids:
        try:
            done.append(load(conn, run_id))
        except NoOverlapData as e:
            skipped.append(str(e))
    if not done:
        raise NoOverlapData(f"{source}: " + "; ".join(skipped))
    # blocking runs of the same campaign, also when SOURCE named a single run
    pool = {o.run_id: o for o in done}
    for cid in {o.info["campaign_id"] for o in done}:
        for rid in queries.blocking_runs(conn, cid):
            if rid not in pool:
                try:
                    pool[rid] = load(conn, rid)
                except NoOverlapData:
                    pass
    for o in done:
        key = baseline_key(o)
        if key is None or o.info["status"] != "ok":
            continue
        base = [b for b in pool.values() if b.info["variant"] == "blocking" and baseline_key(b) == key
                and b.exposed is not None and b.info["status"] == "ok"]
        same = [x.exposed for x in done if x.label == o.label and baseline_key(x) == key and x.exposed is not None
                and x.info["status"] == "ok"]
        if base and same:
            o.baseline_exposed = statistics.median(b.exposed for b in base)
            o.baseline_runs = sorted(b.run_id for b in base)
            if o.baseline_exposed:
                o.efficiency = 1 - statistics.median(same) / o.baseline_exposed
    return done, skipped


def _ms(v, width: int) -> str:
    return f"{v * 1e3:>{width}.3f}" if v is not None else f"{'-':>{width}}"


def table(results: list[RunOverlap]) -> str:
    lines = [f"{'run':>6} {'variant':16}{'ranks':>6}{'loop ms':>10}{'exposed ms':>12}{'balance':>9}{'efficiency':>11}"
             f"{'Irecv gap us':>13}  waits (focus window)"]
    for o in results:
        eff = f"{o.efficiency:>11.0%}" if o.efficiency is not None else f"{'-':>11}"
        bal = f"{o.load_balance:>9.2f}" if o.load_balance is not None else f"{'-':>9}"
        gap = f"{o.irecv_gap * 1e6:>13.3g}" if o.irecv_gap is not None else f"{'-':>13}"
        waits = ", ".join(f"{r.path.rsplit('/', 1)[-1]}: {r.cause} ({r.explained:.0%})"
                          for r in o.regions if r.cause)
        lines.append(f"{o.run_id:>6} {o.label:16}{o.info['ranks']:>6}{_ms(o.window.time_s, 10)}"
                     f"{_ms(o.exposed, 12)}{bal}{eff}{gap}  {waits}")
    return "\n".join(lines)


def store(conn, source: str, results: list[RunOverlap]) -> None:
    for o in results:
        db.insert_advice(conn, "overlap", o.run_id, source, o.summary(), o.text())
