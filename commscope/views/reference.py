"""The reference studies: each headline effect of the five papers commscope's workloads come from, set beside
the same effect measured on the stored runs.

EFFECTS (reference_effects.py) is the declarative table: the study (cited by its description), the effect, the
paper's figure as the study states it, the workload, the contrasted parameter and its two values (baseline and
treatment), and the measure. The paper's figures are the only numbers typed in there. `compute(conn, campaigns)` measures each effect
from the store, per condition (the other parameters and the environment equal), so a parameter sweep gives one
row per point of the sweep.

Every measure is a column of the measurement model (docs/measurement-model.md) read through its views, each run
on its focus window where it has one, else its run window, ok runs only; the I/O times are the workload's FOMs
(v_foms), the collective times collsweep's (v_collectives). A run's condition is its series key less the
contrasted parameter and those that go with it, so runs are matched as a series comparison would match them.

Ours for a contrast is the ratio treatment / baseline of the measure, one per pair of runs: repeats are paired by
campaign and Ramble repeat index where each side's runs carry distinct ones, else every baseline run with every
treatment run. The figure is the median of those ratios, the spread their interquartile range (which the verdict
reads, so one disturbed run does not decide it), their range shown beside it. VERDICT_RULE gives the verdict.

Where an effect is not (or only partly) reproduced, `machine_limits` says what of the machine its runs had stands
between them and the study's conditions, read from the runs through the views: the node count (and commgraph's
bytes between nodes) for a placement, the stored hardware's cores against the study's rank count (with the trend
over the rank counts that did run), the file system pio wrote to (param.fs), ranks outnumbering cores.
"""
from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field

from commscope.views.reference_effects import EFFECTS, RUN_IT, STUDIES, Effect, plain
from commscope.views.reference_effects import SEISMIC  # noqa: F401 (its tests name this study through reference)

# How a figure is shown, and the value that means "no effect" in that form. Ours is computed as the ratio
# r = treatment / baseline (a level: the value itself) and shown in the paper's form:
#   change  (r - 1) in %        gain     (1/r - 1) in %      share  the level in %
#   times   r (x)               speedup  1/r (x)
NO_EFFECT = {"change": 0.0, "gain": 0.0, "times": 1.0, "speedup": 1.0, "share": None}


def shown(form: str, r: float) -> float:
    """A ratio (or a level) in the paper's form."""
    if form == "change":
        return (r - 1) * 100
    if form == "gain":
        return (1 / r - 1) * 100 if r else math.inf
    if form == "speedup":
        return 1 / r if r else math.inf
    if form == "share":
        return r * 100
    return r


def fmt(form: str, v: float) -> str:
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if form in ("change", "gain"):
        return f"{v:+.1f} %"
    if form == "share":
        return f"{v:.1f} %"
    return f"{v:.3g}×"


# Measures: (label, SQL over v_run_metrics' columns of the run's compared window, alias m). The MPI time of a
# run without a profile (or whose profile has no loop region) is the workload's own communication timer over
# its timed loop (comm_time_avg / _max); of a profile with a loop region, Caliper's MPI time inside it.
MEASURES = {
    "mpi_time": ("MPI time, mean rank", "m.mpi_time_avg_s"),
    "time": ("time, slowest rank", "m.time_s"),
    # halo3d and stencil2d: the workload's own communication timer (v_halo), the exposed time of an overlapped
    # exchange as the seismic study times it; Caliper's MPI time would add the polls inside the interior compute
    "comm_time": ("communication time, mean rank (the workload's timer)",
                  "(SELECT min(h.comm_time_avg) FROM v_halo h WHERE h.run_id = m.run_id)"),
    "skew": ("skew: communication time of the slowest rank less the mean rank's (the workload's timer)",
             "(SELECT min(h.comm_time_max - h.comm_time_avg) FROM v_halo h WHERE h.run_id = m.run_id)"),
    "mpi_share": ("MPI time of the mean rank over the slowest rank's time", "m.mpi_time_avg_s / nullif(m.time_s, 0)"),
    "read_time": ("read time per round (FOM read_time)",
                  "(SELECT min(f.value) FROM v_foms f WHERE f.run_id = m.run_id AND f.name = 'read_time')"),
    "write_time": ("write time per round (FOM write_time)",
                   "(SELECT min(f.value) FROM v_foms f WHERE f.run_id = m.run_id AND f.name = 'write_time')"),
    "collective_sum": ("t_avg summed over the sizes swept, the best algorithm at each size", None),
}

# What to run for an effect without runs.

