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
"""
from __future__ import annotations

import datetime as dt
import html
from decimal import Decimal
from pathlib import Path

import click

from . import db
from . import panels as P


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
    ref_stack = conn.execute("SELECT stack FROM v_runs WHERE system = %s GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1",
                             (ref_system,)).fetchone()[0]
    values.update(reference_system=ref_system, reference_stack=ref_stack)
    # The panels query an hour either side (a run's day and time buckets); the header says the runs' own span.
    said.append(f"runs from {row[0]:%Y-%m-%d %H:%M:%S} to {row[1]:%Y-%m-%d %H:%M:%S} UTC; "
                f"procurement reference {ref_system} / {ref_stack}")
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


def figure(panel: P.Panel, cols: list[str], rows: list[tuple]):
    """The plotly figure of one panel, or None for a table."""
    import plotly.graph_objects as go
    spec = panel.plot
    kind = spec.get("kind")
    idx = {c: i for i, c in enumerate(cols)}
    fig = go.Figure()
    ys = spec["y"] if isinstance(spec.get("y"), list) else [spec.get("y")]
    if kind in ("line", "xy"):
        xconv = _time if kind == "line" else _num
        groups: dict = {}
        for r in rows:
            key = r[idx[spec["series"]]] if spec.get("series") else None
            groups.setdefault(key, []).append(r)
        for key, rs in groups.items():
            for y in ys:
                name = key if key is not None else y
                if key is not None and len(ys) > 1:
                    name = f"{key} {y}"
                fig.add_trace(go.Scatter(x=[xconv(r[idx[spec["x"]]]) for r in rs], y=[_num(r[idx[y]]) for r in rs],
                                         mode="lines+markers", name=str(name)))
        fig.update_xaxes(title=spec["x"], type="log" if spec.get("log_x") else None)
        fig.update_yaxes(title=", ".join(ys), type="log" if spec.get("log_y") else None)
        days = {xconv(r[idx[spec["x"]]]) for r in rows} if kind == "line" else set()
        if len(days) == 1:
            # One night only (the panels plot whole days): plotly would zoom its axis to a millisecond around
            # it; show the day before and after instead.
            (day,) = days
            fig.update_xaxes(range=[day - dt.timedelta(days=1), day + dt.timedelta(days=1)])
    elif kind == "bar":
        for y in ys:
            fig.add_trace(go.Bar(x=[str(r[idx[spec["x"]]]) for r in rows], y=[_num(r[idx[y]]) for r in rows], name=y))
        fig.update_layout(barmode="stack" if spec.get("stacked") else "group")
        fig.update_yaxes(title=UNIT_LABELS.get(panel.unit, panel.unit) or None)
    elif kind == "heatmap":
        xs = sorted({r[idx[spec["x"]]] for r in rows})
        yv = sorted({r[idx[spec["y"]]] for r in rows})
        z = [[None] * len(xs) for _ in yv]
        for r in rows:
            z[yv.index(r[idx[spec["y"]]])][xs.index(r[idx[spec["x"]]])] = _num(r[idx[spec["z"]]])
        fig.add_trace(go.Heatmap(x=xs, y=yv, z=z, colorscale="Oranges", colorbar={"title": spec["z"]}))
        fig.update_xaxes(title=spec["x"], type="category")
        fig.update_yaxes(title=spec["y"], type="category", autorange="reversed")
    else:
        return None
    fig.update_layout(height=380, margin={"l": 60, "r": 20, "t": 30, "b": 60}, template="plotly_white",
                      legend={"font": {"size": 10}})
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
    parts, n = [], 0
    for board in P.DASHBOARDS:
        parts.append(f"<h2>{html.escape(board.title)}</h2><p class='note'>{html.escape(board.description)}</p>")
        for panel in board.panels:
            cur = conn.execute(P.expand(panel.sql, t0, t1, values))
            cols = [c.name for c in cur.description]
            rows = cur.fetchall()
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
