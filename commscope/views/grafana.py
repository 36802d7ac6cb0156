"""Grafana dashboards as code: the panels of panels.py built with
grafana-foundation-sdk (the Grafana 11.6 flavour), checked, and deployed.

    commscope dashboards build  [--out dashboards/json]
    commscope dashboards lint   [--dir dashboards/json] [--provisioning dashboards/provisioning]
    commscope dashboards deploy --url URL     (token in GRAFANA_TOKEN, or GRAFANA_USER/GRAFANA_PASSWORD)

The SDK has no PostgreSQL query builder, so SQLQuery below is the Dataquery
Grafana's PostgreSQL datasource stores: rawSql, format, datasource.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from commscope.views import panels as P

DATASOURCE_UID = "commscope-postgres"
DATASOURCE_TYPE = "grafana-postgresql-datasource"
DATASOURCE = {"type": DATASOURCE_TYPE, "uid": DATASOURCE_UID}


class DashboardError(Exception):
    """A dashboard file, the provisioning or Grafana refused what was asked: one line saying which."""


class BadURL(DashboardError):
    """--url is not an http(s) URL."""


def sdk():
    try:
        from grafana_foundation_sdk.builders import (barchart, dashboard, heatmap, table,  # noqa: F401
                                                     timeseries, xychart)
        from grafana_foundation_sdk.cog import builder, variants  # noqa: F401
        from grafana_foundation_sdk.models import dashboard as models  # noqa: F401
    except ImportError:
        raise DashboardError('grafana-foundation-sdk is not installed: pip install "commscope[dashboards]"') from None
    import grafana_foundation_sdk
    return grafana_foundation_sdk


def _query_classes():
    from grafana_foundation_sdk.cog import builder, variants

    class SQLQuery(variants.Dataquery):
        """What Grafana's PostgreSQL datasource keeps for a code-mode query."""

        def __init__(self, ref_id: str, sql: str, fmt: str):
            self.ref_id, self.sql, self.fmt = ref_id, sql, fmt

        def to_json(self) -> dict:
            return {"refId": self.ref_id, "datasource": dict(DATASOURCE), "editorMode": "code",
                    "format": self.fmt, "rawQuery": True, "rawSql": self.sql}

    class SharedQuery(variants.Dataquery):
        """What Grafana keeps for a panel that shows another panel's query results (the Dashboard datasource)."""

        def __init__(self, ref_id: str, panel_id: int):
            self.ref_id, self.panel_id = ref_id, panel_id

        def to_json(self) -> dict:
            return {"refId": self.ref_id, "datasource": dict(SHARED_DATASOURCE), "panelId": self.panel_id}

    class QueryBuilder(builder.Builder[variants.Dataquery]):
        def __init__(self, q):
            self._q = q

        def build(self):
            return self._q

    return (lambda ref_id, sql, fmt: QueryBuilder(SQLQuery(ref_id, sql, fmt)),
            lambda ref_id, panel_id: QueryBuilder(SharedQuery(ref_id, panel_id)))


# Grafana's built-in datasource that hands a panel the results of another panel's queries
# (Grafana's docs: "Share query results with another panel").
SHARED_DATASOURCE = {"type": "datasource", "uid": "-- Dashboard --"}


def long_transformations(p: P.Panel) -> list[dict]:
    """A long panel's steps from the shared rows to its series: drop the rows where its first measure is NULL
    (not measured: no point, as a query of its own would have no row), keep its columns, then one series per
    metric. With one measure, Grouping to matrix (@grafana/data) makes one frame of time and a column per metric (no
    value where a metric has none at that time; the lines span those); with several, Prepare time series
    (multi-frame), which only Grafana's application has."""
    split = ({"id": "groupingToMatrix", "options": {"columnField": "metric", "rowField": "time",
                                                     "valueField": p.measures[0], "emptyValue": "null"}}
             if len(p.measures) == 1 else {"id": "prepareTimeSeries", "options": {"format": "multi"}})
    return [{"id": "filterByValue", "options": {"type": "exclude", "match": "any", "filters": [
                {"fieldName": p.measures[0], "config": {"id": "isNull", "options": {}}}]}},
            {"id": "filterFieldsByName", "options": {"include": {"names": list(p.columns)}}},
            split]


