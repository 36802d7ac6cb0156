"""The barrier advisor (the reservoir study): where a run spends time in MPI_Barrier, which barriers look like
debugging barriers, and what removing them would save (docs/advisors.md, "Barrier advice").

Input: one run's call-tree rows (v_node_metrics, or records.from_profile for a profile file) on its focus window
when it has one, else its run window; every barrier on that window's call paths counts, set against the window's
MPI time and time. Judging a barrier needs call counts (region.count); without them the advice says the counts
were not measured, never that there is no debugging barrier.

Likely debugging barrier: an MPI_Barrier called more than once per rank next to communication with the same call
count: a sibling under the same parent region (the siblings of the barrier's own region when it holds nothing
else, like cgsolve's `debug_barrier`) whose subtree calls only collectives or point-to-point/RMA functions, alone
or all such siblings together. A barrier called once per rank (a timing barrier) is never flagged.

Predicted saving, per rank, of removing a barrier site, summed over the likely sites:

    barrier time min over ranks + 1.5 x the barrier region's own time (avg over ranks)

The first term is the latency (the skew moves to the next wait; the rank that waits least holds the latency
alone), the second the Caliper events of a region holding only the barrier; a run without Caliper saves the
latency alone. It is an estimate, not a bound. In a campaign, runs with and without the barriers are paired on
their series (parameters equal except DEBUG_BARRIER_KEYS, environment equal). bench/barrier_advice.py measures
how close the prediction comes (bench/results/barrier_advice.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from commscope.store import db
from commscope.store.queries import advise as queries

COLLECTIVES = {"MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
               "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv",
               "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Scan", "MPI_Exscan", "MPI_Iallreduce",
               "MPI_Ireduce", "MPI_Ibcast", "MPI_Iallgather", "MPI_Ialltoall", "MPI_Neighbor_alltoall",
               "MPI_Neighbor_allgather", "MPI_Neighbor_alltoallv"}
POINT_TO_POINT = {"MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Ssend", "MPI_Issend", "MPI_Rsend",
                  "MPI_Sendrecv", "MPI_Sendrecv_replace", "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome",
                  "MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Put", "MPI_Get", "MPI_Accumulate",
                  "MPI_Win_post", "MPI_Win_start", "MPI_Win_complete", "MPI_Win_wait", "MPI_Win_fence",
                  "MPI_Probe", "MPI_Iprobe"}
COMMUNICATION = COLLECTIVES | POINT_TO_POINT | {"MPI_Barrier", "MPI_Ibarrier"}


class NoBarrierData(LookupError):
    """The run has no MPI_Barrier in its profile (or no profile at all)."""


@dataclass
class Node:
    path: str
    excl_min: float | None
    excl_avg: float | None
    excl_max: float | None
    calls: int | None
    incl_max: float | None = None


@dataclass
class BarrierSite:
    region: str                      # the region MPI_Barrier is called in
    calls: int | None                # summed over ranks
    calls_per_rank: float | None
    time_min: float                  # exclusive MPI_Barrier time over ranks, s
    time_avg: float
    time_max: float
    region_overhead: float           # 1.5 x its own region's exclusive time, avg over ranks, s (0 without one)
    share_of_mpi: float | None       # time_avg / the run's MPI time per rank
    parent: str                      # where its neighbours are looked for
    neighbours: list = field(default_factory=list)   # [(path, kind, calls)] communication siblings
    matched: list = field(default_factory=list)      # the neighbours whose calls match
    likely_debug: bool = False
    why: str = ""
    predicted_saving: float = 0.0    # per rank, s (0 unless likely_debug): latency + region_overhead

    @property
    def latency(self) -> float:
        """What removing it saves a run without Caliper: the least-waiting rank's barrier time."""
        return self.time_min

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("region", "calls", "calls_per_rank", "time_min", "time_avg", "time_max",
                                              "region_overhead", "latency", "share_of_mpi", "parent", "neighbours",
                                              "matched", "likely_debug", "why", "predicted_saving")}


