"""What changed behind a finding of the regression gate, and why (from campaign.py's findings; it never judges).
Each regression, improvement and suspect lists what differs between its baseline and new runs (only the judged
series' runs in the gate's window are read) and the call-tree regions whose time moved most; other verdicts none.

- What differs: git commit, commscope's and Caliper's versions, Spack hash, MPI library, interconnect (as stored
  and as the run printed it), hardware digest and CPU model, Caliper configuration, compiler, kernel, hosts. An item
  differs when a new run has a value no baseline run has; a value never recorded (None) is no difference.
  `in_series_key`: the series key holds it, so within a series it differs only in spelling.
- Versions changed: each version (v_version_changes: MPI library, compiler, Spack spec hash, Caliper and
  commscope versions, hardware, kernel) that differs, from its old to its new value, with the campaign it changed in.
- Regions moved: per call-tree node of the finding's window (all for run, those under the focus region for
  focus), its exclusive time averaged over ranks (node_metrics.excl_avg, 0 where a run lacks it), median over
  baseline and new runs; the REGIONS largest absolute changes (none without a call tree, and it says so).

Cause. A version that changed between the baseline and the new runs is the cause: version change, naming it.
Else the canary: the nightly study runs pingpong on every stack and interconnect; its FOM `latency` is judged by
the same gate in the same campaign. For a regression, improvement or suspect of another series:
- platform when a canary of the same system, stack and interconnect moved the same way in the same campaign (a
  regression or a suspect that got worse moved worse; an improvement or one that got better moved better);
- software when such a canary was judged and none moved the same way, or when it cannot tell but would have
  shown a shift as large as the finding's own (its detectable effect is below the finding's effect);
- unknown when none was judged there (none ran, no baseline, or cannot tell at that size), saying which.
A canary's own regression, improvement or suspect is platform. Other verdicts get no cause.
"""
from __future__ import annotations

import statistics

import psycopg

from commscope.store.queries import gate as queries
from commscope.store.queries.gate import RUN_ATTRIBUTES as ATTRIBUTES

CANARY_APPS = ("pingpong",)
MATCH = ("system", "stack", "interconnect")   # what a canary shares with the series it speaks for
REGIONS = 5                                  # regions listed per finding
MOVED = ("regression", "improvement", "suspect")   # suspect: the first night of a shift (regressions.judge)


def attach(conn: psycopg.Connection, findings: list, canaries: list) -> None:
    """Sets `attribution` on every regression, improvement and suspect: what differs, the regions moved and the
    cause, from its runs (Finding.runs) and the CANARIES' findings in the same campaign."""
    judged = [f for f in findings if f.verdict in MOVED and f.runs]
    if not judged:
        return
    every = sorted({r for f in judged for part in f.runs.values() for r in part})
    attrs = queries.run_attributes(conn, every)
    nodes = _nodes(conn, every)
    changes = queries.version_changes(conn, sorted({f.series["series_id"] for f in judged}))
    for f in judged:
        ids = f.runs
        f.attribution = {"differs": [], "same": {}, **_regions(nodes, ids, f.series["window"])}
        for i, (label, _expr, in_key) in enumerate(ATTRIBUTES):
            base = _values(attrs, ids["baseline"], i)
            new = _values(attrs, ids["new"], i)
            if not base and not new:
                continue
            if set(new) - set(base):
                f.attribution["differs"].append({"what": label, "in_series_key": in_key, "baseline": base, "new": new})
            else:
                f.attribution["same"][label] = new[0] if len(new) == 1 else new
        f.attribution["versions"] = versions_changed(f, changes)
        f.attribution.update(classify(f, canaries))


def _values(attrs: dict[int, tuple], run_ids: list[int], i: int) -> list[str]:
    """The distinct recorded values of attribute I over the runs, most runs first (None: not recorded, left out)."""
    seen: dict[str, int] = {}
    for r in run_ids:
        v = attrs[r][i]
        if v is not None:
            seen[str(v)] = seen.get(str(v), 0) + 1
    return sorted(seen, key=lambda v: (-seen[v], v))


def _nodes(conn: psycopg.Connection, run_ids: list[int]) -> dict[int, dict]:
    """Per run: its focus region per window, and its nodes' exclusive time averaged over ranks by path."""
    out: dict[int, dict] = {r: {"focus": None, "nodes": {}} for r in run_ids}
    for run_id, focus in queries.focus_regions(conn, run_ids):
        out[run_id]["focus"] = focus
    for run_id, path, excl in queries.exclusive_times(conn, run_ids):
        if excl is not None:
            out[run_id]["nodes"][path] = excl
    return out


def _regions(nodes: dict[int, dict], ids: dict[str, list[int]], window: str) -> dict:
    """The REGIONS nodes of the window whose median time moved most between baseline and new runs."""
    every = ids["baseline"] + ids["new"]
    focus = {nodes[r]["focus"] for r in every if nodes[r]["focus"]}
    if window == "fom":
        window = "focus" if focus else "run"
    region = None
    if window == "focus":
        if len(focus) != 1:
            return {"regions": [], "regions_note": "the runs have no single focus region to read nodes under"}
        (region,) = focus

    def inside(path: str) -> bool:
        return region is None or region in path.split("/")

    have = {r: {p: t for p, t in nodes[r]["nodes"].items() if inside(p)} for r in every}
    base = [have[r] for r in ids["baseline"] if have[r]]
    new = [have[r] for r in ids["new"] if have[r]]
    if not base or not new:
        missing = "baseline" if not base else "new"
        return {"regions": [], "regions_note": f"no call tree stored for the {missing} runs "
                                               f"(runs without a profile, or profiles without this window's nodes)"}
    moved = []
    for path in sorted(set().union(*base, *new)):
        b = statistics.median(t.get(path, 0.0) for t in base)
        n = statistics.median(t.get(path, 0.0) for t in new)
        moved.append({"path": path, "baseline_s": b, "new_s": n, "change_s": n - b,
                      "change": (n - b) / b if b else None})
    moved.sort(key=lambda m: (-abs(m["change_s"]), m["path"]))
    where = f"under {region}" if region else "of the whole run"
    return {"regions": moved[:REGIONS], "regions_note": f"exclusive time, mean over ranks, median of "
                                                        f"{len(base)} baseline and {len(new)} new runs, nodes {where}"}


