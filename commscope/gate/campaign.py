"""One campaign through the gate: every series' finding (regressions.check), the canaries' findings in the same
campaign, then what changed behind each moved finding and its cause (attribution.attach). This is the step above
both: regressions never reads attribution, and attribution never judges."""
from __future__ import annotations

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
