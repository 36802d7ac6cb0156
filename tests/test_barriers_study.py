"""The barriers study end to end: `commscope run barriers` records call counts (Caliper mode `counts`, the
study's own, ramble/studies/barriers/commscope.yaml) and `commscope advise barriers` on its campaign finds the
debugging barriers of the `on` experiments and measures them against the `off` ones, although the two differ in
their Ramble variant and name: they are paired on their series (parameters equal but the debug-barrier switch,
same environment).

In CI: the plan and the rendered study without Ramble, and a real barriers workspace (tests/data/ramble/
barriers-openmpi4-counts, made by `commscope run barriers`; its README says how) ingested and advised, every
figure checked against caliper-reader's records of its profiles and the workload's own output. With RAMBLE_ROOT
and COMMSCOPE_CALIPER_PREFIX: the same, live, through setup and run."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import caliperreader
import psycopg
import pytest

import ramble_static as rs
import suite
from commscope.workflow import errors, paths, plan as workflow_plan, run as workflow_run
from commscope.workflow.ingest import Provenance, ingest

from conftest import CALIPER_PREFIX, ROOT, stack_or_skip
from helpers import caliper_per_rank

DATA = Path(__file__).parent / "data"
WORKSPACE = DATA / "ramble" / "barriers-openmpi4-counts"
CLI = [sys.executable, "-m", "commscope.cli"]
RAMBLE_ROOT = os.environ.get("RAMBLE_ROOT")


def test_the_barriers_study_records_call_counts_by_default():
    """Without --caliper the barriers study runs in the mode that counts calls, and that mode's Caliper
    configuration has region.count; other studies keep `mpi`, and --caliper still chooses."""
    plan = workflow_plan.plan_run("barriers", site="slurm-cluster", spack=False)
    assert plan.caliper == "counts"
    assert workflow_run.render(plan)["ramble"]["modifiers"] == [{"name": "caliper", "mode": "counts"}]
    assert workflow_plan.plan_run("smoke", site="slurm-cluster", spack=False).caliper == "mpi"
    assert workflow_plan.plan_run("barriers", site="slurm-cluster", caliper="mpi", spack=False).caliper == "mpi"
    mod = rs.load(rs.RAMBLE / "modifiers" / "caliper" / "modifier.py")
    (config,) = [v for n, v, meth, modes in mod.env_mods if n == "CALI_CONFIG" and "counts" in modes]
    assert {"profile.mpi", "region.count"} <= set(config.split(","))


def test_a_study_declaring_an_unknown_mode_is_refused(tmp_path, monkeypatch):
    study = tmp_path / "studies" / "barriers"
    study.mkdir(parents=True)
    (study / "commscope.yaml").write_text("caliper: everything\n")
    monkeypatch.setattr(paths, "STUDIES_DIR", tmp_path / "studies")
    with pytest.raises(errors.WorkflowError, match=r"commscope.yaml: caliper: 'everything' is not a Caliper mode"):
        workflow_plan.study_caliper_mode("barriers")


# ---- the reference, from the workspace's own files ------------------------------------------

def experiments(ws: Path) -> dict[str, dict]:
    """Ramble's result entries by debug_barriers value ('on', 'off'), with the run directory."""
    res = json.loads((ws / "results.latest.json").read_text())
    out = {}
    for e in res["experiments"]:
        v = e["RAMBLE_VARIABLES"]
        name = e["experiment_name"]
        d = ws / "experiments" / e["application_name"] / e["workload_name"] / name
        out[v["debug_barriers"]] = {"name": name, "variant": v["variant"], "dir": d, "status": e["RAMBLE_STATUS"],
                                    "cali": d / f"{name}.cali", "out": d / f"{name}.out"}
    return out


