"""Every panel of every committed dashboard, run through Grafana's own code: npm @grafana/data (pinned in
dashboards/check/package-lock.json, installed by ci/setup.sh), by dashboards/check/transform.js.

A real store is filled by `commscope ingest` with the real fixtures (tests/data and its Ramble workspaces). For each
panel of dashboards/json, its query (the source panel's, for the Dashboard datasource) is expanded as Grafana
expands it on first load (the six "All" variables every option; a variable without All its first option, each after
the variables it names), run as the read-only role, typed as Grafana's PostgreSQL datasource types its frames, and
passed through the panel's transformations by @grafana/data's transformDataFrame with the standard transformers
registered. Checked: every transformation id is known, runs, and finds the fields its options name; the result is
not empty where the query returned rows; every field that fieldConfig or options name exists; the panel type gets
what it needs (barchart a string or time x field or options.xField, heatmap numeric buckets in numeric order,
timeseries a time field, xychart a numeric x and y).
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

import conftest
from helpers import CALIPERS_OWN_PATH, calipers_own
import suite
from grafana_draw import (default_variables, drawn, frames_of, grafana_transform, matrix_problems, nested_set,
                          node_or_skip, panel_problems, time_range)
from commscope.cli import main
from commscope.views import panels as P

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
JSON_DIR = ROOT / "dashboards" / "json"
CHECK = ROOT / "dashboards" / "check"
RAMBLE_WORKSPACES = ["smoke-openmpi4-mpi", "smoke-mpich4-matrix", "smoke-openmpi4-repeats", "smoke-mixed-caliper"]

@pytest.fixture(scope="module")
def workload_outputs(tmp_path_factory):
    """Real runs of the workloads whose panels no committed fixture feeds, as `commscope ingest` reads any run
    without Caliper: collsweep (collectives), pio (I/O), halo3d at 1 and 2 ranks with the same block per rank
    (weak scaling)."""
    stack, bdir = conftest.built_once("debian-openmpi4")
    out = tmp_path_factory.mktemp("outputs")
    scratch = tmp_path_factory.mktemp("pio")
    runs = [("collsweep", "collsweep", ["--coll", "allreduce", "--sizes", "8,1K", "--iters", "10", "--warmup", "2"], 2),
            ("pio", "pio", ["--n", "21,17,12", "--iters", "2", "--dir", str(scratch), "--method", "independent"], 2)]
    runs += [(f"halo3d-weak-n{n}", "halo3d", ["--local", "12,12,8", "--iters", "4", "--variant", "blocking"], n)
             for n in (1, 2)]
    for name, workload, args, n in runs:
        r = suite.run(stack, bdir, workload, args, n)
        assert r.returncode == 0, f"{name}: {r.stderr[-800:]}"
        (out / f"{name}.out").write_text(r.stdout)
    return out


# The stores the panels are drawn on: the fixtures and runs above (every panel has data), and the four real smoke
# campaigns alone (tests/data/ramble: Grafana's first-load defaults on a store of one kind of study).
STORES = {
    "fixtures": [[str(DATA), "--system", "lab-a"]] + [[str(DATA / "ramble" / ws)] for ws in RAMBLE_WORKSPACES],
    "smoke": [[str(DATA / "ramble" / ws)] for ws in RAMBLE_WORKSPACES],
}
# Panels empty on a store, and why. The regression detector (commscope check) and the change-point detector write
# the annotations tables; the fixtures' series are too short for a change point (test_change_points.py).
DETECTORS = ("commscope-mpi-fraction / Regressions", "commscope-mpi-fraction / Change points",
             "commscope-mpi-fraction / Series too noisy to gate")
# The MPI-fraction panels show each series' focus window (the workload's timed loop) where it has one, and the
# smoke campaigns' Caliper profiles measured MPI over the whole run only: their focus windows have no MPI fraction.
NOT_MEASURED = {
    "fixtures": set(),
    "smoke": {"commscope-mpi-fraction / MPI time fraction, mean over ranks",
              "commscope-mpi-fraction / MPI time fraction on the slowest rank"},
}
EMPTY = {
    "fixtures": set(DETECTORS),
    # the smoke campaigns here ran no collsweep or pio, and each experiment at 2 ranks only (no scaling)
    "smoke": set(DETECTORS) | NOT_MEASURED["smoke"] | {f"commscope-scaling / {t}" for t in (
        "Strong scaling: speedup", "Strong scaling: parallel efficiency", "Weak scaling: parallel efficiency",
        "POP efficiencies against ranks")} | {
        "commscope-collectives / Latency against message size", "commscope-collectives / Best algorithm per size band",
        "commscope-io / Bandwidth by method and group size", "commscope-io / Write bandwidth over time"},
}


def _fill(dsn: str, store: str, outputs: Path | None = None) -> str:
    """The store filled by `commscope ingest`; a DSN of the read-only role."""
    env = {"COMMSCOPE_DB_URL": dsn}
    runs = STORES[store] + ([[str(outputs), "--system", "lab-a", "--stack", "debian-openmpi4"]] if outputs else [])
    for args in runs:
        r = CliRunner().invoke(main, ["ingest", *args, "--quiet"], env=env)
        assert r.exit_code == 0, (args, r.output)
    return conftest.grant_local(dsn, "grafana_ro")


def _cases(conn, t0, t1, chosen: dict | None = None) -> tuple[list[dict], dict]:
    """One case per panel of every committed dashboard: (cases for transform.js, key -> (panel, number of rows
    of its query, its frames)); the variables as on first load, but those CHOSEN."""
    cases, info = [], {}
    for f in sorted(JSON_DIR.glob("*.json")):
        doc = json.loads(f.read_text())
        values = default_variables(conn, doc, t0, t1) | {k: v for k, v in (chosen or {}).items()
                                                         if any(x["name"] == k for x in doc["templating"]["list"])}
        by_id = {p["id"]: p for p in doc["panels"]}
        for p in doc["panels"]:
            target = p["targets"][0]
            # The Dashboard datasource hands over the source panel's query results, before its transformations.
            source = by_id[target["panelId"]]["targets"][0] if "panelId" in target else target
            frames, rows = frames_of(conn, source, values, t0, t1)
            key = f"{doc['uid']} / {p['title']}"
            cases.append({"key": key, "transformations": p.get("transformations", []), "frames": frames})
            info[key] = (p, rows, frames)
    return cases, info


@pytest.mark.parametrize("store", list(STORES))
def test_every_panel_draws_through_grafanas_own_code_with_the_default_variables(dsn, store, request):
    node_or_skip()
    ro = _fill(dsn, store, request.getfixturevalue("workload_outputs") if store == "fixtures" else None)
    with psycopg.connect(ro) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "grafana_ro"
        t0, t1 = time_range(conn)
        cases, info = _cases(conn, t0, t1)
    results = grafana_transform(cases)
    problems = [f"{key}: {p}" for key, (panel, _, frames) in info.items()
                for p in panel_problems(panel, results[key]) + matrix_problems(panel, frames, results[key])]
    assert not problems, "\n".join(problems)
    # Every panel draws, but those with nothing in this store to show (and then its query has no rows, or the
    # rows it has measured nothing the panel draws).
    empty = {k for k in info if not drawn(results[k])}
    assert empty == EMPTY[store], f"empty: {sorted(empty - EMPTY[store])}; not empty: {sorted(EMPTY[store] - empty)}"
    assert all(info[k][1] == 0 for k in empty - NOT_MEASURED[store]), [(k, info[k][1]) for k in empty]
    # Only one panel uses a transformation that @grafana/data lacks (prepareTimeSeries: three measures per metric).
    assert {k for k in info if results[k]["documented"]} == {"commscope-mpi-fraction / POP efficiencies"}
    assert len(info) == sum(len(json.loads(f.read_text())["panels"]) for f in JSON_DIR.glob("*.json"))


def test_the_procurement_reference_defaults_to_the_combination_with_most_runs_and_never_names_one_without(dsn):
    """Grafana takes each reference variable's first option on first load; that must be the system with most runs,
    its stack with most runs and that pair's interconnect with most runs (what the report picks), counted here from
    the runs' rows. And every option a chained selection offers must have runs."""
    ro = _fill(dsn, "fixtures")
    doc = json.loads((JSON_DIR / "commscope-procurement.json").read_text())
    refs = [v for v in doc["templating"]["list"] if v["name"].startswith("reference_")]
    with psycopg.connect(ro) as conn:
        t0, t1 = time_range(conn)
        rows = conn.execute("SELECT system, stack, interconnect FROM v_runs").fetchall()
        values = default_variables(conn, doc, t0, t1)

        def most(counter):
            return min(counter, key=lambda k: (-counter[k], k))
        system = most(collections.Counter(r[0] for r in rows))
        stack = most(collections.Counter(r[1] for r in rows if r[0] == system))
        interconnect = most(collections.Counter(r[2] for r in rows if r[:2] == (system, stack)))
        assert (values["reference_system"], values["reference_stack"], values["reference_interconnect"]) == (
            system, stack, interconnect)
        assert P.reference_values(conn, system) == {"reference_system": system, "reference_stack": stack,
                                                    "reference_interconnect": interconnect}
        # Every selection the chained variables offer names runs.
        have = set(rows)
        offered = 0

        def options(v, chosen):
            return [str(r[0]) for r in conn.execute(P.expand(v["query"], t0, t1, chosen, set())).fetchall()]
        for s in options(refs[0], {}):
            for st in options(refs[1], {"reference_system": s}):
                for ic in options(refs[2], {"reference_system": s, "reference_stack": st}):
                    offered += 1
                    assert (s, st, ic) in have, f"the variables offer {s} / {st} / {ic}, which has no runs"
        assert offered == len(have)


