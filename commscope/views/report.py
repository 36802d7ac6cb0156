"""The static report: the dashboards' panels as one self-contained HTML page
(plotly, its JavaScript inlined), for laptops without Grafana and for
procurement attachments.

    commscope report -o report.html
    commscope report --compare systemA systemB -o procurement.html
    commscope report --campaign 12 --campaign 13 -o nightly.html

Every panel runs the SQL of panels.py, expanded exactly as Grafana would for
the selection: all series by default; --compare picks the systems (the first is
the procurement reference); --campaign picks the series and the time span of
those campaigns' runs, as one would with the dashboards' variables and time picker.

The first screen answers where time goes, what changed and what to do: one line per finding, with its
numbers (the largest MPI shares with POP's efficiencies; the gate's regressions and the change points; the
advisors' suggestions and the fastest stack per experiment). A series is named by its application and only the
parameters that differ among those listed beside it; the full set is on hover. The reference studies the
selection ran follow (reference.py), then the dashboards. All of it is read from the views; the report never
writes to the store.
"""
from __future__ import annotations

import datetime as dt
import html
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from commscope.store import db, files
from commscope.views import panels as P
from commscope.views import reference
from commscope.views.figures import TOP_SERIES, figure, plot_value


class ReportError(Exception):
    """The selection names what the store does not hold: one line saying which, and what to do."""


def selection(conn, campaigns: tuple[int, ...], compare: tuple[str, ...]) -> tuple[dict, dt.datetime, dt.datetime, str]:
    """Variable values and time range for the report, and a sentence saying what they are."""
    values = P.all_values(conn)
    where, args, said = "TRUE", [], []
    if campaigns:
        known = {r[0] for r in conn.execute("SELECT DISTINCT campaign_id FROM v_runs WHERE campaign_id = ANY(%s)",
                                            (list(campaigns),))}
        missing = [c for c in campaigns if c not in known]
        if missing:
            raise ReportError(f"--campaign {', '.join(map(str, missing))}: no such campaign with runs in the store")
        where, args = "campaign_id = ANY(%s)", [list(campaigns)]
        for name, _, col in P.VARIABLES:
            values[name] = [str(r[0]) for r in conn.execute(
                f"SELECT DISTINCT {col} FROM v_runs WHERE {where} ORDER BY 1", args)]
        said.append(f"campaigns {', '.join(map(str, campaigns))}")
    if compare:
        unknown = [s for s in compare if s not in values["system"]]
        if unknown:
            raise ReportError(f"--compare {', '.join(unknown)}: no such system in the selection "
                              f"(known: {', '.join(values['system'])})")
        values["system"] = list(compare)
        said.append(f"systems {', '.join(compare)} (reference {compare[0]})")
    row = conn.execute(f"SELECT min(started_at), max(started_at) FROM v_runs WHERE {where}", args).fetchone()
    if row[0] is None:
        raise ReportError("the store has no runs; ingest some first (commscope ingest)")
    t0, t1 = row[0] - dt.timedelta(hours=1), row[1] + dt.timedelta(hours=1)
    ref_system = compare[0] if compare else conn.execute(
        "SELECT system FROM v_runs GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1").fetchone()[0]
    ref = P.reference_values(conn, ref_system)
    values.update(ref)
    # The panels query an hour either side (a run's day and time buckets); the header says the runs' own span.
    said.append(f"runs from {row[0]:%Y-%m-%d %H:%M:%S} to {row[1]:%Y-%m-%d %H:%M:%S} UTC; procurement reference "
                f"{ref['reference_system']} / {ref['reference_stack']} / {ref['reference_interconnect']}")
    return values, t0, t1, "; ".join(said) if said else "all runs"


# A series label as the views spell it (series_label: "... #<series id>"), with the window or loop the panel adds.
SERIES_LABEL = re.compile(r"^.* #(\d+)( \[[^\]]+\])?$")


