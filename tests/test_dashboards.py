"""The Grafana dashboards (commscope/views/grafana.py, panels.py, dashboards/).

Grafana itself cannot be installed here. What is tested instead: the committed
JSON is what the generator makes, it validates against the dashboard schema
generated from npm @grafana/schema 11.6.0, the lint rules hold, and every panel
query, expanded the way Grafana's PostgreSQL datasource expands it, runs as the
read-only role against a real store filled with real data (the Caliper
fixtures, the Ramble workspaces, and workload runs made here) and returns the
columns its panel reads.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import re
import socket
import statistics
from pathlib import Path

import jsonschema
import psycopg
import pytest
import yaml
from click.testing import CliRunner

from commscope.views import grafana as D
from commscope.views import grafana_macros as M
from commscope.views import panels as P
from commscope.cli import main
from commscope.workflow.ingest import Provenance, ingest
import conftest
import suite
from grafana_shown import panel_json, shown_rows
from rollup_oracle import ON_THE_FLY_VIEWS

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
JSON_DIR = ROOT / "dashboards" / "json"
PROVISIONING = ROOT / "dashboards" / "provisioning"
SCHEMA = ROOT / "dashboards" / "schema" / "grafana-schema-11.6.0-dashboard.schema.json"


# ---- the JSON -----------------------------------------------------------------------------

def test_each_panel_is_picked_by_its_title():
    """Tests and the report pick a panel by its title (Dashboard.panel), so titles are unique within a dashboard."""
    for board in P.DASHBOARDS:
        titles = [p.title for p in board.panels]
        assert len(titles) == len(set(titles)), board.uid
        assert all(board.panel(t).title == t for t in titles)
    with pytest.raises(KeyError):
        P.SCALING.panel("no such panel")


def test_committed_json_is_what_the_generator_makes():
    built = D.build_all()
    committed = {f.stem: f.read_text() for f in JSON_DIR.glob("*.json")}
    assert set(committed) == set(built), "dashboards/json/ and panels.DASHBOARDS disagree; run commscope dashboards build"
    for uid, doc in built.items():
        assert committed[uid] == D.dump(doc), f"{uid}.json is stale; run commscope dashboards build"
    assert len(built) == 9


def _validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text())
    # @grafana/schema types an annotation's target as the built-in Grafana datasource's
    # query only ("TODO: this should be a regular DataQuery"); a SQL annotation's target is
    # the PostgreSQL query (rawSql, format, refId). Only that one object is opened.
    schema["definitions"]["AnnotationTarget"]["additionalProperties"] = True
    return jsonschema.Draft7Validator(schema)


def test_json_validates_against_the_grafana_schema():
    v = _validator()
    for f in sorted(JSON_DIR.glob("*.json")):
        errors = [f"{list(e.path)}: {e.message}" for e in v.iter_errors(json.loads(f.read_text()))]
        assert not errors, f"{f.name}: {errors[:5]}"


def test_schema_rejects_what_grafana_would_not_read():
    v = _validator()
    doc = json.loads((JSON_DIR / "commscope-scaling.json").read_text())
    bad_panel = json.loads(json.dumps(doc))
    bad_panel["panels"][0]["gridPos"]["w"] = "wide"
    bad_key = json.loads(json.dumps(doc))
    bad_key["panels"][0]["rawSql"] = "SELECT 1"   # a query belongs in targets
    no_version = {k: v_ for k, v_ in doc.items() if k != "schemaVersion"}
    for broken in (bad_panel, bad_key, no_version):
        assert list(v.iter_errors(broken)), "the schema accepted a broken dashboard"


def test_every_dashboard_has_the_variables_and_the_provisioned_datasource():
    uid = D.provisioned_uid(PROVISIONING)
    docs = D.read_dir(JSON_DIR)
    assert D.lint(docs, uid) == []
    for name, d in docs.items():
        names = [v["name"] for v in d["templating"]["list"]]
        assert names[:6] == ["system", "app", "workload", "stack", "interconnect", "ranks"], name
    assert "Regressions" in [a["name"] for a in docs["commscope-mpi-fraction.json"]["annotations"]["list"]]


def test_lint_finds_each_kind_of_mistake():
    uid = D.provisioned_uid(PROVISIONING)
    docs = D.read_dir(JSON_DIR)
    a, b = "commscope-io.json", "commscope-halo.json"
    dup = {a: docs[a], "copy.json": json.loads(json.dumps(docs[a]))}
    assert any("uid commscope-io is also" in p for p in D.lint(dup, uid))
    wrong_ds = json.loads(json.dumps(docs[b]))
    wrong_ds["panels"][1]["targets"][0]["datasource"]["uid"] = "some-other"
    assert any("not the provisioned datasource" in p for p in D.lint({b: wrong_ds}, uid))
    wrong_fmt = json.loads(json.dumps(docs[b]))
    ts = next(p for p in wrong_fmt["panels"] if p["type"] == "timeseries")
    ts["targets"][0]["format"] = "table"
    assert any("needs 'time_series'" in p for p in D.lint({b: wrong_fmt}, uid))
    shared = json.loads(json.dumps(docs["commscope-mpi-fraction.json"]))
    reusing = next(p for p in shared["panels"] if "panelId" in p["targets"][0])
    reusing["targets"][0]["panelId"] = 99
    assert any("is no panel with a query" in p for p in D.lint({"m": shared}, uid))
    reusing["targets"][0]["panelId"] = 1
    reusing["datasource"] = {"type": "datasource", "uid": "-- Grafana --"}
    assert any("not the provisioned datasource" in p for p in D.lint({"m": shared}, uid))
    no_var = json.loads(json.dumps(docs[b]))
    no_var["templating"]["list"] = [v for v in no_var["templating"]["list"] if v["name"] != "ranks"]
    assert any("no template variable ranks" in p for p in D.lint({b: no_var}, uid))


def test_the_mpi_fraction_dashboard_sends_one_query_for_its_three_time_series():
    """Its three time series are measures of the same rows, so one panel has the query and the two others take its
    results (Grafana's Dashboard datasource), each keeping its own measure: a dashboard load sends one query of
    ~3,700 rows instead of three (issue 19; dashboards/README.md). What each shows is checked against the files
    in the tests below, through the JSON's transformations (grafana_shown.py)."""
    doc = json.loads((JSON_DIR / "commscope-mpi-fraction.json").read_text())
    series = [p for p in doc["panels"] if p["type"] == "timeseries"]
    with_sql = [p for p in series if p["targets"][0].get("rawSql")]
    assert len(series) == 3 and len(with_sql) == 1
    assert all(p["targets"][0]["panelId"] == with_sql[0]["id"] for p in series if p is not with_sql[0])
    kept = [next(t["options"]["include"]["names"] for t in p["transformations"] if t["id"] == "filterFieldsByName")
            for p in series]
    assert kept == [["time", "metric", "mpi_fraction"], ["time", "metric", "mpi_fraction_slowest"],
                    ["time", "metric", "parallel_efficiency", "load_balance", "communication_efficiency"]]


def test_cli_lint_fails_on_a_bad_dashboard(tmp_path):
    doc = json.loads((JSON_DIR / "commscope-io.json").read_text())
    doc["panels"][0]["datasource"] = {"type": "prometheus", "uid": "prom"}
    (tmp_path / "io.json").write_text(json.dumps(doc))
    r = CliRunner().invoke(main, ["dashboards", "lint", "--dir", str(tmp_path), "--provisioning", str(PROVISIONING)])
    assert r.exit_code == 1 and "not the provisioned datasource" in r.output
    ok = CliRunner().invoke(main, ["dashboards", "lint", "--dir", str(JSON_DIR), "--provisioning", str(PROVISIONING)])
    assert ok.exit_code == 0, ok.output


def test_cli_build_writes_the_same_json(tmp_path):
    r = CliRunner().invoke(main, ["dashboards", "build", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    for f in JSON_DIR.glob("*.json"):
        assert (tmp_path / f.name).read_text() == f.read_text()


# ---- provisioning ----------------------------------------------------------------------------

def test_provisioning_takes_credentials_from_the_environment_only():
    doc = yaml.safe_load((PROVISIONING / "datasources" / "commscope.yaml").read_text())
    (ds,) = doc["datasources"]
    assert ds["uid"] == D.DATASOURCE_UID and ds["type"] == "grafana-postgresql-datasource"
    secrets = [ds["url"], ds["user"], ds["jsonData"]["database"], *ds["secureJsonData"].values()]
    for value in secrets:
        assert isinstance(value, str) and value.startswith("${") and value.endswith("}"), value
    assert "READONLY" in ds["user"], "Grafana connects as the read-only role"
    prov = yaml.safe_load((PROVISIONING / "dashboards" / "commscope.yaml").read_text())
    (p,) = prov["providers"]
    assert p["type"] == "file" and p["options"]["path"].startswith("${")


# ---- Grafana's expansion, against macros.go and sqleng -----------------------------------------

T0 = dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc)
T1 = dt.datetime(2026, 11, 22, 6, 30, 0, 250000, tzinfo=dt.timezone.utc)


def test_macros_expand_as_grafana_does():
    e = lambda s: M.expand_macros(s, T0, T1)  # noqa: E731
    assert e('$__timeFilter("time")') == "\"time\" BETWEEN '2026-10-01T00:00:00Z' AND '2026-11-22T06:30:00.25Z'"
    assert e("$__timeFrom() $__timeTo()") == "'2026-10-01T00:00:00Z' '2026-11-22T06:30:00.25Z'"
    assert e('SELECT $__timeGroup("time", 1d) FROM x') == 'SELECT floor(extract(epoch from "time")/86400)*86400 FROM x'
    # A $__timeGroup followed by ',' is the pre-5.3 form and gets the alias.
    assert e('SELECT $__timeGroup("time", 1h), v') == 'SELECT floor(extract(epoch from "time")/3600)*3600 AS "time", v'
    assert e("$__timeGroupAlias(t, '30d')") == 'floor(extract(epoch from t)/2.592e+06)*2.592e+06 AS "time"'
    assert e("$__time(t)") == 't AS "time"'
    with pytest.raises(ValueError, match="unknown macro"):
        e("$__nosuch(t)")
    with pytest.raises(ValueError, match="needs time column and interval"):
        e("$__timeGroup(t)")


def test_interval_and_variables_expand_as_grafana_does():
    assert M.format_interval(86400) == "1d" and M.format_interval(7 * 86400) == "7d" and M.format_interval(90) == "1m"
    assert M.grafana_interval(T0, T1, "1d") == 86400          # nightly panels never go below a day
    assert M.grafana_interval(T0 - dt.timedelta(days=730), T1, "1d") == 86400
    assert M.grafana_interval(T0 - dt.timedelta(days=3000), T1, "1d") == 604800
    sql = P.expand("x IN ($system) AND s = '$reference_system' AND $__interval_ms > 0 AND g = '$__interval'",
                   T0, T1, {"system": ["a", "o'b"], "reference_system": "it's"}, multi={"system"}, interval=86400)
    assert sql == "x IN ('a','o''b') AND s = 'it''s' AND 86400000 > 0 AND g = '1d'"


# ---- every panel query on real data ------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _time_range(conn):
    lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM v_runs").fetchone()
    return lo - dt.timedelta(days=1), hi + dt.timedelta(days=1)


@pytest.mark.parametrize("board", P.DASHBOARDS, ids=[d.uid for d in P.DASHBOARDS])
def test_every_panel_query_returns_its_columns_on_real_data(filled, board):
    with psycopg.connect(filled) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "grafana_ro"
        values = P.all_values(conn)
        assert all(values[v] != [""] for v in values), values
        values.update(P.reference_values(conn, "local", "debian-openmpi4"))
        t0, t1 = _time_range(conn)
        docs = {d["uid"]: d for d in D.read_dir(JSON_DIR).values()}
        # A panel showing another's results (a target with a panelId) runs that panel's query.
        queries = [(p["title"], p["type"], panel_json(board.uid, p["title"])[1]["targets"][0])
                   for p in docs[board.uid]["panels"]]
        assert [q[0] for q in queries] == [p.title for p in board.panels]
        for (title, ptype, target), panel in zip(queries, board.panels):
            # The SQL the committed JSON holds, expanded as Grafana expands it.
            sql = P.expand(target["rawSql"], t0, t1, values)
            cur = conn.execute(sql)
            cols = [c.name for c in cur.description]
            rows = cur.fetchall()
            missing = set(panel.columns) - set(cols)
            assert not missing, f"{board.uid} / {title}: no column {missing} in {cols}"
            assert rows, f"{board.uid} / {title}: no rows\n{sql}"
            if ptype == "timeseries":
                assert cols[0] == "time" and all(r[0] is not None for r in rows)
                numeric = [i for i, c in enumerate(cols) if c not in ("time", "metric")]
                assert all(isinstance(r[i], (int, float)) or r[i] is None for r in rows for i in numeric), title
        for var in docs[board.uid]["templating"]["list"]:
            # a chained variable's query names the variables before it
            assert conn.execute(P.expand(var["query"], t0, t1, values)).fetchall(), var["name"]


def test_panels_show_what_the_real_runs_did(filled):
    """A few numbers checked against the runs themselves, not just shapes."""
    with psycopg.connect(filled) as conn:
        values = P.all_values(conn)
        values.update(P.reference_values(conn, "local", "debian-openmpi4"))
        t0, t1 = _time_range(conn)
        def run(board, title):
            return conn.execute(P.expand(board.panel(title).sql, t0, t1, values)).fetchall()
        best_band = "Best algorithm per size band"
        best = [dict(zip(P.COLLECTIVES.panel(best_band).columns, r)) for r in run(P.COLLECTIVES, best_band)]
        ours = [r for r in best if r["collective"] == "allreduce" and r["stack"] == "debian-openmpi4"]
        algos = {r["best_algorithm"] for r in ours}
        assert algos <= {"default", "tuned 3"} and algos, "the forced Allreduce algorithm is labelled from its PARAM echo"
        assert all(r["algorithms"] == 2 for r in ours)
        io = {r[0].split(" ")[0] + (" " + r[0].split(" ")[1] if " g" in r[0] else "") for r in run(P.IO, "Bandwidth by method and group size")}
        assert {"independent", "collective", "two-phase g2"} <= io
        weak = [r for r in run(P.SCALING, "Weak scaling: parallel efficiency") if "points/rank" in r[0] and "debian-openmpi4" in r[0]]
        assert [r[1] for r in weak] == [1, 2] and weak[0][2] == pytest.approx(1.0)
        normalized = run(P.PROCUREMENT, "Normalized time per experiment")
        ref = [r for r in normalized if (r[0], r[1]) == ("local", "debian-openmpi4")]
        assert ref and all(r[-1] == pytest.approx(1.0) for r in ref)   # normalized, the last column
        ann = conn.execute(P.expand(P.ANNOTATIONS_SQL, t0, t1, values)).fetchall()
        assert len(ann) == 1 and ann[0][2].startswith("regression")


# ---- the daily rollups (migration 0006) ----------------------------------------------------------

ROLLUP_VIEWS = ["v_run_metrics_daily", "v_mpi_fraction_daily", "v_wall_time_daily", "v_rank_groups_daily", "v_mpi_routines_daily",
                "v_comm_matrix_daily",
                "v_collectives_daily", "v_halo_daily", "v_io_daily", "v_shown_metrics_daily", "v_comparison_daily"]


def _same(a: list[tuple], b: list[tuple]) -> bool:
    """Equal rows, floating-point sums equal up to summation order."""
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        for x, y in zip(ra, rb, strict=True):
            if x is None or y is None or isinstance(x, (str, dt.datetime, dict)):
                if x != y:
                    return False
            elif not math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12):
                return False
    return True


def _rollups_and_panels(conn) -> tuple[dict, dict]:
    """Every rollup view's rows, and every panel's rows over the whole history."""
    views = {}
    for v in ROLLUP_VIEWS:
        ncols = len(conn.execute(f"SELECT * FROM {v} LIMIT 0").description)
        views[v] = conn.execute(f"SELECT * FROM {v} ORDER BY {', '.join(map(str, range(1, ncols + 1)))}").fetchall()
    values = P.all_values(conn)
    values.update(P.reference_values(conn, "local", "debian-openmpi4"))
    t0, t1 = _time_range(conn)
    panels = {f"{b.uid} / {p.title}": conn.execute(P.expand(p.sql, t0, t1, values)).fetchall()
              for b in P.DASHBOARDS for p in b.panels}
    return views, panels


# The measures of v_shown_metrics_daily (migration 0029), each with its count of non-NULL values: (view column
# prefix, run_windows column).
SHOWN_MEASURES = [("mpi_fraction_avg", "mpi_fraction_avg"), ("mpi_fraction_slowest", "mpi_fraction_slowest"),
                  ("parallel_efficiency", "parallel_efficiency"), ("load_balance", "load_balance"),
                  ("communication_efficiency", "communication_efficiency"), ("user_time_avg", "user_time_avg_s"),
                  ("mpi_time_avg", "mpi_time_avg_s"), ("mpi_sync_time_avg", "mpi_sync_time_avg_s")]


def _utc_day(t: dt.datetime) -> dt.datetime:
    return t.astimezone(dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)


def _windows_of_ok_runs(conn) -> list[dict]:
    """Every window of every 'ok' run that has a series, as the tables store them."""
    measures = ", ".join(f"w.{col}" for _, col in SHOWN_MEASURES)
    cur = conn.execute(f"""SELECT r.id AS run_id, r.series_id, r.started_at, r.app, r.ranks, w."window", w.time_s,
        {measures} FROM runs r JOIN run_windows w ON w.run_id = r.id
        WHERE r.status = 'ok' AND r.series_id IS NOT NULL""")
    cols = [c.name for c in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _assert_shown_rollup_is_what_the_runs_say(conn) -> int:
    """v_shown_metrics_daily against the runs' own windows, summed here: per UTC day and series, the focus window
    when any of the day's runs has one, else the run window; each measure's sum over the runs and its count of
    values (a measure no run has is NULL with count 0, not 0)."""
    groups: dict = {}
    for w in _windows_of_ok_runs(conn):
        groups.setdefault((_utc_day(w["started_at"]), w["series_id"]), []).append(w)
    expected = {}
    for key, ws in groups.items():
        window = "focus" if any(w["window"] == "focus" for w in ws) else "run"
        values = []
        for _, col in SHOWN_MEASURES:
            xs = [w[col] for w in ws if w["window"] == window and w[col] is not None]
            values += [len(xs), math.fsum(xs) if xs else None]
        expected[key] = (window, *values)
    cols = ", ".join(f"{m}_n, {m}_sum" for m, _ in SHOWN_MEASURES)
    got = {(_utc_day(day), sid): (window, *rest) for day, sid, window, *rest in conn.execute(
        f'SELECT day, series_id, "window", {cols} FROM v_shown_metrics_daily').fetchall()}
    assert set(got) == set(expected), "v_shown_metrics_daily has other (day, series) groups than the runs"
    for key in expected:
        assert _same([got[key]], [expected[key]]), (key, got[key], expected[key])
    return len(expected)


def _assert_comparison_rollup_is_what_the_runs_say(conn) -> int:
    """v_comparison_daily against the runs' own windows, here: each run compared on its focus window when that has
    a time above 0, else on its run window when that has, else left out; per UTC day, series, application, rank
    count, window and MPI library string the runs, their time's sum, least and greatest and the newest run's
    start; system, stack and interconnect the series environment's."""
    per_run: dict = {}
    for w in _windows_of_ok_runs(conn):
        if w["time_s"] is not None and w["time_s"] > 0:
            per_run.setdefault(w["run_id"], {})[w["window"]] = w
    env = {sid: (e, params) for sid, e, params in conn.execute("SELECT id, environment, parameters FROM series")}
    library = dict(conn.execute("SELECT r.id, st.library FROM runs r LEFT JOIN stacks st ON st.id = r.stack_id"))
    groups: dict = {}
    for by_window in per_run.values():
        w = by_window.get("focus") or by_window["run"]
        e, params = env[w["series_id"]]
        key = (_utc_day(w["started_at"]), w["series_id"], e.get("system"), e.get("stack"), e.get("interconnect"),
               w["app"], w["ranks"], json.dumps(params, sort_keys=True), w["window"], library[w["run_id"]])
        groups.setdefault(key, []).append((w["time_s"], w["started_at"]))
    expected = {k: (len(ts), math.fsum(t for t, _ in ts), min(t for t, _ in ts), max(t for t, _ in ts),
                    max(at for _, at in ts)) for k, ts in groups.items()}
    got = {(_utc_day(t), sid, sy, st, ic, app, n, json.dumps(params, sort_keys=True), window, lib):
           (runs, tsum, tmin, tmax, last)
           for t, sid, sy, st, ic, app, n, params, window, runs, tsum, tmin, tmax, lib, _version, last
           in conn.execute("SELECT * FROM v_comparison_daily").fetchall()}
    assert set(got) == set(expected), "v_comparison_daily has other groups than the runs"
    for key in expected:
        assert _same([got[key]], [expected[key]]), (key, got[key], expected[key])
    return len(expected)


def _ranges_between(days: list) -> list[tuple]:
    """Every range between two of DAYS (UTC day starts, ascending), each from an hour into its first day to an hour
    before the end of its last, and one before them all."""
    if not days:
        return []
    ranges = [(a + dt.timedelta(hours=1), b + dt.timedelta(hours=23)) for i, a in enumerate(days) for b in days[i:]]
    return ranges + [(days[0] - dt.timedelta(days=9), days[0] - dt.timedelta(days=8))]


def _kept_and_on_the_fly(conn, read):
    """READ(conn) on the store as its triggers keep it, and again with every rollup replaced by its on-the-fly
    definition (tests/rollup_oracle.py) in a transaction that is rolled back."""
    kept = read(conn)
    with conn.transaction(force_rollback=True):
        for view in ON_THE_FLY_VIEWS:
            conn.execute(view)
        fly = read(conn)
    return kept, fly


def _routine_ranges(conn) -> list[tuple]:
    """_ranges_between the UTC days with routine rows."""
    return _ranges_between([_utc_day(d) for (d,) in conn.execute(
        "SELECT DISTINCT date_trunc('day', r.started_at, 'UTC') FROM runs r "
        "WHERE EXISTS (SELECT 1 FROM mpi_metrics m WHERE m.run_id = r.id) ORDER BY 1")])


def _routines_between(conn, t0, t1) -> list[tuple]:
    return conn.execute("SELECT * FROM routines_between(%s, %s) ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9 NULLS FIRST",
                        (t0, t1)).fetchall()


def _assert_routines_between_is_what_the_runs_say(conn) -> int:
    """routines_between (running totals, migration 0030) against the runs' own MPI routine rows, summed here over
    each range's whole UTC days: per series (its environment, and its measurement-model series, the label's #id)
    and function, the ok runs that called it, their time and their calls; per series with function NULL, the runs
    with any routine row, all their time and calls. Calls no run counted are NULL, not 0."""
    runs = {rid: (sid, _utc_day(t), tuple(env)) for rid, sid, t, *env in conn.execute(
        "SELECT r.run_id, rr.series_id, r.started_at, r.system, r.app, r.workload, coalesce(r.variant, ''), r.stack, "
        "r.interconnect, r.ranks FROM v_runs r JOIN runs rr ON rr.id = r.run_id "
        "WHERE rr.status = 'ok' AND rr.series_id IS NOT NULL")}
    rows = [(rid, fn, t, c) for rid, fn, t, c in conn.execute(
        "SELECT run_id, function, time_total, calls FROM mpi_metrics") if rid in runs]
    checked = 0
    for a, b in _routine_ranges(conn):
        lo, hi = _utc_day(a) - dt.timedelta(days=1), b
        groups: dict = {}
        for rid, fn, t, c in rows:
            sid, day, env = runs[rid]
            if not lo < day <= hi:
                continue
            for f in (fn, None):
                g = groups.setdefault((*env, sid, f), [set(), [], []])
                g[0].add(rid)
                g[1].append(t)
                if c is not None:
                    g[2].append(c)
        expected = {k: (len(g[0]), math.fsum(g[1]), sum(g[2]) if g[2] else None) for k, g in groups.items()}
        got = {(*env, int(_SERIES_LABEL_ID.search(label).group(1)), f): (n, t, c)
               for *env, label, f, n, t, c in _routines_between(conn, a, b)}
        assert set(got) == set(expected), (a, b, set(got) ^ set(expected))
        for k in expected:
            assert _same([got[k]], [expected[k]]), (a, b, k, got[k], expected[k])
        checked += len(expected)
    return checked


def _assert_routines_ranges_match_the_daily_sums(conn) -> None:
    """routines_between against its on-the-fly twin (the daily rows summed over the range) for every range."""
    ranges = _routine_ranges(conn)
    kept, fly = _kept_and_on_the_fly(conn, lambda c: [_routines_between(c, a, b) for a, b in ranges])
    for (a, b), k, f in zip(ranges, kept, fly):
        assert _same(k, f), f"routines_between({a}, {b}): running totals differ from the daily sums"
    assert not ranges or not kept[-1]


def _assert_rollups_match_on_the_fly(conn) -> dict:
    assert _assert_shown_rollup_is_what_the_runs_say(conn) >= 0
    assert _assert_comparison_rollup_is_what_the_runs_say(conn) >= 0
    assert _assert_routines_between_is_what_the_runs_say(conn) >= 0
    _assert_routines_ranges_match_the_daily_sums(conn)
    assert _assert_collectives_between_is_what_the_runs_say(conn) >= 0
    (kept, kept_panels), (fly, fly_panels) = _kept_and_on_the_fly(conn, _rollups_and_panels)
    for v in ROLLUP_VIEWS:
        assert _same(kept[v], fly[v]), f"{v}: the trigger-kept rollup differs from the on-the-fly aggregate"
    for title in kept_panels:
        assert _same(kept_panels[title], fly_panels[title]), f"{title}: differs with on-the-fly views"
    return kept


def test_daily_rollups_equal_the_on_the_fly_aggregates(filled, dsn):
    """The trigger-kept rollups are what aggregating the per-run views gives, on
    every real fixture; and they stay so when a run, then a whole campaign, is deleted."""
    with psycopg.connect(dsn) as conn:
        kept = _assert_rollups_match_on_the_fly(conn)
        assert all(kept[v] for v in ROLLUP_VIEWS), {v: len(r) for v, r in kept.items()}
        # One run out of a (series, day) that keeps others: its group is recomputed, not dropped.
        run_id, series_id, day = conn.execute(
            "SELECT run_id, series_id, day FROM run_day rd WHERE (SELECT count(*) FROM run_day o "
            "WHERE o.series_id = rd.series_id AND o.day = rd.day) > 1 ORDER BY run_id LIMIT 1").fetchone()
        conn.execute("DELETE FROM runs WHERE id = %s", (run_id,))
        assert conn.execute("SELECT 1 FROM runs_daily WHERE series_id = %s AND day = %s", (series_id, day)).fetchone()
        _assert_rollups_match_on_the_fly(conn)
        # The campaign of the only collsweep runs (and pio, halo3d): whole groups go.
        (campaign,) = conn.execute("SELECT campaign_id FROM v_runs WHERE app = 'collsweep' LIMIT 1").fetchone()
        conn.execute("DELETE FROM campaigns WHERE id = %s", (campaign,))
        kept = _assert_rollups_match_on_the_fly(conn)
        assert not kept["v_collectives_daily"]
        assert conn.execute("SELECT count(*) FROM run_day").fetchone() == conn.execute("SELECT count(*) FROM runs").fetchone()
        # TRUNCATE fires no delete trigger; the rollups are emptied with the runs.
        conn.execute("TRUNCATE campaigns, runs CASCADE")
        assert not any(conn.execute(f"SELECT 1 FROM {v} LIMIT 1").fetchone() for v in ROLLUP_VIEWS + ["run_day"])


def test_updating_runs_leaves_no_rollup_stale(filled, dsn):
    """A run marked failed leaves its group's averages; runs moved to another day and system
    leave their old groups and join new ones: every rollup still equals the on-the-fly aggregate."""
    with psycopg.connect(dsn) as conn:
        before = _assert_rollups_match_on_the_fly(conn)
        run_id = conn.execute("SELECT id FROM runs WHERE status = 'ok' AND mpi_fraction_avg IS NOT NULL "
                              "ORDER BY id LIMIT 1").fetchone()[0]
        conn.execute("UPDATE runs SET status = 'failed' WHERE id = %s", (run_id,))
        after = _assert_rollups_match_on_the_fly(conn)
        assert after["v_mpi_fraction_daily"] != before["v_mpi_fraction_daily"]
        conn.execute("INSERT INTO systems (name) VALUES ('lab-b')")
        conn.execute("UPDATE runs SET started_at = started_at - interval '3 days', "
                     "system_id = (SELECT id FROM systems WHERE name = 'lab-b') WHERE app = 'halo3d'")
        _assert_rollups_match_on_the_fly(conn)


def _copy_run_rows(conn, suffix: str, days: int, where: str, params: tuple = ()) -> list[int]:
    """The runs rows WHERE selects (copies made before, whose content hash holds SUFFIX, left out) again, `days`
    earlier, their content hash ending in SUFFIX + days; their ids. Their child rows are the caller's to copy."""
    cols = [c for (c,) in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs' AND column_name "
        "NOT IN ('id', 'content_hash', 'started_at') ORDER BY ordinal_position")]
    return [r for (r,) in conn.execute(
        f"INSERT INTO runs (content_hash, started_at, {', '.join(cols)}) "
        f"SELECT content_hash || '{suffix}{days}', started_at - make_interval(days => %s), {', '.join(cols)} "
        f"FROM runs r WHERE content_hash NOT LIKE '%%{suffix}%%' AND ({where}) RETURNING id", (days, *params))]


def _copy_runs_back(conn, app: str, days: int) -> list[int]:
    """Every run of `app` again, `days` earlier, with its FOMs: the same real rows
    arriving as another night's ingest would (the triggers see an ordinary insert)."""
    ids = _copy_run_rows(conn, "-back", days, "app = %s", (app,))
    conn.execute("INSERT INTO foms (run_id, name, repeat, value, unit) "
                 "SELECT n.id, f.name, f.repeat, f.value, f.unit FROM runs n "
                 "JOIN runs o ON n.content_hash = o.content_hash || %s JOIN foms f ON f.run_id = o.id "
                 "WHERE n.id = ANY(%s)", (f"-back{days}", ids))
    return ids


def _collectives_between(conn, t0, t1) -> list[tuple]:
    return conn.execute("SELECT * FROM collectives_between(%s, %s) ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11",
                        (t0, t1)).fetchall()


def _assert_collectives_ranges(conn) -> int:
    """collectives_between (running totals, 0008, 0031) against summing the daily rows
    (its on-the-fly definition) for every range between two days with runs,
    including ranges that start after the first night and end before the last."""
    ranges = _ranges_between([d for (d,) in conn.execute(
        "SELECT DISTINCT date_trunc('day', started_at, 'UTC') FROM v_runs WHERE app = 'collsweep' ORDER BY 1")])
    assert ranges, "no collsweep runs: nothing to range over"
    kept, fly = _kept_and_on_the_fly(conn, lambda c: [_collectives_between(c, a, b) for a, b in ranges])
    for (a, b), k, f in zip(ranges, kept, fly):
        assert _same(k, f), f"collectives_between({a}, {b}): running totals differ from the daily sums"
    assert not kept[-1] and any(kept[:-1])
    return len(ranges)


def _collective_ranges(conn) -> list[tuple]:
    """_ranges_between the UTC days of collsweep runs, and one range over all time."""
    days = [_utc_day(d) for (d,) in conn.execute(
        "SELECT DISTINCT date_trunc('day', started_at, 'UTC') FROM runs WHERE app = 'collsweep' ORDER BY 1")]
    return _ranges_between(days) + [(dt.datetime(1970, 1, 2, tzinfo=dt.timezone.utc),
                                     dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc))]


