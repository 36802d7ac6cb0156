"""The regression gate: for every series (docs/measurement-model.md: runs of equal application, parameters and
environment, one series_id) in the newest campaign, compare its runs with the runs of the same series in the
campaigns before it. Runs of another problem size, Caliper configuration or stack are other series, so they are
never each other's baseline.

The measurement is a column of v_run_metrics on the series' focus window where its runs have one (the workloads'
timed loop), else on its run window, as the dashboards show a series (v_run_metrics_daily's `shown`); or a FOM
(fom:NAME, or fom:NAME@CONTEXT for a FOM Ramble reports per context). Only runs with status 'ok' count: partial runs (ranks missing) and failed runs are neither baseline
nor judged.

The test is robust, not a fixed threshold: with three or more new samples a one-sided Mann-Whitney U test against
the baseline window, else a robust z-score (median and MAD of the baseline) of the new median. A change counts
only when it is significant (p < alpha) AND at least min_effect in size, so tiny but consistent shifts on a quiet
machine do not fail a pipeline. Benchpark's gate is a fixed baseline x 1.05; min_effect=0.05 with alpha plays
that role while ignoring noise."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import psycopg
from psycopg import sql

# v_run_metrics columns the gate can judge, and which way is worse.
METRICS = {"time_s": "lower", "mpi_time_avg_s": "lower", "mpi_time_max_s": "lower", "mpi_fraction_avg": "lower",
           "mpi_fraction_slowest": "lower", "user_time_avg_s": "lower", "mpi_sync_time_avg_s": "lower",
           "load_balance": "higher", "communication_efficiency": "higher", "parallel_efficiency": "higher"}
# The names the gate had before the measurement model, for pipelines that still pass them.
ALIASES = {"wall_time": "time_s", "mpi_time_avg": "mpi_time_avg_s"}
# What a selection may filter on: v_runs columns (the dashboards' template variables).
FILTERS = ("system", "app", "workload", "variant", "stack", "interconnect", "ranks")
# What a finding says about its series (v_runs columns of its newest run), for the label and the annotation.
DESCRIBE = FILTERS + ("global_size",)
LOWER_BETTER_UNITS = {"s", "ms", "us", "ns", "sec", "msec", "usec", "nsec", "seconds"}  # usec: IMB through Ramble


@dataclass
class Finding:
    series: dict          # series_id, window, and DESCRIBE's columns
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
        """As the dashboards name a series (v_run_metrics_daily.series_label) and the window judged."""
        s = self.series
        variant = f" {s['variant']}" if s["variant"] else ""
        size = f" {s['global_size']}" if s["global_size"] else ""
        return (f"{s['system'] or 'unknown'} {s['app']}{variant} {s['stack'] or 'unknown'} {s['interconnect']} "
                f"n{s['ranks']}{size} #{s['series_id']} [{s['window']}]")


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


def canonical_metric(metric: str) -> str:
    """The v_run_metrics column (or fom:NAME) a --metric names."""
    metric = ALIASES.get(metric, metric)
    if metric.startswith("fom:") or metric in METRICS:
        return metric
    raise ValueError(f"unknown metric {metric!r}; choose a v_run_metrics column ({', '.join(METRICS)}), "
                     f"{', '.join(f'{a} (= {c})' for a, c in ALIASES.items())}, or fom:NAME")


def _fom_and_context(conn: psycopg.Connection, spec: str) -> tuple[str, str | None]:
    """(FOM name, context) of fom:NAME or fom:NAME@CONTEXT. A FOM stored in several contexts (migration 0015:
    one IMB latency per message size) must name one; values of different contexts are no one series."""
    name, at, context = spec, "", None
    if "@" in spec and not conn.execute("SELECT 1 FROM foms WHERE name = %s LIMIT 1", (spec,)).fetchone():
        name, at, context = spec.partition("@")
    contexts = sorted((r[0] for r in conn.execute("SELECT DISTINCT context FROM foms WHERE name = %s", (name,))),
                      key=lambda c: (c is not None, str(c)))
    if at and context not in contexts:
        raise ValueError(f"FOM {name!r} has no context {context!r} in the store"
                         + (f" (it has: {', '.join(map(str, contexts[:8]))})" if contexts else ""))
    if not at and len(contexts) > 1:
        raise ValueError(f"FOM {name!r} is stored in {len(contexts)} contexts ({', '.join(map(str, contexts[:8]))}"
                         f"{', ...' if len(contexts) > 8 else ''}); name one: fom:{name}@{contexts[-1]}")
    if not at and contexts:
        context = contexts[0]   # its one context
    return name, context


def _values(conn: psycopg.Connection, metric: str, where: dict) -> tuple[list[tuple], str]:
    """Rows (series_id, window, campaign_id, started_at, run_id, value) of the ok runs with a series, and the
    metric's direction."""
    clauses, params = [sql.SQL("r.status = 'ok'"), sql.SQL("r.series_id IS NOT NULL")], []
    for k, v in where.items():
        if v is not None:
            clauses.append(sql.SQL("v.{} = %s").format(sql.Identifier(k)))
            params.append(v)
    selected = sql.SQL(" AND ").join(clauses)
    if metric.startswith("fom:"):
        name, context = _fom_and_context(conn, metric[4:])
        units = {r[0] for r in conn.execute("SELECT DISTINCT unit FROM foms WHERE name = %s AND context IS NOT "
                                            "DISTINCT FROM %s", (name, context))}
        if not units:
            raise ValueError(f"no FOM named {name!r} in the store")
        direction = "lower" if units <= LOWER_BETTER_UNITS else "higher" if all("/s" in (u or "") for u in units) else None
        if direction is None:
            raise ValueError(f"FOM {name!r} has units {sorted(map(str, units))}: cannot tell whether larger is worse")
        # A FOM is the workload's own figure: no window of commscope's.
        q = sql.SQL("SELECT r.series_id, 'fom', v.campaign_id, v.started_at, r.id, f.value "
                    "FROM runs r JOIN v_runs v ON v.run_id = r.id JOIN foms f ON f.run_id = r.id "
                    "WHERE f.name = %s AND f.context IS NOT DISTINCT FROM %s AND {}").format(selected)
        return conn.execute(q, [name, context, *params]).fetchall(), direction
    # Each series on one window: focus where its runs have one, else run (v_run_metrics_daily's `shown`).
    q = sql.SQL("""WITH m AS (
  SELECT r.series_id, m."window", v.campaign_id, v.started_at, r.id AS run_id, m.{col} AS value
  FROM runs r JOIN v_runs v ON v.run_id = r.id JOIN v_run_metrics m ON m.run_id = r.id
  WHERE {selected}
), shown AS (
  SELECT series_id, CASE WHEN bool_or("window" = 'focus') THEN 'focus' ELSE 'run' END AS "window"
  FROM m GROUP BY series_id
)
SELECT m.series_id, m."window", m.campaign_id, m.started_at, m.run_id, m.value
FROM m JOIN shown USING (series_id, "window")
WHERE m.value IS NOT NULL""").format(col=sql.Identifier(metric), selected=selected)
    return conn.execute(q, params).fetchall(), METRICS[metric]