def plot_names(conn, labels, cache: dict) -> dict:
    """The legend names of a plot's series: each label of a stored series (SERIES_LABEL) named by its application
    and what tells it apart from the plot's other series of that application (series_names), its window kept;
    the label and the full key as its hover. Empty when a label is not a series' (the plot keeps its labels)."""
    matched = {lab: SERIES_LABEL.match(str(lab)) for lab in labels if lab is not None}
    if not matched or not all(matched.values()):
        return {}
    ids = {int(m.group(1)) for m in matched.values()}
    missing = ids - cache.keys()
    if missing:
        cache.update(_series_keys(conn, missing))
    if not ids <= cache.keys():
        return {}
    order = list(matched)
    named = series_names([cache[int(matched[lab].group(1))] for lab in order])
    return {lab: (f"{short}{matched[lab].group(2) or ''}", f"{lab}: {full}")
            for lab, (short, full) in zip(order, named)}


def label_names(labels) -> dict:
    """The legend names of a plot whose series are not stored series (a collective and algorithm on a stack, an I/O
    method, a scaling experiment): each label without the words every label of the plot ends with, nor those all
    share after the first word (what it is); the label as its hover. Empty when that leaves two names alike or
    changes nothing."""
    words = {lab: str(lab).split() for lab in labels if lab is not None}
    if len(words) < 2:
        return {}
    ws = list(words.values())
    tail = 0
    while all(len(w) > tail + 1 for w in ws) and len({w[-1 - tail] for w in ws}) == 1:
        tail += 1
    head = 1
    while all(len(w) - tail > head + 1 for w in ws) and len({w[head] for w in ws}) == 1:
        head += 1
    short = {lab: " ".join(w[:1] + w[head:len(w) - tail]) for lab, w in words.items()}
    if len(set(short.values())) < len(short) or all(short[lab] == str(lab) for lab in short):
        return {}
    return {lab: (short[lab], str(lab)) for lab in short}


def table_html(cols: list[str], rows: list[tuple], limit: int = 200) -> str:
    def cell(v):
        v = plot_value(v)
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, dt.datetime):
            return f"{v:%Y-%m-%d %H:%M}"
        return html.escape("" if v is None else str(v))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows[:limit])
    more = f"<p class='note'>{len(rows) - limit} more rows not shown.</p>" if len(rows) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def tree_html(cols: list[str], rows: list[tuple], limit: int = 400) -> str:
    """A flame graph panel's call tree (rows of level, value, self and label, depth first: Grafana's nested set) as
    an indented tree table, each node under its parent: its time with everything it called, that as a share of the
    whole tree with a bar as wide (an icicle on its side), and its own time. Each cell of a node's name carries its
    level and its time exactly (data-level, data-value)."""
    at = {c: cols.index(c) for c in ("level", "value", "self", "label")}
    total = rows[0][at["value"]] if rows else None

    def num(v):
        return "" if v is None else f"{v:.4g}"
    body = []
    for r in rows[:limit]:
        level, value, own, label = (r[at[c]] for c in ("level", "value", "self", "label"))
        share = value / total if total and value is not None else None
        body.append(f"<tr><td style='padding-left: {0.3 + 1.2 * level:.1f}em' data-level='{level}' "
                    f"data-value='{value!r}'>{html.escape(str(label))}</td><td>{num(value)}</td>"
                    f"<td>{'' if share is None else f'{share:.1%}'}</td>"
                    f"<td class='bar'><span style='width: {0 if share is None else 100 * share:.1f}%'></span></td>"
                    f"<td>{num(own)}</td></tr>")
    more = f"<p class='note'>{len(rows) - limit} more nodes not shown.</p>" if len(rows) > limit else ""
    return ("<table class='tree'><thead><tr><th>region</th><th>time (s)</th><th>share</th><th></th>"
            f"<th>own time (s)</th></tr></thead><tbody>{''.join(body)}</tbody></table>{more}")


