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

The page opens with the findings a reader acts on, each a sentence with its numbers: the series with the largest
MPI share and their POP efficiencies, the fastest stack per experiment with its margin and spread, the gate's
regressions and the change points, and the advisors' suggestions. The reference studies follow (reference.py):
each headline effect of the five papers beside ours, with its spread, conditions and verdict. All of it is read
from the views; the report never writes to the store.
"""
from __future__ import annotations

import datetime as dt
import html
from decimal import Decimal
from pathlib import Path

import click

from commscope.store import db
from commscope.views import panels as P
from commscope.views import reference


class ReportError(click.ClickException):
    exit_code = 2


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


# Grafana unit ids, as an axis title says them.
UNIT_LABELS = {"percentunit": "fraction", "MBs": "MB/s", "s": "seconds", "bytes": "bytes", "x": "speedup"}


def _num(v):
    return float(v) if isinstance(v, Decimal) else v


def _time(v):
    """Grafana reads a numeric time column as epoch seconds."""
    if isinstance(v, (int, float, Decimal)):
        return dt.datetime.fromtimestamp(float(v), dt.timezone.utc)
    return v


# At most this many series have their own legend entry; the others share one entry ("N other series", hidden
# until clicked), so no legend grows past about 15 entries (series, the "other" entry and one per metric).
TOP_SERIES = 10
COLORS = ["#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B", "#E377C2", "#7F7F7F", "#BCBD22", "#17BECF"]
DASHES = ["solid", "dash", "dot", "dashdot"]
OTHER = "#B0B0B0"


def _mean_of(rs, i) -> float:
    vals = [float(_num(r[i])) for r in rs if r[i] is not None]
    return sum(vals) / len(vals) if vals else float("-inf")


def _text(v) -> str:
    """A name as plotly shows it: plotly renders HTML tags (<a href>, <b>) in trace names, legends, hover text,
    tick labels and titles, so every name from the store or a panel is HTML-escaped and shows as text."""
    return html.escape(str(v), quote=False)


def figure(panel: P.Panel, cols: list[str], rows: list[tuple]):
    """The plotly figure of one panel, or None for a table. Lines: one colour and one legend entry per series, the
    TOP_SERIES with the highest mean of the first metric named, the rest grouped under one entry; several metrics
    of a series share its colour, one dash style each. Bars with long or many categories lie horizontally, their
    labels on an axis that makes room for them."""
    import plotly.graph_objects as go
    spec = panel.plot
    kind = spec.get("kind")
    idx = {c: i for i, c in enumerate(cols)}
    fig = go.Figure()
    ys = spec["y"] if isinstance(spec.get("y"), list) else [spec.get("y")]
    legend_entries = 0
    height = 380
    if kind in ("line", "xy"):
        xconv = _time if kind == "line" else _num
        groups: dict = {}
        for r in rows:
            key = r[idx[spec["series"]]] if spec.get("series") else None
            groups.setdefault(key, []).append(r)
        order = sorted(groups, key=lambda k: (-_mean_of(groups[k], idx[ys[0]]), str(k)))
        top, rest = order[:TOP_SERIES], order[TOP_SERIES:]
        for n, key in enumerate(order):
            rs = groups[key]
            shown = key in top
            group = str(key) if shown else "other"
            for j, y in enumerate(ys):
                first = j == 0 and (shown or key == rest[0])
                name = str(key if key is not None else y) if shown else f"{len(rest)} other series"
                fig.add_trace(go.Scatter(
                    x=[xconv(r[idx[spec["x"]]]) for r in rs], y=[_num(r[idx[y]]) for r in rs], mode="lines+markers",
                    name=_text(name), legendgroup=group, showlegend=first, visible=True if shown else "legendonly",
                    hovertext=_text(f"{key} {y}" if len(ys) > 1 else str(key)), hoverinfo="x+y+text",
                    line={"color": COLORS[n % len(COLORS)] if shown else OTHER, "dash": DASHES[j % len(DASHES)]},
                    marker={"size": 5}))
        legend_entries = len(top) + (1 if rest else 0)
        if len(ys) > 1:
            # One entry per metric, saying which dash is which.
            for j, y in enumerate(ys):
                fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=_text(y), legendgroup=f"metric {y}",
                                         line={"color": "#444", "dash": DASHES[j % len(DASHES)]}, hoverinfo="skip"))
            legend_entries += len(ys)
        fig.update_xaxes(title=_text(spec["x"]), type="log" if spec.get("log_x") else None)
        fig.update_yaxes(title=_text(UNIT_LABELS.get(panel.unit, panel.unit) if len(ys) > 1 else ys[0]),
                         type="log" if spec.get("log_y") else None)
        days = {xconv(r[idx[spec["x"]]]) for r in rows} if kind == "line" else set()
        if len(days) == 1:
            # One night only (the panels plot whole days): plotly would zoom its axis to a millisecond around
            # it; show the day before and after instead.
            (day,) = days
            fig.update_xaxes(range=[day - dt.timedelta(days=1), day + dt.timedelta(days=1)])
        # The legend below the plot, one entry a line, so long series names take no width from the plot.
        legend_height = 21 * legend_entries + 20
        height = 400 + legend_height
        fig.update_layout(legend={"orientation": "v", "x": 0, "xanchor": "left", "y": -70 / (height - 90),
                                  "yanchor": "top", "maxheight": legend_height + 20, "font": {"size": 11},
                                  "tracegroupgap": 2})
    elif kind == "bar":
        cats = [_text(r[idx[spec["x"]]]) for r in rows]
        horizontal = len(cats) > 12 or max(map(len, cats)) > 14
        for j, y in enumerate(ys):
            vals = [_num(r[idx[y]]) for r in rows]
            fig.add_trace(go.Bar(x=vals if horizontal else cats, y=cats if horizontal else vals, name=_text(y),
                                 orientation="h" if horizontal else "v", marker={"color": COLORS[j % len(COLORS)]}))
        legend_entries = len(ys)
        fig.update_layout(barmode="stack" if spec.get("stacked") else "group")
        unit = _text(UNIT_LABELS.get(panel.unit, panel.unit)) if UNIT_LABELS.get(panel.unit, panel.unit) else None
        if horizontal:
            # Categories top to bottom in the query's order, each a readable row.
            fig.update_yaxes(type="category", autorange="reversed", automargin=True, tickfont={"size": 11})
            fig.update_xaxes(title=unit)
            height = max(300, 22 * len(cats) * (1 if spec.get("stacked") or len(ys) == 1 else len(ys)) + 140)
        else:
            fig.update_xaxes(type="category", automargin=True)
            fig.update_yaxes(title=unit)
        fig.update_layout(legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"})
    elif kind == "heatmap":
        xs = sorted({r[idx[spec["x"]]] for r in rows})
        yv = sorted({r[idx[spec["y"]]] for r in rows})
        z = [[None] * len(xs) for _ in yv]
        for r in rows:
            z[yv.index(r[idx[spec["y"]]])][xs.index(r[idx[spec["x"]]])] = _num(r[idx[spec["z"]]])
        fig.add_trace(go.Heatmap(x=[_text(x) for x in xs], y=[_text(y) for y in yv], z=z, colorscale="Oranges",
                                 colorbar={"title": _text(spec["z"])}))
        fig.update_xaxes(title=_text(spec["x"]), type="category")
        fig.update_yaxes(title=_text(spec["y"]), type="category", autorange="reversed")
    else:
        return None
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    fig.update_layout(height=height, margin={"l": 60, "r": 20, "t": 30, "b": 60}, template="plotly_white")
    return fig


def table_html(cols: list[str], rows: list[tuple], limit: int = 200) -> str:
    def cell(v):
        v = _num(v)
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, dt.datetime):
            return f"{v:%Y-%m-%d %H:%M}"
        return html.escape("" if v is None else str(v))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows[:limit])
    more = f"<p class='note'>{len(rows) - limit} more rows not shown.</p>" if len(rows) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


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


def foms_html(conn, campaigns: tuple[int, ...]) -> str:
    """Every FOM of the newest run of each application and experiment (v_foms), with its context and unit:
    the one place the report shows an application that has none of commscope's own fields (a Ramble builtin
    application, a ReFrame test), for the selected campaigns' runs, or all of them."""
    where, args = ("campaign_id = ANY(%s)", [list(campaigns)]) if campaigns else ("TRUE", [])
    cur = conn.execute(
        "WITH newest AS (SELECT DISTINCT ON (app, workload, coalesce(experiment, '')) run_id FROM v_runs "
        f"WHERE {where} ORDER BY app, workload, coalesce(experiment, ''), started_at DESC, run_id DESC) "
        "SELECT f.app, f.workload, f.experiment, f.system, f.ranks, f.time, f.context, f.name, f.value, f.unit "
        "FROM v_foms f JOIN newest n ON n.run_id = f.run_id "
        "ORDER BY f.app, f.workload, f.experiment, f.repeat, f.context NULLS FIRST, f.name", args)
    cols = [c.name for c in cur.description]
    rows = cur.fetchall()
    head = ("<h2>Figures of merit</h2><p class='note'>The FOMs of the newest run of each application and experiment "
            "(v_foms), as the application, Ramble or ReFrame reported them, per context (e.g. message size).</p>")
    if not rows:
        return head + "<p class='note'>No FOMs stored for this selection.</p>"
    return head + "<div class='panel foms'>" + table_html(cols, rows, limit=1000) + "</div>"


