"""ReFrame results (issue 15): a run report and perflogs written by a real ReFrame run of commscope's pingpong on
this machine (reframe/, tests/thirdparty/reframe/README.md), stored and checked against what the workload itself
printed: the `FOM` lines of its stdout, kept in ReFrame's output and stage directories. The perflogs are also read by
hand with csv and must give the same runs as the report. A live test runs ReFrame here and stores its fresh report."""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from helpers import cli_in_process

from commscope.workflow.ingest import Provenance, ingest
from commscope.read.records import ReadOptions
from conftest import grant_local

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "thirdparty" / "reframe"
REPORTS = [DATA / "report.json", DATA / "report-one-rank.json"]
PERFLOGS = DATA / "perflogs"
FOM = re.compile(r"^FOM (\S+) (\S+) (\S+)$", re.M)


def cli(*args, dsn):
    """The real command, in this process (cli_in_process)."""
    return cli_in_process(args, {**os.environ, "COMMSCOPE_DB_URL": dsn})


def _store(dsn, paths, **opts):
    with psycopg.connect(dsn) as conn:
        return ingest(conn, paths, Provenance(), read=ReadOptions(**opts))


def stdout_foms(path: Path) -> dict:
    """name -> (value, unit) from the workload's own FOM lines (workloads/README.md, output contract)."""
    return {n: (float(v), u) for n, v, u in FOM.findall(path.read_text())}


def report_cases(report: Path, root: Path | None = None) -> list[tuple[dict, Path, str]]:
    """(test case, the workload's stdout, the session's command line) for every test case of REPORT that is not a
    fixture. ReFrame keeps a passed case's files in its output directory and a failed one's in its stage directory;
    ROOT is where the session's prefix was copied to (tests/thirdparty/reframe/README.md), else they are where
    ReFrame left them."""
    doc = json.loads(report.read_text())
    info = doc["session_info"]
    out = []
    for run in doc["runs"]:
        for c in run["testcases"]:
            if c["fixture"]:
                continue
            d = Path(c["outputdir"] if c["result"] == "pass" else c["stagedir"])
            if root is not None:   # the session ran under <prefix>/s<N>; its output/ and stage/ are kept below ROOT
                d = root / d.relative_to(Path(info["prefix_output"]).parent.parent)
            out.append((c, d / c["job_stdout"], info["cmdline"]))
    return out