def _assert_collectives_between_is_what_the_runs_say(conn) -> int:
    """collectives_between against the runs' own collective latencies (collective_latency, one row per run,
    repeat, collective, size and statistic), summed here over each range's whole UTC days: per series (the run's
    environment) and key (collective, algorithm, size, statistic), the rows of 'ok' runs and their values' sum.
    A key without a row in the range is not there (not 0)."""
    runs = {rid: (_utc_day(t), tuple(env)) for rid, t, *env in conn.execute(
        "SELECT r.run_id, rr.started_at, r.system, r.app, r.workload, coalesce(r.variant, ''), r.stack, "
        "r.interconnect, r.ranks FROM v_runs r JOIN runs rr ON rr.id = r.run_id WHERE rr.status = 'ok'")}
    rows = [(runs[rid], key, v) for rid, *key, v in conn.execute(
        "SELECT run_id, collective, algorithm, bytes, stat, value FROM collective_latency") if rid in runs]
    checked = 0
    for a, b in _collective_ranges(conn):
        lo, hi = _utc_day(a) - dt.timedelta(days=1), b
        groups: dict = {}
        for (day, env), key, v in rows:
            if lo < day <= hi:
                groups.setdefault((*env, *key), []).append(v)
        expected = {k: (len(vs), math.fsum(vs)) for k, vs in groups.items()}
        got = {tuple(k): (n, v) for *k, n, v in _collectives_between(conn, a, b)}
        assert set(got) == set(expected), (a, b, set(got) ^ set(expected))
        for k in expected:
            assert _same([got[k]], [expected[k]]), (a, b, k, got[k], expected[k])
        checked += len(expected)
    return checked