@dataclass
class BarrierAdvice:
    ranks: int
    mpi_time_avg: float | None       # the window's, per rank
    window_time: float | None        # the window's slowest rank's time
    sites: list
    calls_measured: bool = True      # False: a profile without region.count, which cannot tell debugging barriers
    focus: str | None = None         # the focus region the window covers; None: the run window

    @property
    def barrier_time(self) -> float:
        return sum(s.time_avg for s in self.sites)

    @property
    def barrier_calls(self) -> int | None:
        calls = [s.calls for s in self.sites]
        return None if None in calls else sum(calls)

    @property
    def predicted_saving(self) -> float:
        return sum(s.predicted_saving for s in self.sites)

    @property
    def predicted_saving_without_caliper(self) -> float:
        """The latency part alone: what a run without the annotations would save."""
        return sum(s.latency for s in self.sites if s.likely_debug)

    def summary(self) -> dict:
        # Without call counts no barrier can be judged: which are debugging barriers, and what removing them
        # would save, are not measured (NULL), not "none" and 0.
        known = self.calls_measured
        return {"window": "focus" if self.focus else "run", "focus_region": self.focus, "ranks": self.ranks,
                "mpi_time_avg": self.mpi_time_avg, "window_time": self.window_time,
                "calls_measured": known,
                "barrier_time_avg": self.barrier_time, "barrier_calls": self.barrier_calls,
                "barrier_share_of_mpi": self.barrier_time / self.mpi_time_avg if self.mpi_time_avg else None,
                "likely_debug_sites": [s.region for s in self.sites if s.likely_debug] if known else None,
                "predicted_saving": self.predicted_saving if known else None,
                "predicted_saving_without_caliper": self.predicted_saving_without_caliper if known else None,
                "predicted_saving_share_of_mpi": (self.predicted_saving / self.mpi_time_avg
                                                  if self.mpi_time_avg and known else None),
                "predicted_saving_share_of_window": (self.predicted_saving / self.window_time
                                                     if self.window_time and known else None),
                "model": ("saving = barrier time min over ranks (latency; the skew moves to the next operation) "
                          "+ 1.5 x the barrier region's own time (its annotations)"),
                "sites": [s.as_dict() for s in self.sites]}

    @property
    def loop(self) -> str | None:
        """The region that holds the likely debugging barriers (their common
        parent, e.g. main/timestep): its slowest rank's inclusive time is what
        removing them should shorten."""
        parents = [s.parent.split("/") for s in self.sites if s.likely_debug]
        if not parents:
            return None
        common = parents[0]
        for p in parents[1:]:
            n = 0
            while n < min(len(common), len(p)) and common[n] == p[n]:
                n += 1
            common = common[:n]
        return "/".join(common) or None

    def text(self) -> str:
        debug = [s for s in self.sites if s.likely_debug]
        where = f"in the focus window ({self.focus})" if self.focus else "in the run"
        share = f" ({self.barrier_time / self.mpi_time_avg:.0%} of its MPI time)" if self.mpi_time_avg else ""
        head = (f"MPI_Barrier takes {self.barrier_time:.4g} s per rank {where}{share} in {self.barrier_calls or '?'} "
                f"calls over {self.ranks} ranks.")
        if not self.calls_measured:
            return head + (" Call counts not measured (the profile was recorded without region.count), so "
                           "debugging barriers cannot be told from others: profile with call counts "
                           "(commscope run --caliper counts, or CALI_CONFIG=...,region.count).")
        if not debug:
            return head + " No barrier looks like a debugging barrier."
        where = "; ".join(f"{s.region} ({s.why})" for s in debug)
        wall = (f", {self.predicted_saving / self.window_time:.1%} of the {'focus window' if self.focus else 'run'}"
                if self.window_time else "")
        return (f"{head} Likely debugging barriers: {where}. Removing them is predicted to save "
                f"{self.predicted_saving:.4g} s per rank{wall}.")


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _leaf(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _kind(functions: set) -> str | None:
    """'collective' or 'halo' when a subtree calls only communication (besides
    barriers), None when it calls anything else (setup, I/O) or nothing."""
    comm = functions - {"MPI_Barrier", "MPI_Ibarrier"}
    if not comm or not comm <= COMMUNICATION:
        return None
    return "collective" if comm & COLLECTIVES else "halo"


def analyse(nodes: list[Node], ranks: int, mpi_time_avg: float | None, window_time: float | None,
            calls_measured: bool | None = None, focus: str | None = None) -> BarrierAdvice:
    """Barrier sites of one run's window and which look like debugging barriers. mpi_time_avg and window_time
    are the window's; focus: the focus region (the window is every call path through it), None for the run
    window. calls_measured: whether the profile counted calls (region.count in its Caliper configuration);
    None: whether any node has a count. Raises NoBarrierData when the window has no MPI_Barrier."""
    if calls_measured is None:
        calls_measured = any(n.calls is not None for n in nodes)
    # the window's call paths; none is left out by its region's name
    by_path = {n.path: n for n in nodes if focus is None or focus in n.path.split("/")}
    if not by_path and focus:
        raise NoBarrierData(f"the focus region {focus} is not in the call tree" + (
            " (a profile without a `loop` region, as profiles made before the workloads had one, takes its focus "
            "window from the workload's own timers; to advise on the regions it has, ingest it with "
            "`commscope ingest --focus timestep`)" if focus == "loop" else ""))
    functions: dict = {}          # path -> MPI functions called in its subtree
    for p in by_path:
        name = p.rsplit("/", 1)[-1]
        if name.startswith("MPI_"):
            parts = p.split("/")
            for i in range(1, len(parts)):
                functions.setdefault("/".join(parts[:i]), set()).add(name)
    children: dict = {}
    for p in by_path:
        children.setdefault(_parent(p), []).append(p)
    sites = []
    for p, n in sorted(by_path.items()):
        if not p.endswith("/MPI_Barrier") or n.excl_avg is None:
            continue
        region = _parent(p)
        own = functions.get(region, set())
        overhead = 0.0
        if own == {"MPI_Barrier"} and "/" in region:
            parent, skip = _parent(region), region      # a region of its own: look at its siblings
            if children.get(region) == [p] and by_path.get(region) and by_path[region].excl_avg is not None:
                # nothing else in it: its own time is 2/3 of its annotations' cost, the parent holds the rest
                overhead = 1.5 * by_path[region].excl_avg
        else:
            parent, skip = region, p                    # called among other work: look at the region's children
        neighbours = []
        for c in sorted(children.get(parent, [])):
            if c == skip:
                continue
            name = c.rsplit("/", 1)[-1]
            kind = _kind({name} if name.startswith("MPI_") else functions.get(c, set()))
            if kind:
                neighbours.append((c, kind, by_path[c].calls))
        site = BarrierSite(region=region, calls=n.calls, calls_per_rank=n.calls / ranks if n.calls is not None else None,
                           time_min=n.excl_min if n.excl_min is not None else n.excl_avg, time_avg=n.excl_avg,
                           time_max=n.excl_max if n.excl_max is not None else n.excl_avg, region_overhead=overhead,
                           share_of_mpi=n.excl_avg / mpi_time_avg if mpi_time_avg else None,
                           parent=parent, neighbours=neighbours)
        if calls_measured:
            _judge(site)
        else:
            site.calls = site.calls_per_rank = None
            site.why = "call counts not measured (no region.count in the Caliper configuration)"
        sites.append(site)
    if not sites:
        raise NoBarrierData(f"no MPI_Barrier in the focus window ({focus})" if focus else "no MPI_Barrier in the profile")
    return BarrierAdvice(ranks, mpi_time_avg, window_time, sites, calls_measured, focus)


def _judge(site: BarrierSite) -> None:
    if site.calls is None:
        site.why = "call counts not measured at this site"
        return
    if site.calls_per_rank is not None and site.calls_per_rank <= 1:
        site.why = "called once per rank: a timing or phase barrier"
        return
    if not site.neighbours:
        site.why = f"no collective or halo next to it in {site.parent or 'the top level'}"
        return
    counted = [nb for nb in site.neighbours if nb[2] is not None]
    single = [nb for nb in counted if nb[2] == site.calls]
    if single:
        site.matched = single[:1]
    elif len(counted) > 1 and sum(nb[2] for nb in counted) == site.calls:
        site.matched = counted
    if not site.matched:
        site.why = (f"{site.calls} calls match none of its neighbours in {site.parent} "
                    f"({', '.join(f'{_leaf(c)} {k} {n}' for c, k, n in counted)})")
        return
    site.likely_debug = True
    site.why = (f"{site.calls} calls, as many as "
                + " + ".join(f"{_leaf(c)} ({k}, {n})" for c, k, n in site.matched))
    site.predicted_saving = site.time_min + site.region_overhead


# ---- prediction against measurement --------------------------------------------------

def loop_time(nodes: list[Node], region: str) -> float | None:
    """The slowest rank's inclusive time of a region."""
    return next((n.incl_max for n in nodes if n.path == region), None)


def compare(with_barriers: list[tuple], without: list[list[Node]], fastest: float = 1.0) -> dict:
    """Predicted against measured saving. with_barriers: (BarrierAdvice,
    nodes) of runs that have likely debugging barriers; without: the nodes of
    the same experiment's runs without them. The measured saving is the drop of
    the median slowest-rank time of the region holding the barriers; the
    prediction is the median of those runs' predictions.

    fastest < 1 keeps only that share of each side's runs, the fastest by that
    time (at least one): on a shared machine most runs are slowed by other
    processes, by up to 100x on a loaded 2-core box, and the undisturbed runs
    are the fastest ones."""
    import math
    import statistics
    loop = with_barriers[0][0].loop
    w = sorted((t, a) for a, nodes in with_barriers if (t := loop_time(nodes, loop)) is not None)
    t_without = sorted(t for nodes in without if (t := loop_time(nodes, loop)) is not None)
    if not w or not t_without:
        raise NoBarrierData(f"the runs have no region {loop} to measure the saving on")
    w = w[:max(1, math.ceil(fastest * len(w)))]
    t_without = t_without[:max(1, math.ceil(fastest * len(t_without)))]
    t_with = [t for t, _ in w]
    predicted = statistics.median(a.predicted_saving for _, a in w)
    measured = statistics.median(t_with) - statistics.median(t_without)
    return {"region": loop, "runs_with": len(t_with), "runs_without": len(t_without), "fastest": fastest,
            "time_with": statistics.median(t_with), "time_without": statistics.median(t_without),
            "predicted_saving": predicted, "measured_saving": measured,
            "ratio": predicted / measured if measured else None}


# ---- inputs ------------------------------------------------------------------------

def nodes_from_record(rec) -> list[Node]:
    """A record's node rows (records.from_profile): the profile-file path."""
    return [Node(r[0], r[1], r[2], r[3], r[7], r[6]) for r in rec.node_rows]


def nodes_from_store(conn, run_id: int) -> list[Node]:
    return [Node(*row) for row in conn.execute(
        "SELECT path, excl_min, excl_avg, excl_max, calls, incl_max FROM v_node_metrics WHERE run_id = %s", (run_id,))]


def stored_runs(conn, source: str) -> list[int]:
    """Run ids named by SOURCE: a run id (`42` or `run:42`) or a campaign
    (`campaign:7`, every run of it). LookupError names what is missing."""
    kind, _, ident = source.rpartition(":")
    if not ident.isdigit() or kind not in ("", "run", "campaign"):
        raise LookupError(f"{source}: not a run id (42, run:42), a campaign (campaign:7) or a profile file")
    if kind == "campaign":
        ids = queries.campaign_runs(conn, int(ident))
        if not ids:
            raise LookupError(f"{source}: no campaign {ident} in the store (or it holds no runs)")
        return ids
    if not queries.run_exists(conn, int(ident)):
        raise LookupError(f"{source}: no run {ident} in the store")
    return [int(ident)]


# The parameter that switches the debugging barriers: the workload's PARAM line (output beside the profile) or
# its Adiak value. Runs that differ in nothing else are compared.
DEBUG_BARRIER_KEYS = ("param.debug-barriers", "debug_barriers")


def experiment_key(app, parameters: dict, environment: dict, but=()) -> str:
    """The experiment (application, parameters, environment; docs/measurement-model.md) less the parameters
    BUT names: runs with equal keys differ at most in those."""
    params = {k: v for k, v in parameters.items() if k not in but}
    return json.dumps([app, params, environment], sort_keys=True, default=str)


def counts_measured(caliper_config: str | None) -> bool | None:
    """Whether a profile counted calls: region.count in its Caliper configuration (records.caliper_config).
    None when the configuration is not known (a run stored before the measurement model)."""
    if not caliper_config:
        return None
    return "region.count" in caliper_config.split(",")


def run_info(conn, run_id: int) -> dict:
    """The run's application, parameters and environment (its series), and the MPI time and time of its focus
    window, else its run window (NULL MPI time: MPI was not measured)."""
    row = queries.run_series_and_window(conn, run_id)
    names = ["app", "ranks", "campaign_id", "parameters", "environment", "mpi_time_avg", "window_time", "focus",
             "status"]
    info = {"run_id": run_id, **dict(zip(names, row))}
    env = info["environment"] or {}
    info["calls_measured"] = counts_measured(env.get("caliper"))
    info["pair_key"] = (None if info["parameters"] is None else
                        experiment_key(info["app"], info["parameters"], env, but=DEBUG_BARRIER_KEYS))
    info["switch"] = next((str(info["parameters"][k]) for k in DEBUG_BARRIER_KEYS
                           if info["parameters"] and k in info["parameters"]), None)
    return info


# ---- one source to advice --------------------------------------------------------

@dataclass
class Advice:
    run_id: int | None
    source: str
    summary: dict
    text: str


NO_MPI = "MPI calls not measured (a profile without profile.mpi), so no barrier data"


def from_profile_path(path: str) -> Advice:
    """A profile file or per-rank directory, read directly (nothing stored needed)."""
    from pathlib import Path

    from commscope.read import files, pipeline
    from commscope.read.measures import COLUMNS
    groups = files.discover([Path(path)])
    if len(groups) != 1:
        raise LookupError(f"{path}: expected one run's profile, found {len(groups)} runs")
    rec = pipeline.read_record(groups[0])
    if not rec.node_rows:
        raise NoBarrierData(f"{path}: no call-tree times in this profile, so no barrier data")
    windows = {row[0]: dict(zip(COLUMNS, row)) for row in rec.window_rows}
    w = windows.get("focus") or windows.get("run") or {}
    if w.get("mpi_time_avg_s") is None:
        raise NoBarrierData(f"{path}: {NO_MPI}")
    try:
        a = analyse(nodes_from_record(rec), rec.ranks, w["mpi_time_avg_s"], w["time_s"],
                    counts_measured(rec.caliper_config), w["focus_region"])
    except NoBarrierData as e:
        raise NoBarrierData(f"{path}: {e}") from None
    return Advice(None, path, a.summary(), a.text())


def from_store(conn, source: str, fastest: float = 1.0) -> tuple[list[Advice], list[str]]:
    """Advice for each run SOURCE names that has barrier data, and notes on the
    ones skipped. Runs of one experiment that differ only in the debug-barrier
    switch (parameters equal but DEBUG_BARRIER_KEYS, same environment: the
    barriers study's on/off pairs, whose Ramble variant differs) are compared:
    the measured saving goes into the summary of each run with barriers, against
    the runs with counted calls, no likely debugging barrier and the switch not
    on. Only runs with status 'ok' enter that comparison: a partial run (ranks
    missing) or a failed one gets its own advice but is neither side of a
    measured saving (docs/measurement-model.md)."""
    ids = stored_runs(conn, source)
    analysed, skipped, plain = [], [], []     # plain: runs with a call tree and no debugging barrier
    for run_id in ids:
        info = run_info(conn, run_id)
        nodes = nodes_from_store(conn, run_id)
        if not nodes:
            skipped.append(f"run {run_id}: no call-tree times (a run stored from its output alone, or a "
                           "message-tracing profile), so no barrier data")
            continue
        if info["mpi_time_avg"] is None and info["environment"] is not None:
            skipped.append(f"run {run_id}: {NO_MPI}")
            continue
        try:
            a = analyse(nodes, info["ranks"], info["mpi_time_avg"], info["window_time"], info["calls_measured"],
                        info["focus"])
        except NoBarrierData as e:
            skipped.append(f"run {run_id}: {e}")
            plain.append((info, None, nodes))
            continue
        analysed.append((info, a, nodes))
        if a.calls_measured and not a.predicted_saving:
            plain.append((info, a, nodes))
    if not analysed:
        raise NoBarrierData(f"{source}: " + "; ".join(skipped))
    out = []
    for info, a, nodes in analysed:
        summary = a.summary()
        if a.predicted_saving and info["pair_key"] is not None and info["status"] == "ok":
            same = [(i, b, n) for i, b, n in analysed if i["pair_key"] == info["pair_key"] and b.predicted_saving
                    and i["status"] == "ok"]
            without = [(i, n) for i, b, n in plain if i["pair_key"] == info["pair_key"] and i["switch"] != "on"
                       and (b is None or b.calls_measured) and i["status"] == "ok"]
            if without:
                summary["measured"] = compare([(b, n) for _, b, n in same], [n for _, n in without], fastest)
                summary["measured"]["with_run_ids"] = [i["run_id"] for i, _, _ in same]
                summary["measured"]["without_run_ids"] = [i["run_id"] for i, _ in without]
        summary["status"] = info["status"]
        text = a.text()
        if info["status"] != "ok":
            text += f" Status {info['status']}: not compared with other runs."
        m = summary.get("measured")
        if m and m["measured_saving"]:
            which = (f"the fastest {m['runs_with']} runs with them and {m['runs_without']} without" if fastest < 1
                     else f"{m['runs_with']} run(s) with them and {m['runs_without']} without")
            text += (f" Measured on {which}: {m['region']} got "
                     f"{m['measured_saving']:.4g} s faster (predicted {m['predicted_saving']:.4g} s, "
                     f"ratio {m['ratio']:.2f}).")
        out.append(Advice(info["run_id"], source, summary, text))
    return out, skipped


def store(conn, advice: list[Advice]) -> None:
    for a in advice:
        db.insert_advice(conn, "barriers", a.run_id, a.source, a.summary, a.text)