def _hatchet(path: Path):
    """Hatchet's GraphFrame of a profile (from_caliperreader). Hatchet duplicates (node, rank) rows of one-element
    paths, the copies beyond one all zero (/work/shared/notes/offline-toolchain.md): the row with time is kept."""
    import hatchet as ht
    gf = ht.GraphFrame.from_caliperreader(str(path))
    df = gf.dataframe
    df = df.assign(_t=df["time"].abs()).sort_values("_t", kind="stable").drop(columns="_t")
    gf.dataframe = df[~df.index.duplicated(keep="last")]
    return gf


def _mean_over_ranks(gf, column: str) -> dict[tuple, float]:
    """call path -> COLUMN of Hatchet's dataframe, mean over its ranks."""
    df = gf.dataframe.reset_index()
    ranks = df["rank"].nunique()
    total: dict = collections.defaultdict(float)
    for node, t in zip(df["node"], df[column]):
        total[tuple(n.frame["name"] for n in node.path())] += float(t)
    total.pop(CALIPERS_OWN_PATH, None)   # Caliper's own MPI_Comm_dup (helpers.calipers_own)
    return {p: t / ranks for p, t in total.items()}


def _hatchet_inclusive_mean(path: Path) -> dict[tuple, float]:
    """call path -> inclusive time, mean over the profile's ranks (Hatchet's update_inclusive_columns)."""
    gf = _hatchet(path)
    gf.update_inclusive_columns()
    return _mean_over_ranks(gf, "time (inc)")