def test_collectives_between_any_range_equals_the_daily_sums(filled, dsn):
    """The running totals stay right when older nights arrive after newer ones
    (the tail of each series is recomputed), and when a night in the middle goes."""
    with psycopg.connect(dsn) as conn:
        _copy_runs_back(conn, "collsweep", 5)     # arrives after the newer runs: totals recomputed from 5 days back
        middle = _copy_runs_back(conn, "collsweep", 2)
        assert _assert_collectives_ranges(conn) >= 6
        # Running totals really carry: the range of the newest night alone is its own runs, not their history.
        (n_all,) = conn.execute("SELECT sum(n) FROM collectives_between('-infinity', 'infinity')").fetchone()
        (n_new,) = conn.execute("SELECT sum(n) FROM collectives_between(now() - interval '1 day', 'infinity')").fetchone()
        assert n_all == 3 * n_new, (n_all, n_new)
        conn.execute("DELETE FROM runs WHERE id = ANY(%s)", (middle,))
        _assert_collectives_ranges(conn)
        (n_all,) = conn.execute("SELECT sum(n) FROM collectives_between('-infinity', 'infinity')").fetchone()
        assert n_all == 2 * n_new
        conn.rollback()


def _copy_routines_back(conn, days: int) -> list[int]:
    """Every run with MPI routine rows again, `days` earlier, with its routine rows: another night's ingest of the
    same profiles, arriving after the newer nights (the triggers see ordinary inserts)."""
    ids = _copy_run_rows(conn, "-rback", days, "EXISTS (SELECT 1 FROM mpi_metrics m WHERE m.run_id = r.id)")
    mcols = [c for (c,) in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'mpi_metrics' AND column_name "
        "NOT IN ('run_id', 'started_at') ORDER BY ordinal_position")]
    started = ", started_at" if conn.execute("SELECT 1 FROM information_schema.columns WHERE table_name = "
                                             "'mpi_metrics' AND column_name = 'started_at'").fetchone() else ""
    conn.execute(f"INSERT INTO mpi_metrics (run_id{started}, {', '.join(mcols)}) "
                 f"SELECT n.id{started and ', n.started_at'}, {', '.join('m.' + c for c in mcols)} FROM runs n "
                 "JOIN runs o ON n.content_hash = o.content_hash || %s JOIN mpi_metrics m ON m.run_id = o.id "
                 "WHERE n.id = ANY(%s)", (f"-rback{days}", ids))
    return ids


