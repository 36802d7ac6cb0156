"""A Ramble workspace of one of Ramble's builtin applications, intel-mpi-benchmarks (issue 15, item 2): every
experiment a run of that application, its Ramble variables its parameters, every FOM kept with its unit and
context (one IMB latency per message size). tests/thirdparty/ramble-imb/ is a real workspace (README.md says how
it was made); its FOMs are checked against the numbers in IMB's own tables in each experiment's output, read
here by their column headers (not through Ramble's or commscope's regexes), and its parameters against the
workspace config and IMB's own "Calling sequence" line. A live test runs Ramble on the same config when
RAMBLE_ROOT is set and a hand-built IMB is found.

Item 4: tests/thirdparty/ramble-imb-preload/ is the same application profiled by commscope's Caliper modifier
in mode `preload` (a Caliper built without GOTCHA, preloaded into the unmodified IMB). Its MPI time per function
and MPI fraction are checked against the profiles' records read with caliper-reader; a live test runs it when
RAMBLE_ROOT and COMMSCOPE_CALIPER_NOGOTCHA_PREFIX are set."""
from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import yaml

from commscope.workflow.ingest import Provenance, ingest
from conftest import ROOT, grant_local, stack_or_skip
from helpers import calling_sequence, check_profiles, expected_foms, experiments, imb_prefix, out_file

WS = Path(__file__).parent / "thirdparty" / "ramble-imb"
PRELOAD_WS = Path(__file__).parent / "thirdparty" / "ramble-imb-preload"
APP = "intel-mpi-benchmarks"
def configured_variables(ws: Path, exp: dict) -> dict:
    """The variables the workspace config (configs/ramble.yaml) sets for this experiment: the workspace's,
    then its workload's experiment entry; a list is the experiment's own element, found by its name."""
    conf = yaml.safe_load((ws / "configs" / "ramble.yaml").read_text())["ramble"]
    found = dict(conf.get("variables") or {})
    entries = conf["applications"][exp["application_name"]]["workloads"][exp["workload_name"]]["experiments"]
    for template, entry in entries.items():
        for k, v in ((entry or {}).get("variables") or {}).items():
            for one in (v if isinstance(v, list) else [v]):
                name = template.format(**{**found, k: one})
                if name == exp["experiment_name"]:
                    found[k] = one
    return {k: str(v) for k, v in found.items()}