# ---- the findings: what a reader acts on, each a sentence with its numbers -----------------------------------

FINDINGS_PER_KIND = 5


def _pct(v) -> str:
    return f"{float(v) * 100:.1f}%"


def _experiment(parameters: dict) -> str:
    """An experiment's parameters as a short line: ranks and the workload's own parameters."""
    params = " ".join(f"{k.removeprefix('param.')}={v}" for k, v in sorted(parameters.items())
                      if k.startswith("param.") or k == "ranks")
    return params or "(no parameters)"


def mpi_findings(conn, t0, t1, values) -> list[str]:
    """The series spending the largest share of time in MPI (v_run_metrics_daily, each on the window the
    dashboards show), with POP's efficiencies."""
    q = f"""SELECT series_label, "window", sum(runs) AS runs, {P._mean("mpi_fraction_avg")},
  {P._mean("parallel_efficiency")}, {P._mean("load_balance")}, {P._mean("communication_efficiency")}
FROM v_run_metrics_daily WHERE {P.SHOWN}
GROUP BY 1, 2 HAVING sum(mpi_fraction_avg_n) > 0
ORDER BY 4 DESC, 1 LIMIT {FINDINGS_PER_KIND}"""
    out = []
    for label, window, runs, mpi, pe, lb, ce in conn.execute(P.expand(q, t0, t1, values)):
        pop = (f"POP parallel efficiency {float(pe):.2f} = load balance {float(lb):.2f} × communication efficiency "
               f"{float(ce):.2f}" if pe is not None else "POP efficiencies not measured (no per-rank times)")
        out.append(f"{label} [{window}]: {_pct(mpi)} of its time in MPI (mean over ranks, {runs} "
                   f"run{'s' if runs != 1 else ''}); {pop}.")
    return out