def _one_panel(dsn: str, key: str, chosen: dict | None = None) -> tuple[dict, list]:
    """Panel KEY ("dashboard / title") run as Grafana would on the store behind DSN, read as the read-only role,
    with the variables CHOSEN (else as on first load): @grafana/data's result and the problems panel_problems finds
    in it."""
    with psycopg.connect(conftest.grant_local(dsn, "grafana_ro")) as conn:
        t0, t1 = time_range(conn)
        cases, info = _cases(conn, t0, t1, chosen)
    res = grafana_transform([c for c in cases if c["key"] == key])[key]
    return res, panel_problems(info[key][0], res)


def test_the_flame_graph_shows_the_call_tree_as_hatchet_reads_the_profile(dsn):
    """The call-tree panel, through @grafana/data, on a store holding one real 4-rank profile: each region's width
    (value) is its inclusive time averaged over ranks as Hatchet computes it from the same file, the call paths are
    Hatchet's, and the widest regions come in the same order."""
    node_or_skip()
    profile = DATA / "halo3d-overlap-n4.runtime-profile.cali"
    r = CliRunner().invoke(main, ["ingest", str(profile), "--system", "lab-a", "--quiet"],
                           env={"COMMSCOPE_DB_URL": dsn})
    assert r.exit_code == 0, r.output
    res, problems = _one_panel(dsn, "commscope-call-tree / Call tree of the latest profiled run")
    assert not problems
    (frame,) = res["frames"]
    shown = {path[1:]: value for path, value, _ in nested_set(frame) if len(path) > 1}
    expected = _hatchet_inclusive_mean(profile)
    assert set(shown) == set(expected), sorted(set(shown) ^ set(expected))
    for path, t in expected.items():
        assert shown[path] == pytest.approx(t, rel=1e-9, abs=1e-12), path
    widest = sorted(expected, key=lambda p: -expected[p])[:5]
    assert sorted(widest, key=lambda p: -shown[p]) == widest
    assert len(expected) >= 5