def check_advice(dsn, ws: Path) -> None:
    """Advise on the workspace's campaign and check the advice against the files."""
    exps = experiments(ws)
    on, off = exps["on"], exps["off"]
    assert on["status"] == off["status"] == "SUCCESS"
    assert on["variant"] != off["variant"]                    # what kept the old advisor from pairing them
    _, g = caliperreader.read_caliper_contents(str(on["cali"]))
    assert g["opts:region.count"] == "true" and g["caliper_mode"] == "counts"
    with psycopg.connect(dsn) as conn:
        ids = {src.rsplit("/", 1)[-1]: i for src, i in conn.execute("SELECT source, id FROM runs")}
        (campaign,) = conn.execute("SELECT max(campaign_id) FROM runs").fetchone()
    run_on = next(i for s, i in ids.items() if s.startswith(on["name"]))
    run_off = next(i for s, i in ids.items() if s.startswith(off["name"]))
    r = subprocess.run([*CLI, "advise", "barriers", f"campaign:{campaign}"], capture_output=True, text=True,
                       env={**os.environ, "COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        rows = {run_id: (s, text) for run_id, s, text in
                conn.execute("SELECT run_id, summary, text FROM v_advice WHERE kind = 'barriers'")}
    s, text = rows[run_on]
    # the site: cgsolve's debug_barrier region inside each CG iteration, 3 calls per iteration and rank
    iterations = int(suite.parse_output(on["out"].read_text()).verify["iterations"][1])
    site_path = ["main", "loop", "timestep", "debug_barrier", "MPI_Barrier"]
    barrier, calls = caliper_per_rank(on["cali"], lambda p: p == site_path)
    ranks = len(barrier)
    assert s["likely_debug_sites"] == ["main/loop/timestep/debug_barrier"] and s["calls_measured"] is True
    assert s["window"] == "focus" and s["focus_region"] == "loop"
    # the barrier before the first dot product is called once per rank: a phase barrier, not flagged; the
    # timing barrier before the loop is outside the focus window
    assert {x["region"]: x["likely_debug"] for x in s["sites"]} == {
        "main/loop/debug_barrier": False, "main/loop/timestep/debug_barrier": True}
    in_loop, _ = caliper_per_rank(on["cali"], lambda p: p[-1] == "MPI_Barrier" and "loop" in p)
    assert s["barrier_time_avg"] == pytest.approx(sum(in_loop.values()) / len(in_loop), rel=1e-9)
    site = next(x for x in s["sites"] if x["likely_debug"])
    assert site["calls"] == sum(calls.values()) == 3 * iterations * ranks
    assert site["time_min"] == pytest.approx(min(barrier.values()), rel=1e-9)
    own, _ = caliper_per_rank(on["cali"], lambda p: p == site_path[:-1])
    assert s["predicted_saving"] == pytest.approx(min(barrier.values()) + 1.5 * sum(own.values()) / ranks, rel=1e-9)
    # measured against the `off` experiment: the slowest rank's time in main/loop/timestep, with minus without
    m = s["measured"]
    assert m["with_run_ids"] == [run_on] and m["without_run_ids"] == [run_off]
    loop_on, _ = caliper_per_rank(on["cali"], lambda p: p[:3] == ["main", "loop", "timestep"])
    loop_off, _ = caliper_per_rank(off["cali"], lambda p: p[:3] == ["main", "loop", "timestep"])
    assert m["region"] == "main/loop/timestep"
    assert m["measured_saving"] == pytest.approx(max(loop_on.values()) - max(loop_off.values()), rel=1e-9)
    assert "Measured on 1 run(s) with them and 1 without" in text
    # the off run has no barrier in its loop
    assert run_off not in rows and f"skipped run {run_off}: no MPI_Barrier in the focus window (loop)" in r.stdout


def test_the_barriers_workspace_pairs_on_and_off(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WORKSPACE], Provenance())
    check_advice(dsn, WORKSPACE)


@pytest.mark.skipif(not RAMBLE_ROOT or not Path(RAMBLE_ROOT, "bin", "ramble").exists(),
                    reason="Ramble is in no package registry: set RAMBLE_ROOT to a checkout of "
                           "GoogleCloudPlatform/ramble at the commit in versions.yaml to run the study for real")
@pytest.mark.skipif(not CALIPER_PREFIX, reason="Caliper is not installed here (no registry carries it); set "
                    "COMMSCOPE_CALIPER_PREFIX to a Caliper+Adiak install built with Debian Open MPI 4.1")
def test_live_run_barriers_then_advise(tmp_path, dsn):
    """commscope setup with Caliper, commscope run barriers at 2 ranks (ingested), commscope advise barriers."""
    stack_or_skip("debian-openmpi4")
    env = {**os.environ, "COMMSCOPE_HOME": str(tmp_path / "home"), "COMMSCOPE_DB_URL": dsn, "SPACK_ROOT": ""}
    p = subprocess.run([*CLI, "setup", "--stacks", "debian-openmpi4",
                        "--caliper-prefix", f"debian-openmpi4={CALIPER_PREFIX}"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert "with Caliper" in p.stdout + p.stderr, p.stdout + p.stderr
    p = subprocess.run([*CLI, "run", "barriers", "--stacks", "debian-openmpi4", "--where", "{n_ranks} == 2"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Caliper counts" in p.stdout and "stored" in p.stdout
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    check_advice(dsn, ws)