def test_routines_between_any_range_is_what_the_profiles_records_say(filled, dsn):
    """The routine panels' running totals (0030) on every real fixture: after the fill, when older nights arrive
    after newer ones (each series' tail recomputed), when a night in the middle goes, when runs fail or move, and
    after TRUNCATE: per range, what the routine rows sum to here and what the daily rows sum to."""
    with psycopg.connect(dsn) as conn:
        assert _assert_routines_between_is_what_the_runs_say(conn) > 0
        _assert_routines_ranges_match_the_daily_sums(conn)
        # Some fixtures have no call counts: their series' calls are NULL, others' are counted.
        calls = [c for *_, c in _routines_between(conn, "-infinity", "infinity")]
        assert None in calls and any(c is not None for c in calls), calls
        total = "SELECT sum(runs) FROM routines_between('-infinity', 'infinity') WHERE function IS NULL"
        (n_first,) = conn.execute(total).fetchone()
        _copy_routines_back(conn, 5)
        middle = _copy_routines_back(conn, 2)
        assert _assert_routines_between_is_what_the_runs_say(conn) > 0
        _assert_routines_ranges_match_the_daily_sums(conn)
        assert conn.execute(total).fetchone()[0] == 3 * n_first > 0
        conn.execute("DELETE FROM runs WHERE id = ANY(%s)", (middle,))
        assert _assert_routines_between_is_what_the_runs_say(conn) > 0
        _assert_routines_ranges_match_the_daily_sums(conn)
        conn.execute("UPDATE runs SET status = 'failed' WHERE id = (SELECT min(run_id) FROM mpi_metrics)")
        conn.execute("UPDATE runs SET started_at = started_at - interval '3 days' WHERE id = ANY(%s)",
                     (_copy_routines_back(conn, 1)[:2],))
        assert _assert_routines_between_is_what_the_runs_say(conn) > 0
        _assert_routines_ranges_match_the_daily_sums(conn)
        conn.execute("TRUNCATE campaigns, runs CASCADE")
        assert not conn.execute("SELECT 1 FROM routines_between('-infinity', 'infinity')").fetchone()
        assert not conn.execute("SELECT 1 FROM routines_cum UNION ALL SELECT 1 FROM routines_keys").fetchone()
        conn.rollback()


