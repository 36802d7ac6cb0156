"""One campaign through the gate: every series' finding (regressions.check), the canaries' findings in the same
campaign, then what changed behind each moved finding and its cause (attribution.attach). This is the step above
both: regressions never reads attribution, and attribution never judges. Over the campaign's findings: the budget
(hold) and one alert per cause (one_alert_per_cause)."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import psycopg

from commscope.gate import attribution, regressions
from commscope.gate.stats import CONFIRM, MAX_UNDETECTABLE
from commscope.store.queries import gate as queries

CANARY_METRIC = "fom:latency"
CANARY_FALLBACK_METRIC = "time_s"   # when the store's `latency` FOM cannot be judged (stored in several contexts)


def check(conn: psycopg.Connection, metric: str = "time_s", campaign: int | None = None, baseline: int = 10,
          min_effect: float = 0.05, alpha: float = 0.01, confirm: int = CONFIRM,
          max_undetectable: float = MAX_UNDETECTABLE, **where) -> list[regressions.Finding]:
    """regressions.check's findings, each regression, improvement and suspect with its attribution."""
    findings = regressions.check(conn, metric, campaign, baseline, min_effect, alpha, confirm, max_undetectable,
                                 **where)
    if any(f.verdict in attribution.MOVED for f in findings):
        judged = findings[0].campaign
        attribution.attach(conn, findings, canaries(conn, judged, baseline, min_effect, alpha, confirm,
                                                    max_undetectable))
    return findings


def canaries(conn: psycopg.Connection, campaign: int, baseline: int, min_effect: float, alpha: float,
             confirm: int, max_undetectable: float) -> list[regressions.Finding]:
    """The gate's findings on every canary series of the campaign (empty when none ran)."""
    found = []
    if not queries.campaign_ran(conn, campaign, attribution.CANARY_APPS):
        return found
    for app in attribution.CANARY_APPS:
        for metric in (CANARY_METRIC, CANARY_FALLBACK_METRIC):
            try:
                found += regressions.check(conn, metric, campaign, baseline, min_effect, alpha, confirm,
                                           max_undetectable, app=app)
                break
            except regressions.NotMeasured:
                continue
            except ValueError:   # the FOM is stored in several contexts (IMB's): judge the loop time instead
                continue
            except LookupError:  # no run of this canary in the campaign
                break
    return found


FALSE_ALARMS = 1.0   # check's budget by default: false alarms expected in one campaign over all its findings
PLATFORM_WIDE = "platform-wide"   # the cause of a group no canary explains (one_alert_per_cause)


def budget_p(f: regressions.Finding, level: float) -> float | None:
    """What a budget of LEVEL weighs an alert by: its p with nights as units too (nights_alert_p), where the series
    has the nights for that test, else its alert_p. A regression or improvement whose confirmation rank test cannot
    reach LEVEL (its floor above it: 5 nights against 10 cannot go below 6.7e-4) is weighed by the same nights'
    Student's t instead (confirm_units_p). The choice rests on run counts and LEVEL, never on the values, so each
    series is still held to one test at the budget's level."""
    if f.confirm_floor is not None and f.confirm_floor > level and f.confirm_units_p is not None:
        return f.confirm_units_p
    return f.nights_alert_p if f.nights_alert_p is not None else f.alert_p


def hold(findings: list[regressions.Finding], fdr: float | None, alpha: float, false_alarms: float | None = None,
         groups: list | None = None) -> int:
    """The campaign's budget over its alerts (regressions, and suspects on the worse side; across series and
    metrics). The units are each group of GROUPS (one cause: one alert, its p Group.p) and each alert outside a
    group (its budget_p, on alpha's scale: the runs of one night are not independent draws, so the budget asks
    the test with nights as units too); m is the number of findings that could have alerted (every judged series
    and metric with a baseline).
    - FALSE_ALARMS E: a unit stands where its p <= E / m, so at most E false alarms are expected in the campaign
      (Bonferroni over the m findings, each test holding its level); where E / m >= alpha every alert stands.
    - FDR Q (instead): Benjamini-Hochberg at Q over the units: ranked k = 1..n by p, they stand up to the largest k
      with p <= Q k / m.
    - Neither: every alert stands, as judged alone.
    A held unit holds back every member (Finding.held says why). Returns how many alerts were held back."""
    if fdr is None and false_alarms is None:
        return 0
    m = sum(f.verdict not in ("no baseline",) for f in findings)
    grouped = [g for g in groups or [] if g.members]
    inside = {id(f) for g in grouped for f in g.members}
    strictest = (fdr if fdr is not None else false_alarms) / m if m else math.inf   # the first unit's level
    alone = [(budget_p(f, strictest), [f]) for f in findings if f.alert and id(f) not in inside]
    units = [(g.p(strictest), g.members) for g in grouped] + [u for u in alone if u[0] is not None]
    units.sort(key=lambda u: u[0])
    if fdr is not None:
        stand = max((k for k, (p, _) in enumerate(units, 1) if p <= fdr * k / m), default=0)
        why = lambda k, p: (f"ranks {k} of {len(units)} alerts over {m} findings, above Benjamini-Hochberg's "  # noqa: E731
                            f"{fdr:g} x {k}/{m} = {fdr * k / m:.2g} (--fdr {fdr:g})")
    else:
        level = false_alarms / m if m else math.inf
        stand = sum(p <= level for p, _ in units) if level < alpha else len(units)
        why = lambda k, p: (f"is above {false_alarms:g} / {m} = {level:.2g}, the level that keeps the "  # noqa: E731
                            f"campaign's {m} findings to {false_alarms:g} false alarm{'s' if false_alarms != 1 else ''} "
                            f"expected (--false-alarms {false_alarms:g})")
    held = 0
    for k, (p, members) in enumerate(units, 1):
        if k > stand:
            for f in members:
                f.held = f"held back by the campaign's budget: its p {p:.2g} (on alpha={alpha:g}'s scale) {why(k, p)}"
                held += 1
    return held