def check_store(dsn: str, ws: Path, profiled: bool = False) -> None:
    """Every experiment of WS is one run of intel-mpi-benchmarks whose FOMs equal IMB's tables and whose
    parameters are its configured variables; without a profile nothing measured by commscope is made up."""
    exps = experiments(ws)
    with psycopg.connect(dsn) as conn:
        runs = {r[0]: r[1:] for r in conn.execute(
            "SELECT r.experiment, r.id, r.app, r.workload, r.status, r.ranks, r.nodes, r.profile_kind, s.parameters, "
            "r.wall_time, r.mpi_time_avg, r.mpi_fraction_avg FROM runs r JOIN series s ON s.id = r.series_id "
            "WHERE r.app = %s", (APP,))}
        assert sorted(runs) == sorted(e["name"] for e in exps)
        for exp in exps:
            run_id, app, workload, status, ranks, nodes, kind, params, wall, mpi, frac = runs[exp["name"]]
            assert (app, workload, status, ranks, nodes) == (APP, exp["workload_name"], "ok", 2, 1)
            if profiled:
                assert kind == "runtime-profile" and None not in (wall, mpi, frac)
            else:
                # no Caliper in these experiments: commscope measured nothing, and says so with NULL
                assert kind == "none" and (wall, mpi, frac) == (None, None, None)
            stored = {(c, n): (v, u) for c, n, v, u in conn.execute(
                "SELECT context, name, value, unit FROM v_foms WHERE run_id = %s", (run_id,))}
            expected = expected_foms(out_file(ws, exp))
            assert len(expected) >= 12 and stored.keys() == expected.keys()
            for key, (value, unit) in expected.items():
                assert stored[key] == (pytest.approx(value), unit), key

            config = configured_variables(ws, exp)
            cmd = calling_sequence(out_file(ws, exp))
            assert params["ranks"] == int(config["n_ranks"]) == 2 and params["nodes"] == int(config["n_nodes"])
            assert params["ramble_workload"] == exp["workload_name"]
            # every variable the config sets is a parameter with the configured value, except Ramble's own
            # launch settings and paths (where it ran, not what)
            not_params = {"n_ranks", "n_nodes", "mpi_command", "batch_submit", "processes_per_node",
                          "caliper_preload_prefix"}
            for k, v in config.items():
                if k in not_params or v.startswith("/"):
                    assert k not in params, k
                else:
                    assert params[k] == v, k
            # what ran is what the parameters say: IMB's own record of its command line
            assert f"-msglog {params['msglog_min']}:{params['msglog_max']}" in " ".join(cmd)
            assert cmd[cmd.index("-iter") + 1] == params["num_iterations"]
            benchmark = params.get("collective_type") or params.get("pingpong_type") or "Exchange"
            assert cmd[1] == benchmark
            # the other parameters are the application's workload variables at their defaults, each seen in
            # the command IMB ran, and none is a path or one of Ramble's bookkeeping names
            rest = {k: v for k, v in params.items() if k not in config and k not in ("ranks", "nodes", "ramble_workload")}
            assert "experiment_run_dir" not in params and "repeat_index" not in params
            for k, v in rest.items():
                assert not str(v).startswith("/") and not k.startswith("caliper_"), k
                assert v == "" or str(v) in cmd or k == "n_threads", (k, v, cmd)


def test_every_experiment_is_a_run_with_every_fom_and_its_context(dsn):
    with psycopg.connect(dsn) as conn:
        res = ingest(conn, [WS], Provenance())
        assert len(res.inserted) == len(experiments(WS)) == 4 and not res.bad
        assert conn.execute("SELECT DISTINCT c.kind FROM campaigns c JOIN runs r ON r.campaign_id = c.id").fetchall() \
            == [("ramble",)]
    check_store(dsn, WS)


def test_a_variable_made_of_the_rank_count_is_no_parameter(dsn):
    """IMB's collectives set min_collective_ranks to '{n_ranks}' (Ramble's own raw value in the results): it is the
    run's ranks again, so the series' parameters leave it out, as `commscope run` does for its own workspaces;
    otherwise runs of one experiment at 2 and 4 ranks would differ in a parameter and never meet on a scaling
    curve. (Before, a directly ingested workspace stored min_collective_ranks = '2' as a parameter.)"""
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WS], Provenance())
        params = dict(conn.execute("SELECT r.experiment, s.parameters FROM runs r JOIN series s ON s.id = r.series_id "
                                   "WHERE r.app = %s", (APP,)).fetchall())
    made_of_ranks = 0
    for exp in experiments(WS):
        for k, raw in exp["RAMBLE_RAW_VARIABLES"].items():
            if raw == "{n_ranks}" and k not in ("processes_per_node",):
                made_of_ranks += 1
                assert k not in params[exp["name"]], (exp["name"], k, params[exp["name"]])
    assert made_of_ranks >= 2   # min_collective_ranks of Allreduce and Bcast
    assert params["intel-mpi-benchmarks.collective.Allreduce-n2"]["ranks"] == 2


