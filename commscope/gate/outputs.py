"""What a pipeline reads of the gate's findings: JSON, JUnit XML and Markdown, each finding with a link to the
call-tree dashboard's diff of its series between the judged campaign and its last baseline campaign (diff_url)."""
from __future__ import annotations

import json
import math
import re
import statistics
import urllib.parse

from commscope.gate import changepoints
from commscope.gate.attribution import lines as attributed
from commscope.gate.metrics import canonical_metric
from commscope.gate.detectable import RUNS_A_NIGHT
from commscope.store.queries.gate import DESCRIBE

def printable(text) -> str:
    """TEXT with control characters (newlines, escape codes, bidirectional overrides) written as escapes, so a
    name cannot forge lines of an output, nor make XML that no parser reads."""
    return "".join(c if c.isprintable() or c == " " else
                   {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c) or
                   (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else
                    f"\\U{ord(c):08x}") for c in str(text))


def code(text, cell: bool = False) -> str:
    """TEXT as one Markdown code span, shown verbatim: its fence is a backtick run longer than any in TEXT
    (padded with spaces where TEXT starts or ends with a backtick), control characters are escapes, and in a
    table CELL every | is \\| (GitHub ends a cell at a bare one, even inside a code span)."""
    text = printable(text)
    if cell:
        text = text.replace("|", "\\|")
    fence = "`" * (1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def detectable(f) -> str:
    """A finding's detectable effect as text: the smallest shift its campaign would have flagged."""
    return f"{f.detectable:+.0%}" if f.detectable is not None else "none (no shift would have been flagged)"


def annotation_text(f, link=None) -> str:
    """The dashboards' annotation of a regression or improvement, ending in LINK when given (the call-tree diff,
    diff_url; as text, since the dashboards escape annotation texts)."""
    return (f"{f.verdict}: {f.metric} [{f.series['window']}] {f.effect:+.1%} against the median of "
            f"{f.n_baseline} earlier runs of series #{f.series['series_id']} (p={f.p_value:.2g}; "
            f"detectable effect {detectable(f)})" + (f"; call tree diff: {link}" if link else ""))


def _number(v):
    """A JSON number, or None for what was not measured or is not finite."""
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def diff_url(f) -> str | None:
    """The call-tree dashboard for finding F, relative to Grafana's root URL: its series' call tree in the judged
    campaign and the regions that got slower since its last baseline campaign (variables series, campaign and
    baseline, percent-encoded). None when the finding has no baseline."""
    if f.campaign is None or f.baseline_campaign is None:
        return None
    from commscope.views.panels import CALL_TREE
    query = urllib.parse.urlencode({"var-series": f.series["series_id"], "var-campaign": f.campaign,
                                    "var-baseline": f.baseline_campaign}, quote_via=urllib.parse.quote)
    return f"/d/{CALL_TREE.uid}/call-tree?{query}"


def as_dict(f, alpha: float, min_effect: float) -> dict:
    """One finding, machine-readable; its series identified by key and parameters."""
    s = f.series
    return {"series_id": s["series_id"], "series_key": s["key"], "app": s["app"], "parameters": s["parameters"],
            "environment": s["environment"], "window": s["window"], "label": f.label(),
            **{k: s[k] for k in DESCRIBE if k != "app"},
            "campaign": f.campaign, "metric": f.metric, "verdict": f.verdict,
            "baseline_median": _number(f.baseline_median), "new_median": _number(f.new_median),
            "effect": _number(f.effect), "p_value": _number(f.p_value), "smallest_p": _number(f.smallest_p),
            "n_new": f.n_new, "n_baseline": f.n_baseline, "runs_needed": f.needs,
            "n_baseline_campaigns": f.n_campaigns, "campaign_p": _number(f.campaign_p), "previous": f.previous,
            "confirm_campaigns": f.n_confirm or None, "confirm_p": _number(f.confirm_p),
            "confirm_effect": _number(f.confirm_effect), "confirm_summary": f.confirm_summary,
            "detectable_effect": _number(f.detectable), "max_undetectable": f.max_undetectable,
            "runs_a_night_would": f.runs_a_night, "nights": "pooled" if f.pooled else "units",
            "nights_p": _number(f.nights_p), "night_spread": f.night_spread, "two_night_p": _number(f.two_night_p),
            "night_judged": f.night.isoformat() if f.night else None,
            "newest_run_started_at": f.time.isoformat() if f.time else None, "reason": f.reason(alpha, min_effect),
            "attribution": f.attribution, "baseline_campaign": f.baseline_campaign, "diff_url": diff_url(f),
            "direction": f.way, "alert": f.alert, "alert_p": _number(f.alert_p),
            "nights_alert_p": _number(f.nights_alert_p), "confirm_units_p": _number(f.confirm_units_p),
            "confirm_floor": _number(f.confirm_floor), "held": f.held,
            "group": group_dict(f.group) if f.group else None}


def group_dict(g) -> dict:
    """A group of alerts with one cause (campaign.Group), machine-readable: its members by series id, the
    leading one first."""
    return {"cause": g.cause, "where": g.where, "versions": list(g.versions), "label": g.label(),
            "lead_series_id": g.members[0].series["series_id"],
            "members": [m.series["series_id"] for m in g.members]}


def failed(f) -> bool:
    """A JUnit failure: a regression the budget did not hold back that stands alone or leads its group."""
    return f.verdict == "regression" and not f.held and (f.group is None or f.group.members[0] is f)


def group_lines(groups: list, most: int = 10) -> list[str]:
    """One line per group of alerts with one cause, naming up to MOST members."""
    out = []
    for g in groups:
        names = ", ".join(printable(m.label()) for m in g.members[:most])
        more = f", and {len(g.members) - most} more" if len(g.members) > most else ""
        out.append(f"one alert: {printable(g.label())}: {names}{more}")
    return out


SKIPPED = ("cannot tell", "no baseline", "suspect")


def junit_xml(findings: list, alpha: float, min_effect: float) -> bytes:
    """JUnit XML: one test suite per metric, one test case per series judged. A regression is a failure; cannot
    tell and no baseline are skipped (not judged), and so is suspect (not confirmed yet: the next campaign
    decides); no change and improvement pass."""
    import xml.etree.ElementTree as ET
    root = ET.Element("testsuites", name="commscope check")
    metrics = list(dict.fromkeys(f.metric for f in findings))
    for metric in metrics:
        mine = [f for f in findings if f.metric == metric]
        campaigns = sorted({str(f.campaign) for f in mine})
        title = printable(f"commscope check {metric} campaign {', '.join(campaigns)}")
        suite = ET.SubElement(root, "testsuite", name=title, tests=str(len(mine)),
                              failures=str(sum(failed(f) for f in mine)),
                              skipped=str(sum(not failed(f) and (f.verdict in SKIPPED or bool(f.held)
                                                                 or f.verdict == "regression") for f in mine)),
                              errors="0")
        props = ET.SubElement(suite, "properties")
        for name, value in (("campaign", ", ".join(campaigns)), ("metric", metric), ("alpha", f"{alpha:g}"),
                            ("min_effect", f"{min_effect:g}"), ("max_undetectable", f"{mine[0].max_undetectable:g}")):
            ET.SubElement(props, "property", name=name, value=printable(value))
        for f in mine:
            case = ET.SubElement(suite, "testcase", classname=printable(f"commscope.check.{metric}"),
                                 name=printable(f.label()))
            reason = printable(f.reason(alpha, min_effect))
            if f.held:
                ET.SubElement(case, "skipped", message=reason + "; " + printable(f.held))
            elif f.group is not None and f.group.members[0] is not f:
                ET.SubElement(case, "skipped", message=reason + "; " + printable(
                    f"one alert with its cause, led by {f.group.members[0].label()}: {f.group.label()}"))
            elif f.verdict in ("regression", "suspect"):
                cause = f"; cause: {f.attribution['cause']}" if f.attribution and f.attribution.get("cause") else ""
                kind = {"type": "regression"} if f.verdict == "regression" else {}
                ET.SubElement(case, "failure" if f.verdict == "regression" else "skipped", **kind,
                              message=reason + printable(cause)).text = "\n".join(
                    [reason, *map(printable, attributed(f)), *group_lines([f.group] if f.group else [], most=1000)])
            elif f.verdict in SKIPPED:
                ET.SubElement(case, "skipped", message=reason)
            out = ET.SubElement(case, "system-out")
            out.text = json.dumps(as_dict(f, alpha, min_effect), default=str, indent=1)
    total = sum(1 for _ in root.iter("testcase"))
    root.set("tests", str(total))
    root.set("failures", str(sum(failed(f) for f in findings)))
    root.set("skipped", str(sum(not failed(f) and (f.verdict in SKIPPED or bool(f.held) or f.verdict == "regression")
                                for f in findings)))
    root.set("errors", "0")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


ORDER = {"regression": 0, "suspect": 1, "cannot tell": 2, "improvement": 3, "no baseline": 4, "no change": 5}


def markdown(findings: list, alpha: float, min_effect: float) -> str:
    """A summary for a merge request comment or a job summary: counts, then every series, regressions first."""
    counts = {v: sum(f.verdict == v for f in findings) for v in ORDER}
    campaigns = ", ".join(sorted({str(f.campaign) for f in findings}))
    metrics = ", ".join(dict.fromkeys(f.metric for f in findings))
    head = "regressions" if counts["regression"] else "no regressions"
    lines = [f"### commscope check: {head} in campaign {campaigns}", "",
             f"{len(findings)} series on {code(metrics)} (alpha {alpha:g}, smallest effect {min_effect:.0%}): "
             + ", ".join(f"{n} {v}" for v, n in counts.items() if n), "",
             "| verdict | series | metric | baseline median | new median | change | p | runs new / baseline "
             "| detectable effect |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    cell = lambda v: f"{v:.6g}" if v is not None else "–"  # noqa: E731
    for f in sorted(findings, key=lambda f: (ORDER[f.verdict], f.metric, f.series["series_id"])):
        change = f"{f.effect:+.1%}" if f.effect is not None and math.isfinite(f.effect) else "–"
        change += f" {f.way}" if f.way else ""
        change += " (held back)" if f.held else ""
        p = f"{f.p_value:.2g}" if f.p_value is not None else "–"
        lines.append(f"| **{f.verdict}** | {code(f.label(), cell=True)} | {code(f.metric, cell=True)} "
                     f"| {cell(f.baseline_median)} | {cell(f.new_median)} "
                     f"| {change} | {p} | {f.n_new} / {f.n_baseline} | {detectable(f)} |")
    groups = list({id(f.group): f.group for f in findings if f.group}.values())
    if groups:
        lines += ["", "One cause, one alert:"] + [f"- {code(line)}" for line in group_lines(groups)]
    moved = [f for f in findings if f.verdict in ("regression", "improvement", "suspect") and f.attribution]
    if moved:
        lines += ["", "What changed:"]
        for f in sorted(moved, key=lambda f: (ORDER[f.verdict], f.metric, f.series["series_id"])):
            link = f" [call tree diff]({diff_url(f)})" if diff_url(f) else ""
            lines += [f"- **{f.verdict}** {code(f.label())} ({code(f.metric)}):{link}"]
            lines += [f"  - {code(a)}" for a in attributed(f)]
    unsure = [f for f in findings if f.verdict in ("suspect", "cannot tell")]
    cannot = [f for f in unsure if f.verdict == "cannot tell"]
    once = len(cannot) >= SUMMARISE_FROM and 2 * len(cannot) > len(findings)
    if unsure:
        lines += ["", "Suspect or cannot tell:"] + [f"- {code(f.label())}: {printable(f.reason(alpha, min_effect))}"
                                                     for f in unsure if not (once and f.verdict == "cannot tell")]
        lines += [f"- {cannot_tell_summary(cannot, len(findings))}"] if once else []
    return "\n".join(lines) + "\n"


SUMMARISE_FROM = 20   # cannot tells from which the text says them once, when they are most of the findings


def unsure_lines(findings: list, alpha: float, min_effect: float) -> list[str]:
    """The text's lines on suspects and cannot tells: one per suspect that is not in a group of alerts with one
    cause (its group's line says it), and per held-back alert; one per cannot tell, unless at least SUMMARISE_FROM
    of them are most of the findings: then one summary (cannot_tell_summary)."""
    unsure = [f for f in findings if f.verdict == "cannot tell"]
    once = len(unsure) >= SUMMARISE_FROM and 2 * len(unsure) > len(findings)
    lines = []
    for f in findings:
        if f.group is not None and f.group.members[0] is not f:   # said once, by its group's line
            continue
        if f.verdict == "suspect" or (f.verdict == "cannot tell" and not once) or f.held:
            lines.append(f"{printable(f.label())}: {printable(f.reason(alpha, min_effect))}"
                         + (f"; {f.held}" if f.held else ""))
    if once:
        lines.append(cannot_tell_summary(unsure, len(findings)))
    return lines


def cannot_tell_summary(unsure: list, total: int) -> str:
    """One paragraph for many cannot tells: how many, their typical detectable effect, and what would change it
    (more runs a night, more baseline nights or runs, quieter nights)."""
    seen = sorted(f.detectable for f in unsure if f.detectable is not None)
    runs = sorted(f.runs_a_night for f in unsure if f.runs_a_night)
    nights = sum(bool(f.needs and f.needs.get("campaigns")) for f in unsure)
    alpha_out = sum(bool(f.needs and not f.needs.get("campaigns")) for f in unsure)
    noisy = [f for f in unsure if not f.needs]
    quieter = sum(not f.runs_a_night for f in noisy)
    limit = unsure[0].max_undetectable
    parts = [f"cannot tell on {len(unsure)} of {total} series: their nights could not show a shift of "
             f"{limit:.0%}"]
    if seen:
        q = statistics.quantiles(seen, n=4) if len(seen) > 1 else [seen[0]] * 3
        parts.append(f"the typical detectable effect is {statistics.median(seen):+.0%} (quartiles {q[0]:+.0%} to "
                     f"{q[2]:+.0%})")
    if runs:
        parts.append(f"{len(runs)} would show {limit:.0%} with more runs a night (typically "
                     f"{statistics.median_low(runs)}, from {runs[0]} to {runs[-1]})")
    if quieter:
        parts.append(f"{quieter} would not with up to {RUNS_A_NIGHT[-1]} runs a night: their nights differ too "
                     f"much, so they need quieter nights (the nodes to themselves)")
    if nights:
        parts.append(f"{nights} need more baseline nights")
    if alpha_out:
        parts.append(f"{alpha_out} have too few runs for the test to reach alpha (more runs a night or baseline "
                     f"nights)")
    return "; ".join(parts) + ". Each series' figures: --format json, and the dashboards' Series too noisy to gate."


def change_points_markdown(changes: list[dict]) -> str:
    """The change points' section of check's Markdown summary: one list item per change point, a code span each."""
    if not changes:
        return ""
    lines = ["", "Change points this campaign completes (Apache Otava E-divisive over each series' history):", ""]
    lines += [f"- {code(changepoints.describe(c))}" for c in changes]
    return "\n".join(lines) + "\n"


def check_json(found, alpha: float, min_effect: float, max_undetectable: float, budget: dict | None) -> str:
    """`commscope check --format json`: the campaign's figures, its budget ({"false_alarms": E} or {"fdr": Q};
    None: each series alone), its groups and change points, and each finding (as_dict) with the change points of
    its series and metric."""
    series = [as_dict(f, alpha, min_effect) for f in found.findings]
    changes: dict[tuple, list] = {}   # by series and metric, in found.changes' order
    for c in found.changes:
        changes.setdefault((c["series_id"], c["metric"]), []).append(c)
    for f, d in zip(found.findings, series):
        d["change_points"] = [changepoints.as_dict(c) for c in changes.get((f.series["series_id"], f.metric), [])]
    return json.dumps({"campaigns": sorted({f.campaign for f in found.findings}), "alpha": alpha,
                       "min_effect": min_effect, "max_undetectable": max_undetectable,
                       "budget": budget, "fdr": (budget or {}).get("fdr"), "alerts": sum(f.leads for f in found.findings),
                       "series_alerting": sum(f.alert for f in found.findings), "held_back": found.held,
                       "groups": [group_dict(g) for g in found.groups],
                       "regressions": len(found.regressions), "annotations": found.noted,
                       "change_points": [changepoints.as_dict(c) for c in found.changes],
                       "series": series}, default=str, indent=1)


def check_text(found, metrics, alpha: float, min_effect: float, budget: dict | None, annotated: bool) -> list[str]:
    """`commscope check`'s text: per metric a table of the findings, the cannot-tells said once where they are
    many, each moved finding's attribution; then the alerts of one cause, the change points and a summary line."""
    out = []
    width = max(len(printable(f.label())) for f in found.findings)
    for metric in metrics:
        mine = [f for f in found.findings if f.metric == canonical_metric(metric)]
        if not mine:
            continue
        out.append(f"campaign {', '.join(sorted({str(f.campaign) for f in mine}))}: {mine[0].metric}")
        out.append(f"{'series':<{width}}  {'verdict':<12} {'baseline':>12} {'new':>12} {'change':>8} {'p':>8}  "
                   f"{'n':<7} detectable")
        for f in mine:
            fmt_v = lambda v: f"{v:12.6g}" if v is not None else f"{'-':>12}"  # noqa: E731
            change = f"{f.effect:+8.1%}" if f.effect is not None else f"{'-':>8}"
            p = f"{f.p_value:8.2g}" if f.p_value is not None else f"{'-':>8}"
            out.append(f"{printable(f.label()):<{width}}  {f.verdict:<12} {fmt_v(f.baseline_median)} "
                       f"{fmt_v(f.new_median)} {change} {p}  {f'{f.n_new}/{f.n_baseline}':<7} {detectable(f)}")
        out += unsure_lines(mine, alpha, min_effect)
        for f in mine:
            if f.verdict in ("regression", "improvement", "suspect") and f.attribution:
                out.append(f"{printable(f.label())}: {f.verdict}")
                out += [f"  {printable(line)}" for line in attributed(f)]
    out += group_lines(found.groups)
    out += [f"change point: {printable(changepoints.describe(c))}" for c in found.changes]
    findings, groups = found.findings, found.groups
    unsure = sum(f.verdict == "cannot tell" for f in findings)
    suspect = sum(f.verdict == "suspect" for f in findings)
    slower = sum(f.alert and f.verdict == "suspect" for f in findings)
    out.append(f"{len(findings)} series, {len(found.regressions)} regressions"
               + (f", {suspect} suspect ({slower} on the worse side)" if suspect else "")
               + (f", {found.held} alerts held back by the campaign's budget ("
                  + ", ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in budget.items()) + ")"
                  if found.held and budget else "")
               + (f"; {sum(len(g.members) for g in groups)} of the alerting series are {len(groups)} alert"
                  f"{'s' if len(groups) > 1 else ''} of one cause each" if groups else "")
               + (f", {unsure} cannot tell" if unsure else "")
               + (f", {found.noted} annotations written" if annotated else ""))
    return out