def stack_findings(conn, where: str, args: list) -> list[str]:
    """For each experiment run on two or more stacks (same application, parameters and environment but the
    stack; v_run_compared, each run on its focus window else its whole run): the fastest stack, its margin over
    the next one, and the spread of its own runs."""
    q = f"""WITH t AS (
  SELECT c.app, c.parameters, environment_but_stack(c.environment) AS env, c."window", c.environment->>'stack' AS stack,
         avg(c.time_s) AS time_s, min(c.time_s) AS time_min, max(c.time_s) AS time_max, count(*) AS runs
  FROM v_run_compared c JOIN v_runs v ON v.run_id = c.run_id
  WHERE c.time_s > 0 AND {where}
  GROUP BY 1, 2, 3, 4, 5
), r AS (
  SELECT *, row_number() OVER (w ORDER BY time_s, stack) AS place, count(*) OVER w AS stacks
  FROM t WINDOW w AS (PARTITION BY app, parameters, env, "window")
)
SELECT a.app, a.parameters, a.env->>'system', a.env->>'interconnect', a."window", a.stack, a.time_s, a.time_min,
       a.time_max, a.runs, b.stack, b.time_s, b.runs, a.stacks
FROM r a JOIN r b USING (app, parameters, env, "window")
WHERE a.place = 1 AND b.place = 2
ORDER BY b.time_s / a.time_s DESC, 1
LIMIT {FINDINGS_PER_KIND}"""
    out = []
    for app, params, system, ic, window, best, t, tmin, tmax, n, second, t2, n2, stacks in conn.execute(q, args):
        spread = (f"spread {_pct((tmax - tmin) / t)} over its {n} runs" if n > 1
                  else "1 run, so no spread measured")
        out.append(f"{app} {_experiment(params)} on {system or 'unknown system'} ({ic}) [{window}]: {best} is "
                   f"fastest of {stacks} stacks, {_pct(t2 / t - 1)} ahead of {second} ({t:.4g} s against "
                   f"{t2:.4g} s; {spread}).")
    return out