def test_the_slower_regions_are_hatchets_subtraction_of_a_real_two_night_regression(dsn):
    """The diff panel, through @grafana/data, on five real nights of one series (tests/gate-history: night 5 ran beside
    two busy loops): its rows are Hatchet's graphframe subtraction of night 4 from night 5 (exclusive time per call
    path, mean over ranks), the paths that got slower, the most first; each share is the path's part of the growth of
    the call tree's whole time."""
    node_or_skip()
    history = ROOT / "tests" / "gate-history"
    nights = [history / f"halo3d-blocking-24-n2.mpi.night{n}.cali" for n in range(1, 6)]
    for f in nights:
        r = CliRunner().invoke(main, ["ingest", str(f), str(f.with_suffix(".out")), "--system", "lab-a", "--quiet"],
                               env={"COMMSCOPE_DB_URL": dsn})
        assert r.exit_code == 0, r.output
    res, problems = _one_panel(dsn, "commscope-call-tree / Regions that got slower than the run before")
    assert not problems and not res["unknown"]
    (frame,) = res["frames"]
    f = {x["name"]: x["values"] for x in frame["fields"]}
    shown = {tuple(region.split("/")): (change, share) for region, change, share in
             zip(f["region"], f["change_s"], f["share_percent"])}
    gf5, gf4 = _hatchet(nights[4]), _hatchet(nights[3])
    diff = _mean_over_ranks(gf5 - gf4, "time")
    grown = sum(diff.values())   # the call tree's whole time: regions and MPI calls
    slower = {p: d for p, d in diff.items() if d > 0}
    assert set(shown) == set(slower), sorted(set(shown) ^ set(slower))
    for p, d in slower.items():
        assert shown[p][0] == pytest.approx(d, rel=1e-9, abs=1e-15), p
    assert list(f["region"]) == sorted(f["region"], key=lambda r: -dict(zip(f["region"], f["change_s"]))[r])
    top = max(slower, key=slower.get)
    assert f["region"][0] == "/".join(top), (f["region"][:3], top)
    assert grown > 0
    for p, d in slower.items():
        assert shown[p][1] == pytest.approx(100 * d / grown, rel=1e-6), p


# ---- the call tree as caliper-reader reads the profile ----------------------------------------------------------

PROFILE = DATA / "halo3d-overlap-n4.runtime-profile.cali"
FLAME = "commscope-call-tree / Call tree of the latest profiled run"
DIFF = "commscope-call-tree / Regions that got slower than the run before"


