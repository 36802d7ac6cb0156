"""The regression gate: for every series (system, app, workload, variant,
stack, interconnect, ranks) in the newest campaign, compare its runs with the
same series in the campaigns before it.

The test is robust, not a fixed threshold: with three or more new samples a
one-sided Mann-Whitney U test against the baseline window, else a robust
z-score (median and MAD of the baseline) of the new median. A change counts
only when it is significant (p < alpha) AND at least min_effect in size, so
tiny but consistent shifts on a quiet machine do not fail a pipeline.
Benchpark's gate is a fixed baseline x 1.05; min_effect=0.05 with alpha plays
that role while ignoring noise."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import psycopg

SERIES = ("system", "app", "workload", "variant", "stack", "interconnect", "ranks")
RUN_METRICS = {"wall_time": "lower", "mpi_fraction_avg": "lower", "mpi_fraction_slowest": "lower",
               "mpi_time_avg": "lower"}
LOWER_BETTER_UNITS = {"s", "ms", "us", "ns"}


@dataclass
class Finding:
    series: dict
    metric: str
    verdict: str          # regression | improvement | ok | no baseline
    baseline_median: float | None
    new_median: float | None
    effect: float | None  # relative change, positive = worse
    p_value: float | None
    n_baseline: int
    n_new: int
    time: object = None   # the newest run's start

    def label(self) -> str:
        return "/".join(str(self.series[k]) for k in SERIES)


def _mann_whitney_greater(new: list[float], base: list[float]) -> float:
    from scipy.stats import mannwhitneyu
    return float(mannwhitneyu(new, base, alternative="greater").pvalue)


def _robust_z_p(new_med: float, base: list[float]) -> float:
    med = statistics.median(base)
    mad = statistics.median(abs(x - med) for x in base) * 1.4826
    if mad == 0:
        return 0.0 if new_med > med else 1.0
    z = (new_med - med) / mad
    return 0.5 * math.erfc(z / math.sqrt(2))  # one-sided normal tail


def compare(new: list[float], base: list[float], min_effect: float, alpha: float) -> tuple[str, float | None, float | None]:
    """(verdict, effect, p) for values where larger is worse."""
    if len(base) < 3 or not new:
        return "no baseline", None, None
    nm, bm = statistics.median(new), statistics.median(base)
    effect = (nm - bm) / abs(bm) if bm else (math.inf if nm > bm else 0.0)
    if len(new) >= 3:
        p_worse, p_better = _mann_whitney_greater(new, base), _mann_whitney_greater([-x for x in new], [-x for x in base])
    else:
        p_worse, p_better = _robust_z_p(nm, base), _robust_z_p(-nm, [-x for x in base])
    if p_worse < alpha and effect >= min_effect:
        return "regression", effect, p_worse
    if p_better < alpha and effect <= -min_effect:
        return "improvement", effect, p_better
    return "ok", effect, min(p_worse, p_better)


def _values(conn: psycopg.Connection, metric: str, where: dict) -> tuple[list[tuple], str]:
    """Rows (series..., campaign_id, started_at, value) and the metric's direction."""
    from psycopg import sql
    clauses, params = [sql.SQL("status = 'ok'")], []
    for k, v in where.items():
        if v is not None:
            clauses.append(sql.SQL("{} = %s").format(sql.Identifier(k)))
            params.append(v)
    keys = sql.SQL(", ").join(sql.Identifier(k) for k in SERIES)
    if metric.startswith("fom:"):
        name = metric[4:]
        units = {r[0] for r in conn.execute("SELECT DISTINCT unit FROM foms WHERE name = %s", (name,))}
        if not units:
            raise ValueError(f"no FOM named {name!r} in the store")
        direction = "lower" if units <= LOWER_BETTER_UNITS else "higher" if all("/s" in (u or "") for u in units) else None
        if direction is None:
            raise ValueError(f"FOM {name!r} has units {sorted(map(str, units))}: cannot tell whether larger is worse")
        q = sql.SQL("SELECT {}, v.campaign_id, v.started_at, f.value FROM v_runs v JOIN foms f ON f.run_id = v.run_id "
                    "WHERE f.name = %s AND {}").format(
            sql.SQL(", ").join(sql.Identifier("v", k) for k in SERIES),
            sql.SQL(" AND ").join(sql.SQL("v.") + c for c in clauses))
        return conn.execute(q, [name, *params]).fetchall(), direction
    if metric not in RUN_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose from {', '.join(RUN_METRICS)} or fom:NAME")
    q = sql.SQL("SELECT {}, campaign_id, started_at, {} FROM v_runs WHERE {} AND {} IS NOT NULL").format(
        keys, sql.Identifier(metric), sql.SQL(" AND ").join(clauses), sql.Identifier(metric))
    return conn.execute(q, params).fetchall(), RUN_METRICS[metric]