def test_the_ingest_command_stores_the_workspace(dsn):
    env = {**os.environ, "COMMSCOPE_DB_URL": dsn}
    r = subprocess.run([sys.executable, "-m", "commscope.cli", "ingest", str(WS)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "stored 4 runs" in r.stdout
    check_store(dsn, WS)


def test_text_foms_are_shown_with_the_numeric_ones(dsn, tmp_path):
    """Every FOM without a number in a real workspace of commscope's smoke study (read from Ramble's own
    results.latest.json) is a row of v_text_foms, read as the dashboards' read-only role, and a row of the report's
    Figures of merit table with its text, beside the numeric FOMs of the same experiment."""
    import html
    ws = Path(__file__).parent / "data" / "ramble" / "smoke-openmpi4-mpi"
    with psycopg.connect(dsn) as conn:
        ingest(conn, [ws], Provenance())
    expected = set()
    for exp in experiments(ws):
        for ctx in exp["CONTEXTS"]:
            for f in ctx["foms"]:
                try:
                    float(f["value"])
                except ValueError:
                    expected.add((exp["name"], None if ctx["name"] == "null" else ctx["name"], f["name"], f["value"],
                                  f["units"]))
    assert len(expected) >= 10
    with psycopg.connect(grant_local(dsn, "text_fom_reader")) as conn:
        stored = set(conn.execute("SELECT experiment, context, name, text, unit FROM v_text_foms").fetchall())
    assert stored == expected
    out = tmp_path / "report.html"
    r = subprocess.run([sys.executable, "-m", "commscope.cli", "report", "-o", str(out)], capture_output=True,
                       text=True, env={**os.environ, "COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 0, r.stderr
    m = re.search(r"<h2>Figures of merit</h2>.*?<table>(.*?)</table>", out.read_text(), re.S)
    cols = [html.unescape(c) for c in re.findall(r"<th>(.*?)</th>", m.group(1))]
    rows = [dict(zip(cols, (html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row))))
            for row in re.findall(r"<tr>(.*?)</tr>", m.group(1).split("</thead>", 1)[1], re.S)]
    shown = {(x["experiment"], x["name"]): x for x in rows}
    for e, _ctx, name, text, _unit in expected:   # one run per experiment here: each is its newest
        assert shown[e, name]["text"] == text and shown[e, name]["value"] == "", shown[e, name]
    assert any(x["value"] != "" and x["text"] == "" for x in rows)   # and the numeric FOMs beside them


def test_text_foms_are_kept_in_the_run_s_metadata(dsn):
    """A FOM without a number (commscope's workloads report their MPI library so) is kept too, with its
    context and unit, in metadata.ramble_text_foms: here on a workspace of commscope's own smoke study."""
    ws = Path(__file__).parent / "data" / "ramble" / "smoke-openmpi4-mpi"
    with psycopg.connect(dsn) as conn:
        ingest(conn, [ws], Provenance())
        kept = dict(conn.execute("SELECT experiment, metadata->'ramble_text_foms' FROM runs").fetchall())
    checked = 0
    for exp in experiments(ws):
        text = []
        for ctx in exp["CONTEXTS"]:
            for f in ctx["foms"]:
                try:
                    float(f["value"])
                except ValueError:
                    text.append({"name": f["name"], "context": None if ctx["name"] == "null" else ctx["name"],
                                 "value": f["value"], "unit": f["units"]})
        assert (kept[exp["name"]] or []) == text, exp["name"]
        checked += len(text)
    assert checked >= 5   # every experiment's mpi_library


def test_the_regression_gate_takes_a_fom_of_one_context(dsn):
    """commscope check --metric fom:NAME compares a series' values of one FOM: IMB's "Latency min" of every message
    size are no one series, so a context must be named (fom:NAME@CONTEXT), and its values are that size's."""
    from commscope.gate import regressions
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WS], Provenance())
        with pytest.raises(ValueError, match=r"'Latency min' is stored in 14 contexts .*fom:Latency min@"):
            regressions.check(conn, metric="fom:Latency min")
        with pytest.raises(ValueError, match=r"no context 'Bytes: 3 \(Latency\)'"):
            regressions.check(conn, metric="fom:Latency min@Bytes: 3 (Latency)")
        rows, direction = regressions.values(conn, "fom:Latency min@Bytes: 4096 (Latency)", {})
        assert direction == "lower"
        runs = dict(conn.execute("SELECT id, experiment FROM runs").fetchall())
    got = {runs[r[4]]: r[5] for r in rows}
    want = {e["name"]: expected_foms(out_file(WS, e))[("Bytes: 4096 (Latency)", "Latency min")][0]
            for e in experiments(WS) if e["workload_name"] == "collective"}
    assert got == pytest.approx(want) and len(got) == 2


def test_reingesting_the_workspace_stores_nothing_new(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WS], Provenance())
        n = conn.execute("SELECT count(*) FROM foms").fetchone()[0]
        again = ingest(conn, [WS], Provenance())
        assert not again.inserted and len(again.skipped) == 4
        assert conn.execute("SELECT count(*) FROM foms").fetchone()[0] == n


