"""Caliper profiles of applications commscope did not write (issue 15), stored and checked against
references taken by other routes: the upstream caliper-reader's records (MPI time is the records
carrying `mpi.function`, time outside regions the records with no path), and the applications' own
timers printed on stdout (hypre's PCG Solve wall clock, Kripke's Timers table). The files are real
runs of LLNL AMG2023, LLNL Kripke, an unmodified Intel MPI Benchmarks binary and Caliper's own loop
example, plus cali-query's JSON of some of them; tests/thirdparty/ says how each was made. Metadata
fallbacks are checked on copies of these files with globals renamed or changed in the test (edited_copy)."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
from helpers import calipers_own, cli_in_process
from caliperreader import read_caliper_contents

from commscope.workflow.ingest import Provenance, ingest
from commscope.read.records import ReadOptions

THIRD = Path(__file__).parent / "thirdparty"
TIME = ("sum#sum#time.duration", "sum#time.duration")
AMG_KEYS = ("Problem", "Size-x", "Size-y", "Size-z", "Solver")
# The folders of Caliper profiles (ramble-imb-preload/ is a Ramble workspace: tests/test_thirdparty_ramble.py)
CALI = sorted(p for d in ("amg2023", "kripke", "imb-unannotated") for p in (THIRD / d).rglob("*.cali"))
RUNTIME = [p for p in CALI if ".spot." not in p.name]
SPOT = [p for p in CALI if p.name.endswith(".spot.cali")]


def cli(*args, dsn):
    """The real command, in this process (cli_in_process)."""
    import os
    return cli_in_process(args, {**os.environ, "COMMSCOPE_DB_URL": dsn})


def app_of(path: Path) -> str:
    return {"amg2023": "amg", "kripke": "kripke", "imb-unannotated": "IMB-MPI1"}[path.parent.name]


def per_rank_reference(path: Path, focus: str | None = None) -> dict[int, list[float]]:
    """rank -> [time, MPI time] over the run (or the FOCUS region's subtrees), from caliper-reader."""
    records, _ = read_caliper_contents(str(path))
    acc: dict = defaultdict(lambda: [0.0, 0.0])
    for r in records:
        t = next((float(r[a]) for a in TIME if a in r), None)
        if t is None or calipers_own(r):
            continue
        p = r.get("path") or []
        p = p if isinstance(p, list) else [p]
        if focus and focus not in p:
            continue
        a = acc[int(r["mpi.rank"])]
        a[0] += t
        if "mpi.function" in r:
            a[1] += t
    return dict(acc)


def spot_reference(path: Path) -> tuple[float, float]:
    """(mean rank's time, mean rank's MPI time) from a spot file: Σ of each record's across-rank sum of
    exclusive time over the job's rank count, the record without a path included. (Spot's avg is over the
    ranks that made the record: AMG2023's MPI_Test on some ranks only would count as if on all.)"""
    records, g = read_caliper_contents(str(path))
    ranks = int(g["mpi.world.size"])
    total = mpi = 0.0
    for r in records:
        v = r.get("sum#scale#sum#time.duration.ns")
        if v is None or calipers_own(r):
            continue
        total += float(v) / ranks
        if "mpi.function" in r:
            mpi += float(v) / ranks
    return total, mpi


def app_timer(path: Path) -> float | None:  # noqa: D401
    """The application's own timer of its solve phase, from its stdout: hypre's `PCG Solve` wall clock
    (the maximum over ranks), or Kripke's `Solve` timer (rank 0's)."""
    text = path.with_suffix(".out").read_text()
    m = re.search(r"PCG Solve:\s*\n\s*wall clock time = ([0-9.eE+-]+) seconds", text)
    if m:
        return float(m.group(1))
    m = re.search(r"^\s*Solve\s+\d+\s+([0-9.eE+-]+)\s*$", text, re.M)
    return float(m.group(1)) if m else None


def _store(dsn, paths, **opts):
    with psycopg.connect(dsn) as conn:
        return ingest(conn, paths, Provenance(), read=ReadOptions(**opts))


def _windows(dsn) -> dict:
    """source file name -> window -> v_run_metrics row."""
    with psycopg.connect(dsn) as conn:
        cur = conn.execute("SELECT r.source, m.* FROM v_run_metrics m JOIN runs r ON r.id = m.run_id")
        cols = [d.name for d in cur.description]
        out: dict = defaultdict(dict)
        for row in cur.fetchall():
            d = dict(zip(cols, row))
            out[Path(d["source"]).name][d["window"]] = d
    return out


@pytest.fixture
def stored(dsn):
    """Every third-party profile stored, each application with the name and parameters a user gives."""
    _store(dsn, [THIRD / "amg2023"], param_keys=AMG_KEYS)
    _store(dsn, [THIRD / "kripke"], app="kripke")
    _store(dsn, [THIRD / "imb-unannotated"], app="IMB-MPI1")
    return dsn


def test_every_runtime_profile_is_stored_with_the_records_numbers(stored):
    got = _windows(stored)
    with psycopg.connect(stored) as conn:
        runs = {Path(s).name: (app, ranks, src) for s, app, ranks, src in conn.execute(
            "SELECT source, app, ranks, metadata->>'ranks_source' FROM runs")}
    assert len(runs) == len(RUNTIME) + len(SPOT)
    for f in RUNTIME:
        ref = per_rank_reference(f)
        app, ranks, source = runs[f.name]
        assert app == app_of(f)
        assert ranks == len(ref), f.name   # every rank left records
        assert source == ("jobsize" if "amg" in f.name else "mpi.world.size")
        row = got[f.name]["run"]
        times = {r: v[0] for r, v in ref.items()}
        slowest = max(times, key=times.get)
        assert row["time_s"] == pytest.approx(times[slowest], rel=1e-9), f.name
        assert row["ranks_measured"] == len(ref)
        if "nompi" in f.name:
            # recorded without profile.mpi: MPI was not measured, which is not 0
            assert all(v[1] == 0 for v in ref.values())
            for col in ("mpi_time_avg_s", "mpi_fraction_avg", "mpi_fraction_slowest", "load_balance",
                        "parallel_efficiency"):
                assert row[col] is None, (f.name, col)
            continue
        mpi = {r: v[1] for r, v in ref.items()}
        assert row["mpi_time_avg_s"] == pytest.approx(sum(mpi.values()) / len(mpi), rel=1e-9), f.name
        assert row["mpi_fraction_avg"] == pytest.approx(sum(mpi.values()) / sum(times.values()), rel=1e-9), f.name
        assert row["mpi_fraction_slowest"] == pytest.approx(mpi[slowest] / times[slowest], rel=1e-9), f.name


def test_spot_profiles_give_the_mean_rank_and_leave_the_slowest_unknown(stored):
    """Spot keeps aggregates over ranks: the slowest rank's run time is unknown, unless the job had one
    rank, which is then the mean rank and the slowest."""
    got = _windows(stored)
    one_rank = 0
    for f in SPOT:
        total, mpi = spot_reference(f)
        row = got[f.name]["run"]
        assert row["mpi_fraction_avg"] == pytest.approx(mpi / total, rel=1e-4), f.name
        assert row["mpi_time_avg_s"] == pytest.approx(mpi, rel=1e-4), f.name
        if read_caliper_contents(str(f))[1]["mpi.world.size"] == "1":
            one_rank += 1
            assert row["time_s"] == pytest.approx(total, rel=1e-4), f.name
            assert row["mpi_fraction_slowest"] == pytest.approx(mpi / total, rel=1e-4), f.name
            assert row["ranks_measured"] == 1
        else:
            assert row["time_s"] is None and row["mpi_fraction_slowest"] is None, f.name
    assert one_rank >= 2   # AMG2023 and Kripke at 1 rank


def test_an_unannotated_binary_keeps_its_mpi_time_per_function(stored):
    f = THIRD / "imb-unannotated" / "imb-mpi1-n2.runtime-profile.cali"
    records, _ = read_caliper_contents(str(f))
    per_function: dict = defaultdict(float)
    for r in records:
        if "mpi.function" in r and not calipers_own(r):
            per_function[r["mpi.function"]] += float(r["sum#sum#time.duration"])
    with psycopg.connect(stored) as conn:
        rows = dict(conn.execute(
            "SELECT m.function, m.time_total FROM mpi_metrics m JOIN runs r ON r.id = m.run_id "
            "WHERE r.app = 'IMB-MPI1'").fetchall())
    assert rows.keys() == per_function.keys()
    for fn, t in per_function.items():
        assert rows[fn] == pytest.approx(t, rel=1e-9), fn
    # all its time is MPI or outside every region: the fraction is MPI over both, not 100 %
    ref = per_rank_reference(f)
    frac = sum(v[1] for v in ref.values()) / sum(v[0] for v in ref.values())
    assert _windows(stored)[f.name]["run"]["mpi_fraction_avg"] == pytest.approx(frac, rel=1e-9)
    assert frac < 0.99


# hypre prints the maximum over ranks; Kripke prints rank 0's, which is the slowest only in one-rank runs
TIMED = [p for p in CALI if app_timer(p) is not None
         and ("kripke" not in p.name or "-n1." in p.name)]


@pytest.mark.parametrize("path", TIMED, ids=lambda p: p.name)
def test_focus_on_the_solve_phase_equals_the_application_s_own_timer(dsn, path):
    """--focus Solve: the focus window's time is the slowest rank's time in the Solve subtrees, which
    hypre prints as the PCG Solve wall clock (max over ranks)."""
    own = app_timer(path)
    _store(dsn, [path], app=app_of(path), focus="Solve")
    row = _windows(dsn)[path.name]["focus"]
    assert row["focus_region"] == "Solve"
    assert row["time_s"] == pytest.approx(own, abs=5e-5), path.name


def test_declared_parameters_make_series_and_scaling_pairs(stored):
    """AMG2023 with --param-keys: one series per rank count and Caliper mode; problem and solver are
    parameters; weak scaling pairs the three rank counts of one mode (same problem per rank)."""
    with psycopg.connect(stored) as conn:
        rows = conn.execute("SELECT r.ranks, s.parameters, s.environment->>'caliper', r.series_id FROM runs r "
                            "JOIN series s ON s.id = r.series_id WHERE r.app = 'amg'").fetchall()
        weak = conn.execute("SELECT weak_scaling_key(s.app, s.parameters, s.environment), "
                            "array_agg((s.parameters->>'ranks')::int ORDER BY (s.parameters->>'ranks')::int) "
                            "FROM series s WHERE s.app = 'amg' GROUP BY 1").fetchall()
        searched = conn.execute("SELECT count(*) FROM runs WHERE metadata @> '{\"Solver\": \"PCG\"}'").fetchone()[0]
    assert len(rows) == 7 and len({r[3] for r in rows}) == 7
    for ranks, params, _caliper, _sid in rows:
        assert params == {"ranks": ranks, "nodes": 1, "Problem": "2", "Size-x": "32", "Size-y": "32",
                          "Size-z": "32", "Solver": "PCG"}
    # runtime-profile and spot at 1, 2 and 4 ranks, and the one run without profile.mpi
    assert sorted(ranks for _key, ranks in weak) == [[1, 2, 4], [1, 2, 4], [2]]
    assert searched == 7   # application metadata is kept and searchable


def test_without_declared_keys_the_command_line_defines_the_experiment(dsn):
    f = THIRD / "amg2023" / "amg2023-n2.runtime-profile.cali"
    _store(dsn, [f], params=(("queue", "debug"),))
    with psycopg.connect(dsn) as conn:
        (params,) = conn.execute("SELECT s.parameters FROM series s").fetchone()
    # its Adiak cmdline is [.../amg,-problem,2,-n,32,32,32,-P,2,1,1]: one parameter per option
    assert params == {"ranks": 2, "nodes": 1, "problem": "2", "n": "32,32,32", "P": "2,1,1", "queue": "debug"}


def test_an_application_without_adiak_keeps_its_own_globals_as_parameters(stored):
    _, g = read_caliper_contents(str(THIRD / "kripke" / "kripke-n2.runtime-profile.cali"))
    own = {k: str(v) for k, v in g.items() if k.startswith("kripke.")}
    assert own
    with psycopg.connect(stored) as conn:
        params = [p for (p,) in conn.execute("SELECT s.parameters FROM series s WHERE s.app = 'kripke'")]
    assert params and all({k: p[k] for k in own} == own for p in params)


def test_refusals_name_the_file_the_missing_input_and_the_flag(dsn):
    kripke = THIRD / "kripke" / "kripke-n2.runtime-profile.cali"
    amg = THIRD / "amg2023" / "amg2023-n2.runtime-profile.cali"
    r = cli("ingest", str(amg), str(kripke), dsn=dsn)
    assert r.returncode == 2 and str(kripke) in r.stderr and "--app" in r.stderr and "nothing was stored" in r.stderr
    r = cli("ingest", "--param-keys", "Problem,Size-q", str(amg), dsn=dsn)
    assert r.returncode == 2 and str(amg) in r.stderr and "'Size-q'" in r.stderr and "--param" in r.stderr
    r = cli("ingest", "--param", "novalue", str(amg), dsn=dsn)
    assert r.returncode == 2 and "--param" in r.stderr and "KEY=VALUE" in r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    r = cli("ingest", "--skip-bad", str(amg), str(kripke), dsn=dsn)
    assert r.returncode == 3 and str(kripke) in r.stderr and "--app" in r.stderr   # 3: skipped some
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT app FROM runs").fetchall() == [("amg",)]


_LINE = re.compile(r"#(\d+) \[(focus|run)\]$")


def test_dashboards_and_report_show_third_party_series(stored, tmp_path):
    """Only third-party runs in the store: every panel query of every dashboard runs; the MPI fraction panel
    draws a line per measured series on its run window (no focus region here), equal to caliper-reader's
    Σ MPI / Σ time; runs without MPI wrapping draw none; the report is written and names the applications."""
    from click.testing import CliRunner

    from commscope.views import panels as P
    from commscope.cli import main
    with psycopg.connect(stored) as conn:
        values = P.all_values(conn)
        lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM runs").fetchone()
        import datetime as dt
        t0, t1 = lo - dt.timedelta(days=1), hi + dt.timedelta(days=1)
        for board in P.DASHBOARDS:
            for panel in board.panels:
                conn.execute(P.expand(panel.sql, t0, t1, values)).fetchall()   # raises on an error
        lines = {}
        from grafana_shown import shown_rows
        for r in shown_rows(conn, "commscope-mpi-fraction", "MPI time fraction, mean over ranks", t0, t1, values):
            sid, window = _LINE.search(r["metric"]).groups()
            lines.setdefault(int(sid), []).append((window, r["mpi_fraction"]))
        series_of = {Path(s).name: sid for s, sid in conn.execute("SELECT source, series_id FROM runs")}
    checked = 0
    for f in RUNTIME:
        sid = series_of[f.name]
        if "nompi" in f.name:
            assert sid not in lines, f.name
            continue
        ref = per_rank_reference(f)
        ((window, value),) = lines[sid]
        assert window == "run"
        assert value == pytest.approx(sum(v[1] for v in ref.values()) / sum(v[0] for v in ref.values()), rel=1e-9)
        checked += 1
    assert checked == 7
    out = tmp_path / "report.html"
    r = CliRunner(env={"COMMSCOPE_DB_URL": stored}).invoke(main, ["report", "-o", str(out)])
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert "amg" in html and "kripke" in html and "IMB-MPI1" in html
    # An application that is not one of commscope's workloads has no variant of its own: its label names its
    # parameters instead (AMG2023's the --param-keys given), and nothing shows as a placeholder of the code that
    # drew it (Python's None, a NaN, JavaScript's undefined).
    with psycopg.connect(stored) as conn:
        variants = {v for (v,) in conn.execute("SELECT DISTINCT variant FROM runs WHERE app = 'amg'")}
    assert variants == {"Problem=2 Size-x=32 Size-y=32 Size-z=32 Solver=PCG"}
    import re
    text = re.sub(r"<script[^>]*>.*?</script>", " ", html, flags=re.S)
    assert not re.search(r"\b(None|nan|NaN|undefined)\b", text), re.search(r".{60}\b(None|nan|NaN|undefined)\b.{20}", text)
    labels = re.findall(r'"(?:name|text|hovertext)":\s*"([^"]*)"', html)
    assert labels and not [t for t in labels if re.search(r"\b(None|nan|undefined)\b", t)]


# ---- cali-query's JSON output -----------------------------------------------------------------------------

CQ = THIRD / "cali-query-json"
# cali-query output -> (the .cali it was made from, the flags a user gives). The plain `format json` file has
# no globals, so no name; its rank count comes from its records.
CALI_QUERY = {
    "amg2023-n2.runtime-profile.json": ("amg2023/amg2023-n2.runtime-profile.cali", {"param_keys": AMG_KEYS}),
    "amg2023-n2.runtime-profile.records.json": ("amg2023/amg2023-n2.runtime-profile.cali", {"app": "amg"}),
    "amg2023-n2.runtime-profile.split.json": ("amg2023/amg2023-n2.runtime-profile.cali", {"param_keys": AMG_KEYS}),
    "amg2023-n2.runtime-profile-nompi.json": ("amg2023/amg2023-n2.runtime-profile-nompi.cali",
                                              {"param_keys": AMG_KEYS}),
    "amg2023-n2.spot.json": ("amg2023/amg2023-n2.spot.cali", {"param_keys": AMG_KEYS}),
    "kripke-n4.runtime-profile.json": ("kripke/kripke-n4.runtime-profile.cali", {"app": "kripke"}),
}
# cali-query writes a double with std::to_string, i.e. printf's %f: rounded to 6 decimals. The .cali file's
# 6 significant digits are finer below 1 s, so each JSON value is off by up to half a microsecond.
JSON_STEP = 5e-7


def _pathkey(r: dict) -> tuple:
    p = r.get("path") or []
    return tuple(p if isinstance(p, list) else [p])


def cr_reference(path: Path, rounded: bool) -> dict:
    """Per call path, from caliper-reader's records of the .cali file: for a runtime-profile, exclusive
    seconds per rank, inclusive max and mean over ranks (descendants' records added), and MPI time summed
    over ranks; for spot, the records' own across-rank statistics. ROUNDED: each record's value first
    rounded to 6 decimals, as cali-query prints it."""
    records, _ = read_caliper_contents(str(path))
    val = (lambda v: round(float(v), 6)) if rounded else float
    if ".spot." in path.name:
        out = {}
        for r in records:
            if "max#inclusive#sum#time.duration" in r and _pathkey(r) and not calipers_own(r):
                out["/".join(_pathkey(r))] = {
                    "incl_min": val(r["min#inclusive#sum#time.duration"]),
                    "incl_avg": val(r["avg#inclusive#sum#time.duration"]),
                    "incl_max": val(r["max#inclusive#sum#time.duration"]),
                    "excl_avg": val(r["avg#scale#sum#time.duration.ns"]),
                    "mpi_total": val(r["sum#scale#sum#time.duration.ns"]) if "mpi.function" in r else None}
        return out
    excl: dict = defaultdict(lambda: defaultdict(float))
    ranks = set()
    for r in records:
        t = next((val(r[a]) for a in TIME if a in r), None)
        if t is None or calipers_own(r):
            continue
        ranks.add(int(r["mpi.rank"]))
        excl[_pathkey(r)][int(r["mpi.rank"])] += t
    out = {}
    prefixes = {p[:i] for p in excl if p for i in range(1, len(p) + 1)}
    for q in prefixes:
        incl = [sum(excl[p].get(rank, 0.0) for p in excl if p[:len(q)] == q) for rank in sorted(ranks)]
        ex = [excl[q].get(rank, 0.0) for rank in sorted(ranks)] if q in excl else [0.0] * len(ranks)
        out["/".join(q)] = {"excl_max": max(ex), "incl_max": max(incl), "incl_avg": sum(incl) / len(incl),
                            "mpi_total": sum(ex) if q[-1].startswith("MPI_") else None}
    return out


def _stored_nodes(dsn, name: str) -> dict:
    """call path -> node_metrics row (and the MPI time of an MPI leaf), of the run whose source is NAME."""
    with psycopg.connect(dsn) as conn:
        cur = conn.execute(
            "SELECT n.path, nm.excl_min, nm.excl_avg, nm.excl_max, nm.incl_min, nm.incl_avg, nm.incl_max, nm.calls, "
            "(SELECT mm.time_total FROM mpi_metrics mm JOIN nodes p ON p.id = mm.node_id WHERE mm.run_id = r.id "
            " AND mm.function = n.name AND p.path = coalesce(n.parent_path, %s)) AS mpi_total "
            "FROM node_metrics nm JOIN nodes n ON n.id = nm.node_id JOIN runs r ON r.id = nm.run_id "
            "WHERE r.source LIKE %s", ("(outside regions)", f"%/{name}"))
        cols = [d.name for d in cur.description]
        return {row[0]: dict(zip(cols, row)) for row in cur.fetchall()}


@pytest.mark.parametrize("name", sorted(CALI_QUERY), ids=str)
def test_cali_query_json_is_the_cali_file_rounded_to_microseconds(name):
    """The committed JSON is what tests/thirdparty/cali-query-json/README.md says: each of its records is a
    record of the source .cali (caliper-reader), nested attributes joined by '/' under `path`, and each
    number is caliper-reader's rounded to 6 decimals; `format json(object)` also carries the globals."""
    import json
    src, _ = CALI_QUERY[name]
    records, g = read_caliper_contents(str(THIRD / src))
    doc = json.loads((CQ / name).read_text())
    got = doc["records"] if isinstance(doc, dict) and "records" in doc else doc
    if isinstance(doc, dict) and "nodes" in doc:
        got = _split_rows(doc)
    assert len(got) == len(records)
    def key(r):
        p = r.get("path")
        return (tuple(p.split("/")) if isinstance(p, str) else _pathkey(r), str(r.get("mpi.rank")))
    ref = {key(r): r for r in records}
    assert len(ref) == len(records)
    for r in got:
        cr = ref[key(r)]
        for k, v in r.items():
            if k == "path":
                continue
            if isinstance(v, float):
                assert abs(v - float(cr[k])) <= JSON_STEP + 1e-12 and v == round(float(cr[k]), 6), (name, k)
            else:
                assert str(v) == str(cr[k]), (name, k)
    if isinstance(doc, dict) and "globals" in doc:
        assert set(doc["globals"]) == set(g)
    elif isinstance(doc, dict):
        assert set(g) <= set(doc)


def _split_rows(doc: dict) -> list[dict]:
    """json-split's rows as records: each value column by name, `path` as the node labels from the root."""
    def labels(i):
        out = []
        while i is not None:
            out.append(doc["nodes"][i]["label"])
            i = doc["nodes"][i].get("parent")
        return "/".join(reversed(out))
    rows = []
    for row in doc["data"]:
        rec = {c: v for c, v, m in zip(doc["columns"], row, doc["column_metadata"]) if m.get("is_value") and v is not None}
        p = row[doc["columns"].index("path")]
        if p is not None:
            rec["path"] = labels(p)
        rows.append(rec)
    return rows


def test_cali_query_json_paren_split_is_refused_naming_the_layouts_read(dsn):
    """cali-query 2.14's `format json(split)` writes records without an enclosing list, which is not JSON (the
    node-table layout is `format json-split`): refused, naming the file and the JSON layouts that are read."""
    f = CQ / "amg2023-n2.runtime-profile.paren-split.json"
    r = cli("ingest", "--app", "amg", str(f), dsn=dsn)
    assert r.returncode == 2 and str(f) in r.stderr and "nothing was stored" in r.stderr, r.stderr
    assert "json-split" in r.stderr and "cali-query" in r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


@pytest.mark.parametrize("name", sorted(CALI_QUERY), ids=str)
def test_cali_query_json_stores_the_numbers_of_its_cali_file(dsn, name):
    """Ingesting cali-query's JSON of a profile stores the numbers the .cali file gives: every node's times
    within the JSON's rounding (half a microsecond per record summed), the same calls, rank count, MPI
    functions and, for `format json(object)`, the same application, MPI library, system, parameters and
    series. Both equal caliper-reader's records: the .cali exactly, the JSON once each record is rounded
    as cali-query rounds it."""
    src, flags = CALI_QUERY[name]
    cali, js = THIRD / src, CQ / name
    _store(dsn, [cali, js], **flags)
    from_cali, from_json = _stored_nodes(dsn, cali.name), _stored_nodes(dsn, js.name)
    assert from_cali and from_json.keys() == from_cali.keys()
    records, _ = read_caliper_contents(str(cali))
    per_rank = max(sum(1 for r in records if str(r.get("mpi.rank")) == str(k)) for k in
                   {r.get("mpi.rank") for r in records})
    tol = JSON_STEP * per_rank + 1e-12
    for path, a in from_cali.items():
        b = from_json[path]
        assert a["calls"] == b["calls"], (name, path)
        for col in ("excl_min", "excl_avg", "excl_max", "incl_min", "incl_avg", "incl_max", "mpi_total"):
            if a[col] is None:
                assert b[col] is None, (name, path, col)
            else:
                assert abs(a[col] - b[col]) <= tol, (name, path, col, a[col], b[col])
    exact, rounded = cr_reference(cali, rounded=False), cr_reference(cali, rounded=True)
    assert exact.keys() == from_cali.keys() - {"(outside regions)"}
    for path, ref in exact.items():
        for col, v in ref.items():
            if v is None:
                continue
            assert from_cali[path][col] == pytest.approx(v, rel=1e-9, abs=1e-15), (name, path, col)
            assert from_json[path][col] == pytest.approx(rounded[path][col], rel=1e-9, abs=1e-15), (name, path, col)
    got = _windows(dsn)
    ca, jw = got[cali.name]["run"], got[js.name]["run"]
    for col in ("time_s", "mpi_time_avg_s", "mpi_time_max_s"):
        assert (ca[col] is None) == (jw[col] is None), (name, col)
        if ca[col] is not None:
            assert abs(ca[col] - jw[col]) <= tol, (name, col)
    with psycopg.connect(dsn) as conn:
        runs = {Path(s).name: row for s, *row in conn.execute(
            "SELECT r.source, r.app, r.ranks, r.metadata->>'ranks_source', r.mpi_fraction_avg IS NULL, "
            "r.series_id, r.metadata->>'mpi_library_source', sy.name, st.library "
            "FROM runs r JOIN systems sy ON sy.id = r.system_id JOIN stacks st ON st.id = r.stack_id")}
    a, b = runs[cali.name], runs[js.name]
    assert a[:2] == b[:2] and a[3] == b[3]            # application, ranks, whether MPI was measured
    if name.endswith(".records.json"):
        # plain `format json` keeps no globals: the ranks are the records' largest mpi.rank + 1
        assert b[2] == "largest mpi.rank + 1" and b[5] == "none"
    else:
        assert a[2:] == b[2:]                         # same rank source, series, MPI library, system


# ---- spot without profile.mpi, and spot's timeseries channel -------------------------------------------------

SPOT_NOMPI = THIRD / "amg2023-spot-nompi" / "amg2023-n2.nompi.spot.cali"
TIMESERIES = THIRD / "spot-timeseries" / "cxx-example.timeseries.spot.cali"
MPI_WINDOW_COLUMNS = ("mpi_time_avg_s", "mpi_time_max_s", "mpi_fraction_avg", "mpi_fraction_slowest",
                      "mpi_sync_time_avg_s", "communication_efficiency", "parallel_efficiency")


def spot_nodes(path: Path) -> dict:
    """'/'-joined call path -> the regionprofile record's across-rank statistics, from caliper-reader."""
    records, _ = read_caliper_contents(str(path))
    return {"/".join(r["path"]): {"incl_min": float(r["min#inclusive#sum#time.duration"]),
                                  "incl_avg": float(r["avg#inclusive#sum#time.duration"]),
                                  "incl_max": float(r["max#inclusive#sum#time.duration"]),
                                  "excl_min": float(r["min#scale#sum#time.duration.ns"]),
                                  "excl_avg": float(r["avg#scale#sum#time.duration.ns"]),
                                  "excl_max": float(r["max#scale#sum#time.duration.ns"]),
                                  "calls": int(r["sum#sum#rc.count"])}
            for r in records if r.get("spot.channel") == "regionprofile" and r.get("path")}


def test_spot_without_profile_mpi_stores_times_and_no_mpi_number(dsn):
    """AMG2023's spot profile recorded without profile.mpi (spot.options says so): every MPI number of the run
    is NULL, not 0, and every node's times and calls equal the file's records (caliper-reader); the solve and
    setup regions' slowest-rank inclusive times match hypre's own printed wall clocks."""
    records, g = read_caliper_contents(str(SPOT_NOMPI))
    assert "profile.mpi" not in g["spot.options"].split(",") and not any("mpi.function" in r for r in records)
    _store(dsn, [SPOT_NOMPI], param_keys=AMG_KEYS)
    with psycopg.connect(dsn) as conn:
        run = conn.execute("SELECT ranks, metadata->>'ranks_source', mpi_time_avg, mpi_time_max, mpi_fraction_avg, "
                           "mpi_fraction_slowest, profile_kind, s.environment->>'caliper' FROM runs r "
                           "JOIN series s ON s.id = r.series_id").fetchone()
        mpi_rows = conn.execute("SELECT count(*) FROM mpi_metrics").fetchone()[0]
        rank_rows = conn.execute("SELECT count(*) FROM rank_metrics").fetchone()[0]
    assert run[:2] == (int(g["jobsize"]), "jobsize")
    assert run[2:6] == (None, None, None, None) and run[6] == "spot" and "profile.mpi" not in run[7]
    assert mpi_rows == 0 and rank_rows == 0     # spot keeps no ranks; no MPI function was wrapped
    row = _windows(dsn)[SPOT_NOMPI.name]["run"]
    for col in MPI_WINDOW_COLUMNS:
        assert row[col] is None, col
    stored = _stored_nodes(dsn, SPOT_NOMPI.name)
    ref = spot_nodes(SPOT_NOMPI)
    assert stored.keys() == ref.keys()
    for path, r in ref.items():
        for col, v in r.items():
            assert stored[path][col] == pytest.approx(v, rel=1e-9), (path, col)
    text = SPOT_NOMPI.with_suffix(".out").read_text()
    for region, label in (("main/Problem/Setup", "PCG Setup"), ("main/Problem/Solve", "PCG Solve")):
        own = float(re.search(rf"{label}:\s*\n\s*wall clock time = ([0-9.eE+-]+) seconds", text).group(1))
        assert stored[region]["incl_max"] == pytest.approx(own, abs=5e-5), region


def test_spot_timeseries_channel_is_ignored_and_its_region_profile_stored(dsn):
    """A spot profile with a timeseries channel (Caliper's loop-annotated cxx-example, no MPI at all): the
    region profile is stored with the records' numbers, none of the timeseries records becomes a node (their
    path is the loop alone, `mainloop`), as docs/add-your-application.md says; the rank count is 1 because the
    profile has no MPI, and that source is recorded; every MPI number is NULL."""
    records, g = read_caliper_contents(str(TIMESERIES))
    series = [r for r in records if r.get("spot.channel") == "timeseries"]
    assert series and "timeseries" in g["spot.channels"].split(",")
    assert not {"mpi.world.size", "jobsize"} & g.keys() and not any("mpi.rank" in r for r in records)
    _store(dsn, [TIMESERIES], app="cxx-example")
    stored = _stored_nodes(dsn, TIMESERIES.name)
    ref = spot_nodes(TIMESERIES)
    assert stored.keys() == ref.keys()
    assert not {"/".join(r["path"]) for r in series} & stored.keys()
    for path, r in ref.items():
        for col, v in r.items():
            assert stored[path][col] == pytest.approx(v, rel=1e-9), (path, col)
    with psycopg.connect(dsn) as conn:
        ranks, source, kept, nodes = conn.execute(
            "SELECT ranks, metadata->>'ranks_source', metadata->>'spot.channels', "
            "(SELECT count(*) FROM nodes WHERE path = 'mainloop') FROM runs").fetchone()
    assert (ranks, source) == (1, "no MPI in the profile")
    assert kept == g["spot.channels"] and nodes == 0
    row = _windows(dsn)[TIMESERIES.name]["run"]
    for col in MPI_WINDOW_COLUMNS:
        assert row[col] is None, col


# ---- metadata fallbacks, on copies of real profiles edited in a documented, minimal way ------------------------

def edited_copy(src: Path, dst: Path, rename: dict | None = None, values: dict | None = None) -> Path:
    """A copy of the .cali file SRC at DST with Caliper globals edited in its text. RENAME {key: new key}
    renames a global's attribute (the node `attr=8,data=KEY` that names it; attribute 8 is Caliper's
    cali.attribute.name), so KEY is absent from the copy; VALUES {key: value} replaces the data of the node
    holding KEY's value. caliper-reader reads the copy back, which the function checks."""
    text = src.read_text()
    for key, new in (rename or {}).items():
        text, n = re.subn(rf"^(__rec=node,id=\d+,attr=8,data=){re.escape(key)}(,|$)",
                          lambda m, new=new: m.group(1) + new + m.group(2), text, flags=re.M)
        assert n == 1, (src, key)
    for key, new in (values or {}).items():
        attr = re.search(rf"^__rec=node,id=(\d+),attr=8,data={re.escape(key)}(,|$)", text, re.M).group(1)
        text, n = re.subn(rf"^(__rec=node,id=\d+,attr={attr},data=)[^,\n]*",
                          lambda m, new=new: m.group(1) + new, text, flags=re.M)
        assert n == 1, (src, key)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text)
    _, g = read_caliper_contents(str(dst))
    for key, new in (rename or {}).items():
        assert key not in g and new in g, key
    for key, new in (values or {}).items():
        assert g[key] == new, key
    return dst