# ---- deploy ---------------------------------------------------------------------------------------

def test_collectives_between_per_series_is_what_the_runs_say(filled, dsn):
    """The collectives panels' running totals, kept per series (0031), on the real collsweep runs: after the fill,
    when older nights arrive after newer ones, when a size new to a series arrives on a middle night, when that
    night goes, when runs fail or move to another
    day and system, and after TRUNCATE: per range, what the runs' latencies sum to here and what the daily rows
    sum to. Each series keeps each of its keys once."""
    def check() -> None:
        assert _assert_collectives_between_is_what_the_runs_say(conn) > 0
        _assert_collectives_ranges(conn)
        keys = conn.execute("SELECT k.series_id, count(*), count(DISTINCT u) FROM collectives_series k, "
                            "unnest(k.collective, k.algorithm, k.bytes, k.stat) u GROUP BY 1").fetchall()
        assert keys and all(n == distinct for _, n, distinct in keys), keys

    with psycopg.connect(dsn) as conn:
        check()
        _copy_runs_back(conn, "collsweep", 5)
        middle = _copy_runs_back(conn, "collsweep", 2)
        check()
        # A size new to its series on a middle night (the run's 8-byte latencies again as 4-byte ones): the key goes
        # after the series' others, its rows before that night have no entry for it.
        conn.execute("INSERT INTO foms (run_id, name, repeat, value, unit) SELECT run_id, replace(name, '_8B_', '_4B_'), "
                     "repeat, value, unit FROM foms WHERE run_id = %s AND name LIKE '%%\\_8B\\_%%'", (middle[0],))
        assert conn.execute("SELECT 1 FROM collective_latency WHERE run_id = %s AND bytes = 4", (middle[0],)).fetchone()
        check()
        conn.execute("DELETE FROM runs WHERE id = ANY(%s)", (middle,))
        check()
        conn.execute("UPDATE runs SET status = 'failed' WHERE id = (SELECT min(run_id) FROM collective_latency)")
        conn.execute("INSERT INTO systems (name) VALUES ('lab-b')")
        conn.execute("UPDATE runs SET started_at = started_at - interval '3 days', "
                     "system_id = (SELECT id FROM systems WHERE name = 'lab-b') WHERE id = ANY(%s)",
                     (_copy_runs_back(conn, "collsweep", 1)[:1],))
        check()
        conn.execute("TRUNCATE campaigns, runs CASCADE")
        assert not conn.execute("SELECT 1 FROM collectives_between('-infinity', 'infinity')").fetchone()
        assert not conn.execute("SELECT 1 FROM collectives_series UNION ALL "
                                "SELECT 1 FROM collectives_series_cum").fetchone()
        conn.rollback()