def versions_changed(f, changes: list[tuple]) -> list[dict]:
    """The versions that differ between F's baseline and new runs, each with its last change up to F's newest run
    to a value the new runs have (CHANGES: queries.version_changes)."""
    differs = {d["what"]: d for d in f.attribution["differs"]}
    out: dict[str, dict] = {}
    for sid, what, previous, value, campaign, time in changes:
        d = differs.get(what)
        if sid == f.series["series_id"] and d and value in d["new"] and (f.time is None or time <= f.time):
            out[what] = {"what": what, "from": previous, "to": value, "campaign": campaign, "time": time}
    return list(out.values())


def version_text(v: dict) -> str:
    """One version change as a finding names it: 'MPI library A -> B (campaign 12)'."""
    return f"{v['what']} {v['from']} -> {v['to']} (campaign {v['campaign']})"


def direction(f) -> str | None:
    """Which way a finding moved: worse (regression, or suspect with a positive effect), better (improvement, or
    suspect with a negative effect), else None."""
    if f.verdict == "regression" or (f.verdict == "suspect" and (f.effect or 0) > 0):
        return "worse"
    if f.verdict == "improvement" or (f.verdict == "suspect" and (f.effect or 0) < 0):
        return "better"
    return None


def classify(f, canaries: list) -> dict:
    """The cause of a regression, improvement or suspect F: version change, platform, software or unknown (the
    module's rule), with the canaries it rests on."""
    mine = [c for c in canaries if all(c.series.get(k) == f.series.get(k) for k in MATCH)]
    said = [{"series_id": c.series["series_id"], "label": c.label(), "metric": c.metric, "verdict": c.verdict,
             "effect": c.effect, "detectable": c.detectable} for c in mine]
    versions = f.attribution.get("versions") if f.attribution else None
    if versions:
        return {"cause": "version change", "canaries": said,
                "cause_reason": "; ".join(version_text(v) for v in versions)}
    if f.series["app"] in CANARY_APPS:
        return {"cause": "platform", "cause_reason": f"{f.series['app']} is a canary: it measures the transport alone",
                "canaries": []}
    where = ", ".join(f"{k} {f.series.get(k)}" for k in MATCH)
    moved = [c for c in mine if direction(c) is not None and direction(c) == direction(f)]
    judged = [c for c in mine if c.verdict in ("regression", "improvement", "suspect", "no change")
              or (c.verdict == "cannot tell" and c.detectable is not None and f.effect is not None
                  and c.detectable < abs(f.effect))]
    if moved:
        return {"cause": "platform", "canaries": said,
                "cause_reason": f"the canary {moved[0].label()} moved {direction(f)} too ({moved[0].verdict}, "
                                f"{moved[0].metric} {moved[0].effect:+.1%}) in the same campaign"}
    if judged:
        return {"cause": "software", "canaries": said,
                "cause_reason": f"the canary {judged[0].label()} shows {judged[0].verdict} "
                                f"({judged[0].metric}) in the same campaign"
                                + (f", and would have shown a shift of {judged[0].detectable:.0%}"
                                   if judged[0].verdict == "cannot tell" else "")}
    why = (f"its canaries could not be judged ({', '.join(sorted({c.verdict for c in mine}))})" if mine
           else "no canary (pingpong) of the same " + where + " ran in this campaign")
    return {"cause": "unknown", "canaries": said, "cause_reason": why}


# ---- what the outputs show -----------------------------------------------------------------------------

def _short(values: list[str], n: int = 3) -> str:
    shown = ", ".join(values[:n])
    return shown + (f" (+{len(values) - n} more)" if len(values) > n else "")


def lines(f) -> list[str]:
    """The attribution of a finding as text lines (for the table, JUnit's failure message and Markdown)."""
    a = getattr(f, "attribution", None)
    if not a:
        return []
    out = []
    if a.get("cause"):
        out.append(f"cause: {a['cause']} ({a['cause_reason']})")
    for v in a.get("versions") or []:
        out.append(f"changed: {version_text(v)}")
    for d in a["differs"]:
        key = " [in the series key]" if d["in_series_key"] else ""
        out.append(f"differs: {d['what']}{key}: {_short(d['baseline']) or 'not recorded'} -> "
                   f"{_short(d['new']) or 'not recorded'}")
    if not a["differs"]:
        out.append("differs: nothing recorded differs between the baseline and the new runs")
    if a["regions"]:
        out.append(f"regions moved most ({a['regions_note']}):")
        for m in a["regions"]:
            rel = f", {m['change']:+.1%}" if m["change"] is not None else ""
            out.append(f"  {m['path']}: {m['baseline_s']:.6g} s -> {m['new_s']:.6g} s ({m['change_s']:+.6g} s{rel})")
    else:
        out.append(f"regions moved: none ({a['regions_note']})")
    return out