def advice_html(conn, campaigns: tuple[int, ...]) -> str:
    """What `commscope advise` concluded (v_advice), newest first: for the
    selected campaigns' runs, or all of it."""
    where, args = ("run_id IN (SELECT run_id FROM v_runs WHERE campaign_id = ANY(%s))", [list(campaigns)]) \
        if campaigns else ("TRUE", [])
    cur = conn.execute("SELECT created_at, kind, run_id, app, variant, stack, ranks, source, text FROM v_advice "
                       f"WHERE {where} ORDER BY created_at DESC, id DESC", args)
    cols = [c.name for c in cur.description]
    rows = cur.fetchall()
    head = ("<h2>Advice</h2><p class='note'>What commscope advise (barriers, collectives, placement, overlap) "
            "concluded, with the figures in v_advice.summary.</p>")
    if not rows:
        return head + "<p class='note'>No advice stored for this selection (run commscope advise).</p>"
    return head + "<div class='panel advice'>" + table_html(cols, rows) + "</div>"


# A FOM family: one run's FOMs whose name and context differ only in their numbers (a per-step residual, a
# per-size latency). Up to FOM_FAMILY_LISTED members are listed one row each; a larger family is one row.
FOM_FAMILY_LISTED = 64
DIGITS = re.compile(r"\d+")


def fom_family(name: str, context: str | None) -> tuple[str, str | None]:
    """The family of a FOM: its name and context with every run of digits read as '#'."""
    return DIGITS.sub("#", name), None if context is None else DIGITS.sub("#", context)


def _steps(row: tuple) -> tuple[int, ...]:
    """The numbers in a FOM's context and name, in order: its place in its family (step 10 after step 9)."""
    return tuple(int(d) for d in DIGITS.findall(f"{row[6] or ''} {row[7]}"))


def summarise_foms(rows: list[tuple]) -> list[tuple]:
    """FOM rows (app, workload, experiment, system, ranks, time, context, name, value, text, unit, run_id), each
    run's families of more than FOM_FAMILY_LISTED members one row: the family (numbers as '#') for context and
    name, its last member's value or text (the highest numbers), and count, min, median and max of its values
    (NULL for text). Smaller families are listed, count 1, in the order given."""
    members: dict[tuple, list[tuple]] = {}
    for r in rows:
        members.setdefault((r[11], r[10], *fom_family(r[7], r[6])), []).append(r)
    out, done = [], set()
    for r in rows:
        key = (r[11], r[10], *fom_family(r[7], r[6]))
        family = members[key]
        if len(family) <= FOM_FAMILY_LISTED:
            out.append(r[:11] + (1, None, None, None))
            continue
        if key in done:
            continue
        done.add(key)
        last = max(family, key=_steps)
        values = sorted(float(plot_value(m[8])) for m in family if m[8] is not None)
        out.append(r[:6] + (key[3], key[2], last[8], last[9], r[10], len(family),
                            *((values[0], statistics.median(values), values[-1]) if values else (None,) * 3)))
    return out


def foms_html(conn, campaigns: tuple[int, ...]) -> str:
    """Every FOM of the newest run of each application and experiment (v_foms), with its context and unit:
    the one place the report shows an application that has none of commscope's own fields (a Ramble builtin
    application, a ReFrame test), for the selected campaigns' runs, or all of them. A large family of FOMs
    (per-step values) is one row (summarise_foms), so the table stays small."""
    where, args = ("campaign_id = ANY(%s)", [list(campaigns)]) if campaigns else ("TRUE", [])
    cur = conn.execute(
        "WITH newest AS (SELECT DISTINCT ON (app, workload, coalesce(experiment, '')) run_id FROM v_runs "
        f"WHERE {where} ORDER BY app, workload, coalesce(experiment, ''), started_at DESC, run_id DESC), "
        "every_fom AS (SELECT run_id, app, workload, experiment, system, ranks, time, context, name, repeat, value, "
        "NULL AS text, unit FROM v_foms UNION ALL SELECT run_id, app, workload, experiment, system, ranks, time, "
        "context, name, NULL, NULL, text, unit FROM v_text_foms) "
        "SELECT f.app, f.workload, f.experiment, f.system, f.ranks, f.time, f.context, f.name, f.value, f.text, "
        "f.unit, f.run_id FROM every_fom f JOIN newest n ON n.run_id = f.run_id "
        "ORDER BY f.app, f.workload, f.experiment, f.repeat NULLS LAST, f.context NULLS FIRST, f.name", args)
    cols = [c.name for c in cur.description][:11] + ["count", "min", "median", "max"]
    rows = summarise_foms(cur.fetchall())
    head = ("<h2>Figures of merit</h2><p class='note'>The FOMs of the newest run of each application and experiment "
            "(v_foms), as the application, Ramble or ReFrame reported them, per context (e.g. message size); a FOM "
            "without a number (v_text_foms) has its text instead of a value. FOMs of one run whose names and "
            f"contexts differ only in their numbers (per-step values) are one row when there are more than "
            f"{FOM_FAMILY_LISTED}: '#' stands for the numbers, value is the last one's (the highest numbers), "
            "with their count, min, median and max.</p>")
    if not rows:
        return head + "<p class='note'>No FOMs stored for this selection.</p>"
    return head + "<div class='panel foms'>" + table_html(cols, rows, limit=1000) + "</div>"


