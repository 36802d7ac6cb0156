"""Change points over each series' whole history (issue 18).

The regression gate (regressions.py) asks one question per campaign: are this campaign's runs worse than the
campaigns just before? A change point asks another, over all of a series' runs: where did its level move? That
finds shifts the gate misses (a slow drift, a change that needs several nights of runs to be significant) and
says when they began.

The detector is Apache Otava's E-divisive (`otava.analysis.compute_change_points`, Hunter's variant: E-divisive
over sliding windows, then a merge step that keeps a change point only when Student's t-test of the two levels
it separates is significant at ALPHA and the relative change is above MIN_MAGNITUDE). A series' points are its ok
runs' values of one v_run_metrics column, in start-time order (run id breaks ties), on its focus window when any
of its runs has one, else on its run window (the window the dashboards show). Partial and failed runs are no
points, and a run that did not measure the metric (NULL) is none either.

Incremental: a series is recomputed when its ok runs are no longer those its stored change points were computed
from (change_point_state: their count and largest id), i.e. it got new runs or some were re-ingested or removed.
Such a series is recomputed over its whole history, not a tail: Otava's E-divisive splits and merges over the
whole series, so a new run can move or remove an older change point, and a whole-series recompute of one series
costs milliseconds (docs/regression-gate.md, Change points, has the measurements). Series without new runs are not
read at all.

As runs arrive: `commscope ingest`, once its campaign is committed, recomputes the series that campaign's runs
belong to (after_ingest), for time_s and every metric the store already keeps change points of; no other series
is read."""
from __future__ import annotations

import dataclasses
import importlib.util
import math
import time as _time
from importlib import metadata

import psycopg
from psycopg import sql

from commscope.store import db
from commscope.store.queries import gate as queries
from commscope.gate.metrics import ALIASES, METRICS
from commscope.gate.pvalues import MIN_BASELINE, MIN_CAMPAIGNS
from commscope.gate.stats import CONFIRM, rank_test_reachable

ALPHA = 0.01          # Otava's max_pvalue: the merge step's t-test level (the gate's default alpha)
MIN_MAGNITUDE = 0.05  # Otava's min_magnitude: the smallest relative change kept (the gate's min_effect)
WINDOW_LEN = 50       # Otava's window_len: E-divisive's sliding window over the series, in runs (Otava's default)
MIN_LEVEL = 2         # runs a level needs, but the newest level (detect)


def method() -> str:
    """The library, its version and the parameters, stored with every change point."""
    try:
        version = metadata.version("apache-otava")
    except metadata.PackageNotFoundError:
        version = "?"
    return (f"apache-otava {version} e-divisive (split/merge, t-test) max_pvalue={ALPHA:g} "
            f"min_magnitude={MIN_MAGNITUDE:g} window_len={WINDOW_LEN}")


class MissingLibrary(RuntimeError):
    """Apache Otava is not installed."""


def _missing(e: str) -> MissingLibrary:
    return MissingLibrary(f"change points need Apache Otava ({e}): pip install 'commscope[changepoints]'")


def _otava():
    try:
        from otava.analysis import compute_change_points
    except ImportError as e:
        raise _missing(str(e)) from None
    return compute_change_points


def _require_otava() -> None:
    """MissingLibrary unless Apache Otava is installed, found without importing its analysis: that brings
    scipy.stats, about 2 s of every process that ingests, which a series with too few runs for a change point
    (detect) never needs."""
    try:
        found = importlib.util.find_spec("otava.analysis")
    except ImportError as e:
        raise _missing(str(e)) from None
    if found is None:
        raise _missing("No module named 'otava.analysis'")


def canonical_metric(metric: str) -> str:
    """The v_run_metrics column a --metric names; FOMs have no change points (yet)."""
    metric = ALIASES.get(metric, metric)
    if metric not in METRICS:
        raise ValueError(f"no change points for metric {metric!r}: choose a v_run_metrics column "
                         f"({', '.join(METRICS)})")
    return metric


@dataclasses.dataclass
class Level:
    """One change point found in a list of values: the index of the first value of the new level, and the two
    levels it separates (back to the previous change point, up to the next)."""
    index: int
    p_value: float
    n_before: int
    n_after: int
    mean_before: float
    mean_after: float
    stddev_before: float
    stddev_after: float