NO_RANK_COUNT = {"jobsize": "was-jobsize", "mpi.world.size": "was-mpi.world.size"}
AMG_N2 = THIRD / "amg2023" / "amg2023-n2.runtime-profile.cali"


def _run_meta(dsn) -> dict:
    """source file name -> (ranks, ranks_source, MPI library, its source, system, stack library, metadata)."""
    with psycopg.connect(dsn) as conn:
        return {Path(s).name: tuple(rest) for s, *rest in conn.execute(
            "SELECT r.source, r.ranks, r.metadata->>'ranks_source', r.metadata->>'mpi_library_source', "
            "st.library, sy.name, r.metadata FROM runs r JOIN stacks st ON st.id = r.stack_id "
            "JOIN systems sy ON sy.id = r.system_id")}


def test_rank_count_falls_back_to_the_largest_mpi_rank_and_to_the_rank_files(dsn, tmp_path):
    """Without Adiak's jobsize and Caliper's mpi.world.size (both renamed in copies of real profiles), the rank
    count is the largest mpi.rank + 1 of an aggregated profile, and the number of rank-N.cali files of a per-rank
    set (whose records name no rank); each run records which source it used."""
    amg = edited_copy(AMG_N2, tmp_path / "amg" / "amg-norank.cali", rename=NO_RANK_COUNT)
    records, _ = read_caliper_contents(str(amg))
    largest = max(int(r["mpi.rank"]) for r in records if "mpi.rank" in r)
    per_rank = sorted((THIRD.parent / "data" / "halo3d-blocking-n4.per-rank").glob("rank-*.cali"))
    for f in per_rank:
        edited_copy(f, tmp_path / "halo" / f.name, rename=NO_RANK_COUNT)
        assert not any("mpi.rank" in r for r in read_caliper_contents(str(tmp_path / "halo" / f.name))[0])
    _store(dsn, [amg], param_keys=AMG_KEYS)
    _store(dsn, [tmp_path / "halo"])
    got = _run_meta(dsn)
    assert got[amg.name][:2] == (largest + 1, "largest mpi.rank + 1")
    assert got["halo"][:2] == (len(per_rank), "rank files")