def regression_findings(conn, t0, t1, values) -> list[str]:
    """What the gate recorded (commscope check --annotate writes v_annotations) and the change points
    (commscope changepoints, v_change_points) in the selection, newest first. Read from the views, so the
    report never writes."""
    ann = f"""SELECT "time", coalesce(system, 'all') || ' ' || coalesce(app, 'all') || ' ' || coalesce(stack, 'all')
  || coalesce(' n' || ranks, ''), text
FROM v_annotations
WHERE $__timeFilter("time") AND (system IS NULL OR system IN ($system)) AND (app IS NULL OR app IN ($app))
  AND (stack IS NULL OR stack IN ($stack)) AND (ranks IS NULL OR ranks IN ($ranks))
  AND (text LIKE 'regression%' OR text LIKE 'improvement%')
ORDER BY "time" DESC LIMIT {FINDINGS_PER_KIND}"""
    out = [f"Gate, {t:%Y-%m-%d %H:%M} UTC, {what}: {text}." for t, what, text in conn.execute(P.expand(ann, t0, t1, values))]
    cp = f"""SELECT "time", series_label, "window", metric, direction, mean_before, mean_after, change, n_before, n_after,
  p_value, campaign_id, run_id
FROM v_change_points WHERE $__timeFilter("time") AND {P.SERIES}
ORDER BY "time" DESC LIMIT {FINDINGS_PER_KIND}"""
    for t, label, window, metric, direction, before, after, change, nb, na, p, campaign, run in conn.execute(
            P.expand(cp, t0, t1, values)):
        moved = f" ({float(change) * 100:+.1f}%)" if change is not None else ""
        out.append(f"Change point ({direction}), {t:%Y-%m-%d %H:%M} UTC, {label} [{window}]: {metric} went from "
                   f"{float(before):.4g} (mean of {nb} runs) to {float(after):.4g} (mean of {na}){moved}, "
                   f"p={float(p):.2g}, at run {run} of campaign {campaign}.")
    return out


def advice_findings(conn, campaigns: tuple[int, ...]) -> list[str]:
    """The newest suggestion of each advisor (v_advice): its first sentence."""
    where, args = ("run_id IN (SELECT run_id FROM v_runs WHERE campaign_id = ANY(%s))", [list(campaigns)]) \
        if campaigns else ("TRUE", [])
    rows = conn.execute(f"SELECT DISTINCT ON (kind) kind, source, text FROM v_advice WHERE {where} "
                        "ORDER BY kind, created_at DESC, id DESC", args).fetchall()
    out = []
    for kind, source, text in rows[:FINDINGS_PER_KIND]:
        first = text.split(". ")[0].rstrip(".")
        out.append(f"Advice ({kind}, {source}): {first}.")
    return out


def findings_html(conn, campaigns, values, t0, t1, where: str, args: list) -> str:
    """The report's first section: a few sentences with numbers, the detail below."""
    parts = [("MPI time and POP efficiencies, the series with the largest MPI share", mpi_findings(conn, t0, t1, values),
              "No series in the selection measured MPI time (Caliper with profile.mpi: --caliper mpi)."),
             ("Fastest stack per experiment, the largest margins", stack_findings(conn, where, args),
              "No experiment in the selection ran on two or more stacks with everything else equal."),
             ("Regressions and change points", regression_findings(conn, t0, t1, values),
              "No regression or change point recorded in the selection (commscope check --annotate records "
              "the gate's findings, commscope changepoints the change points)."),
             ("Advisors' suggestions", advice_findings(conn, campaigns),
              "No advice stored for this selection (run commscope advise).")]
    html_parts = ["<section id='findings'><h2>Findings</h2>"]
    for title, lines, none in parts:
        html_parts.append(f"<h3>{html.escape(title)}</h3>")
        if lines:
            html_parts.append("<ul>" + "".join(f"<li class='finding'>{html.escape(x)}</li>" for x in lines) + "</ul>")
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
                why = P.WHY_EMPTY.get(board.uid, "")
                parts.append(f"<p class='note empty'>No data for this selection. {html.escape(why)}</p></div>")
                continue
            fig = figure(panel, cols, rows)
            if fig is None:
                parts.append(table_html(cols, rows))
            else:
                n += 1
                series = panel.plot.get("series")
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


@click.command("report")
@click.option("--campaign", "campaigns", type=int, multiple=True, help="only this campaign's series and time span (repeatable)")
@click.option("--compare", "compare", multiple=True, metavar="SYSTEM",
              help="compare these systems (repeat, or give several); the first is the reference")
@click.argument("more_systems", nargs=-1, metavar="[SYSTEM]...")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="the HTML file to write")
def report_cmd(campaigns, compare, more_systems, output):
    """Render the dashboards' panels into one self-contained HTML page."""
    if more_systems and not compare:
        raise click.UsageError(f"unexpected arguments {' '.join(more_systems)} (systems follow --compare)")
    try:
        with db.connect() as conn:
            page = render(conn, tuple(campaigns), tuple(compare) + tuple(more_systems))
    except db.DBError as e:
        raise click.ClickException(str(e)) from None
    tmp = output.with_name(output.name + ".part")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(output)   # no half-written report
    click.echo(f"wrote {output} ({len(page) // 1024} KiB)")