# Parameters a condition's line leaves out: they follow from the ones it shows (the grid of ranks from the rank
# count and decomposition, the file's size from the array's).
DERIVED = ("param.process_grid", "param.file_bytes", "param.dims4", "param.global")

# Parameters that never define a condition: paths of the run (pio's --dir is the experiment's directory) and
# Ramble's workload name, which names the experiment's template, not its inputs.
NEVER_CONDITION = ("param.dir", "param.file", "ramble_workload")


# The rank map's name, as the placement the run had: identity without one, else the file's name without its
# directory, extension and rank count (maps/reverse-4.map -> reverse).
PLACEMENT = ("CASE WHEN coalesce(m.parameters->>'param.rank-map', 'none') IN ('none', '') THEN 'identity' "
             "ELSE regexp_replace(m.parameters->>'param.rank-map', '^.*/|(-n?[0-9]+)?(\\.[A-Za-z-]+)?$', '', 'g') END")


VERDICT_RULE = (
    "Ours is the ratio treatment / baseline of the measure for each pair of runs in one condition (repeats paired "
    "by campaign and repeat index where each side's runs carry distinct ones, else every baseline run with every "
    "treatment run), shown in the study's form; the figure is the median of those ratios, the spread their "
    "interquartile range (IQR; the range is shown beside it; collsweep's sums without repeat indices: the extremes "
    "over every combination of runs). "
    "Reproduced: the spread overlaps the study's range and does not include no effect (unless the study's range "
    "does). Partly: it misses the range but lies wholly on the study's side of no effect (weaker: between no "
    "effect and the range; stronger: beyond it). Not: the spread includes no effect where the study's range does "
    "not, or lies on the other side; for a level (a share), any miss. No figure: the study gives "
    "none, ours is shown. Not run: the store has no baseline and treatment runs in one condition. Runs on one "
    "rank are left out: they communicate with nobody (a trend over rank counts shows them). A row not or partly "
    "reproduced also says what its runs' machine lacked of the study's conditions, as the runs record it: one "
    "node for a placement, fewer cores than the study's ranks, a local file system for the I/O methods, more "
    "ranks than cores.")


@dataclass
class Row:
    effect: Effect
    condition: str = ""
    figure: float | None = None          # median, in the paper's form
    low: float | None = None             # spread: the interquartile range of the per-pair ratios, in the paper's form
    high: float | None = None
    runs_baseline: int = 0
    runs_treatment: int = 0
    pairs: int = 0
    paired_by: str = ""                  # "repeat index" | "all pairs" | "runs"
    verdict: str = "not run"
    reason: str = ""
    treatment_value: str = ""
    ratio: float | None = None           # median, IQR and range as ratios treatment / baseline (a level: the value)
    ratio_q1: float | None = None
    ratio_q3: float | None = None
    ratio_min: float | None = None
    ratio_max: float | None = None
    machine: list[str] = field(default_factory=list)   # what the runs' machine lacked of the study's conditions


# ---- reading the runs --------------------------------------------------------------------------------------

# What a run records of the machine it ran on (machine_limits), from the views: its node count (Ramble's n_nodes
# or Caliper's numhosts; NULL for a workload output given alone), the cores per node of the hardware description
# it was stored with (the site's hardware.yaml), and commgraph's own count of the bytes its ranks sent between
# hosts (the processor names MPI gave them).
MACHINE_COLUMNS = """m.nodes, (SELECT v.cores_per_node FROM v_runs v WHERE v.run_id = m.run_id) AS cores_per_node,
         (SELECT max(f.value) FROM v_foms f WHERE f.run_id = m.run_id
                                               AND f.name = 'internode_bytes_per_iter') AS internode_bytes"""