def check(conn: psycopg.Connection, metric: str = "time_s", campaign: int | None = None, baseline: int = 10,
          min_effect: float = 0.05, alpha: float = 0.01, **where) -> list[Finding]:
    """Findings for every series of the newest (or the given) campaign: its ok runs there against its ok runs
    in the `baseline` campaigns before it that have any."""
    metric = canonical_metric(metric)
    unknown = set(where) - set(FILTERS)
    if unknown:
        raise ValueError(f"cannot filter series by {', '.join(sorted(unknown))}; choose from {', '.join(FILTERS)}")
    rows, direction = _values(conn, metric, where)
    if not rows:
        (old,) = conn.execute("SELECT count(*) FROM runs WHERE series_id IS NULL").fetchone()
        hint = (f" ({old} runs stored before the measurement model have no series: re-ingest their files, "
                f"v_runs_needing_reingest lists them)" if old else "")
        raise LookupError(f"no successful runs with {metric} match; nothing to check{hint}")
    newest = campaign if campaign is not None else max(r[2] for r in rows)
    if campaign is not None and not any(r[2] == campaign for r in rows):
        raise LookupError(f"campaign {campaign} has no successful runs of {metric} matching the selection")
    series: dict[tuple, dict[int, list]] = {}
    last: dict[tuple, tuple] = {}   # the series' newest run in the judged campaign: (started_at, run_id)
    for sid, window, cid, started, run_id, value in rows:
        if cid > newest:
            continue
        key = (sid, window)
        series.setdefault(key, {}).setdefault(cid, []).append(float(value))
        if cid == newest:
            last[key] = max(last.get(key, (started, run_id)), (started, run_id))
    described = _describe(conn, [run_id for _, run_id in last.values()])
    sign = 1.0 if direction == "lower" else -1.0
    findings = []
    for key, by_campaign in sorted(series.items()):
        if newest not in by_campaign:
            continue
        earlier = sorted(c for c in by_campaign if c < newest)[-baseline:]
        base = [v for c in earlier for v in by_campaign[c]]
        new = by_campaign[newest]
        verdict, effect, p = compare([sign * v for v in new], [sign * v for v in base], min_effect, alpha)
        started, run_id = last[key]
        findings.append(Finding({"series_id": key[0], "window": key[1], **described[run_id]}, metric, verdict,
                                statistics.median(base) if base else None, statistics.median(new),
                                effect, p, len(base), len(new), started))
    return findings


def _describe(conn: psycopg.Connection, run_ids: list[int]) -> dict[int, dict]:
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in DESCRIBE)
    q = sql.SQL("SELECT run_id, {} FROM v_runs WHERE run_id = ANY(%s)").format(cols)
    return {r[0]: dict(zip(DESCRIBE, r[1:])) for r in conn.execute(q, (run_ids,))}


def annotate(conn: psycopg.Connection, findings: list[Finding]) -> int:
    """One annotation per regression or improvement, shown by the dashboards; re-checking the same campaign
    replaces its annotations (one per series, metric and time: tag series:ID)."""
    n = 0
    with conn.transaction():
        for f in findings:
            if f.verdict not in ("regression", "improvement"):
                continue
            tag = f"series:{f.series['series_id']}"
            conn.execute("DELETE FROM annotations WHERE \"time\" = %s AND tags @> %s",
                         (f.time, ["commscope-check", f.metric, tag]))
            conn.execute("INSERT INTO annotations (\"time\", system, app, workload, variant, stack, interconnect, ranks, "
                         "text, tags) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                         (f.time, *(f.series[k] for k in FILTERS),
                          f"{f.verdict}: {f.metric} [{f.series['window']}] {f.effect:+.1%} against the median of "
                          f"{f.n_baseline} earlier runs of series #{f.series['series_id']} (p={f.p_value:.2g})",
                          ["commscope-check", f.metric, f.verdict, tag]))
            n += 1
    return n