@dataclass
class Group:
    """Alerts of one campaign with one cause: the platform of one system, stack and interconnect (a canary there
    moved the same way, or, platform-wide, its findings moved as a whole), or the same version change on one system
    and stack. MEMBERS: largest effect first."""
    cause: str
    where: dict
    versions: tuple = ()
    members: list = field(default_factory=list)
    p_platform: float | None = None   # platform-wide: the sign test's p over the platform's findings

    def p(self, level: float) -> float:
        """The group's p as one alert under a budget of LEVEL (campaign.hold): the sign test's for a platform-wide
        group, else its members' smallest budget_p."""
        if self.p_platform is not None:
            return self.p_platform
        return min(budget_p(f, level) for f in self.members if budget_p(f, level) is not None)

    def label(self) -> str:
        where = " ".join(str(v) for v in self.where.values())
        effects = sorted(f.effect for f in self.members if f.effect is not None)
        spread = (f" (change {effects[0]:+.0%} to {effects[-1]:+.0%}, median {statistics.median(effects):+.0%})"
                  if effects else "")
        what = f" ({'; '.join(self.versions)})" if self.versions else ""
        return (f"{self.cause}{what} on {where}: {len(self.members)} series {self.members[0].way} together"
                f"{spread}")


def one_alert_per_cause(findings: list[regressions.Finding], min_effect: float | None = None,
                        alpha: float | None = None) -> list[Group]:
    """Alerts (Finding.alert) of the same cause become one alert: those whose attribution says platform on the
    same system, stack and interconnect (the canary among them), or version change with the same versions on the
    same system and stack, and moved the same way. Then, given MIN_EFFECT and ALPHA, the remaining alerts of one
    system, stack, interconnect and metric that moved one way are one platform-wide alert where that platform's
    findings (every series judged there with a baseline, alerting or not) moved that way as a whole: their median
    effect is at least MIN_EFFECT that way, and more of them moved that way than not by a sign test at p < ALPHA.
    A few series that regressed each for its own reason leave the platform's median where it was. A cause shared by
    two or more alerts is a Group; each member's Finding.group names it, the first (largest effect, regressions
    first) leads it. Other alerts stand alone."""
    keyed: dict[tuple, Group] = {}
    for f in findings:
        cause = (f.attribution or {}).get("cause")
        if not f.alert or cause not in ("platform", "version change"):
            continue
        s = f.series
        if cause == "platform":
            where = {k: s.get(k) for k in attribution.MATCH}
            versions = ()
        else:
            where = {k: s.get(k) for k in ("system", "stack")}
            versions = tuple(sorted(attribution.version_text(v) for v in f.attribution.get("versions") or []))
        key = (cause, f.way, tuple(where.values()), versions)
        keyed.setdefault(key, Group(cause, where, versions)).members.append(f)
    groups = [g for g in keyed.values() if len(g.members) > 1]
    if min_effect is not None and alpha is not None:
        taken = {id(f) for g in groups for f in g.members}
        groups += _platform_wide([f for f in findings if f.alert and id(f) not in taken], findings, min_effect, alpha)
    for g in groups:
        g.members.sort(key=lambda f: (f.verdict != "regression", -(f.effect or 0), f.series["series_id"]))
        for f in g.members:
            f.group = g
    return groups


def _platform_wide(alerts: list, findings: list, min_effect: float, alpha: float) -> list[Group]:
    """The platform-wide groups of one_alert_per_cause among ALERTS, judged on all FINDINGS of each platform."""
    from scipy.stats import binomtest
    def platform(f):
        return (f.metric, *(f.series.get(k) for k in attribution.MATCH))
    effects: dict[tuple, list[float]] = {}
    for f in findings:
        if f.verdict != "no baseline" and f.effect is not None and math.isfinite(f.effect):
            effects.setdefault(platform(f), []).append(f.effect)
    out = []
    for way in ("worse", "better"):
        sign = 1.0 if way == "worse" else -1.0
        mine: dict[tuple, list] = {}
        for f in alerts:
            if f.moved == way:
                mine.setdefault(platform(f), []).append(f)
        for key, members in mine.items():
            signed = [sign * e for e in effects.get(key, [])]
            if len(members) < 2 or statistics.median(signed) < min_effect:
                continue
            p = binomtest(sum(e > 0 for e in signed), sum(e != 0 for e in signed), 0.5,
                          alternative="greater").pvalue
            if p < alpha:
                where = dict(zip(attribution.MATCH, key[1:]))
                out.append(Group(PLATFORM_WIDE, where, members=members, p_platform=float(p)))
    return out