def detect(values: list[float], alpha: float = ALPHA, min_magnitude: float = MIN_MAGNITUDE,
           window_len: int = WINDOW_LEN) -> list[Level]:
    """Otava's change points of VALUES (in order), as Levels, by index.

    A level holds at least MIN_LEVEL runs, except the newest, which may hold the newest run alone: one run at the
    start or between two change points is an outlier that no later run can confirm, while a single newest run is
    what the series shows so far (a later recompute drops it if the next runs return to the old level). A change
    point that leaves a shorter level is removed and the remaining ones are tested again with Otava's own merge
    step (t-test at ALPHA, MIN_MAGNITUDE)."""
    if len(values) < 3:
        return []
    compute = _otava()
    from otava.analysis import TTestSignificanceTester, merge
    series = [float(v) for v in values]
    cps, _weak = compute(series, window_len=window_len, max_pvalue=alpha, min_magnitude=min_magnitude)
    tester = TTestSignificanceTester(alpha)
    while True:
        cuts = [0] + [int(c.index) for c in cps] + [len(series)]
        short = [i for i, c in enumerate(cps) if cuts[i + 1] - cuts[i] < MIN_LEVEL
                 or (cuts[i + 2] - cuts[i + 1] < MIN_LEVEL and i + 1 < len(cps))]
        if not short:
            break
        del cps[short[0]]
        intervals = tester.get_intervals(cps)
        cps = merge([tester.change_point(c.to_candidate(), series, intervals) for c in cps], series, alpha,
                    min_magnitude)
    cuts = [0] + [int(c.index) for c in cps] + [len(series)]
    out = []
    for i, c in enumerate(cps, 1):
        s = c.stats
        out.append(Level(int(c.index), float(s.pvalue), cuts[i] - cuts[i - 1], cuts[i + 1] - cuts[i],
                         float(s.mean_1), float(s.mean_2), float(s.std_1), float(s.std_2)))
    return out


# ---- the store -------------------------------------------------------------------

def stale_series(conn: psycopg.Connection, metric: str, series_ids: list[int] | None = None) -> list[int]:
    """The series whose change points of METRIC were computed from other ok runs than they have now (or with
    another method), or never; and series whose runs are gone but whose rows remain."""
    now = queries.ok_run_fingerprints(conn, series_ids)
    state = queries.change_point_states(conn, metric, series_ids)
    me = method()
    stale = [sid for sid, fp in now.items() if sid not in state or state[sid][:2] != fp or state[sid][2] != me]
    gone = [sid for sid in state if sid not in now]
    return sorted(stale + gone)


def series_points(conn: psycopg.Connection, series_id: int, metric: str,
                  rows: list[tuple] | None = None) -> tuple[str | None, list[tuple]]:
    """(window, [(run_id, campaign_id, started_at, value)]) of one series: its ok runs that measured METRIC,
    in start-time order, on its focus window when any run has one there, else its run window. ROWS: its
    queries.window_values, read already."""
    rows = queries.window_values(conn, series_id, metric) if rows is None else rows
    windows = {r[0] for r in rows}
    window = "focus" if "focus" in windows else ("run" if "run" in windows else None)
    return window, [r[1:] for r in rows if r[0] == window]


def recompute_series(conn: psycopg.Connection, series_id: int, metric: str) -> int:
    """Replace one series' change points of METRIC by those of its whole history now; returns how many. A change
    point found again at the same run keeps when and with which campaign it was first found."""
    with conn.transaction():
        db.writer_session(conn)
        queries.lock_series(conn, series_id)
        fp = queries.ok_run_fingerprints(conn, [series_id]).get(series_id)
        window, points = series_points(conn, series_id, metric) if fp else (None, [])
        found = detect([float(p[3]) for p in points]) if points else []
        kept = queries.first_detections(conn, series_id, metric)
        newest_campaign = max((p[1] for p in points), default=None)
        worse_higher = METRICS[metric] == "lower"
        me = method()
        rows = []
        campaigns, cuts = [p[1] for p in points], [0, *(lv.index for lv in found), len(points)]
        for i, lv in enumerate(found, 1):
            run_id, campaign_id, started, _ = points[lv.index]
            change = lv.mean_after / lv.mean_before - 1 if lv.mean_before else None
            up = lv.mean_after > lv.mean_before
            direction = "regression" if up == worse_higher else "improvement"
            said = level_verdict(campaigns, cuts, i, direction)   # what check and the report call it
            first_at, first_campaign = kept.get(run_id, (None, newest_campaign))
            rows.append((window, run_id, campaign_id, started, points[lv.index - 1][2], lv.n_before, lv.n_after,
                         lv.mean_before, lv.mean_after, lv.stddev_before, lv.stddev_after, change, direction,
                         lv.p_value, me, first_at, first_campaign, said))
        queries.replace_change_points(conn, series_id, metric, rows)
        queries.save_change_point_state(conn, series_id, metric, fp, len(points), me)
    return len(found)