def test_mpi_library_falls_back_to_libraries_and_to_an_mpi_value(dsn, tmp_path):
    """Without Adiak's mpi_library_vendor (renamed), the MPI library is the libmpi among Adiak's `libraries`;
    without that too (renamed) it is an application's own `mpi` value (here the vendor's value under the key
    `mpi`). The source is recorded either way."""
    _, g = read_caliper_contents(str(AMG_N2))
    libmpi = [p for p in g["libraries"].strip("[]").split(",") if Path(p).name.startswith("libmpi.so")]
    assert len(libmpi) == 1
    a = edited_copy(AMG_N2, tmp_path / "amg-libraries.cali", rename={"mpi_library_vendor": "was-vendor"})
    b = edited_copy(AMG_N2, tmp_path / "amg-mpi.cali",
                    rename={"mpi_library_vendor": "mpi", "libraries": "was-libraries"})
    _store(dsn, [a, b], param_keys=AMG_KEYS)
    got = _run_meta(dsn)
    assert got[a.name][2:4] == ("libraries", libmpi[0])
    assert got[b.name][2:4] == ("mpi", g["mpi_library_vendor"])


def test_system_is_adiak_cluster_unless_given(dsn, tmp_path):
    """The system is Adiak's `cluster` (edited to differ from `hostname`, which is the next fallback), and
    --system overrides it."""
    _, g = read_caliper_contents(str(AMG_N2))
    a = edited_copy(AMG_N2, tmp_path / "a.cali", values={"cluster": "cluster-a"})
    b = edited_copy(AMG_N2, tmp_path / "b.cali", values={"cluster": "cluster-b"})
    assert g["hostname"] not in ("cluster-a", "cluster-b")
    _store(dsn, [a], param_keys=AMG_KEYS)
    r = cli("ingest", "--system", "site-b", "--param-keys", ",".join(AMG_KEYS), str(b), dsn=dsn)
    assert r.returncode == 0, r.stderr
    got = _run_meta(dsn)
    assert got[a.name][4] == "cluster-a" and got[b.name][4] == "site-b"