def test_deploy_says_when_grafana_is_unreachable(monkeypatch):
    monkeypatch.setenv("GRAFANA_TOKEN", "glsa_not_a_real_token")
    url = f"http://127.0.0.1:{_free_port()}"
    r = CliRunner().invoke(main, ["dashboards", "deploy", "--url", url, "--dir", str(JSON_DIR)])
    assert r.exit_code == 1 and f"cannot reach Grafana at {url}" in r.output, r.output


def test_deploy_arguments(monkeypatch):
    for v in ("GRAFANA_TOKEN", "GRAFANA_USER", "GRAFANA_PASSWORD", "GRAFANA_URL"):
        monkeypatch.delenv(v, raising=False)
    r = CliRunner().invoke(main, ["dashboards", "deploy", "--dir", str(JSON_DIR)])
    assert r.exit_code == 2 and "--url" in r.output
    r = CliRunner().invoke(main, ["dashboards", "deploy", "--url", "http://127.0.0.1:1", "--dir", str(JSON_DIR)])
    assert r.exit_code == 1 and "no Grafana credentials" in r.output
    monkeypatch.setenv("GRAFANA_TOKEN", "x")
    r = CliRunner().invoke(main, ["dashboards", "deploy", "--url", "grafana.local:3000", "--dir", str(JSON_DIR)])
    assert r.exit_code == 2 and "not an http(s) URL" in r.output


# ---- the measurement model's panels (migration 0013) ------------------------------------------------------

from helpers import PER_RANK_PROFILES, calipers_own, reference  # noqa: E402

_LINE = re.compile(r"#(\d+) \[(focus|run)\]$")


def _fom(out: Path, name: str) -> float:
    """A FOM as the workload printed it (the output contract's `FOM name value unit` line)."""
    (value,) = re.findall(rf"^FOM {name} (\S+) s$", out.read_text(), re.M)
    return float(value)


def test_mpi_fraction_panel_shows_each_series_focus_window_as_the_file_records_it(filled, dsn):
    """Each line is one series on its focus window: its value is the mean over the series' runs of Σ MPI / Σ time
    over ranks in the loop, computed here from each file's records with caliper-reader. Runs of another problem
    size are other lines; runs without MPI measurements draw no line (not measured is not 0)."""
    with psycopg.connect(dsn) as conn:
        values = P.all_values(conn)
        t0, t1 = _time_range(conn)
        source_series = {Path(src).name: sid for src, sid in conn.execute("SELECT source, series_id FROM runs")}
        series_runs = dict(conn.execute("SELECT series_id, count(*) FROM runs WHERE status = 'ok' GROUP BY 1"))
        unmeasured = {sid for (sid,) in conn.execute(
            "SELECT DISTINCT series_id FROM series s JOIN runs r ON r.series_id = s.id "
            "WHERE s.environment->>'caliper' = 'none'")}
        shown = {title: shown_rows(conn, "commscope-mpi-fraction", title, t0, t1, values)
                 for title in ("MPI time fraction, mean over ranks", "MPI time fraction on the slowest rank")}
    lines: dict[int, list[tuple]] = {}
    for r in shown["MPI time fraction, mean over ranks"]:
        sid, window = _LINE.search(r["metric"]).groups()
        lines.setdefault(int(sid), []).append((window, r["mpi_fraction"]))
    slowest: dict[int, list[tuple]] = {}
    for r in shown["MPI time fraction on the slowest rank"]:
        sid, window = _LINE.search(r["metric"]).groups()
        slowest.setdefault(int(sid), []).append((window, r["mpi_fraction_slowest"]))
    checked = 0
    by_series: dict[int, list[float]] = {}
    for name in PER_RANK_PROFILES:
        ref = reference(name)
        per_rank = ref["focus"] or ref["run"]
        fraction = sum(v[1] + v[2] for v in per_rank.values()) / sum(v[0] for v in per_rank.values())
        # the rank with the longest time in the window, and its own MPI share
        t, mpi, sync = max(per_rank.values(), key=lambda v: v[0])[:3]
        by_series.setdefault(source_series[name], []).append((fraction, "focus" if ref["focus"] else "run",
                                                             (mpi + sync) / t))
    for sid, refs in by_series.items():
        if series_runs[sid] != len(refs) or len(lines.get(sid, [])) != 1:
            continue   # the series holds runs from elsewhere too, or spans several buckets
        ((window, value),) = lines[sid]
        assert window == refs[0][1], sid
        assert value == pytest.approx(sum(r[0] for r in refs) / len(refs), rel=1e-9), sid
        ((window, value),) = slowest[sid]
        assert window == refs[0][1], sid
        assert value == pytest.approx(sum(r[2] for r in refs) / len(refs), rel=1e-9), sid
        checked += 1
    assert checked >= 5, (checked, lines)
    # 24^3 and 64^3 halo3d blocking at 2 ranks are two series, two lines
    assert source_series["halo3d-blocking-loop-n2.mpi-profile.cali"] != \
        source_series["halo3d-blocking-loop-n2.comm-stats.cali"]
    assert {source_series["halo3d-blocking-loop-n2.mpi-profile.cali"],
            source_series["halo3d-blocking-loop-n2.comm-stats.cali"]} <= set(lines)
    # a profile without a `loop` region (made before it) has the workload's timers as its focus window, which
    # give no mean-rank loop time, so no fraction: no line rather than one over another interval
    assert source_series["halo3d-overlap-n2.runtime-profile.cali"] not in lines
    assert unmeasured and not unmeasured & set(lines), "runs without MPI measurements drew a fraction"
    assert not unmeasured & set(slowest), "runs without MPI measurements drew a slowest rank's fraction"


def test_pop_panel_has_the_efficiencies_of_runs_measured_only_by_their_timers(filled, dsn, workload_outputs):
    """A run without a profile has POP's efficiencies from the workload's own compute timers; the POP panel shows
    them on its focus window (the timed loop)."""
    out = workload_outputs / "halo3d-strong-n2.out"
    avg, mx, total = (_fom(out, n) for n in ("compute_time_avg", "compute_time_max", "total_time"))
    with psycopg.connect(dsn) as conn:
        values = P.all_values(conn)
        t0, t1 = _time_range(conn)
        (sid,) = conn.execute("SELECT series_id FROM runs WHERE source = %s", (str(out),)).fetchone()
        rows = shown_rows(conn, "commscope-mpi-fraction", "POP efficiencies", t0, t1, values)
    ((pe, lb, ce),) = [(r["parallel_efficiency"], r["load_balance"], r["communication_efficiency"]) for r in rows
                       if _LINE.search(r["metric"]).groups() == (str(sid), "focus")]
    assert lb == pytest.approx(avg / mx) and ce == pytest.approx(mx / total) and pe == pytest.approx(avg / total)


