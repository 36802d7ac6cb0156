"""A panel drawn through Grafana's own code: npm @grafana/data (pinned in dashboards/check/package-lock.json,
installed by ci/setup.sh), by dashboards/check/transform.js. A panel's query is expanded as Grafana expands it on
first load, its rows typed as Grafana's PostgreSQL datasource types its frames, and passed through the panel's
transformations; the checks say what a panel type needs of the result (tests/test_grafana_data.py runs every panel,
other tests one each)."""
from __future__ import annotations

import collections
import datetime as dt
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from commscope.views import panels as P

ROOT = Path(__file__).resolve().parent.parent
JSON_DIR = ROOT / "dashboards" / "json"
CHECK = ROOT / "dashboards" / "check"

# PostgreSQL types as Grafana's PostgreSQL datasource types its frame fields (its row converters).
NUMBER = {"int2", "int4", "int8", "float4", "float8", "numeric", "oid"}
TIME = {"timestamptz", "timestamp", "date"}
STRING = {"text", "varchar", "bpchar", "name", "uuid", "json", "jsonb"}

# A transformation that exists only in Grafana's application code: transform.js runs it as Grafana's
# documentation describes it (dashboards/README.md).
DOCUMENTED_ONLY = {"prepareTimeSeries"}


def node_or_skip() -> None:
    if not shutil.which("node"):
        pytest.skip("node is not installed (Node.js 20 is needed to run Grafana's @grafana/data)")
    if not (CHECK / "node_modules" / "@grafana" / "data").is_dir():
        if not shutil.which("npm"):
            pytest.skip("npm is not installed, so @grafana/data cannot be installed (bash dashboards/check/install.sh)")
        pytest.fail("@grafana/data is not installed: run bash dashboards/check/install.sh (ci/setup.sh does)")