def caliper_tree(path: Path) -> dict:
    """The call tree of a profile as caliper-reader reads its records: {"ranks": the ranks with a record, "excl":
    call path -> exclusive seconds per rank (0 where a rank has no record there), "incl": the same inclusive (a path
    and every path under it), "slowest": the rank with the most time in the call tree (the lowest among equals)}."""
    import caliperreader
    records, _ = caliperreader.read_caliper_contents(str(path))
    ranks = sorted({int(r["mpi.rank"]) for r in records if "mpi.rank" in r})
    at = {r: i for i, r in enumerate(ranks)}
    excl: dict = collections.defaultdict(lambda: [0.0] * len(ranks))
    for r in records:
        t = r.get("sum#sum#time.duration", r.get("sum#time.duration"))
        if "path" not in r or t is None or "mpi.rank" not in r or calipers_own(r, path):
            continue
        p = tuple(r["path"]) if isinstance(r["path"], list) else (r["path"],)
        excl[p][at[int(r["mpi.rank"])]] += float(t)
    incl: dict = collections.defaultdict(lambda: [0.0] * len(ranks))
    for p, times in excl.items():
        for i in range(1, len(p) + 1):
            incl[p[:i]] = [a + b for a, b in zip(incl[p[:i]], times)]
    tree = [sum(times[i] for times in excl.values()) for i in range(len(ranks))]
    slowest = ranks[tree.index(max(tree))]
    return {"ranks": ranks, "excl": dict(excl), "incl": dict(incl), "slowest": slowest}


def _ingest(dsn: str, *args: str) -> None:
    r = CliRunner().invoke(main, ["ingest", *args, "--system", "lab-a", "--quiet"], env={"COMMSCOPE_DB_URL": dsn})
    assert r.exit_code == 0, r.output