def test_strong_scaling_compares_the_same_experiment_on_the_workloads_timed_loop(filled, dsn, workload_outputs):
    """Speedup at 2 ranks is the 1-rank run's loop time over the 2-rank run's, the workload's own total_time;
    the weak-scaling runs (another global grid) are not in that line."""
    t = {n: _fom(workload_outputs / f"halo3d-strong-n{n}.out", "total_time") for n in (1, 2)}
    with psycopg.connect(dsn) as conn:
        values = P.all_values(conn)
        t0, t1 = _time_range(conn)
        rows = conn.execute(P.expand(P.SCALING.panel("Strong scaling: speedup").sql, t0, t1, values)).fetchall()
    strong = [r for r in rows if " 24,24,16 " in r[0] and "[focus]" in r[0]]
    assert [r[1] for r in strong] == [1, 2], rows
    assert strong[0][2] == pytest.approx(1.0) and strong[1][2] == pytest.approx(t[1] / t[2], rel=1e-9)


# ---- the halo exchange and MPI routine panels per series (migration 0017) ---------------------------------------

_SERIES_LABEL = re.compile(r"#(\d+) \[(loop|run)\]$")
_SERIES_LABEL_ID = re.compile(r"#(\d+)$")


def _output_of(source: str) -> Path | None:
    """The workload's stdout of a stored run: the run itself, beside its profile, or in its per-rank directory."""
    p = Path(source)
    if p.suffix == ".out":
        return p
    if p.is_dir():
        outs = sorted(p.glob("*.out"))
        return outs[0] if len(outs) == 1 else None
    return p.with_suffix(".out") if p.with_suffix(".out").exists() else None


def _halo_foms(out: Path) -> dict | None:
    """The loop's communication, compute and total times as the workload printed them (FOM lines)."""
    foms = dict(re.findall(r"^FOM (comm_time_avg|comm_time_max|compute_time_avg|compute_time_max|total_time) (\S+) s$",
                           out.read_text(), re.M))
    return {k: float(v) for k, v in foms.items()} if "comm_time_avg" in foms else None


def _series_runs(conn) -> dict[int, list[str]]:
    """The sources of each series' ok runs."""
    runs: dict[int, list[str]] = {}
    for sid, src in conn.execute("SELECT series_id, source FROM runs WHERE status = 'ok' AND series_id IS NOT NULL"):
        runs.setdefault(sid, []).append(src)
    return runs


def _panel_rows(conn, board, i):
    values = P.all_values(conn)
    t0, t1 = _time_range(conn)
    return conn.execute(P.expand(board.panels[i].sql, t0, t1, values)).fetchall()


def test_halo_panels_show_each_series_as_its_runs_timers_say(filled, dsn):
    """One bar per series: its mean communication time (average and slowest rank) and exposed fraction are the means
    over the series' runs of the FOMs in their .out files, read here with a regex; runs of another problem size
    (halo3d overlap 24^3 and 64^3 at 2 ranks, one series each before 0017) are other bars."""
    with psycopg.connect(dsn) as conn:
        comm, exposed, skew = (_panel_rows(conn, P.HALO, i) for i in range(3))
        series = _series_runs(conn)
        source_series = {Path(src).name: sid for sid, srcs in series.items() for src in srcs}
    bars = {int(_SERIES_LABEL.search(r[0]).group(1)): r[1:] for r in comm}
    fractions = {int(_SERIES_LABEL.search(r[0]).group(1)): r[1] for r in exposed}
    assert all(_SERIES_LABEL.search(r[0]).group(2) == "loop" for r in comm)
    checked = 0
    for sid, (avg, mx) in bars.items():
        outs = [_output_of(src) for src in series[sid]]
        foms = [_halo_foms(o) for o in outs if o]
        if len(foms) != len(outs) or not all(foms):
            continue   # a run whose output is not beside it
        assert avg == pytest.approx(statistics.mean(f["comm_time_avg"] for f in foms), rel=1e-9), sid
        assert mx == pytest.approx(statistics.mean(f["comm_time_max"] for f in foms), rel=1e-9), sid
        assert fractions[sid] == pytest.approx(
            statistics.mean(f["comm_time_max"] / f["total_time"] for f in foms), rel=1e-9), sid
        if len(foms) == 1:   # one run: one point, its own skew and imbalance
            (point,) = [r[2:] for r in skew if _SERIES_LABEL.search(r[1]).group(1) == str(sid)]
            assert point == pytest.approx((foms[0]["comm_time_max"] / foms[0]["comm_time_avg"],
                                           foms[0]["compute_time_max"] / foms[0]["compute_time_avg"]), rel=1e-9)
        checked += 1
    assert checked >= 8, (checked, bars)
    small, large = (source_series[n] for n in ("halo3d-overlap-n2.runtime-profile.cali",
                                               "halo3d-overlap-pml32-xboth-n2.comm-stats.cali"))
    assert small != large and {small, large} <= set(bars)


def _routine_times(name: str) -> dict[str, float]:
    """Exclusive time per MPI function summed over ranks, from the profile's records with caliper-reader (the
    innermost MPI function of a record, outside regions included, but Caliper's own: helpers.calipers_own)."""
    from caliperreader import read_caliper_contents
    src = DATA / name
    total: dict[str, float] = {}
    for f in (sorted(src.glob("rank-*.cali")) if src.is_dir() else [src]):
        for r in read_caliper_contents(str(f))[0]:
            t = next((float(r[a]) for a in ("sum#sum#time.duration", "sum#time.duration") if a in r), None)
            fn = r.get("mpi.function")
            fn = fn[-1] if isinstance(fn, list) else fn
            if t is not None and fn and not calipers_own(r, f):
                total[fn] = total.get(fn, 0.0) + t
    return total


def test_routine_panels_show_each_series_as_its_profiles_records_say(filled, dsn):
    """Per series on the whole run: each routine's time per run (mean over the runs that called it of its time summed
    over ranks), its share of the series' MPI time, and MPI_Barrier's share, against caliper-reader's records of the
    fixture profiles; series whose runs are all such fixtures are checked."""
    with psycopg.connect(dsn) as conn:
        top, barrier = _panel_rows(conn, P.ROUTINES, 0), _panel_rows(conn, P.ROUTINES, 1)
        series = _series_runs(conn)
    files = {str(DATA / n): n for n in PER_RANK_PROFILES if not n.endswith(".json")}
    by_series: dict[int, dict] = {}
    for series_name, fn, per_run, share, _calls in top:
        m = _SERIES_LABEL.search(series_name)
        assert m.group(2) == "run"
        by_series.setdefault(int(m.group(1)), {})[fn] = (per_run, share)
    shares = {int(_SERIES_LABEL.search(r[0]).group(1)): r[1] for r in barrier}
    checked = 0
    for sid, shown in by_series.items():
        if not all(src in files for src in series[sid]):
            continue
        times = [_routine_times(files[src]) for src in series[sid]]
        everything = sum(sum(t.values()) for t in times)
        expected = {}
        for fn in {fn for t in times for fn in t}:
            called = [t[fn] for t in times if fn in t]
            expected[fn] = (sum(called) / len(called), 100 * sum(called) / everything)
        top15 = sorted(expected, key=lambda fn: -expected[fn][0])[:15]
        assert set(shown) == set(top15), sid
        for fn in top15:
            assert shown[fn] == pytest.approx(expected[fn], rel=1e-6), (sid, fn)
        barrier_time = sum(t.get("MPI_Barrier", 0.0) for t in times)
        assert shares[sid] == pytest.approx(100 * barrier_time / everything, rel=1e-6, abs=1e-12), sid
        checked += 1
    assert checked >= 8, (checked, sorted(by_series))