@dataclasses.dataclass
class Update:
    metric: str
    series: int          # series recomputed
    change_points: int   # change points those series have now
    seconds: float


def update(conn: psycopg.Connection, metrics=("time_s",), series_ids: list[int] | None = None,
           full: bool = False) -> list[Update]:
    """Recompute the change points of the series that got new runs (or all given/stored series with FULL), per
    metric; series_ids limits it to those series."""
    out = []
    for metric in metrics:
        metric = canonical_metric(metric)
        t0 = _time.perf_counter()
        if full:
            ids = sorted(set(queries.ok_run_fingerprints(conn, series_ids)) | {
                sid for sid in queries.change_point_series(conn, metric) if series_ids is None or sid in series_ids})
        else:
            ids = stale_series(conn, metric, series_ids)
        n = sum(recompute_series(conn, sid, metric) for sid in ids)
        out.append(Update(metric, len(ids), n, _time.perf_counter() - t0))
    return out


def after_ingest(conn: psycopg.Connection, campaign_id: int) -> list[Update]:
    """Recompute the change points of the series the campaign's runs belong to (those whose ok runs changed), for
    time_s and every other metric the store keeps change points of; MissingLibrary without Otava."""
    _require_otava()
    ids = queries.campaign_series(conn, campaign_id)
    if not ids:
        return []
    kept = queries.change_point_metrics(conn)
    return update(conn, ["time_s", *sorted(kept - {"time_s"})], ids)


def refresh_after_ingest(campaign_id: int, warn) -> None:
    """after_ingest on its own connection, once the campaign is committed (`commscope ingest` and `commscope
    run`). The runs are stored whatever happens here: a failure is a note through WARN, and `commscope
    changepoints` catches up later."""
    try:
        with db.connect() as conn:
            after_ingest(conn, campaign_id)
    except MissingLibrary as e:
        warn(f"change points not updated: {e}")
    except (psycopg.Error, db.DBError) as e:
        warn(f"the runs are stored, but updating their series' change points failed "
             f"({db.masked(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)}); "
             f"run 'commscope changepoints' to update them")


COLUMNS = ("series_id", "metric", "window", "run_id", "campaign_id", "time", "previous_time", "n_before", "n_after",
           "mean_before", "mean_after", "stddev_before", "stddev_after", "change", "direction", "p_value",
           "detected_at", "detected_campaign", "series_label", "versions_changed")


def verdict(direction: str, runs_before: int, campaigns_before: int, campaigns_after: int) -> str:
    """What a change point is called, by the gate's own minimums (stats.py), so that it never says more than
    `commscope check` would of the same runs: "no baseline" when the level before it holds fewer than MIN_BASELINE
    runs; "cannot tell" when they come from fewer than MIN_CAMPAIGNS campaigns; "suspect" when the new level is
    held by fewer than CONFIRM campaigns (2 where CONFIRM campaigns cannot be ranked against the level before:
    the gate's two-campaign rule); else its direction, regression or improvement."""
    if runs_before < MIN_BASELINE:
        return "no baseline"
    if campaigns_before < MIN_CAMPAIGNS:
        return "cannot tell"
    needed = CONFIRM if rank_test_reachable(campaigns_before, CONFIRM, ALPHA) else 2
    return direction if campaigns_after >= needed else "suspect"


def level_verdict(campaigns: list, cuts: list[int], i: int, direction: str) -> str:
    """The verdict of the change point that starts level I of one series: CAMPAIGNS are its points' campaigns in
    order, CUTS [0, each level's first index, len(CAMPAIGNS)]; the levels it separates run back to the previous
    cut and on to the next."""
    before, after = campaigns[cuts[i - 1]:cuts[i]], campaigns[cuts[i]:cuts[i + 1]]
    return verdict(direction, len(before), len(set(before)), len(set(after)))


