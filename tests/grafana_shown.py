"""What a Grafana panel shows of its query's rows, read from the committed dashboard JSON (dashboards/json).

Grafana cannot run here. A panel that shows another panel's results (the Dashboard datasource: a target with a
panelId) gets that panel's SQL; then the row and field filters its JSON names are applied as Grafana's
transformations apply them: filterByValue (isNull, include or exclude) and filterFieldsByName (names).
prepareTimeSeries and groupingToMatrix (metric by time) only split the rows into one series per metric, which the
tests do by grouping. Any other transformation fails here, so a dashboard that grows one is not read wrongly by the
tests. tests/test_grafana_data.py runs them all through Grafana's own @grafana/data.
"""
from __future__ import annotations

import json
from pathlib import Path

from commscope.views import panels as P

JSON_DIR = Path(__file__).resolve().parent.parent / "dashboards" / "json"


def panel_json(uid: str, title: str) -> tuple[dict, dict]:
    """(the panel, the panel whose query it runs) in the committed JSON of dashboard UID."""
    doc = json.loads((JSON_DIR / f"{uid}.json").read_text())
    panel = next(p for p in doc["panels"] if p["title"] == title)
    target = panel["targets"][0]
    source = next(p for p in doc["panels"] if p["id"] == target["panelId"]) if "panelId" in target else panel
    return panel, source


def shown_rows(conn, uid: str, title: str, t0, t1, values) -> list[dict]:
    """The rows panel TITLE of dashboard UID shows, each a dict of the fields it keeps."""
    panel, source = panel_json(uid, title)
    cur = conn.execute(P.expand(source["targets"][0]["rawSql"], t0, t1, values))
    cols = [c.name for c in cur.description]
    rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    for t in panel.get("transformations", []):
        o = t["options"]
        if t["id"] == "filterByValue":
            assert all(f["config"]["id"] == "isNull" for f in o["filters"]), t
            hit = (all if o["match"] == "all" else any)
            matched = [hit(r[f["fieldName"]] is None for f in o["filters"]) for r in rows]
            rows = [r for r, m in zip(rows, matched) if m == (o["type"] == "include")]
        elif t["id"] == "filterFieldsByName":
            names = o["include"]["names"]
            rows = [{k: r[k] for k in names} for r in rows]
        elif t["id"] == "groupingToMatrix":
            assert (o["rowField"], o["columnField"]) == ("time", "metric"), t
        elif t["id"] != "prepareTimeSeries":
            raise AssertionError(f"{uid} / {title}: transformation {t['id']} is not modelled here")
    return rows