def xy_transformations(p: P.Panel) -> list[dict]:
    """An xy chart's rows (series, x, y) as one frame: x, then one column per series (Grouping to matrix, no value
    where a series has no point at that x), in ascending x. The xy chart takes the first number field as x and
    every other as a series."""
    x = p.plot["x"]
    return [{"id": "groupingToMatrix", "options": {"columnField": p.plot["series"], "rowField": x,
                                                   "valueField": p.plot["y"], "emptyValue": "null"}},
            {"id": "sortBy", "options": {"sort": [{"field": f"{x}\\{p.plot['series']}", "desc": False}]}}]


def _flamegraph_panel():
    """Grafana's flame graph panel, which the SDK has no builder for: a panel of type flamegraph without options."""
    from grafana_foundation_sdk.builders import text
    b = text.Panel()
    b._internal.type_val = "flamegraph"
    return b


def _panel(p: P.Panel, panel_id: int, queries, source_id: int | None):
    from grafana_foundation_sdk.builders import barchart, heatmap, table, timeseries, xychart
    from grafana_foundation_sdk.builders import common as common_builders
    from grafana_foundation_sdk.models import common
    from grafana_foundation_sdk.models import dashboard as m
    sql_query, shared_query = queries
    kind = {"timeseries": timeseries, "barchart": barchart, "table": table, "xychart": xychart,
            "heatmap": heatmap}.get(p.type)
    b = (kind.Panel() if kind else _flamegraph_panel()).id(panel_id).title(p.title).description(p.description)
    if source_id is None:
        b = (b.datasource(m.DataSourceRef(type_val=DATASOURCE_TYPE, uid=DATASOURCE_UID))
             .with_target(sql_query("A", p.sql, p.format)))
    else:
        b = (b.datasource(m.DataSourceRef(type_val=SHARED_DATASOURCE["type"], uid=SHARED_DATASOURCE["uid"]))
             .with_target(shared_query("A", source_id)))
    b = b.span(24).height(14) if p.type == "flamegraph" else b.span(12).height(9)
    if p.unit:
        b = b.unit(p.unit)
    if p.type == "timeseries":
        b = b.interval("1d")   # nightly data: no finer buckets than a day
    for t in long_transformations(p) if p.long else []:
        b = b.with_transformation(m.DataTransformerConfig(id_val=t["id"], options=t["options"]))
    if p.long and len(p.measures) == 1:
        b = b.span_nulls(True)   # a metric's days without runs are gaps in the matrix, not breaks in its line
    if p.type == "barchart":
        # The x field by name (else Grafana takes the first string or time field); the options this adds would hide
        # the legend, which names the bars' measures.
        b = (b.x_field(p.plot["x"])
             .legend(common_builders.VizLegendOptions().show_legend(True).display_mode(common.LegendDisplayMode.LIST)
                     .placement(common.LegendPlacement.BOTTOM)))
    if p.type == "barchart" and p.plot.get("stacked"):
        b = b.stacking(common.StackingMode.NORMAL)
    for t in xy_transformations(p) if p.type == "xychart" else []:
        b = b.with_transformation(m.DataTransformerConfig(id_val=t["id"], options=t["options"]))
    if p.type == "heatmap":
        b = b.calculate(False).with_transformation(m.DataTransformerConfig(
            id_val="groupingToMatrix", options={"columnField": p.plot["x"], "rowField": p.plot["y"],
                                                "valueField": p.plot["z"]}))
    return b