def test_a_moved_copy_of_the_workspace_reads_its_own_files(dsn, tmp_path):
    """Ramble records absolute paths; a copy elsewhere stores the same runs from its own files."""
    copy = tmp_path / "moved"
    shutil.copytree(WS, copy)
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [copy], Provenance()).inserted) == 4
    check_store(dsn, copy)


def test_report_and_panels_take_the_runs_without_commscope_fields(dsn, tmp_path):
    """No workload, variant, profile or window: every panel query runs, the dashboards' variables offer the
    application, Grafana's read-only role reads the FOMs with their contexts, and the report names the
    application and shows its FOMs."""
    from click.testing import CliRunner

    from commscope.views import panels as P
    from commscope.cli import main
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WS], Provenance(system="imb-test-node"))
        values = P.all_values(conn)
        lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM runs").fetchone()
        for board in P.DASHBOARDS:
            for panel in board.panels:
                conn.execute(P.expand(panel.sql, lo - dt.timedelta(days=1), hi + dt.timedelta(days=1), values)).fetchall()
    assert APP in values["app"]
    with psycopg.connect(grant_local(dsn, "grafana_reader")) as conn:
        n = conn.execute("SELECT count(*) FROM v_foms WHERE app = %s AND context = 'Bytes: 4096 (Latency)' "
                         "AND name = 'Latency min'", (APP,)).fetchone()[0]
    assert n == 2   # Allreduce and Bcast
    out = tmp_path / "report.html"
    r = CliRunner(env={"COMMSCOPE_DB_URL": dsn}).invoke(main, ["report", "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert APP in page and "imb-test-node" in page
    # the newest PingPong's bandwidth at 4 KiB, as IMB printed it, is in the report's FOM table
    ping = next(e for e in experiments(WS) if e["workload_name"] == "pingpong")
    bw = expected_foms(out_file(WS, ping))[("Bytes: 4096 (BW)", "Bandwidth")][0]
    assert re.search(rf"<td>Bytes: 4096 \(BW\)</td><td>Bandwidth</td><td>{bw:.4g}</td>", page)


def test_preloaded_caliper_profiles_of_an_unannotated_application_are_attached(dsn):
    """Mode preload of the Caliper modifier on the unmodified IMB: each experiment's profile is its run's, with
    MPI time per function and the MPI fraction; FOMs and parameters as without Caliper."""
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [PRELOAD_WS], Provenance()).inserted) == 2
    check_store(dsn, PRELOAD_WS, profiled=True)
    check_profiles(dsn, PRELOAD_WS)


def test_profiled_and_unprofiled_experiments_differ_only_in_environment(dsn):
    """The same IMB experiments with and without the preloaded Caliper: equal parameters, different series
    (the Caliper configuration is part of the environment)."""
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WS], Provenance())
        ingest(conn, [PRELOAD_WS], Provenance())
        rows = conn.execute("SELECT r.experiment, r.profile_kind, s.id, s.parameters, s.environment->>'caliper' "
                            "FROM runs r JOIN series s ON s.id = r.series_id "
                            "WHERE r.experiment IN (SELECT experiment FROM runs GROUP BY 1 HAVING count(*) = 2)").fetchall()
    by_exp: dict = {}
    for exp, kind, sid, params, caliper in rows:
        by_exp.setdefault(exp, {})[kind] = (sid, params, caliper)
    assert len(by_exp) == 2   # pingpong and Allreduce ran both ways
    for exp, kinds in by_exp.items():
        (s0, p0, c0), (s1, p1, c1) = kinds["none"], kinds["runtime-profile"]
        assert p0 == p1 and s0 != s1 and c0 == "none" and "profile.mpi" in c1, exp