def grafana_transform(cases: list[dict]) -> dict[str, dict]:
    """key -> what @grafana/data made of each case's frames (transform.js)."""
    r = subprocess.run(["node", str(CHECK / "transform.js")], input=json.dumps(cases), capture_output=True,
                       text=True, cwd=CHECK, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return {x["key"]: x for x in json.loads(r.stdout)}


def time_range(conn) -> tuple[dt.datetime, dt.datetime]:
    """A range holding every run (the fixtures are older than the dashboards' default ranges)."""
    lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM v_runs").fetchone()
    return lo - dt.timedelta(days=1), hi + dt.timedelta(days=1)


def default_variables(conn, doc: dict, t0, t1) -> dict:
    """The variables as Grafana sets them on first load of DOC (no saved current values): "include All" ones to
    All (every option), the others to their first option, each query run after the variables it names."""
    values: dict = {}
    multi = {v["name"] for v in doc["templating"]["list"] if v.get("multi") or v.get("includeAll")}
    for v in doc["templating"]["list"]:
        options = [str(r[0]) for r in conn.execute(P.expand(v["query"], t0, t1, values, multi)).fetchall()]
        if v.get("sort", 0) != 0:
            options.sort()   # the dashboards' sort 1 (alphabetical) over these values
        if v.get("includeAll"):
            values[v["name"]] = options or [""]
        else:
            values[v["name"]] = options[0] if options else ""
    return values


def _field_type(type_name: str, column: str) -> str:
    for kind, names in (("number", NUMBER), ("time", TIME), ("string", STRING), ("boolean", {"bool"})):
        if type_name in names:
            return kind
    raise AssertionError(f"column {column}: PostgreSQL type {type_name} is not modelled here")


def _value(v, kind: str):
    if v is None:
        return None
    if kind == "time":
        if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
            v = dt.datetime(v.year, v.month, v.day, tzinfo=dt.timezone.utc)
        return int(v.timestamp() * 1000)   # epoch milliseconds, as Grafana's frames hold time
    if kind == "number":
        return float(v)
    if kind == "string" and not isinstance(v, str):
        return json.dumps(v) if isinstance(v, (dict, list)) else str(v)
    return v


def long_to_wide(fields: list[dict]) -> list[dict]:
    """A time series query's long rows as Grafana's SQL datasources return them (data.LongToWide of the plugin
    SDK): one row per distinct time, ascending, each number column once per distinct combination of the string
    columns, which become its labels; no value where a combination has none at that time."""
    time = next((f for f in fields if f["type"] == "time"), None)
    assert time is not None, "a time series query without a time column"
    strings = [f for f in fields if f["type"] == "string"]
    numbers = [f for f in fields if f["type"] == "number"]
    times = sorted({t for t in time["values"] if t is not None})
    at = {t: i for i, t in enumerate(times)}
    wide: dict = {}
    for i, t in enumerate(time["values"]):
        labels = tuple((s["name"], s["values"][i]) for s in strings)
        for f in numbers:
            col = wide.setdefault((f["name"], labels), [None] * len(times))
            col[at[t]] = f["values"][i]
    return ([{"name": time["name"], "type": "time", "values": times}]
            + [{"name": name, "type": "number", "values": vals, "labels": dict(labels)}
               for (name, labels), vals in wide.items()])


def frames_of(conn, target: dict, values: dict, t0, t1) -> tuple[list[dict], int]:
    """(the frames Grafana's PostgreSQL datasource returns for TARGET, the number of rows of its query)."""
    cur = conn.execute(P.expand(target["rawSql"], t0, t1, values))
    rows = cur.fetchall()
    fields = []
    for i, d in enumerate(cur.description):
        kind = _field_type(conn.adapters.types.get(d.type_code).name, d.name)
        fields.append({"name": d.name, "type": kind, "values": [_value(r[i], kind) for r in rows]})
    if target["format"] == "time_series":
        fields = long_to_wide(fields)
    return [{"refId": target["refId"], "name": None, "fields": fields}], len(rows)


def _named_by_options(t: dict) -> list[str]:
    """The fields a transformation's options name."""
    o = t.get("options", {})
    if t["id"] == "filterByValue":
        return [f["fieldName"] for f in o["filters"]]
    if t["id"] == "filterFieldsByName":
        return list(o.get("include", {}).get("names", []))
    if t["id"] == "groupingToMatrix":
        return [o["columnField"], o["rowField"], o["valueField"]]
    return []


def _named_by_panel(panel: dict) -> list[str]:
    """The fields a panel's options and fieldConfig overrides name."""
    named = [v for k, v in panel.get("options", {}).items() if k in ("xField", "yField", "colorField", "sizeField")
             and v]
    for o in panel.get("fieldConfig", {}).get("overrides", []):
        if o.get("matcher", {}).get("id") == "byName":
            named.append(o["matcher"]["options"])
    for s in panel.get("options", {}).get("series", []) or []:
        for k in ("x", "y", "color", "size"):
            m = (s.get(k) or {}).get("matcher", {}) if isinstance(s.get(k), dict) else {}
            if m.get("id") == "byName":
                named.append(m["options"])
    return named


def _is_number_name(name: str) -> bool:
    try:
        float(name)
        return True
    except (TypeError, ValueError):
        return False


def drawn(res: dict) -> bool:
    """Whether a value is left to draw once Grafana has transformed the frames."""
    return any(x["type"] == "number" and any(v is not None and v != "" for v in x["values"])
               for f in res["frames"] for x in f["fields"])


def panel_problems(panel: dict, res: dict) -> list[str]:
    """What keeps PANEL from drawing, given what @grafana/data made of its frames (RES)."""
    out = []
    if res["unknown"]:
        out.append(f"transformations unknown to Grafana: {res['unknown']}")
    if set(res["documented"]) - DOCUMENTED_ONLY:
        out.append(f"modelled from the documentation only: {res['documented']}")
    if res["error"]:
        return out + [f"a transformation failed: {res['error'].splitlines()[0]}"]
    for t, names in zip(panel.get("transformations", []), res["steps"]):
        missing = [n for n in _named_by_options(t) if n not in names]
        if missing:
            out.append(f"{t['id']} names {missing}, not among the fields {sorted(set(names))}")
    frames = [f for f in res["frames"] if f["length"]]
    shown = {x["displayName"] for f in res["frames"] for x in f["fields"]} | {
        x["name"] for f in res["frames"] for x in f["fields"]}
    missing = [n for n in _named_by_panel(panel) if n not in shown]
    if missing:
        out.append(f"options or fieldConfig name {missing}, which the frames lack ({sorted(shown)})")
    if not frames:
        return out
    kind = panel["type"]
    for f in frames:
        types = [x["type"] for x in f["fields"]]
        if kind == "barchart":
            x_field = panel.get("options", {}).get("xField")
            if x_field:
                if not any(x_field in (x["name"], x["displayName"]) for x in f["fields"]):
                    out.append(f"options.xField {x_field!r} is no field of the frame")
            elif "string" not in types and "time" not in types:
                out.append(f"a barchart needs a string or time field or options.xField; the fields are "
                           f"{[(x['name'], x['type']) for x in f['fields']]}")
        elif kind == "timeseries":
            if "time" not in types or "number" not in types:
                out.append(f"a time series frame needs a time and a number field: {[(x['name'], x['type']) for x in f['fields']]}")
            elif (t := next(x for x in f["fields"] if x["type"] == "time")["values"]) != sorted(t):
                out.append(f"time series times out of order: {t}")
        elif kind == "xychart":
            # it takes the first number field as x
            if types.count("number") < 2:
                out.append(f"an xy chart needs a numeric x and y: {[(x['name'], x['type']) for x in f['fields']]}")
            else:
                x = next(x for x in f["fields"] if x["type"] == "number")["values"]
                if x != sorted(x):
                    out.append(f"the xy chart's x values are out of order: {x}")
        elif kind == "heatmap":
            x, *buckets = f["fields"]
            names = [b["displayName"] for b in buckets]
            if x["type"] not in ("number", "time") or any(b["type"] != "number" for b in buckets):
                out.append(f"a heatmap needs a numeric or time x and numeric buckets: {types}")
            elif not all(_is_number_name(n) for n in names):
                out.append(f"heatmap buckets are not named by numbers: {names}")
            elif [float(n) for n in names] != sorted(float(n) for n in names):
                out.append(f"heatmap buckets are out of numeric order: {names}")
            if x["values"] != sorted(x["values"]):
                out.append(f"heatmap x values are out of order: {x['values']}")
        elif kind == "flamegraph":
            out += flamegraph_problems(f)
    return out


def nested_set(frame: dict) -> list[tuple[tuple, float, float]]:
    """(path of labels, value, self) of each row of a flame graph frame (Grafana's nested set: depth-first rows,
    each with its level)."""
    f = {x["name"]: x["values"] for x in frame["fields"]}
    out, stack = [], []
    for level, value, self_, label in zip(f["level"], f["value"], f["self"], f["label"]):
        level = int(level)
        assert level <= len(stack), f"level {level} after a row of level {len(stack) - 1}"
        stack[level:] = [label]
        out.append((tuple(stack), value, self_))
    return out


def flamegraph_problems(frame: dict) -> list[str]:
    """What keeps Grafana's flame graph from reading FRAME (its documented data: fields level, value, self and
    label, a nested set in depth-first order with one root), and whether each node's time is its own time plus its
    children's."""
    types = {x["name"]: x["type"] for x in frame["fields"]}
    want = {"level": "number", "value": "number", "self": "number", "label": "string"}
    if any(types.get(k) != v for k, v in want.items()):
        return [f"a flame graph needs fields {want}, not {types}"]
    levels = next(x["values"] for x in frame["fields"] if x["name"] == "level")
    if levels[:1] != [0] or 0 in levels[1:]:
        return [f"a flame graph needs one root at level 0: levels {levels[:20]}"]
    try:
        rows = nested_set(frame)
    except AssertionError as e:
        return [f"not a nested set: {e}"]
    out = []
    children: dict = collections.defaultdict(float)
    for path, value, _ in rows:
        if value is None:
            out.append(f"{'/'.join(path)} has no value")
        elif len(path) > 1:
            children[path[:-1]] += value
    for path, value, self_ in rows:
        if value is not None and self_ is not None and \
                abs(value - self_ - children[path]) > 1e-9 * max(abs(value), 1e-12):
            out.append(f"{'/'.join(path)}: value {value} is not self {self_} + its children's {children[path]}")
    return out[:5]


def _js_name(v) -> str:
    """A value as JavaScript's toString() names it (a column of Grouping to matrix)."""
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def matrix_problems(panel: dict, frames: list[dict], res: dict) -> list[str]:
    """Where a panel starts with Grouping to matrix, each row of its query must be the one cell of the matrix at its
    row and column, with its value, and the matrix must hold no other value."""
    ts = panel.get("transformations", [])
    if not ts or ts[0]["id"] != "groupingToMatrix" or res["error"] or len(res["frames"]) != 1:
        return []
    o = ts[0]["options"]
    raw = {f["name"]: f["values"] for f in frames[0]["fields"]}
    key, *columns = res["frames"][0]["fields"]
    at = {v: i for i, v in enumerate(key["values"])}
    by_name = {c["name"]: c["values"] for c in columns}
    out = []
    for row, col, value in zip(raw[o["rowField"]], raw[o["columnField"]], raw[o["valueField"]]):
        got = by_name.get(_js_name(col), [])[at[row]] if row in at and _js_name(col) in by_name else "missing"
        if got != value:
            out.append(f"the query's row ({row}, {col}) = {value} is {got} in Grafana's matrix")
    cells = sum(v is not None and v != "" for c in columns for v in c["values"])
    if cells != sum(v is not None for v in raw[o["valueField"]]):
        out.append(f"Grafana's matrix has {cells} values, the query {len(raw[o['valueField']])}")
    return out[:5]


def grafana_shows(texts: list[str]) -> list[dict]:
    """What Grafana's annotation tooltip shows of each text: @grafana/data's textUtil.sanitize in headless Chromium
    (dashboards/check/annotation_text.js), set as innerHTML: {html, shown, elements}."""
    check = CHECK
    if not shutil.which("node"):
        pytest.skip("no Node.js to run @grafana/data (install Node.js 20)")
    for need in (check / "node_modules" / "@grafana" / "data", check / "flamegraph" / "node_modules" / "puppeteer-core"):
        if not need.is_dir():
            pytest.fail(f"{need} is not installed: run bash dashboards/check/install.sh (ci/setup.sh does)")
    if not (os.environ.get("COMMSCOPE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no Chromium to run Grafana's sanitizer in (install chromium or set COMMSCOPE_CHROMIUM)")
    r = subprocess.run(["node", "annotation_text.js"], input=json.dumps(texts), capture_output=True, text=True,
                       cwd=check, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)