# ---- the findings: what a reader acts on, each one line with its numbers --------------------------------------

FINDINGS_PER_KIND = 5
FINDING_LIMIT = 160   # characters of a finding's line; the full names and texts are on hover (its title)
NAME_LIMIT = 60       # characters of the pairs naming a series; beyond them its number tells it apart ("#12")


def _pct(v) -> str:
    return f"{float(v) * 100:.1f}%"


def _key_items(parameters: dict, environment: dict) -> tuple[dict[str, str], dict[str, str]]:
    """A series' full key as name=value pairs: its parameters ("param." dropped), and its environment."""
    def text(v):
        return "none" if v is None else str(v)
    params = {k.removeprefix("param."): text(v) for k, v in (parameters or {}).items()}
    return params, {k: text(v) for k, v in (environment or {}).items() if k not in params}


def series_names(keys: list[tuple[str, tuple[dict, dict], int | None]]) -> list[tuple[str, str]]:
    """Each (app, (parameters, environment), series id) named by its application and only pairs that differ among
    the keys of the same application in KEYS (a pair one key lacks differs): those telling it apart from the
    others, fewest first (each time the pair that tells it from the most of the rest; among equals a parameter
    before the environment, then the shortest), listed parameters first, each by name, at most NAME_LIMIT
    characters of them; its number ("#12") where they do not tell it apart. With the full key as a second text,
    for hover."""
    by_app: dict[str, list[dict]] = {}
    for app, (params, env), _ in keys:
        merged = {**env, **params}
        if merged not in by_app.setdefault(app, []):
            by_app[app].append(merged)
    out = []
    for app, (params, env), sid in keys:
        group = by_app[app]
        p_names = sorted({k for a, (p2, _), _ in keys if a == app for k in p2})
        order = p_names + sorted({k for g in group for k in g} - set(p_names))
        mine = {**env, **params}
        differ = [k for k in order if len({g.get(k) for g in group}) > 1]
        rest = [g for g in group if g != mine]
        chosen, used = [], 0
        while rest:
            k = max((k for k in differ if k not in chosen),
                    key=lambda k: (sum(g.get(k) != mine.get(k) for g in rest), k in p_names,
                                   -len(f"{k}={mine.get(k, 'none')}"), -differ.index(k)), default=None)
            part = f"{k}={mine.get(k, 'none')}" if k else ""
            if k is None or not any(g.get(k) != mine.get(k) for g in rest) or \
                    (chosen and used + len(part) + 1 > NAME_LIMIT):
                break
            chosen.append(k)
            used += len(part) + 1
            rest = [g for g in rest if g.get(k) == mine.get(k)]
        shown = [f"{k}={mine.get(k, 'none')}" for k in differ if k in chosen]
        number = [f"#{sid}"] if rest and sid is not None else []
        full = " ".join([app] + [f"{k}={v}" for k, v in sorted(mine.items())])
        out.append((" ".join([app] + shown + number), full))
    return out