def build_dashboard(d: P.Dashboard) -> dict:
    """One dashboard as the JSON Grafana stores."""
    sdk()
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import dashboard as m
    queries = _query_classes()
    ds = m.DataSourceRef(type_val=DATASOURCE_TYPE, uid=DATASOURCE_UID)
    b = (db.Dashboard(d.title).uid(d.uid).description(d.description).tags(["commscope"]).timezone("utc")
         .time(d.time_from, "now").refresh("").readonly())
    for name, label, col in P.VARIABLES:
        b = b.with_variable(db.QueryVariable(name).label(label).datasource(ds).query(P.variable_query(col))
                            .multi(True).include_all(True).refresh(m.VariableRefresh.ON_DASHBOARD_LOAD)
                            .sort(m.VariableSort.ALPHABETICAL_ASC))
    for v in d.extra_variables:
        # Single-valued, offered in the query's order (its first option is the default), no value typed in; their
        # options depend on the time range.
        b = b.with_variable(db.QueryVariable(v["name"]).label(v["label"]).datasource(ds).query(v["query"])
                            .refresh(m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(m.VariableSort.DISABLED)
                            .allow_custom_value(False))
    if d.annotations:
        b = b.annotation(db.AnnotationQuery().name("Regressions").datasource(ds).enable(True).icon_color("red")
                         .target(db.AnnotationTarget().limit(100).match_any(False).tags([]).type("tags")))
        b = b.annotation(db.AnnotationQuery().name("Change points").datasource(ds).enable(True).icon_color("orange")
                         .target(db.AnnotationTarget().limit(100).match_any(False).tags([]).type("tags")))
        b = b.annotation(db.AnnotationQuery().name("Version changes").datasource(ds).enable(True).icon_color("blue")
                         .target(db.AnnotationTarget().limit(100).match_any(False).tags([]).type("tags")))
    ids = {p.title: i for i, p in enumerate(d.panels, 1)}
    for i, p in enumerate(d.panels, 1):
        b = b.with_panel(_panel(p, i, queries, ids[p.reuses] if p.reuses else None))
    out = json.loads(json.dumps(b.build(), cls=JSONEncoder))
    for v in out.get("templating", {}).get("list", []):
        # The SDK gives every variable the interval variable's defaults; they mean
        # nothing to a query variable and @grafana/schema 11.6 has no such fields.
        for k in ("auto", "auto_min", "auto_count"):
            v.pop(k, None)
    for a in out.get("annotations", {}).get("list", []):
        raw = {"Regressions": P.ANNOTATIONS_SQL, "Change points": P.CHANGE_POINTS_ANNOTATION_SQL,
               "Version changes": P.VERSION_CHANGES_ANNOTATION_SQL}.get(a.get("name"))
        if raw:
            # A SQL annotation's target is the datasource's own query, as Grafana stores it.
            a["target"].update({"refId": "Anno", "editorMode": "code", "format": "table", "rawQuery": True,
                                "rawSql": raw})
    return out


def build_all() -> dict[str, dict]:
    """uid -> dashboard JSON for every dashboard in panels.DASHBOARDS."""
    return {d.uid: build_dashboard(d) for d in P.DASHBOARDS}


def dump(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_all(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for uid, doc in build_all().items():
        f = out / f"{uid}.json"
        f.write_text(dump(doc))
        written.append(f)
    return written


# ---- lint ------------------------------------------------------------------------------

def _refs(node, path="$"):
    """Every datasource reference in a dashboard, with where it is."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "datasource":
                yield f"{path}.datasource", v
            yield from _refs(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _refs(v, f"{path}[{i}]")


def provisioned_uid(provisioning: Path) -> str:
    """The uid of the PostgreSQL datasource the provisioning file declares."""
    import yaml
    f = provisioning / "datasources" / "commscope.yaml"
    doc = yaml.safe_load(f.read_text())
    pg = [d for d in doc.get("datasources", []) if d.get("type") == DATASOURCE_TYPE]
    if len(pg) != 1:
        raise DashboardError(f"{f}: expected one {DATASOURCE_TYPE} datasource, found {len(pg)}")
    return pg[0]["uid"]


def lint(docs: dict[str, dict], ds_uid: str) -> list[str]:
    """What is wrong with a set of dashboards; empty when nothing is."""
    problems = []
    seen_uids: dict[str, str] = {}
    for name, d in docs.items():
        uid = d.get("uid")
        if not uid:
            problems.append(f"{name}: no uid")
        elif uid in seen_uids:
            problems.append(f"{name}: uid {uid} is also {seen_uids[uid]}'s")
        else:
            seen_uids[uid] = name
        ids = [p.get("id") for p in d.get("panels", [])]
        if len(ids) != len(set(ids)):
            problems.append(f"{name}: duplicate panel ids {ids}")
        by_id = {p.get("id"): p for p in d.get("panels", [])}
        for where, ref in _refs(d):
            if ref == SHARED_DATASOURCE and where.startswith("$.panels["):
                continue   # a panel showing another's results: its targets are checked below
            if not isinstance(ref, dict) or ref.get("uid") != ds_uid or ref.get("type") != DATASOURCE_TYPE:
                problems.append(f"{name}: {where} is {ref!r}, not the provisioned datasource {ds_uid}")
        names = {v.get("name") for v in d.get("templating", {}).get("list", [])}
        for var, _, _ in P.VARIABLES:
            if var not in names:
                problems.append(f"{name}: no template variable {var}")
        for p in d.get("panels", []):
            title = p.get("title")
            # A time series from long rows (a table) needs Prepare time series or Grouping to matrix (metric by
            # time) to make its series.
            long = any(t.get("id") == "prepareTimeSeries" or (t.get("id") == "groupingToMatrix" and t.get(
                "options", {}).get("rowField") == "time") for t in p.get("transformations", []))
            want = "time_series" if p.get("type") == "timeseries" and not long else "table"
            for t in p.get("targets", []):
                if "panelId" in t:
                    source = by_id.get(t["panelId"], {})
                    if t.get("datasource") != SHARED_DATASOURCE or p.get("datasource") != SHARED_DATASOURCE:
                        problems.append(f"{name}: panel {title!r} shows panel {t['panelId']}'s results but its "
                                        f"datasource is not {SHARED_DATASOURCE}")
                    if not any(st.get("rawSql", "").strip() for st in source.get("targets", [])):
                        problems.append(f"{name}: panel {title!r} shows panel {t['panelId']}'s results, which "
                                        f"is no panel with a query of this dashboard")
                    continue
                if t.get("format") != want:
                    problems.append(f"{name}: panel {title!r} is a {p.get('type')} with a "
                                    f"{t.get('format')!r} query (needs {want!r})")
                sql = t.get("rawSql", "")
                if p.get("type") == "timeseries" and not re.search(r'\$__timeGroupAlias\(|AS "time"', sql):
                    problems.append(f"{name}: panel {title!r}: a time series query needs a time column")
                if not sql.strip():
                    problems.append(f"{name}: panel {title!r} has no SQL")
    return problems


def read_dir(d: Path) -> dict[str, dict]:
    docs = {}
    for f in sorted(d.glob("*.json")):
        try:
            docs[f.name] = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            raise DashboardError(f"{f}: not JSON ({e})") from None
    if not docs:
        raise DashboardError(f"{d}: no dashboard JSON files")
    return docs


# ---- deploy -----------------------------------------------------------------------------

def deploy(docs: dict[str, dict], url: str, token: str | None, user: str | None, password: str | None,
           folder_uid: str | None = None) -> list[str]:
    """Upload every dashboard through Grafana's HTTP API (overwriting same uids)."""
    try:
        from grafana_client import GrafanaApi
    except ImportError:
        raise DashboardError('grafana-client is not installed: pip install "commscope[dashboards]"') from None
    import niquests   # grafana-client's HTTP library
    if not re.match(r"^https?://", url):
        raise BadURL(f"{url!r} is not an http(s) URL")
    credential = token or ((user, password) if user and password else None)
    if credential is None:
        raise DashboardError("no Grafana credentials: set GRAFANA_TOKEN (a service account token), "
                                   "or GRAFANA_USER and GRAFANA_PASSWORD")
    api = GrafanaApi.from_url(url, credential=credential, timeout=10)
    done = []
    for name, d in docs.items():
        body = {"dashboard": {**d, "id": None}, "overwrite": True, "message": "commscope dashboards deploy"}
        if folder_uid:
            body["folderUid"] = folder_uid
        try:
            api.dashboard.update_dashboard(body)
        except niquests.exceptions.ConnectionError as e:
            raise DashboardError(f"cannot reach Grafana at {url}: {str(e).splitlines()[0][:300]}") from None
        except Exception as e:  # grafana_client raises its own classes per HTTP status
            raise DashboardError(f"Grafana at {url} refused {name}: {e}") from None
        done.append(d.get("uid", name))
    return done