def test_the_best_algorithm_table_shows_first_what_beats_the_library_default(filled, workload_outputs):
    """Issue 17: tables show first what differs from the default. On lab-a's real collsweep runs (the default
    Allreduce and Open MPI's forced algorithm 3, Bcast default in both), the table's rows where an algorithm beats
    the default come before the rows where the default is fastest, and each gain over the default equals the
    ratio of the two runs' own t_avg FOM lines."""
    fom = {}
    for name in ("collsweep-default", "collsweep-forced"):
        text = (workload_outputs / f"{name}.out").read_text()
        fom[name] = {(m[1], int(m[2])): float(m[3])
                     for m in re.finditer(r"^FOM (\w+?)_(\d+)B_t_avg (\S+) us$", text, re.M)}
    panel = next(p for p in P.COLLECTIVES.panels if p.title == "Best algorithm per size band")
    with psycopg.connect(filled) as conn:
        t0, t1 = _time_range(conn)
        values = {**P.all_values(conn), "system": ["lab-a"]}
        rows = [dict(zip(panel.columns, r)) for r in conn.execute(P.expand(panel.sql, t0, t1, values)).fetchall()]
    allreduce = [r for r in rows if r["collective"] == "allreduce"]
    assert len(allreduce) == len(fom["collsweep-default"]) // 2 > 0, rows   # allreduce and bcast sizes
    defaults_first_at = next((i for i, r in enumerate(rows) if r["best_algorithm"] == "default"), len(rows))
    assert all(r["best_algorithm"] != "default" for r in rows[:defaults_first_at])
    assert all(r["best_algorithm"] == "default" for r in rows[defaults_first_at:])
    for r in allreduce:
        d, f = fom["collsweep-default"][("allreduce", r["bytes"])], fom["collsweep-forced"][("allreduce", r["bytes"])]
        assert r["best_algorithm"] == ("default" if d <= f else r["best_algorithm"])
        assert r["gain_over_default"] == pytest.approx(d / min(d, f), rel=1e-6)
    gains = [r["gain_over_default"] for r in rows[:defaults_first_at]]
    assert gains == sorted(gains, reverse=True)


def test_the_collectives_panels_keep_each_interconnect_apart(dsn, tmp_path):
    """Real collsweep runs of one system and stack, one over shared memory and one over TCP loopback (the
    interconnect catalog's selections, each proved by the PARAM line the run prints), stored under their
    interconnects: each line of the latency panel and each row of the best-algorithm table is one interconnect's,
    equal to that run's own t_avg FOM lines, never the two runs averaged."""
    import interconnects
    stack, bdir = conftest.built_once("debian-openmpi4")
    coll = ["--coll", "allreduce", "--sizes", "8,64K", "--iters", "20", "--warmup", "2"]
    fom = {}
    with psycopg.connect(dsn) as conn:
        for name, entry in (("shm", "openmpi4/shm"), ("tcp", "openmpi4/tcp")):
            r = suite.run(stack, bdir, "collsweep", coll, 2,
                          env=interconnects.get(entry).environ())
            assert r.returncode == 0 and f"PARAM interconnect {entry}" in r.stdout, r.stderr[-800:]
            fom[name] = {int(m[1]): float(m[2])
                         for m in re.finditer(r"^FOM allreduce_(\d+)B_t_avg (\S+) us$", r.stdout, re.M)}
            assert len(fom[name]) == 2, r.stdout
            out = tmp_path / name / "collsweep.out"
            out.parent.mkdir()
            out.write_text(r.stdout)
            res = ingest(conn, [out], Provenance(system="lab-b", stack="debian-openmpi4", interconnect=name))
            assert len(res.inserted) == 1, res
        t0, t1 = _time_range(conn)
        values = P.all_values(conn)
        latency, best = P.COLLECTIVES.panels
        lines = conn.execute(P.expand(latency.sql, t0, t1, values)).fetchall()
        table = [dict(zip(best.columns, r)) for r in conn.execute(P.expand(best.sql, t0, t1, values)).fetchall()]
    assert fom["tcp"] != fom["shm"]
    by_line: dict[str, dict] = {}
    for series, size, us in lines:
        by_line.setdefault(series, {})[size] = us
    assert len(by_line) == 2, sorted(by_line)
    for name in ("shm", "tcp"):
        (line,) = [v for k, v in by_line.items() if f" {name} n2" in k]
        assert line == pytest.approx(fom[name], rel=1e-9), name
        rows = {r["bytes"]: r for r in table if r["interconnect"] == name}
        assert sorted(rows) == sorted(fom[name]), table
        for size, us in fom[name].items():
            assert rows[size]["latency_us"] == pytest.approx(us, rel=1e-9), (name, size)
            assert (rows[size]["system"], rows[size]["best_algorithm"]) == ("lab-b", "default")
    assert len(table) == 4, table


def test_a_series_whose_runs_carry_two_variant_labels_on_one_day_is_one_rollup_row(filled, dsn):
    """Two experiments of a study can have equal parameters under different Ramble variant labels: one series.
    Relabelling one of a series-day's runs (a rebuild of the group), then adding a run of that series and day
    under a third label (the add path), must neither fail nor split the group: one row per series, day and
    window, equal to the on-the-fly aggregate."""
    with psycopg.connect(dsn) as conn:
        run_id, series_id = conn.execute(
            "SELECT r.id, r.series_id FROM runs r JOIN run_windows w ON w.run_id = r.id WHERE r.status = 'ok' "
            "AND (SELECT count(*) FROM runs o WHERE o.series_id = r.series_id AND o.status = 'ok' "
            "AND date_trunc('day', o.started_at, 'UTC') = date_trunc('day', r.started_at, 'UTC')) > 1 "
            "ORDER BY r.id LIMIT 1").fetchone()
        conn.execute("UPDATE runs SET variant = 'zz-relabelled' WHERE id = %s", (run_id,))
        _assert_rollups_match_on_the_fly(conn)
        cols = [c for (c,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs' AND column_name "
            "NOT IN ('id', 'content_hash', 'variant') ORDER BY ordinal_position")]
        (copy,) = conn.execute(f"INSERT INTO runs (content_hash, variant, {', '.join(cols)}) "
                               f"SELECT content_hash || '-third', 'aa-third', {', '.join(cols)} FROM runs "
                               "WHERE id = %s RETURNING id", (run_id,)).fetchone()
        wcols = [c for (c,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'run_windows' "
            "AND column_name <> 'run_id' ORDER BY ordinal_position")]
        quoted = ", ".join(f'"{c}"' for c in wcols)
        conn.execute(f"INSERT INTO run_windows (run_id, {quoted}) SELECT %s, {quoted} FROM run_windows "
                     "WHERE run_id = %s", (copy, run_id))
        _assert_rollups_match_on_the_fly(conn)
        groups = conn.execute("SELECT day, \"window\", count(*) FROM run_metrics_daily WHERE series_id = %s "
                              "GROUP BY 1, 2", (series_id,)).fetchall()
        assert groups and all(n == 1 for _d, _w, n in groups), groups
        conn.rollback()


def test_the_heavy_panels_rollups_are_what_the_runs_windows_say(filled, dsn):
    """Migration 0029's rollups on every real fixture, against the runs' own windows summed in the test: the shown
    window of each series and day (MPI-fraction and USER / MPI / MPI_SYNC panels) and each run's compared window
    (procurement panels); both hold rows, and focus windows where the runs have them."""
    with psycopg.connect(dsn) as conn:
        assert _assert_shown_rollup_is_what_the_runs_say(conn) > 0
        assert _assert_comparison_rollup_is_what_the_runs_say(conn) > 0
        windows = {w for (w,) in conn.execute('SELECT DISTINCT "window" FROM v_shown_metrics_daily')}
        assert windows == {w for (w,) in conn.execute('SELECT DISTINCT "window" FROM v_comparison_daily')}
        assert "focus" in windows