def test_rank_count_refusals_name_the_file_what_is_missing_and_the_flag(dsn, tmp_path):
    """A spot profile keeps no mpi.rank: without jobsize and mpi.world.size (cali-query's plain JSON has no
    globals; an edited copy has them renamed) nothing says the rank count, and ingest refuses it naming the
    file and --ranks; a jobsize that is not a number is refused the same way. Nothing is stored; --ranks stores
    it and says so."""
    plain = CQ / "amg2023-n2.spot.records.json"
    spot = edited_copy(THIRD / "amg2023" / "amg2023-n2.spot.cali", tmp_path / "spot.cali", rename=NO_RANK_COUNT)
    bad = edited_copy(AMG_N2, tmp_path / "bad.cali", values={"jobsize": "two"})
    for f, what in ((plain, "rank count is not recorded"), (spot, "rank count is not recorded"),
                    (bad, "jobsize 'two' is not an integer")):
        r = cli("ingest", "--app", "amg", str(f), dsn=dsn)
        assert r.returncode == 2 and str(f) in r.stderr and what in r.stderr and "--ranks" in r.stderr, r.stderr
        assert "nothing was stored" in r.stderr
    r = cli("ingest", str(TIMESERIES), dsn=dsn)
    assert r.returncode == 2 and str(TIMESERIES) in r.stderr and "--app" in r.stderr, r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    r = cli("ingest", "--app", "amg", "--ranks", "2", str(plain), dsn=dsn)
    assert r.returncode == 0, r.stderr
    assert _run_meta(dsn)[plain.name][:2] == (2, "--ranks")


def test_adiak_libraries_are_kept_and_searchable(stored):
    """Adiak's `libraries` is kept in runs.metadata like every other value, as a list of paths, so a run can be
    found by a library it loaded."""
    _, g = read_caliper_contents(str(AMG_N2))
    libs = g["libraries"].strip("[]").split(",")
    libmpi = next(p for p in libs if Path(p).name.startswith("libmpi.so"))
    with psycopg.connect(stored) as conn:
        (kept,) = conn.execute("SELECT metadata->'libraries' FROM runs WHERE source LIKE %s",
                               (f"%/{AMG_N2.name}",)).fetchone()
        found = conn.execute("SELECT count(*) FROM runs WHERE metadata @> %s::jsonb",
                             ('{"libraries": ["%s"]}' % libmpi,)).fetchone()[0]
    assert kept == libs
    assert found == 7    # every AMG2023 run (Kripke and IMB record no Adiak)
