"""A panel's rows as a plotly figure for the static report (report.py): lines with one legend entry per series
(the TOP_SERIES largest, the rest under one entry), bars that lie down when their categories are long or many, and
heatmaps. Every name from the store or a panel shows as text, never as HTML."""
from __future__ import annotations

import datetime as dt
import html
from decimal import Decimal

from commscope.views import panels as P

# Grafana unit ids, as an axis title says them.
UNIT_LABELS = {"percentunit": "fraction", "MBs": "MB/s", "s": "seconds", "bytes": "bytes", "x": "speedup"}


def plot_value(v):
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
    vals = [float(plot_value(r[i])) for r in rs if r[i] is not None]
    return sum(vals) / len(vals) if vals else float("-inf")


def _text(v) -> str:
    """A name as plotly shows it: plotly renders HTML tags (<a href>, <b>) in trace names, legends, hover text,
    tick labels and titles, so every name from the store or a panel is HTML-escaped and shows as text."""
    return html.escape(str(v), quote=False)


def figure(panel: P.Panel, cols: list[str], rows: list[tuple], names: dict | None = None):
    """The plotly figure of one panel, or None for a table. Lines: one colour and one legend entry per series, the
    TOP_SERIES with the highest mean of the first metric named, the rest grouped under one entry; several metrics
    of a series share its colour, one dash style each; NAMES gives a series' legend name and hover text (by default
    its label). Bars with long or many categories lie horizontally, their labels on an axis that makes room for
    them."""
    import plotly.graph_objects as go
    spec = panel.plot
    kind = spec.get("kind")
    idx = {c: i for i, c in enumerate(cols)}
    fig = go.Figure()
    ys = spec["y"] if isinstance(spec.get("y"), list) else [spec.get("y")]
    height = 380
    if kind in ("line", "xy"):
        height = _lines(fig, panel, kind, idx, ys, rows, names)
    elif kind == "bar":
        height = _bars(fig, panel, idx, ys, rows)
    elif kind == "heatmap":
        xs = sorted({r[idx[spec["x"]]] for r in rows})
        yv = sorted({r[idx[spec["y"]]] for r in rows})
        z = [[None] * len(xs) for _ in yv]
        for r in rows:
            z[yv.index(r[idx[spec["y"]]])][xs.index(r[idx[spec["x"]]])] = plot_value(r[idx[spec["z"]]])
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


def _lines(fig, panel: P.Panel, kind: str, idx: dict, ys: list, rows: list[tuple], names: dict | None) -> int:
    """figure's lines (kind line or xy) drawn into FIG, the legend below them; returns the figure's height."""
    import plotly.graph_objects as go
    spec = panel.plot
    xconv = _time if kind == "line" else plot_value
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
            short, hover = (names or {}).get(key, (key, key))
            name = str(short if key is not None else y) if shown else f"{len(rest)} other series"
            fig.add_trace(go.Scatter(
                x=[xconv(r[idx[spec["x"]]]) for r in rs], y=[plot_value(r[idx[y]]) for r in rs], mode="lines+markers",
                name=_text(name), legendgroup=group, showlegend=first, visible=True if shown else "legendonly",
                hovertext=_text(f"{hover} {y}" if len(ys) > 1 else str(hover)), hoverinfo="x+y+text",
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
    return height


def _bars(fig, panel: P.Panel, idx: dict, ys: list, rows: list[tuple]) -> int:
    """figure's bars drawn into FIG, lying horizontally when the categories are long or many; returns the
    figure's height."""
    import plotly.graph_objects as go
    spec = panel.plot
    height = 380
    cats = [_text(r[idx[spec["x"]]]) for r in rows]
    horizontal = len(cats) > 12 or max(map(len, cats)) > 14
    for j, y in enumerate(ys):
        vals = [plot_value(r[idx[y]]) for r in rows]
        fig.add_trace(go.Bar(x=vals if horizontal else cats, y=cats if horizontal else vals, name=_text(y),
                             orientation="h" if horizontal else "v", marker={"color": COLORS[j % len(COLORS)]}))
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
    return height