# ---- live: Ramble for real ------------------------------------------------------------------------------

def imb_or_skip() -> Path:
    """The prefix of this machine's IMB-MPI1 (built against Debian Open MPI 4.1), or the test skips saying how to
    build it."""
    stack_or_skip("debian-openmpi4")
    prefix = imb_prefix()
    if not prefix or not (prefix / "bin" / "IMB-MPI1").exists():
        pytest.skip("no Intel MPI Benchmarks here: build IMB-MPI1 2021.11 with mpicc.openmpi "
                    "(tests/thirdparty/ramble-imb/README.md) and set COMMSCOPE_IMB_PREFIX to its prefix or put it on PATH")
    return prefix


RAMBLE_ROOT = os.environ.get("RAMBLE_ROOT")


@pytest.mark.skipif(not RAMBLE_ROOT or not Path(RAMBLE_ROOT, "bin", "ramble").exists(),
                    reason="Ramble is in no package registry: set RAMBLE_ROOT to a checkout of "
                           "GoogleCloudPlatform/ramble at the commit in versions.yaml to run Ramble for real")
def test_a_live_ramble_run_of_imb_is_stored_with_imb_s_numbers(dsn, tmp_path):
    """The committed config, pointed at this machine's IMB, run through Ramble (setup, on, analyze) and
    ingested: the same checks as the committed workspace, on fresh output."""
    prefix = imb_or_skip()
    conf = yaml.safe_load((WS / "configs" / "ramble.yaml").read_text())
    conf["ramble"]["variables"]["intel-mpi-benchmarks_path"] = str(prefix)
    ws = run_workspace(conf, tmp_path)
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [ws], Provenance()).inserted) == 4
    check_store(dsn, ws)


def run_preloaded(conf: dict, prefix: Path, tmp_path: Path) -> Path:
    """The Ramble config CONF (ramble-imb-preload's shape), pointed at this machine's IMB (PREFIX), no-GOTCHA
    Caliper and this repository's Ramble repo, run through Ramble (create, setup, on, analyze): its workspace,
    every experiment of it a success."""
    conf["ramble"]["variables"]["intel-mpi-benchmarks_path"] = str(prefix)
    conf["ramble"]["variables"]["caliper_preload_prefix"] = os.environ["COMMSCOPE_CALIPER_NOGOTCHA_PREFIX"]
    return run_workspace(conf, tmp_path, modifier_repo=True)


def run_workspace(conf: dict, tmp_path: Path, modifier_repo: bool = False) -> Path:
    """The Ramble config CONF run through Ramble (workspace create, setup, on, analyze) in TMP_PATH/ws, with this
    repository's Ramble modifiers where MODIFIER_REPO: its workspace, every experiment of it a success."""
    cfg = tmp_path / "ramble.yaml"
    cfg.write_text(yaml.safe_dump(conf))
    ws = tmp_path / "ws"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}

    def ramble(*args: str) -> None:
        p = subprocess.run([sys.executable, str(Path(RAMBLE_ROOT) / "bin" / "ramble"), *args], capture_output=True,
                           text=True, env=env, timeout=300, cwd=ROOT)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]

    ramble("workspace", "create", "-d", str(ws), "-c", str(cfg))
    if modifier_repo:
        (ws / "configs" / "modifier_repos.yaml").write_text(yaml.safe_dump({"modifier_repos": [str(ROOT / "ramble")]}))
    for args in (["workspace", "setup"], ["on"], ["workspace", "analyze", "-f", "json"]):
        ramble("-D", str(ws), *args)
    assert all(e["RAMBLE_STATUS"] == "SUCCESS" for e in experiments(ws))
    return ws