def _runs(conn, effect: Effect, campaigns: tuple[int, ...], min_ranks: int = 2) -> list[dict]:
    """The effect's ok runs of MIN_RANKS ranks or more, one row each on its compared window: condition parts,
    factor value, measure, campaign and repeat index, and what the run records of its machine."""
    expr = MEASURES[effect.measure][1]
    factor = PLACEMENT if effect.factor == "placement" else \
        "m.parameters->>%(factor)s" if effect.factor else "NULL"
    sql = f"""SELECT * FROM (
  SELECT DISTINCT ON (m.run_id) m.run_id, m.parameters, m.environment, m."window", {factor} AS factor,
         {expr} AS value, m.campaign_id, m.ranks,
         (SELECT max(f.repeat) FROM v_foms f WHERE f.run_id = m.run_id) AS repeat,
         {MACHINE_COLUMNS}
  FROM v_run_metrics m
  WHERE m.app = %(app)s AND m.status = 'ok' AND m.series_id IS NOT NULL AND m.ranks >= %(min_ranks)s
    AND ({effect.where}) AND (%(all)s OR m.campaign_id = ANY(%(campaigns)s))
  ORDER BY m.run_id, m."window" = 'focus' DESC) x
WHERE value IS NOT NULL
ORDER BY run_id"""
    cur = conn.execute(sql, {"app": effect.app, "factor": effect.factor, "all": not campaigns,
                             "campaigns": list(campaigns), "min_ranks": min_ranks})
    cols = [c.name for c in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _condition(effect: Effect, params: dict, env: dict, window: str) -> tuple[str, dict]:
    """A run's condition key (canonical JSON) and its parameters as the condition shows them."""
    drop = set(NEVER_CONDITION) | set(effect.follows) | set(effect.own)
    if effect.factor.startswith("param."):
        drop.add(effect.factor)
    if effect.factor == "placement":
        drop.add("param.rank-map")
    kept = {k: v for k, v in params.items() if k not in drop}
    return json.dumps([kept, env, window], sort_keys=True, default=str), kept


def _pairs(base: list[dict], treat: list[dict]) -> tuple[list[float], str]:
    """Ratios treatment / baseline: by campaign and repeat index where each side's runs carry distinct ones
    (indices above 0) that meet, else all pairs. The campaign is part of the key: two campaigns of one study
    both number their repeats from 1."""
    def key(r):
        return r.get("campaign_id"), r["repeat"]
    bi = [key(r) for r in base]
    ti = [key(r) for r in treat]
    if all(i[1] and i[1] > 0 for i in bi + ti) and len(set(bi)) == len(bi) and len(set(ti)) == len(ti):
        common = sorted(set(bi) & set(ti), key=lambda k: (k[0] or 0, k[1]))
        if common:
            b = {key(r): r["value"] for r in base}
            t = {key(r): r["value"] for r in treat}
            return [t[i] / b[i] for i in common if b[i]], "repeat index"
    return [t["value"] / b["value"] for b in base for t in treat if b["value"]], "all pairs"


# File system types (as /proc/self/mounts names them, pio's param.fs) that are not a local disk: parallel and
# network file systems, where each request goes to a server.
NON_LOCAL_FS = {"lustre", "gpfs", "beegfs", "ceph", "fuse.ceph", "fuse.ceph-fuse", "glusterfs", "fuse.glusterfs",
                "nfs", "nfs4", "pvfs2", "orangefs", "fuse.mfs", "fuse.moosefs", "moosefs", "wekafs", "fuse.daos",
                "panfs", "cifs", "smb3", "9p", "virtiofs"}


def _node_count(run: dict) -> int | None:
    """The nodes a run ran on (Ramble's n_nodes, Caliper's numhosts); None when the run does not say."""
    return int(run["nodes"]) if run.get("nodes") else None


def machine_limits(effect: Effect, runs: list[dict], trend: str = "") -> list[str]:
    """What the machine of RUNS (one condition, both sides) lacked of the study's conditions, each as the runs
    record it: all on one node (and commgraph's bytes between nodes 0) where the effect needs traffic between
    nodes; fewer cores (the stored hardware's cores per node x the runs' nodes) than the rank count the study's
    figure is at, with TREND, the figure at the rank counts that ran; a local file system (param.fs) where the
    effect needs a parallel one; more ranks than cores. Empty when the runs record none of it."""
    out: list[str] = []
    if not runs:
        return out
    nodes = [_node_count(r) for r in runs]
    if "nodes" in effect.needs:
        one_node = all(n == 1 for n in nodes)
        inter = [r.get("internode_bytes") for r in runs]
        no_inter = all(v is not None and v == 0 for v in inter)
        said = []
        if one_node:
            said.append(f"all {len(runs)} runs on one node")
        if no_inter:
            said.append(f"{effect.app} counted 0 bytes sent between nodes in every run")
        if said:
            out.append(", ".join(said) + ": every placement keeps all traffic on the node, where the study's "
                                         "effect comes from the traffic between nodes")
    cores = [r["cores_per_node"] * n if r.get("cores_per_node") and n else None for r, n in zip(runs, nodes)]
    known = None if any(c is None for c in cores) else min(cores)
    if known is not None:
        per_node = sorted({r["cores_per_node"] for r in runs})
        n_nodes = sorted({n for n in nodes})
        how = f"{'/'.join(map(str, per_node))} per node x {'/'.join(map(str, n_nodes))} node" + \
            ("s" if n_nodes != [1] else "")
        if effect.paper_ranks and known < effect.paper_ranks:
            out.append(f"the study's figure is at {effect.paper_ranks} ranks, one per core; the runs' machine has "
                       f"{known} cores ({how}), too few for that" +
                       (f"; the trend it can show, by rank count: {trend}" if trend else ""))
        over = sorted({r["ranks"] for r, c in zip(runs, cores) if r.get("ranks") and r["ranks"] > c})
        if over:
            out.append(f"{'/'.join(map(str, over))} ranks on {known} cores ({how}): the ranks take turns on the "
                       f"cores, so every wait also holds time spent waiting for one")
    if "parallel_fs" in effect.needs:
        fs = {(r.get("parameters") or {}).get("param.fs") for r in runs}
        if fs and None not in fs and not fs & NON_LOCAL_FS:
            out.append(f"the file went to {', '.join(sorted(fs))}, a local file system: its page cache takes small "
                       f"requests at memory speed, where a parallel file system sends each one to a server")
    return out


def _explain(effect: Effect, row: Row, runs: list[dict], trend: str = "") -> Row:
    """The row's machine limits, and where it is not or partly reproduced, the reason names them."""
    row.machine = machine_limits(effect, runs, trend)
    if row.machine and row.verdict in ("not", "partly"):
        row.reason += "; on the runs' machine: " + "; ".join(row.machine)
    return row


def _machine_facts(conn, run_ids) -> dict[int, dict]:
    """Per run: its ranks, parameters and what it records of its machine (MACHINE_COLUMNS)."""
    sql = f"""SELECT m.run_id, m.ranks, m.parameters, {MACHINE_COLUMNS}
FROM (SELECT DISTINCT ON (run_id) run_id, ranks, nodes, parameters FROM v_run_metrics WHERE run_id = ANY(%(ids)s)
      ORDER BY run_id) m"""
    cur = conn.execute(sql, {"ids": sorted(set(run_ids))})
    cols = [c.name for c in cur.description]
    return {r[0]: dict(zip(cols, r)) for r in cur.fetchall()}


def _without_ranks(key: str) -> str:
    kept, env, window = json.loads(key)
    kept = {k: v for k, v in kept.items() if k != "ranks"}
    return json.dumps([kept, env, window], sort_keys=True, default=str)


def _trend(effect: Effect, runs: list[dict]) -> dict[str, str]:
    """For an effect the study gives at a rank count: per condition less its ranks, the figure (median of the
    pairs' ratios) at each rank count that has both sides, one rank included; only where there are two or more."""
    base_re, treat_re = re.compile(effect.baseline), re.compile(effect.treatment)
    sides: dict[str, dict] = {}
    for r in runs:
        if r["factor"] is None:
            continue
        side = "b" if base_re.fullmatch(r["factor"]) else "t" if treat_re.fullmatch(r["factor"]) else None
        if side:
            key = _without_ranks(_condition(effect, r["parameters"], r["environment"], r["window"])[0])
            sides.setdefault(key, {"b": {}, "t": {}})[side].setdefault(r["ranks"], []).append(r)
    out = {}
    for key, s in sides.items():
        parts = []
        for n in sorted(s["b"].keys() & s["t"].keys()):
            ratios, _ = _pairs(s["b"][n], s["t"][n])
            if ratios:
                parts.append(f"{fmt(effect.form, shown(effect.form, statistics.median(ratios)))} at {n} "
                             f"rank{'s' if n != 1 else ''}")
        if len(parts) > 1:
            out[key] = ", ".join(parts)
    return out


def _verdict(effect: Effect, figure: float, low: float, high: float) -> tuple[str, str]:
    if effect.paper is None:
        return "no figure", "the study gives no figure; ours is shown"
    plo, phi = effect.paper
    form = effect.form
    spread = f"ours {fmt(form, low)} to {fmt(form, high)}" if low != high else f"ours {fmt(form, low)}"
    theirs = fmt(form, plo) if plo == phi else f"{fmt(form, plo)} to {fmt(form, phi)}"
    none = NO_EFFECT[form]
    if none is not None and low <= none <= high and not plo <= none <= phi:
        # a spread on both sides of no effect shows none, however much of the study's range it covers
        return "not", f"{spread} includes no effect ({fmt(form, none)}); the study's {theirs}"
    if low <= phi and high >= plo:
        return "reproduced", f"{spread} overlaps the study's {theirs}"
    if none is None:
        return "not", f"{spread}, {'below' if high < plo else 'above'} the study's {theirs}"
    side = 1 if (plo + phi) / 2 > none else -1
    if (low - none) * side > 0 and (high - none) * side > 0:
        weaker = abs(figure - none) < min(abs(plo - none), abs(phi - none))
        return "partly", (f"{spread}: the same direction as the study's {theirs}, "
                          f"{'weaker' if weaker else 'stronger'}")
    if low <= none <= high:
        return "not", f"{spread} includes no effect ({fmt(form, none)}); the study's {theirs}"
    return "not", f"{spread}: the opposite direction to the study's {theirs}"


def _describe(kept: dict, env: dict, window: str, varying: set[str]) -> str:
    """The condition as a short line: stack, interconnect, ranks, the problem size, the file system an I/O run
    wrote to and whatever varies across the effect's conditions."""
    parts = [str(env.get("stack") or "?"), str(env.get("interconnect") or "default")]
    if "ranks" in kept:
        parts.append(f"n{kept['ranks']}")
    always = ("param.n", "param.global", "param.local", "param.fs")
    shown_keys = sorted(k for k in kept if k in varying or k in always)
    said: set = set()
    for k in shown_keys:
        v = kept[k]
        # nothing derived from the problem size (--n) and ranks, nothing said by 'none', no value twice
        # (variant repeats cgsolve's --allreduce)
        if k == "ranks" or v in (None, "none", "") or (k in DERIVED and "param.n" in kept) or \
                (k == "param.variant" and v in said):
            continue
        said.add(v)
        parts.append(f"{k.removeprefix('param.')}={v}")
    if window != "focus":
        parts.append(f"[{window} window]")
    if "system" in varying and env.get("system"):
        parts.insert(0, str(env["system"]))
    return " ".join(parts)


def _quartiles(ratios: list[float]) -> tuple[float, float]:
    """The first and third quartile (linear interpolation between the sorted values; one value: itself)."""
    if len(ratios) == 1:
        return ratios[0], ratios[0]
    q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    return q1, q3


def _summarise(effect: Effect, row: Row, ratios: list[float], iqr: tuple[float, float] | None = None) -> Row:
    """Median, interquartile range (the verdict's spread) and range of the per-pair ratios, in both forms."""
    row.ratio = statistics.median(ratios)
    row.ratio_q1, row.ratio_q3 = iqr or _quartiles(ratios)
    row.ratio_min, row.ratio_max = min(ratios), max(ratios)
    row.figure = shown(effect.form, row.ratio)
    row.low, row.high = sorted((shown(effect.form, row.ratio_q1), shown(effect.form, row.ratio_q3)))
    row.pairs = len(ratios)
    row.verdict, row.reason = _verdict(effect, row.figure, row.low, row.high)
    return row


def _contrast(conn, effect: Effect, campaigns) -> list[Row]:
    # an effect the study gives at a rank count reads its one-rank runs too, for the trend over rank counts
    runs = _runs(conn, effect, campaigns, min_ranks=1 if effect.paper_ranks else 2)
    trend = _trend(effect, runs) if effect.paper_ranks else {}
    runs = [r for r in runs if r["ranks"] > 1]
    base_re, treat_re = re.compile(effect.baseline), re.compile(effect.treatment)
    base: dict[str, list[dict]] = {}
    treat: dict[tuple[str, str], list[dict]] = {}
    shown_of: dict[str, tuple[dict, dict, str]] = {}
    for r in runs:
        if r["factor"] is None:
            continue
        key, kept = _condition(effect, r["parameters"], r["environment"], r["window"])
        if base_re.fullmatch(r["factor"]):
            base.setdefault(key, []).append(r)
        elif treat_re.fullmatch(r["factor"]):
            own = {k: r["parameters"].get(k) for k in effect.own if k in r["parameters"]}
            label = " ".join([r["factor"]] + [f"{k.removeprefix('param.')}={v}" for k, v in sorted(own.items())])
            treat.setdefault((key, label), []).append(r)
        else:
            continue
        shown_of[key] = (kept, r["environment"], r["window"])
    return _rows(effect, base, treat, shown_of, trend)


def _rows(effect: Effect, base, treat, shown_of, trend: dict[str, str] | None = None) -> list[Row]:
    matched = [(k, label) for k, label in treat if k in base]
    varying = _varying([shown_of[k] for k, _ in matched] or list(shown_of.values()))
    rows = []
    for key, label in sorted(matched, key=lambda kl: (_describe(*shown_of[kl[0]], varying), kl[1])):
        b, t = base[key], treat[key, label]
        ratios, how = _pairs(b, t)
        if not ratios:
            continue
        row = Row(effect, _describe(*shown_of[key], varying), runs_baseline=len(b), runs_treatment=len(t),
                  paired_by=how, treatment_value=label)
        _summarise(effect, row, ratios)
        rows.append(_explain(effect, row, b + t, (trend or {}).get(_without_ranks(key), "")))
    if not rows:
        rows.append(_not_run(effect, sum(map(len, base.values())), sum(map(len, treat.values()))))
    return rows


def _varying(conds: list[tuple[dict, dict, str]]) -> set[str]:
    out = set()
    if len({json.dumps(e.get("system"), default=str) for _, e, _ in conds}) > 1:
        out.add("system")
    keys = {k for kept, _, _ in conds for k in kept}
    for k in keys:
        if len({json.dumps(kept.get(k), default=str) for kept, _, _ in conds}) > 1:
            out.add(k)
    return out


def _not_run(effect: Effect, n_base: int, n_treat: int) -> Row:
    if effect.factor:
        if n_base or n_treat:
            why = (f"{n_base} baseline ({plain(effect.baseline)}) and {n_treat} treatment "
                   f"({plain(effect.treatment)}) runs of {effect.app}, none in the same condition; run {effect.run}")
        else:
            why = f"no ok {effect.app} runs with {effect.contrast}; run {effect.run}"
    else:
        why = f"no ok {effect.app} runs that measured it; run {effect.run}"
    return Row(effect, runs_baseline=n_base, runs_treatment=n_treat, verdict="not run", reason=why)


def _level(conn, effect: Effect, campaigns) -> list[Row]:
    runs = _runs(conn, effect, campaigns)
    groups: dict[str, list[dict]] = {}
    shown_of = {}
    for r in runs:
        key, kept = _condition(effect, r["parameters"], r["environment"], r["window"])
        groups.setdefault(key, []).append(r)
        shown_of[key] = (kept, r["environment"], r["window"])
    varying = _varying(list(shown_of.values()))
    rows = []
    for key in sorted(groups, key=lambda k: _describe(*shown_of[k], varying)):
        vals = [r["value"] for r in groups[key]]
        row = Row(effect, _describe(*shown_of[key], varying), runs_treatment=len(vals), paired_by="runs")
        rows.append(_explain(effect, _summarise(effect, row, vals), groups[key]))
    return rows or [_not_run(effect, 0, 0)]


def _best_algorithm(conn, effect: Effect, campaigns) -> list[Row]:
    """collsweep: per condition (collective, the run's series less its algorithm controls), the sum over message
    sizes of t_avg with, at each size, the algorithm of lowest median t_avg, against the default's sum. With
    repeat indices, one ratio per repeat; without, the extremes over every combination of runs (against each
    default run's own sum, the best algorithms' runs taken size by size, the default run itself where the
    default is the best) and the ratio of the medians."""
    sql = """SELECT m.run_id, m.parameters, m.environment, c.repeat, c.algorithm, c.collective, c.bytes, c.value
FROM v_collectives c
JOIN (SELECT DISTINCT ON (run_id) run_id, parameters, environment FROM v_run_metrics
      WHERE app = 'collsweep' AND status = 'ok' AND series_id IS NOT NULL AND ranks > 1
        AND (%(all)s OR campaign_id = ANY(%(campaigns)s))
      ORDER BY run_id) m ON m.run_id = c.run_id
WHERE c.stat = 't_avg' AND c.collective <> 'barrier'
ORDER BY m.run_id, c.collective, c.bytes"""
    rows = conn.execute(sql, {"all": not campaigns, "campaigns": list(campaigns)}).fetchall()
    drop = re.compile(r"^param\.(env\.|mpit\.|iterations\.|algorithm_controls|variant|coll$)")
    groups: dict[str, dict] = {}
    default = re.compile(effect.baseline)
    for run_id, params, env, repeat, alg, coll, size, value in rows:
        alg = "default" if default.fullmatch(alg) else alg
        kept = {k: v for k, v in params.items() if not drop.match(k) and k not in NEVER_CONDITION}
        kept["collective"] = coll
        key = json.dumps([kept, env], sort_keys=True, default=str)
        g = groups.setdefault(key, {"kept": kept, "env": env, "t": {}})
        g["t"].setdefault(alg, {}).setdefault(size, {})[(run_id, repeat)] = value
    varying = _varying([(g["kept"], g["env"], "run") for g in groups.values()])
    facts = _machine_facts(conn, [r[0] for r in rows])
    out = []
    for key, g in sorted(groups.items(), key=lambda kg: _describe(kg[1]["kept"], kg[1]["env"], "run", {"collective"})):
        t = g["t"]
        if "default" not in t or len(t) < 2:
            continue
        sizes = sorted(s for s in t["default"] if all(s in t[a] for a in t))
        if not sizes:
            continue
        med = {a: {s: statistics.median(t[a][s].values()) for s in sizes} for a in t}
        best = {s: min(t, key=lambda a: (med[a][s], a != "default")) for s in sizes}
        reps = {a: {s: {rep: v for (_, rep), v in t[a][s].items()} for s in sizes} for a in t}
        indexed = all(rep and rep > 0 for a in t for s in sizes for (_, rep) in t[a][s]) and \
            all(len(reps[a][s]) == len(t[a][s]) for a in t for s in sizes)
        common = set.intersection(*(set(reps[a][s]) for a in set(best.values()) | {"default"} for s in sizes)) \
            if indexed else set()
        if common:
            ratios = [sum(reps[best[s]][s][i] for s in sizes) / sum(reps["default"][s][i] for s in sizes)
                      for i in sorted(common)]
            how = "repeat index"
            figure_ratio = statistics.median(ratios)
        else:
            # against each default run's own sum (one run covers every size), the best side's runs chosen size by
            # size; where the default is the best, the best side is that same default run
            default_runs = set.intersection(*(set(t["default"][s]) for s in sizes))
            if not default_runs:
                continue
            ext = [[sum(t["default"][s][d] if best[s] == "default" else pick(t[best[s]][s].values()) for s in sizes)
                    / sum(t["default"][s][d] for s in sizes) for d in default_runs] for pick in (min, max)]
            lo, hi = min(ext[0]), max(ext[1])
            ratios, how = [lo, hi], "all combinations"
            figure_ratio = sum(med[best[s]][s] for s in sizes) / sum(med["default"][s] for s in sizes)
        chosen = sorted({best[s] for s in sizes})
        n_default = len({rid for s in sizes for (rid, _) in t["default"][s]})
        n_best = len({rid for s in sizes for a in chosen if a != "default" for (rid, _) in t[a][s]})
        row = Row(effect, _describe(g["kept"], g["env"], "run", varying | {"collective"}),
                  runs_baseline=n_default, runs_treatment=n_best, paired_by=how,
                  treatment_value=f"best of {len(t)} ({', '.join(chosen)}), {len(sizes)} sizes")
        # unpaired, the spread is the extremes over every combination (no quartiles without enumerating them)
        _summarise(effect, row, ratios, None if common else (lo, hi))
        row.ratio = figure_ratio
        row.figure = shown(effect.form, figure_ratio)
        row.verdict, row.reason = _verdict(effect, row.figure, row.low, row.high)
        run_ids = {rid for a in t for s in sizes for (rid, _) in t[a][s]}
        out.append(_explain(effect, row, [facts[i] for i in sorted(run_ids) if i in facts]))
    return out or [_not_run(effect, 0, 0)]


def compute(conn, campaigns: tuple[int, ...] = (), effects: list[Effect] | None = None) -> list[Row]:
    """Every effect's rows for the runs of CAMPAIGNS (all runs when empty): one per condition measured, or one
    'not run' row saying what to run."""
    out = []
    for e in effects or EFFECTS:
        if e.measure == "collective_sum":
            out += _best_algorithm(conn, e, campaigns)
        elif e.factor:
            out += _contrast(conn, e, campaigns)
        else:
            out += _level(conn, e, campaigns)
    return out


def figure_text(row: Row) -> str:
    """Ours as the table shows it: the median and the spread, in the study's form."""
    if row.figure is None or math.isnan(row.figure):
        return "—"
    f = row.effect.form
    if row.pairs <= 1 or row.ratio_min == row.ratio_max:
        return fmt(f, row.figure)
    lo, hi = sorted((shown(f, row.ratio_min), shown(f, row.ratio_max)))
    if (row.low, row.high) == (lo, hi):
        return f"{fmt(f, row.figure)} (range {fmt(f, lo)} to {fmt(f, hi)})"
    return f"{fmt(f, row.figure)} (IQR {fmt(f, row.low)} to {fmt(f, row.high)}; range {fmt(f, lo)} to {fmt(f, hi)})"


# ---- the report's section ----------------------------------------------------------------------------------

SECTION_STYLE = """<style>
#reference table { width: 100%; table-layout: fixed; }
#reference td, #reference th { text-align: left; vertical-align: top; overflow-wrap: break-word; }
#reference td.verdict-reproduced { background: #e3f4e3; } #reference td.verdict-partly { background: #fdf3d8; }
#reference td.verdict-not { background: #f9e0e0; } #reference tr.verdict-not-run td { color: #777; }
</style>"""

COLUMNS = [("Effect", "18%"), ("Study's figure", "12%"), ("Ours: median (spread)", "16%"), ("Runs", "8%"),
           ("Condition", "18%"), ("Verdict", "8%"), ("Why", "20%")]


def section_html(conn, campaigns: tuple[int, ...] = ()) -> str:
    """The report's "Reference studies" section: a table for each study the selection ran (a row per effect and
    condition measured; one line under it names the study's effects without runs), and one line naming the
    studies it did not run and what runs them."""
    import html
    rows = compute(conn, campaigns)
    esc = html.escape
    ran = [s for s in STUDIES if any(r.effect.study == s and r.verdict != "not run" for r in rows)]
    not_ran = [s for s in STUDIES if s not in ran]
    out = [f"<section id='reference'>{SECTION_STYLE}<h2>Reference studies</h2>"]
    if not_ran:
        out.append(f"<p class='note not-run'>Not run in this selection: the {esc(', the '.join(not_ran))} "
                   f"(run them with <code>{RUN_IT}</code>).</p>")
    if not ran:
        return "".join(out) + "</section>"
    out += ["<p class='note'>Each headline effect of the studies commscope's workloads come from, beside the same "
            "effect measured on the stored runs of this selection (each run on its focus window, else its whole run: "
            "v_run_metrics; the I/O times are pio's FOMs, the collective times collsweep's). Only the studies' own "
            "figures are typed in. Conditions: the runs' other parameters and environment, equal on both sides.</p>",
            f"<details class='note rule'><summary><b>Verdict rule.</b></summary>{esc(VERDICT_RULE)}</details>"]
    head = "".join(f"<th style='width:{w}'>{esc(c)}</th>" for c, w in COLUMNS)
    for study in ran:
        # the study's effects without runs: one line under its table, each one's reason on hover
        idle = [e for e in EFFECTS if e.study == study and
                all(r.verdict == "not run" for r in rows if r.effect is e)]
        rs = [r for r in rows if r.effect.study == study and r.effect not in idle]
        counts = {}
        for r in rs:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        tally = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        out.append(f"<h3>The {esc(study)}</h3><p class='note'>{len(rs)} row{'s' if len(rs) != 1 else ''}: "
                   f"{esc(tally)}.</p>")
        body = []
        for e in [x for x in EFFECTS if x.study == study and x not in idle]:
            group = [r for r in rs if r.effect is e]
            what = "; ".join(x for x in (f"{e.app}: {MEASURES[e.measure][0]}", e.contrast, e.note) if x)
            span = f" rowspan='{len(group)}'" if len(group) > 1 else ""
            for i, r in enumerate(group):
                cells = []
                if i == 0:
                    cells.append(f"<td{span}>{esc(e.name)}<br><span class='note'>{esc(what)}</span></td>"
                                 f"<td{span}>{esc(e.paper_text)}<br><span class='note'>({esc(e.study)})</span></td>")
                runs = "—" if r.verdict == "not run" else (
                    f"{r.runs_treatment}" if not e.factor else
                    f"{r.runs_baseline} + {r.runs_treatment}<br><span class='note'>{r.pairs} ratios, "
                    f"{esc(r.paired_by)}</span>")
                # the treatment that ran, where the effect's value does not say it all (a pattern, a group size)
                condition = esc(r.condition or "—") + (
                    f"<br><span class='note'>ran {esc(r.treatment_value)}</span>"
                    if r.treatment_value and r.treatment_value != e.treatment else "")
                verdict_class = "verdict-" + r.verdict.replace(" ", "-")
                cells.append(f"<td class='{verdict_class}'>{esc(figure_text(r))}</td><td>{runs}</td>"
                             f"<td>{condition}</td><td class='verdict {verdict_class}'>{esc(r.verdict)}</td>"
                             f"<td>{esc(r.reason)}</td>")
                body.append(f"<tr class='{verdict_class}'>{''.join(cells)}</tr>")
        out.append(f"<table class='reference'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
        if idle:
            why = " | ".join(f"{e.name}: {r.reason}" for e in idle for r in rows if r.effect is e)
            out.append(f"<p class='note effects-not-run' title='{esc(why, quote=True)}'>Not run here: "
                       f"{esc('; '.join(e.name for e in idle))} (hover for why; <code>{RUN_IT}</code>).</p>")
    return "".join(out) + "</section>"