def with_verdicts(conn: psycopg.Connection, changes: list[dict]) -> list[dict]:
    """CHANGES (dicts with series_id, metric, run_id and direction) each with its verdict: the campaigns of the
    levels it separates are those of the series' points between its neighbouring change points."""
    levels: dict[tuple, tuple] = {}
    series: dict[str, dict] = {}   # per metric, its series: their points and cuts read in two queries
    for c in changes:
        series.setdefault(c["metric"], {})[c["series_id"]] = None
    for metric, ids in series.items():
        ids = list(ids)
        rows, runs = queries.windows_values(conn, ids, metric), queries.change_point_runs(conn, ids, metric)
        for sid in ids:
            _, points = series_points(conn, sid, metric, rows.get(sid, []))
            at = {p[0]: i for i, p in enumerate(points)}
            cuts = sorted(at[r] for r in runs.get(sid, []) if r in at)
            levels[(sid, metric)] = ([p[1] for p in points], at, [0, *cuts, len(points)])
    for c in changes:
        key = (c["series_id"], c["metric"])
        campaigns, at, cuts = levels[key]
        if c["run_id"] not in at:   # its runs are gone since it was computed: nothing to call it
            c["verdict"] = None
            continue
        c["verdict"] = level_verdict(campaigns, cuts, cuts.index(at[c["run_id"]]), c["direction"])
    return changes


def stored(conn: psycopg.Connection, metric: str | None = None, series_ids: list[int] | None = None) -> list[dict]:
    """The stored change points (v_change_points), by series and time, each with its verdict (with_verdicts)."""
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS)
    q = sql.SQL("SELECT {} FROM v_change_points WHERE (%(metric)s::text IS NULL OR metric = %(metric)s) "
                "AND (%(ids)s::int[] IS NULL OR series_id = ANY(%(ids)s)) ORDER BY series_id, metric, \"time\", run_id"
                ).format(cols)
    return with_verdicts(conn, [dict(zip(COLUMNS, r)) for r in conn.execute(q, {"metric": metric, "ids": series_ids})])


def completed_by(conn: psycopg.Connection, campaign: int, metric: str, series_ids: list[int]) -> list[dict]:
    """Change points of these series that the campaign completes: the new level starts with its runs, or the
    series' history first showed the change when this campaign was its newest."""
    return [c for c in stored(conn, canonical_metric(metric), series_ids)
            if c["campaign_id"] == campaign or c["detected_campaign"] == campaign]


def as_dict(c: dict) -> dict:
    """One change point, machine-readable (JSON-safe)."""
    out = {}
    for k, v in c.items():
        if hasattr(v, "isoformat"):
            v = v.isoformat()
        elif isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


def called(c: dict) -> str:
    """A change point's verdict, with the way it moved where the verdict does not say it: "regression",
    "no baseline, worse"."""
    if c.get("verdict") == c["direction"]:
        return c["direction"]
    return f"{c.get('verdict') or 'not judged'}, {'worse' if c['direction'] == 'regression' else 'better'}"


def describe(c: dict) -> str:
    """One line: series, metric, how much, from which run and campaign, how significant, and the versions that
    changed there."""
    change = f"{c['change']:+.1%}" if c["change"] is not None else "?"
    return (f"{c['series_label']} [{c['window']}]: {c['metric']} {change} ({called(c)}), mean "
            f"{c['mean_before']:.6g} over {c['n_before']} runs -> {c['mean_after']:.6g} over {c['n_after']} runs, "
            f"from run {c['run_id']} of campaign {c['campaign_id']} ({c['time']:%Y-%m-%d %H:%M} UTC), "
            f"p={c['p_value']:.2g}; first found with campaign {c['detected_campaign']}"
            + (f"; versions changed: {c['versions_changed']}" if c.get("versions_changed") else ""))


def annotation_text(c: dict) -> str:
    change = f"{c['change']:+.1%}" if c["change"] is not None else "?"
    return (f"change point ({called(c)}): {c['metric']} [{c['window']}] {change}, "
            f"{c['mean_before']:.4g} -> {c['mean_after']:.4g} (p={c['p_value']:.2g}) #{c['series_id']}")