def _chromium_or_skip() -> None:
    node_or_skip()
    if not (CHECK / "flamegraph" / "node_modules" / "@grafana" / "flamegraph").is_dir():
        pytest.fail("@grafana/flamegraph is not installed: run bash dashboards/check/install.sh (ci/setup.sh does)")
    if not (os.environ.get("COMMSCOPE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no Chromium to draw Grafana's flame graph in (install chromium or set COMMSCOPE_CHROMIUM)")


def grafana_flame_graph(frame: dict, unit: str) -> dict:
    """What Grafana's own FlameGraph component (@grafana/flamegraph) draws of FRAME in headless Chromium
    (dashboards/check/flamegraph/render.js): the labels it wrote on its canvas with their bars, and its top table."""
    fields = [{**f, "config": {"unit": unit} if f["type"] == "number" else {}} for f in frame["fields"]]
    r = subprocess.run(["node", str(CHECK / "flamegraph" / "render.js")], input=json.dumps({"fields": fields}),
                       capture_output=True, text=True, cwd=CHECK / "flamegraph", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert not out["error"], out["error"]
    return out


def drawn_bars(labels: list[dict]) -> dict[tuple, float]:
    """Call path (labels from the root down) -> the bar's width as a share of the root's, from what the flame graph
    drew: each bar's level is its y over the row height (22 px), its parent the bar one level up that spans it.
    A bar of value v is v * pixels-per-tick wide, less its two borders (one device pixel together)."""
    bars = []
    for d in labels:
        name = d["text"].rsplit(" (", 1)[0] if d["text"].endswith(")") else d["text"]
        bars.append((round(d["y"] / (22 * d["dpr"])), d["x"], d["width"] + d["dpr"], name))
    bars.sort()
    root = [b for b in bars if b[0] == 0]
    assert len(root) == 1, root
    paths: dict = {}
    for level, x, w, name in bars:
        parent = () if level == 0 else next(
            p for (lv, px, pw, _), p in paths.items() if lv == level - 1 and px - 1e-6 <= x and x + w <= px + pw + 1e-6)
        paths[(level, x, w, name)] = parent + (name,)
    return {p: w / root[0][2] for (_, _, w, _), p in paths.items()}


UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}


def _seconds(text: str) -> float:
    number, unit = text.split(" ")
    return float(number) * UNITS[unit]


def test_grafanas_flame_graph_component_draws_caliper_readers_call_tree(dsn):
    """The call-tree panel's frame, from its SQL on a store holding one real 4-rank profile, drawn by Grafana's own
    FlameGraph (@grafana/flamegraph 13.0.1) in headless Chromium. Read back: every label it wrote on its canvas and
    the bar it wrote it in (the component draws on a canvas; the page records its rect and fillText calls), and its
    top table. Each drawn region is a call path of the profile as caliper-reader reads it, its bar as wide, against
    the root's, as its inclusive time (mean over ranks) against the whole tree's, and the five widest regions are
    drawn; the top table's self time per label is caliper-reader's (to the 3 digits it shows)."""
    _chromium_or_skip()
    _ingest(dsn, str(PROFILE))
    with psycopg.connect(conftest.grant_local(dsn, "grafana_ro")) as conn:
        t0, t1 = time_range(conn)
        _, info = _cases(conn, t0, t1)
    panel, rows, (frame,) = info[FLAME]
    drawn = grafana_flame_graph(frame, panel["fieldConfig"]["defaults"]["unit"])
    ref = caliper_tree(PROFILE)
    n = len(ref["ranks"])
    mean = {p: sum(t) / n for p, t in ref["incl"].items()}
    total = sum(t for p, t in mean.items() if len(p) == 1)
    bars = drawn_bars(drawn["labels"])
    assert bars.pop(("total",)) == 1.0
    shown = {p[1:]: w for p, w in bars.items()}
    assert set(shown) <= set(mean), sorted(set(shown) - set(mean))
    for p, w in shown.items():
        assert w == pytest.approx(mean[p] / total, rel=1e-9), p
    widest = sorted(mean, key=lambda p: -mean[p])[:5]
    assert set(widest) <= set(shown), [p for p in widest if p not in shown]
    assert len(shown) >= 5
    # The top table: one row per label, its self time summed over the label's call paths.
    header, *table = drawn["table"]
    assert header[1:] == ["Symbol", "Self", "Total"], header
    self_by_label: dict = collections.defaultdict(float)
    for p, t in ref["excl"].items():
        self_by_label[p[-1]] += sum(t) / n
    got = {row[1]: _seconds(row[2]) for row in table}
    assert set(got) == set(self_by_label) | {"total"}, sorted(set(got) ^ set(self_by_label))
    for label, t in self_by_label.items():
        assert got[label] == pytest.approx(t, rel=5e-3, abs=1e-9), label


def test_the_flame_graph_on_the_slowest_rank_is_that_ranks_tree_as_caliper_reader_reads_it(dsn):
    """rank_stat = slowest: the call-tree panel shows the tree of the profile's slowest rank (the most time in the
    call tree, from caliper-reader's records), each node's inclusive and exclusive time on that rank, the rank
    named at the root; rank_stat = mean (the first option) keeps the mean over ranks."""
    node_or_skip()
    _ingest(dsn, str(PROFILE))
    ref = caliper_tree(PROFILE)
    col = ref["ranks"].index(ref["slowest"])
    for stat in ("slowest", "mean"):
        res, problems = _one_panel(dsn, FLAME, {"rank_stat": stat})
        assert not problems, problems
        (frame,) = res["frames"]
        rows = nested_set(frame)
        assert rows[0][0] == (("total, rank %d" % ref["slowest"]) if stat == "slowest" else "total",)
        shown = {path[1:]: (value, self_) for path, value, self_ in rows[1:]}
        assert set(shown) == set(ref["incl"])
        for p, (value, self_) in shown.items():
            if stat == "slowest":
                want = (ref["incl"][p][col], ref["excl"].get(p, [0.0] * len(ref["ranks"]))[col])
            else:
                want = (sum(ref["incl"][p]) / len(ref["ranks"]),
                        sum(ref["excl"].get(p, [0.0] * len(ref["ranks"]))) / len(ref["ranks"]))
            assert value == pytest.approx(want[0], rel=1e-9, abs=1e-12), (stat, p)
            assert self_ == pytest.approx(want[1], rel=1e-9, abs=1e-12), (stat, p)
    # what the report and the query tests start the call-tree variables at is what Grafana starts them at
    with psycopg.connect(dsn) as conn:
        doc = json.loads((JSON_DIR / "commscope-call-tree.json").read_text())
        first = default_variables(conn, doc, *time_range(conn))
    assert {k: first[k] for k in P.CALL_TREE_FIRST} == P.CALL_TREE_FIRST
    # the slowest rank is not every node's slowest: the tree is one rank's, not the maximum per node
    assert any(ref["incl"][p][col] < max(ref["incl"][p]) for p in ref["incl"])


def test_the_gates_findings_link_to_the_call_tree_diff_of_their_two_campaigns(dsn, tmp_path):
    """commscope check on five real nights of one series (tests/gate-history, one campaign each): each finding's
    JSON carries diff_url, a relative Grafana URL of the call-tree dashboard whose percent-encoded variables name its
    series, the judged campaign (night 5) and its last baseline campaign (night 4), campaigns that hold that series'
    runs; the diff panel with those variables returns Hatchet's subtraction of night 4 from night 5, slowest first."""
    import urllib.parse
    node_or_skip()
    history = ROOT / "tests" / "gate-history"
    nights = [history / f"halo3d-blocking-24-n2.mpi.night{n}.cali" for n in range(1, 6)]
    for f in nights:
        _ingest(dsn, str(f), str(f.with_suffix(".out")))
    md = tmp_path / "check.md"
    r = CliRunner().invoke(main, ["check", "--format", "json", "--markdown", str(md)],
                           env={"COMMSCOPE_DB_URL": dsn})
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.output[r.output.index("{"):])
    found = [s for s in doc["series"] if s["diff_url"]]
    assert found, doc["series"]
    with psycopg.connect(dsn) as conn:
        order = [c for c, in conn.execute("SELECT campaign_id FROM runs GROUP BY 1 ORDER BY min(started_at)")]
        profiled = {sid for sid, in conn.execute(
            "SELECT DISTINCT series_id FROM runs r WHERE EXISTS (SELECT 1 FROM node_metrics n WHERE n.run_id = r.id)")}
    # each night stored the profile's run and the workload's output alone (a series of its own, without call tree)
    assert {s["series_id"] for s in found} & profiled
    for s in found:
        url = urllib.parse.urlsplit(s["diff_url"])
        assert url.path == "/d/commscope-call-tree/call-tree" and not url.netloc, s["diff_url"]
        chosen = {k[len("var-"):]: v for k, v in urllib.parse.parse_qsl(url.query)}
        assert chosen == {"series": str(s["series_id"]), "campaign": str(order[4]), "baseline": str(order[3])}
        res, problems = _one_panel(dsn, DIFF, chosen)
        assert not problems
        (frame,) = res["frames"]
        f = {x["name"]: x["values"] for x in frame["fields"]}
        if s["series_id"] not in profiled:
            assert not f["region"]
            continue
        diff = _mean_over_ranks(_hatchet(nights[4]) - _hatchet(nights[3]), "time")
        slower = {p: d for p, d in diff.items() if d > 0}
        assert set(tuple(x.split("/")) for x in f["region"]) == set(slower)
        assert tuple(f["region"][0].split("/")) == max(slower, key=slower.get)
    with psycopg.connect(dsn) as conn:
        notes = conn.execute("SELECT text, tags FROM annotations WHERE 'commscope-check' = ANY(tags)").fetchall()
    for s in found:
        for text, tags in notes:
            if f"series:{s['series_id']}" in tags and s["metric"] in tags:
                assert text.endswith(f"; call tree diff: {s['diff_url']}"), text
    # (annotations are written for regressions and improvements; these nights give suspects, so none here)
    assert len(notes) == sum(s["verdict"] in ("regression", "improvement") for s in found)
    moved = [s for s in found if s["verdict"] in ("regression", "improvement", "suspect") and s["attribution"]]
    assert moved, [s["verdict"] for s in found]
    for s in moved:
        assert f"[call tree diff]({s['diff_url']})" in md.read_text()