# Every view that names a series by series_label.
LABEL_VIEWS = ("v_run_metrics_daily", "v_shown_metrics_daily", "v_mpi_routines_daily", "v_routines_keys")


@pytest.mark.skipif(not RAMBLE_ROOT or not os.environ.get("COMMSCOPE_CALIPER_NOGOTCHA_PREFIX"),
                    reason="needs RAMBLE_ROOT (a checkout of GoogleCloudPlatform/ramble at versions.yaml's commit) and "
                           "COMMSCOPE_CALIPER_NOGOTCHA_PREFIX (a Caliper 2.14 built with -DWITH_GOTCHA=OFF against Debian "
                           "Open MPI 4.1, tests/thirdparty/README.md); neither is in a package registry")
def test_two_workloads_with_equal_variables_have_labels_that_name_their_workload(dsn, tmp_path):
    """IMB's pingpong and exchange workloads run by Ramble with the same variables (the PingPong type set for the
    whole workspace, as a site's shared variables do): two series, whose labels differ in more than their ids
    and each name the workload Ramble's results say the run was."""
    prefix = imb_or_skip()
    conf = yaml.safe_load((PRELOAD_WS / "configs" / "ramble.yaml").read_text())
    conf["ramble"]["variables"]["pingpong_type"] = "PingPong"
    conf["ramble"]["applications"][APP]["workloads"] = {
        "pingpong": {"experiments": {"pingpong-n{n_ranks}": {}}},
        "exchange": {"experiments": {"exchange-n{n_ranks}": {}}}}
    ws = run_preloaded(conf, prefix, tmp_path)
    workload_of = {e["name"]: e["workload_name"] for e in experiments(ws)}
    assert sorted(workload_of.values()) == ["exchange", "pingpong"]
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [ws], Provenance()).inserted) == 2
        conn.commit()
        series = dict(conn.execute("SELECT experiment, series_id FROM runs"))
        assert len(set(series.values())) == 2
        for view in LABEL_VIEWS:
            labels = dict(conn.execute(f"SELECT DISTINCT series_label, series_label FROM {view}"))
            named = {int(lab.rsplit(" #", 1)[1]): lab.rsplit(" #", 1)[0] for lab in labels}
            assert set(named) == set(series.values()), (view, labels)
            assert len(set(named.values())) == 2, (view, labels)   # unique without the id
            for exp, sid in series.items():
                assert f" {workload_of[exp]} " in named[sid] + " ", (view, exp, named[sid])


@pytest.mark.skipif(not RAMBLE_ROOT or not os.environ.get("COMMSCOPE_CALIPER_NOGOTCHA_PREFIX"),
                    reason="needs RAMBLE_ROOT (a checkout of GoogleCloudPlatform/ramble at versions.yaml's commit) and "
                           "COMMSCOPE_CALIPER_NOGOTCHA_PREFIX (a Caliper 2.14 built with -DWITH_GOTCHA=OFF against Debian "
                           "Open MPI 4.1, tests/thirdparty/README.md); neither is in a package registry")
def test_a_live_ramble_run_profiles_the_unannotated_imb_with_a_preloaded_caliper(dsn, tmp_path):
    """The committed preload config, pointed at this machine's IMB, no-GOTCHA Caliper and this repository's
    Ramble repo, run through Ramble and ingested: profiles attached, checked against their records."""
    prefix = imb_or_skip()
    conf = yaml.safe_load((PRELOAD_WS / "configs" / "ramble.yaml").read_text())
    ws = run_preloaded(conf, prefix, tmp_path)
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [ws], Provenance()).inserted) == 2
    check_store(dsn, ws, profiled=True)
    check_profiles(dsn, ws)