def _clip(text: str, limit: int) -> str:
    """TEXT cut to LIMIT characters at a word, ending in "…" where cut."""
    if len(text) <= limit:
        return text
    return text[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


@dataclass
class Finding:
    """One line of the findings: its text, and what a reader sees on hover (the full names, the whole text)."""
    text: str
    hover: str = ""

    def html(self) -> str:
        title = f" title='{html.escape(self.hover, quote=True)}'" if self.hover else ""
        return f"<li class='finding'{title}>{html.escape(self.text)}</li>"


def _series_keys(conn, series_ids) -> dict[int, tuple]:
    """Per series: its application, full key (v_run_metrics' parameters and environment) and id."""
    rows = conn.execute("SELECT DISTINCT ON (series_id) series_id, app, parameters, environment FROM v_run_metrics "
                        "WHERE series_id = ANY(%s) ORDER BY series_id", (sorted(set(series_ids)),))
    return {sid: (app, _key_items(params, env), sid) for sid, app, params, env in rows}


def _named(keys: list[tuple], texts: list[tuple[str, str, str]]) -> list[Finding]:
    """Findings whose series is named short (series_names), from (before the name, after it, hover extra); the
    hover holds the full key, and the whole line where it was cut."""
    out = []
    for (name, full), (before, after, extra) in zip(series_names(keys), texts):
        line = f"{before}{name} {after}"
        clipped = _clip(line, FINDING_LIMIT)
        out.append(Finding(clipped, f"{full}{extra}" + (f" — {line}" if clipped != line else "")))
    return out


def mpi_findings(conn, t0, t1, values) -> list[Finding]:
    """Where time goes: the series spending the largest share of time in MPI (v_run_metrics_daily), with POP's
    efficiencies, each on the window the dashboards show, else on its other window where only that one measured
    MPI (a profile whose focus region holds no MPI records)."""
    q = f"""SELECT series_id, "window", runs, mpi, pe, lb, ce FROM (
  SELECT DISTINCT ON (series_id) series_id, "window", bool_or(shown) AS shown, sum(runs) AS runs,
    {P._mean("mpi_fraction_avg")} AS mpi, {P._mean("parallel_efficiency")} AS pe, {P._mean("load_balance")} AS lb,
    {P._mean("communication_efficiency")} AS ce
  FROM v_run_metrics_daily WHERE {P.SHOWN_DAYS}
  GROUP BY 1, 2 HAVING sum(mpi_fraction_avg_n) > 0
  ORDER BY series_id, bool_or(shown) DESC, "window") x
ORDER BY mpi DESC, 1 LIMIT {FINDINGS_PER_KIND}"""
    rows = conn.execute(P.expand(q, t0, t1, values)).fetchall()
    keys = _series_keys(conn, [r[0] for r in rows])
    texts = []
    for sid, window, runs, mpi, pe, lb, ce in rows:
        pop = (f"parallel efficiency {float(pe):.2f} = load balance {float(lb):.2f} × communication "
               f"{float(ce):.2f}" if pe is not None else "POP not measured (no per-rank times)")
        texts.append(("", f"[{window}]: {_pct(mpi)} in MPI ({runs} run{'s' if runs != 1 else ''}); {pop}.",
                      f" (series #{sid})"))
    return _named([keys[r[0]] for r in rows], texts)


def stack_findings(conn, where: str, args: list) -> list[Finding]:
    """What to do: for each experiment run on two or more stacks (same application, parameters and environment
    but the stack; v_run_compared_newest, each series' newest MPI library version only, each run on its focus
    window else its whole run), the fastest stack, its margin over the next one, the spread of its own runs, and
    the versions compared. The selection's runs and their compared rows are each computed once (MATERIALIZED):
    the selection's casts (v.ranks::text, the view's coalesced interconnect) have no statistics, so the planner
    takes it for a few runs, and joined in one query it chose a nested loop that computed v_run_compared_newest
    again for every selected run (38 s on a store of 1,700 runs, where this takes under a second)."""
    q = f"""WITH sel AS MATERIALIZED (
  SELECT v.run_id FROM v_runs v WHERE {where}
), c AS MATERIALIZED (
  SELECT * FROM v_run_compared_newest WHERE time_s > 0 AND run_id IN (SELECT run_id FROM sel)
), t AS (
  SELECT c.app, c.parameters, environment_but_stack(c.environment) AS env, c."window",
         c.environment->>'stack'
           || coalesce(' (' || regexp_replace(split_part(min(c.mpi_library), ',', 1), '\\s+', ' ', 'g') || ')', '')
           AS stack,
         avg(c.time_s) AS time_s, min(c.time_s) AS time_min, max(c.time_s) AS time_max, count(*) AS runs
  FROM c
  GROUP BY 1, 2, 3, 4, c.environment->>'stack'
), r AS (
  SELECT *, row_number() OVER (w ORDER BY time_s, stack) AS place, count(*) OVER w AS stacks
  FROM t WINDOW w AS (PARTITION BY app, parameters, env, "window")
)
SELECT a.app, a.parameters, a.env, a."window", a.stack, a.time_s, a.time_min,
       a.time_max, a.runs, b.stack, b.time_s, b.runs, a.stacks
FROM r a JOIN r b USING (app, parameters, env, "window")
WHERE a.place = 1 AND b.place = 2
ORDER BY b.time_s / a.time_s DESC, 1
LIMIT {FINDINGS_PER_KIND}"""
    rows = conn.execute(q, args).fetchall()
    texts = []
    for app, params, env, window, best, t, tmin, tmax, n, second, t2, n2, stacks in rows:
        spread = f"spread {_pct((tmax - tmin) / t)} over {n} runs" if n > 1 else "1 run, no spread"
        texts.append(("", f"[{window}]: {best} is fastest of {stacks} stacks, {_pct(t2 / t - 1)} ahead of {second} "
                      f"({t:.3g} s vs {t2:.3g} s; {spread}).", ""))
    return _named([(r[0], _key_items(r[1], r[2]), None) for r in rows], texts)


def regression_findings(conn, t0, t1, values) -> list[Finding]:
    """What changed: what the gate recorded (commscope check --annotate writes v_annotations), the change points
    (commscope changepoints, v_change_points), each called by its stored verdict as check calls it (no regression
    without the gate's minimum runs on each side; the dashboards' P.CHANGE_POINT_CALLED), and the version changes
    (v_version_changes) in the selection, newest first. Read from the views, so the report never writes."""
    ann = f"""SELECT "time", coalesce(system, 'all') || ' ' || coalesce(app, 'all') || ' ' || coalesce(stack, 'all')
  || coalesce(' n' || ranks, ''), text
FROM v_annotations
WHERE $__timeFilter("time") AND (system IS NULL OR system IN ($system)) AND (app IS NULL OR app IN ($app))
  AND (stack IS NULL OR stack IN ($stack)) AND (ranks IS NULL OR ranks IN ($ranks))
  AND (text LIKE 'regression%' OR text LIKE 'improvement%')
ORDER BY "time" DESC LIMIT {FINDINGS_PER_KIND}"""
    out = []
    for t, what, text in conn.execute(P.expand(ann, t0, t1, values)):
        line = f"Gate, {t:%Y-%m-%d %H:%M} UTC, {what}: {text}."
        out.append(Finding(_clip(line, FINDING_LIMIT), line if len(line) > FINDING_LIMIT else ""))
    cp = f"""SELECT series_id, "time", "window", metric, {P.CHANGE_POINT_CALLED}, mean_before, mean_after, change,
  n_before, n_after, p_value, campaign_id, run_id, versions_changed
FROM v_change_points WHERE $__timeFilter("time") AND {P.SERIES}
ORDER BY "time" DESC LIMIT {FINDINGS_PER_KIND}"""
    rows = conn.execute(P.expand(cp, t0, t1, values)).fetchall()
    keys = _series_keys(conn, [r[0] for r in rows])
    texts = []
    for sid, t, window, metric, called, before, after, change, nb, na, p, campaign, run, versions in rows:
        moved = f" ({float(change) * 100:+.1f}%)" if change is not None else ""
        with_versions = f"; versions changed: {versions}" if versions else ""
        texts.append((f"Change point ({called}): ", f"[{window}]: {metric} {float(before):.4g} → "
                      f"{float(after):.4g}{moved}, means of {nb} and {na} runs, p={float(p):.2g}, {t:%Y-%m-%d}"
                      f"{with_versions}.",
                      f" (series #{sid}); at run {run} of campaign {campaign}, {t:%Y-%m-%d %H:%M} UTC"))
    out += _named([keys[r[0]] for r in rows], texts)
    vc = f"""SELECT series_id, "time", what, previous, value, campaign_id FROM v_version_changes
WHERE $__timeFilter("time") AND {P.SERIES}
ORDER BY "time" DESC LIMIT {FINDINGS_PER_KIND}"""
    rows = conn.execute(P.expand(vc, t0, t1, values)).fetchall()
    keys = _series_keys(conn, [r[0] for r in rows])
    texts = [("Version change: ", f"[{what}]: {previous} → {value}, campaign {campaign}, {t:%Y-%m-%d}.",
              f" (series #{sid}); {t:%Y-%m-%d %H:%M} UTC") for sid, t, what, previous, value, campaign in rows]
    return out + _named([keys[r[0]] for r in rows], texts)


def advice_findings(conn, campaigns: tuple[int, ...]) -> list[Finding]:
    """What to do: the newest suggestion of each advisor (v_advice), its first sentence."""
    where, args = ("run_id IN (SELECT run_id FROM v_runs WHERE campaign_id = ANY(%s))", [list(campaigns)]) \
        if campaigns else ("TRUE", [])
    rows = conn.execute(f"SELECT DISTINCT ON (kind) kind, source, text FROM v_advice WHERE {where} "
                        "ORDER BY kind, created_at DESC, id DESC", args).fetchall()
    out = []
    for kind, source, text in rows[:FINDINGS_PER_KIND]:
        first = text.split(". ")[0].rstrip(".")
        line = f"Advice ({kind}, {source}): {first}."
        out.append(Finding(_clip(line, FINDING_LIMIT), text if len(line) > FINDING_LIMIT else ""))
    return out


def findings_html(conn, campaigns, values, t0, t1, where: str, args: list) -> str:
    """The report's first screen: where time goes, what changed, what to do; one line each, the detail below."""
    parts = [("Where time goes: the largest MPI shares", mpi_findings(conn, t0, t1, values),
              "No series in the selection measured MPI time (Caliper with profile.mpi: --caliper mpi)."),
             ("What changed: regressions and change points", regression_findings(conn, t0, t1, values),
              "No regression or change point in the selection "
              "(commscope check --annotate, commscope changepoints)."),
             ("What to do: the advisors' suggestions", advice_findings(conn, campaigns),
              "No advice stored for this selection (run commscope advise)."),
             ("What to do: the fastest stack per experiment", stack_findings(conn, where, args),
              "No experiment in the selection ran on two or more stacks with everything else equal.")]
    html_parts = ["<section id='findings'><h2>Findings</h2><p class='note'>Series are named by their application "
                  "and what differs among those listed; hover a line for the full set.</p>"]
    for title, lines, none in parts:
        html_parts.append(f"<h3>{html.escape(title)}</h3>")
        if lines:
            html_parts.append("<ul>" + "".join(f.html() for f in lines) + "</ul>")
        else:
            html_parts.append(f"<p class='note'>{html.escape(none)}</p>")
    return "".join(html_parts) + "</section>"


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
.note, .meta { color: #666; font-size: 0.9em; }
.panel { margin: 1.2em 0; } .panel h3 { margin: 0.2em 0; font-size: 1.05em; }
table { border-collapse: collapse; font-size: 0.85em; } td, th { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
.advice td { text-align: left; vertical-align: top; }
.tree td.bar { width: 12em; } .tree td.bar span { display: block; height: 0.8em; background: #7eb26d; }
"""


def render(conn, campaigns: tuple[int, ...] = (), compare: tuple[str, ...] = ()) -> str:
    """The whole page."""
    import plotly
    import plotly.offline
    values, t0, t1, said = selection(conn, campaigns, compare)
    # The runs of the selection, as v_runs columns (alias v): the variables' values, and the campaigns.
    where = " AND ".join(f"v.{col}::text = ANY(%s)" for _, _, col in P.VARIABLES)
    args = [values[name] for name, _, _ in P.VARIABLES]
    if campaigns:
        where += " AND v.campaign_id = ANY(%s)"
        args.append(list(campaigns))
    parts, n = [findings_html(conn, campaigns, values, t0, t1, where, args)], 0
    series_keys: dict = {}   # the series' full keys, read once for every plot that names them
    # The reference studies' headline effects beside ours (reference.py), right after the findings.
    parts.append(reference.section_html(conn, campaigns))
    for board in P.DASHBOARDS:
        parts.append(f"<h2>{html.escape(board.title)}</h2><p class='note'>{html.escape(board.description)}</p>")
        shared: dict[str, tuple[list[str], list[tuple]]] = {}
        for panel in board.panels:
            sql = P.expand(panel.sql, t0, t1, values)
            if sql not in shared:   # panels that share a query (panel.reuses) run it once, as Grafana does
                cur = conn.execute(sql)
                shared[sql] = ([c.name for c in cur.description], cur.fetchall())
            cols, rows = shared[sql]
            if panel.long:   # as its Grafana transformations do: its columns, no row where its measure is NULL
                keep = [cols.index(c) for c in panel.columns]
                rows = [tuple(r[i] for i in keep) for r in rows if r[cols.index(panel.measures[0])] is not None]
                cols = list(panel.columns)
            parts.append(f"<div class='panel'><h3>{html.escape(panel.title)}</h3>"
                         f"<p class='note'>{html.escape(panel.description)}</p>")
            if not rows:
                why = P.why_empty(board, panel)
                parts.append(f"<p class='note empty'>No data for this selection. {html.escape(why)}</p></div>")
                continue
            series = panel.plot.get("series")
            labels = {r[cols.index(series)] for r in rows} if series and panel.plot.get("kind") in ("line", "xy") \
                else set()
            names = (plot_names(conn, labels, series_keys) or label_names(labels)) if labels else {}
            fig = figure(panel, cols, rows, names) if panel.type != "flamegraph" else None
            if panel.type == "flamegraph":
                parts.append(tree_html(cols, rows))
            elif fig is None:
                parts.append(table_html(cols, rows))
            else:
                n += 1
                if series and len({r[cols.index(series)] for r in rows}) > TOP_SERIES:
                    total = len({r[cols.index(series)] for r in rows})
                    first = panel.plot["y"][0] if isinstance(panel.plot["y"], list) else panel.plot["y"]
                    parts.append(f"<p class='note'>Drawn: the {TOP_SERIES} of {total} series with the highest mean "
                                 f"{html.escape(first)}; the other {total - TOP_SERIES} share one legend entry "
                                 "(click it to draw them), or narrow the selection with --campaign or --compare.</p>")
                parts.append(fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot-{n}",
                                         config={"displaylogo": False, "responsive": True}))
            parts.append("</div>")
    parts.append(foms_html(conn, campaigns))
    parts.append(advice_html(conn, campaigns))
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>commscope report</title>"
            f"<style>{STYLE}</style><script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script></head>"
            f"<body><h1>commscope report</h1><p class='meta'>Generated {generated} from the store's views; "
            f"{html.escape(said)}. Plotly {plotly.__version__}; every plot's toolbar saves it as PNG.</p>"
            + "".join(parts) + "</body></html>")


def write(output: Path, campaigns: tuple[int, ...] = (), compare: tuple[str, ...] = ()) -> int:
    """The report of CAMPAIGNS (all when empty) written to OUTPUT whole or not at all; its size in characters.
    `commscope report` and `commscope run` both write it so. OUTPUT must be a regular file or new
    (files.output_file): anything else is refused before the store is read."""
    files.output_file(output, "report")
    with db.connect() as conn:
        page = render(conn, campaigns, compare)
    with files.replacing(output, "report") as part:
        part.write_text(page, encoding="utf-8")
    return len(page)