def check(conn: psycopg.Connection, metric: str = "wall_time", campaign: int | None = None, baseline: int = 10,
          min_effect: float = 0.05, alpha: float = 0.01, **where) -> list[Finding]:
    """Findings for every series of the newest (or the given) campaign."""
    unknown = set(where) - set(SERIES)
    if unknown:
        raise ValueError(f"cannot filter series by {', '.join(sorted(unknown))}; choose from {', '.join(SERIES)}")
    rows, direction = _values(conn, metric, where)
    if not rows:
        raise LookupError("no successful runs match; nothing to check")
    newest = campaign if campaign is not None else max(r[len(SERIES)] for r in rows)
    if campaign is not None and not any(r[len(SERIES)] == campaign for r in rows):
        raise LookupError(f"campaign {campaign} has no successful runs of {metric} matching the selection")
    series: dict[tuple, dict[int, list]] = {}
    when: dict[tuple, object] = {}
    for *key, cid, started, value in rows:
        key = tuple(key)
        if cid > newest:
            continue
        series.setdefault(key, {}).setdefault(cid, []).append(float(value))
        if cid == newest:
            when[key] = max(when.get(key, started), started)
    sign = 1.0 if direction == "lower" else -1.0
    findings = []
    for key, by_campaign in sorted(series.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if newest not in by_campaign:
            continue
        earlier = sorted(c for c in by_campaign if c < newest)[-baseline:]
        base = [v for c in earlier for v in by_campaign[c]]
        new = by_campaign[newest]
        verdict, effect, p = compare([sign * v for v in new], [sign * v for v in base], min_effect, alpha)
        findings.append(Finding(dict(zip(SERIES, key)), metric, verdict,
                                statistics.median(base) if base else None, statistics.median(new),
                                effect, p, len(base), len(new), when[key]))
    return findings


def annotate(conn: psycopg.Connection, findings: list[Finding]) -> int:
    """One annotation per regression or improvement, shown by the dashboards;
    re-checking the same campaign replaces its annotations."""
    n = 0
    with conn.transaction():
        for f in findings:
            if f.verdict not in ("regression", "improvement"):
                continue
            keys = [f.series[k] for k in SERIES]
            conn.execute("DELETE FROM annotations WHERE \"time\" = %s AND tags @> %s AND system IS NOT DISTINCT FROM %s "
                         "AND app IS NOT DISTINCT FROM %s AND workload IS NOT DISTINCT FROM %s "
                         "AND variant IS NOT DISTINCT FROM %s AND stack IS NOT DISTINCT FROM %s "
                         "AND interconnect IS NOT DISTINCT FROM %s AND ranks IS NOT DISTINCT FROM %s",
                         (f.time, ["commscope-check", f.metric], *keys))
            conn.execute("INSERT INTO annotations (\"time\", system, app, workload, variant, stack, interconnect, ranks, "
                         "text, tags) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                         (f.time, *keys, f"{f.verdict}: {f.metric} {f.effect:+.1%} against the median of "
                                         f"{f.n_baseline} earlier runs (p={f.p_value:.2g})",
                          ["commscope-check", f.metric, f.verdict]))
            n += 1
    return n
