"""One campaign through the gate: every series' finding (regressions.check), the canaries' findings in the same
campaign, then what changed behind each moved finding and its cause (attribution.attach). This is the step above
both: regressions never reads attribution, and attribution never judges. Over the campaign's findings: the budget
(hold) and one alert per cause (one_alert_per_cause)."""
from __future__ import annotations

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


def hold(findings: list[regressions.Finding], fdr: float | None, alpha: float) -> int:
    """The campaign's budget (--fdr Q): Benjamini-Hochberg over every alert of the findings (regressions, and
    suspects on the worse side; across series and metrics), on each alert's p on alpha's scale (alert_p). The
    alerts ranked k = 1..m by that p stand up to the largest k with p <= Q k / m, where m is the number of
    findings that could have alerted (every judged series and metric with a baseline); the others are held
    back (Finding.held says why) and do not alarm. No Q, or Q at least alpha with one finding: every alert
    stands, as judged alone. Returns how many were held back."""
    if fdr is None:
        return 0
    m = sum(f.verdict not in ("no baseline",) for f in findings)
    raised = sorted((f for f in findings if f.alert and f.alert_p is not None), key=lambda f: f.alert_p)
    stand = 0
    for k, f in enumerate(raised, 1):
        if f.alert_p <= fdr * k / m:
            stand = k
    for k, f in enumerate(raised, 1):
        if k > stand:
            f.held = (f"held back by the campaign's budget: its p {f.alert_p:.2g} (on alpha={alpha:g}'s scale) "
                      f"ranks {k} of {len(raised)} alerts over {m} findings, above Benjamini-Hochberg's "
                      f"{fdr:g} x {k}/{m} = {fdr * k / m:.2g} (--fdr {fdr:g})")
    return len(raised) - stand


@dataclass
class Group:
    """Alerts of one campaign with one cause: the platform of one system, stack and interconnect (a canary there
    moved the same way), or the same version change on one system and stack. MEMBERS: largest effect first."""
    cause: str
    where: dict
    versions: tuple = ()
    members: list = field(default_factory=list)

    def label(self) -> str:
        where = " ".join(str(v) for v in self.where.values())
        effects = sorted(f.effect for f in self.members if f.effect is not None)
        spread = (f" (change {effects[0]:+.0%} to {effects[-1]:+.0%}, median {statistics.median(effects):+.0%})"
                  if effects else "")
        what = f" ({'; '.join(self.versions)})" if self.versions else ""
        return (f"{self.cause}{what} on {where}: {len(self.members)} series {self.members[0].way} together"
                f"{spread}")


def one_alert_per_cause(findings: list[regressions.Finding]) -> list[Group]:
    """Alerts (Finding.alert) of the same cause become one alert: those whose attribution says platform on the
    same system, stack and interconnect (the canary among them), or version change with the same versions on the
    same system and stack, and moved the same way. A cause shared by two or more alerts is a Group; each member's
    Finding.group names it, the first (largest effect, regressions first) leads it. Other alerts stand alone."""
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
    for g in groups:
        g.members.sort(key=lambda f: (f.verdict != "regression", -(f.effect or 0), f.series["series_id"]))
        for f in g.members:
            f.group = g
    return groups