def stored_runs(dsn) -> dict:
    """jobid -> (status, ranks, nodes, parameters, system, stack, {fom: (value, unit)}, metadata) of every stored run."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT r.id, r.status, r.ranks, r.nodes, s.parameters, v.system, v.stack, r.metadata "
            "FROM runs r JOIN series s ON s.id = r.series_id JOIN v_runs v ON v.run_id = r.id").fetchall()
        foms = conn.execute("SELECT run_id, name, value, unit FROM foms").fetchall()
    by_run: dict = {}
    for run_id, name, value, unit in foms:
        by_run.setdefault(run_id, {})[name] = (value, unit)
    return {meta["jobid"]: (status, ranks, nodes, params, system, stack, by_run.get(run_id, {}), meta)
            for run_id, status, ranks, nodes, params, system, stack, meta in rows}


def check_against_stdout(dsn, cases) -> int:
    """Every case is stored once, with the FOMs its workload printed, the rank count it printed (RANKS), its
    parameters, system:partition and environment; a case slower than the latency ceiling given on ReFrame's command
    line (-S max_latency_us=X) is failed, and so is a case whose workload printed no FOM (it refused to run)."""
    runs = stored_runs(dsn)
    assert len(runs) == len(cases)
    for case, stdout, cmdline in cases:
        status, ranks, nodes, params, system, stack, foms, meta = runs[case["jobid"]]
        printed = stdout_foms(stdout)
        assert foms == printed, stdout
        assert system == f"{case['system']}:{case['partition']}" and stack == case["environ"]
        assert params["message_bytes"] == str(case["message_bytes"]) and params["ranks"] == ranks == case["num_tasks"]
        assert nodes == 1 and params["nodes"] == 1
        text = stdout.read_text() + stdout.with_suffix(".err").read_text()
        ceiling = re.search(r"max_latency_us=(\S+)", cmdline)
        if printed:
            assert int(re.search(r"^RANKS (\d+)$", stdout.read_text(), re.M).group(1)) == ranks
            slow = ceiling is not None and printed["latency"][0] > float(ceiling.group(1))
            assert status == ("failed" if slow else "ok"), (stdout, printed["latency"])
            if ceiling:
                assert meta["reframe_perfvars"]["latency"]["reference"] == float(ceiling.group(1))
            else:
                assert meta["reframe_perfvars"]["latency"]["reference"] is None
        else:
            assert "needs at least 2 ranks" in text and status == "failed" and not foms
    return len(runs)


def test_report_foms_equal_the_workload_s_own_fom_lines(dsn):
    cases = [c for r in REPORTS for c in report_cases(r, DATA)]
    res = _store(dsn, REPORTS)
    assert len(res.inserted) == 3 and not res.bad
    assert check_against_stdout(dsn, cases) == 3
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT DISTINCT campaign_kind, app, profile_kind FROM v_runs").fetchall() == \
            [("reframe", "PingPong", "reframe")]
        # not measured is NULL: no profile, so no window and no MPI fraction
        assert conn.execute("SELECT count(*) FROM run_windows").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM runs WHERE wall_time IS NOT NULL OR mpi_fraction_avg IS NOT NULL"
                            ).fetchone()[0] == 0


def perflog_by_hand() -> list[dict]:
    """Every line of the committed perflogs, read with csv: the header names the fields, `|` separates them, and
    each performance variable is the fields <var>_value and <var>_unit."""
    rows = []
    for f in sorted(PERFLOGS.rglob("PingPong.log*")):
        with f.open() as fh:
            for row in csv.DictReader(fh, delimiter="|"):
                foms = {k[: -len("_value")]: (float(v), row[k[: -len("_value")] + "_unit"])
                        for k, v in row.items() if k.endswith("_value") and v not in ("", "None")}
                rows.append({"jobid": row["jobid"], "result": row["result"], "foms": foms,
                             "message_bytes": row["message_bytes"], "num_tasks": int(row["num_tasks"])})
    return rows


def test_perflogs_give_the_report_s_runs_and_are_not_stored_twice(dsn):
    by_hand = perflog_by_hand()
    assert len(by_hand) == 3   # two cases of the first session (moved to PingPong.log.h0), one of the second
    res = _store(dsn, [PERFLOGS])
    assert len(res.inserted) == 3 and not res.bad   # BuildPingpong.log is the build fixture's: not a run
    runs = stored_runs(dsn)
    for row in by_hand:
        status, ranks, _nodes, params, system, stack, foms, _meta = runs[row["jobid"]]
        assert foms == row["foms"] and ranks == row["num_tasks"] and params["message_bytes"] == row["message_bytes"]
        assert status == ("ok" if row["result"] == "pass" else "failed") and system == "local:mpirun"
    # the report holds the same test cases: stored already, nothing new; and the numbers agree with the workload's
    res = _store(dsn, REPORTS)
    assert res.inserted == [] and len(res.skipped) == 3
    check_against_stdout(dsn, [c for r in REPORTS for c in report_cases(r, DATA)])


def test_a_grown_perflog_adds_only_its_new_lines(dsn, tmp_path):
    src = PERFLOGS / "local" / "mpirun" / "PingPong.log.h0"
    lines = src.read_text().splitlines(keepends=True)
    log = tmp_path / "local" / "mpirun" / "PingPong.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(lines[:2]))
    assert len(_store(dsn, [tmp_path]).inserted) == 1
    log.write_text("".join(lines))
    res = _store(dsn, [tmp_path])
    assert len(res.inserted) == 1 and len(res.skipped) == 1


def test_bad_input_names_the_file_and_stores_nothing(dsn, tmp_path):
    neither = tmp_path / "results.json"
    neither.write_text(json.dumps({"benchmark": "pingpong", "latency": 0.25}))
    r = cli("ingest", str(neither), dsn=dsn)
    assert r.returncode == 2 and str(neither) in r.stderr and "neither a ReFrame run report" in r.stderr
    old = tmp_path / "old-report.json"
    doc = json.loads(REPORTS[0].read_text())
    doc["session_info"]["data_version"] = "2.1"
    old.write_text(json.dumps(doc))
    r = cli("ingest", str(old), dsn=dsn)
    assert r.returncode == 2 and str(old) in r.stderr and "data version 2.1" in r.stderr
    cut = tmp_path / "perflogs" / "PingPong.log"
    cut.parent.mkdir()
    head, first, second = (PERFLOGS / "local" / "mpirun" / "PingPong.log.h0").read_text().splitlines()
    cut.write_text("\n".join([head, first, second.rsplit("|", 3)[0]]) + "\n")   # a line cut short
    r = cli("ingest", str(cut.parent), dsn=dsn)
    assert r.returncode == 2 and f"{cut}:3" in r.stderr and "fields" in r.stderr
    per_variable = tmp_path / "compat" / "PingPong.log"   # a site format with one line per variable
    per_variable.parent.mkdir()
    per_variable.write_text("job_completion_time|result|system|partition|environ|name|num_tasks|perf_var|perf_value|"
                            "perf_unit\n2026-11-24T10:22:34|pass|local|mpirun|debian-openmpi4|PingPong|2|latency|0.23|us\n")
    r = cli("ingest", str(per_variable), dsn=dsn)
    assert r.returncode == 2 and str(per_variable) in r.stderr and "one line per performance variable" in r.stderr
    profile = ROOT / "tests" / "thirdparty" / "kripke" / "kripke-n1.runtime-profile.cali"
    r = cli("ingest", str(REPORTS[0]), str(profile), dsn=dsn)
    assert r.returncode == 2 and str(profile) in r.stderr and "ReFrame" in r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    r = cli("ingest", "--skip-bad", str(cut.parent), dsn=dsn)
    assert r.returncode == 3 and f"{cut}:3" in r.stderr   # 3: stored, but skipped some (commscope/README.md)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


def test_report_and_dashboards_take_a_reframe_run(dsn, tmp_path):
    """Runs without any commscope field (no profile, no workload output, no window): every panel query of every
    dashboard runs, the dashboards' variables offer the run's system and application, Grafana's read-only role
    reads its FOMs from v_foms (equal to the workload's FOM lines), and the report is written. No panel draws an
    arbitrary application's FOMs yet (commscope/README.md, ReFrame)."""
    import datetime as dt

    from click.testing import CliRunner

    from commscope.views import panels as P
    from commscope.cli import main
    _store(dsn, REPORTS)
    with psycopg.connect(dsn) as conn:
        values = P.all_values(conn)
        lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM runs").fetchone()
        for board in P.DASHBOARDS:
            for panel in board.panels:
                conn.execute(P.expand(panel.sql, lo - dt.timedelta(days=1), hi + dt.timedelta(days=1), values)).fetchall()
    assert "local:mpirun" in values["system"] and "PingPong" in values["app"]
    with psycopg.connect(dsn) as conn:
        jobs = dict(conn.execute("SELECT id, metadata->>'jobid' FROM runs").fetchall())
    with psycopg.connect(grant_local(dsn, "grafana_reader")) as conn:
        read = conn.execute("SELECT run_id, name, value, unit FROM v_foms WHERE app = 'PingPong'").fetchall()
    by_job: dict = {}
    for run_id, name, value, unit in read:
        by_job.setdefault(jobs[run_id], {})[name] = (value, unit)
    printed = {c["jobid"]: stdout_foms(out) for r in REPORTS for c, out, _ in report_cases(r, DATA)}
    assert by_job == {j: f for j, f in printed.items() if f}
    out = tmp_path / "report.html"
    r = CliRunner(env={"COMMSCOPE_DB_URL": dsn}).invoke(main, ["report", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "local:mpirun" in out.read_text()


def test_a_live_reframe_run_is_stored_with_the_workload_s_numbers(dsn, tmp_path):
    """ReFrame runs reframe/checks/pingpong.py here (2 message sizes, 2 ranks, Debian Open MPI) with
    reframe/config/local.py; its fresh report is stored and compared with the workload's stdout."""
    if not Path("/usr/bin/mpicc.openmpi").exists():
        pytest.skip("Debian Open MPI (/usr/bin/mpicc.openmpi) is not installed; run bash ci/setup.sh")
    reframe = shutil.which("reframe", path=str(Path(sys.executable).parent))
    if reframe is None:
        pytest.skip("reframe-hpc is not installed in this venv; pip install -e '.[reframe]'")
    report = tmp_path / "report.json"
    r = subprocess.run([reframe, "-C", str(ROOT / "reframe" / "config" / "local.py"),
                        "-c", str(ROOT / "reframe" / "checks" / "pingpong.py"), "-r", "--nocolor",
                        "--prefix", str(tmp_path / "rfm"), "--report-file", str(report)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "TMPDIR": str(tmp_path)})   # ReFrame's own log file goes there
    assert r.returncode == 0, r.stdout + r.stderr
    cases = report_cases(report)
    assert len(cases) == 2
    res = _store(dsn, [report])
    assert len(res.inserted) == 2
    assert check_against_stdout(dsn, cases) == 2
    # the perflog of the same session adds nothing
    assert _store(dsn, [tmp_path / "rfm" / "perflogs"]).inserted == []


def test_param_keys_and_app_name_the_experiment(dsn):
    """--param-keys takes a test variable into the parameters (iters, equal to the PARAM line the workload printed),
    --app names the application; runs differing only in it are other series."""
    _store(dsn, [REPORTS[0]], param_keys=("iters",), app="pingpong-latency")
    runs = stored_runs(dsn)
    for case, stdout, _ in report_cases(REPORTS[0], DATA):
        params = runs[case["jobid"]][3]
        assert params["iters"] == int(re.search(r"^PARAM iters (\d+)$", stdout.read_text(), re.M).group(1))
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT DISTINCT app FROM runs").fetchall() == [("pingpong-latency",)]
    r = cli("ingest", "--param-keys", "no_such_variable", str(REPORTS[1]), dsn=dsn)
    assert r.returncode == 2 and str(REPORTS[1]) in r.stderr and "no_such_variable" in r.stderr and "--param" in r.stderr
