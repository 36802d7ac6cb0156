"""`commscope check`'s sequence over one campaign: judge each metric (campaign.check), group the alerts by cause
(campaign.one_alert_per_cause), hold the campaign's budget over the groups and the other alerts (campaign.hold),
annotate and record the detectable
effects, then recompute the change points of the judged series and list those the campaign completes. A role that
may not store annotations, detectable effects or change points still gets every verdict: `denied` names what was
not stored."""
from __future__ import annotations

from dataclasses import dataclass, field

import psycopg

from commscope.gate import campaign, changepoints, outputs, regressions
from commscope.store import db
from commscope.store.queries import gate as queries


@dataclass
class Checked:
    """What check found in one campaign, and what it wrote."""
    findings: list
    held: int = 0                 # alerts held back by the campaign's budget
    groups: list = field(default_factory=list)
    noted: int = 0                # annotations written
    changes: list = field(default_factory=list)
    denied: dict = field(default_factory=dict)    # what was not stored -> the privilege error
    notes: list = field(default_factory=list)     # one line each for stderr: metrics not measured, no Otava

    @property
    def regressions(self) -> list:
        return [f for f in self.findings if f.verdict == "regression" and f.held is None]


def check_campaign(conn: psycopg.Connection, metrics, judged: int | None, baseline: int, min_effect: float,
                   alpha: float, confirm: int, max_undetectable: float, fdr: float | None, annotate: bool,
                   false_alarms: float | None = None, **where) -> Checked:
    """JUDGED is the campaign to judge (None: the newest, where that is unambiguous). FDR or FALSE_ALARMS: the
    campaign's budget (campaign.hold; neither: each series alone). Raises LookupError when no
    metric was measured (and ValueError, LookupError as regressions.check does)."""
    found = Checked([])
    unmeasured = []
    for metric in metrics:
        try:
            found.findings += campaign.check(conn, metric, judged, baseline, min_effect, alpha, confirm,
                                         max_undetectable, **where)
        except regressions.NotMeasured as e:
            # one metric nobody measured (no MPI wrapping) leaves the others' verdicts standing
            unmeasured.append(str(e))
    if not found.findings and unmeasured:
        raise LookupError("; ".join(unmeasured))
    found.notes += unmeasured
    groups = campaign.one_alert_per_cause(found.findings, min_effect, alpha)
    found.held = campaign.hold(found.findings, fdr, alpha, false_alarms, groups)
    found.groups = [g for g in groups if g.members[0].held is None]
    for g in groups:
        if g not in found.groups:
            for f in g.members:
                f.group = None
    try:
        if annotate:
            found.noted = queries.annotate(conn, [
                (f.series, f.metric, f.verdict, f.time, outputs.annotation_text(f, outputs.diff_url(f)))
                for f in found.findings if f.held is None and f.verdict in ("regression", "improvement")])
    except psycopg.errors.InsufficientPrivilege as e:   # a read-only role: the verdicts still stand
        conn.rollback()
        found.denied["annotations"] = e
    try:
        if annotate and "annotations" not in found.denied:
            queries.record_detectable(conn, [
                (f.series["series_id"], f.metric, f.series["window"], f.campaign, max(f.runs["new"]), f.time,
                 f.verdict, f.detectable, f.max_undetectable, f.runs_a_night, f.n_new, f.n_baseline,
                 f.reason(alpha, min_effect))
                for f in found.findings if f.verdict != "no baseline" and (f.runs or {}).get("new")])
    except psycopg.errors.InsufficientPrivilege as e:
        conn.rollback()
        found.denied["detectable effects"] = e
    found.changes = change_points_completed(conn, found)
    return found


def change_points_completed(conn: psycopg.Connection, found: Checked) -> list[dict]:
    """The change points that each checked series' judged campaign completes, after recomputing the series that
    got new runs (changepoints.py); none, with a note, without Apache Otava. FOMs have none. A role that may not
    store them computes them in private copies (db.private_copies), and `denied` says so."""
    out = []
    by_metric: dict[tuple, set] = {}
    for f in found.findings:
        if not f.metric.startswith("fom:"):
            by_metric.setdefault((f.metric, f.campaign), set()).add(f.series["series_id"])
    try:
        for (metric, judged), ids in by_metric.items():
            try:
                changepoints.update(conn, [metric], sorted(ids))
            except psycopg.errors.InsufficientPrivilege as e:   # a read-only role: computed in private copies
                conn.rollback()
                found.denied["change points"] = e
                db.private_copies(conn)
                changepoints.update(conn, [metric], sorted(ids))
            out += changepoints.completed_by(conn, judged, metric, sorted(ids))
    except changepoints.MissingLibrary as e:
        found.notes.append(f"no change points: {e}")
    return out
