"""The barrier advisor (commscope advise barriers) on real cgsolve profiles made
with and without --debug-barriers: the figures it stores are checked against
the same figures computed here straight from the .cali records with
caliper-reader, and bad input is refused with exit 2 and nothing stored."""
from __future__ import annotations

import html
import os
import shutil
import subprocess
import sys
from pathlib import Path

import caliperreader
import psycopg
import pytest

import suite
from helpers import caliper_per_rank
from commscope.workflow.ingest import Provenance, ingest


DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-m", "commscope.cli"]
WITH = DATA / "cgsolve-direct-barriers-n4.mpi-profile.cali"
WITHOUT = DATA / "cgsolve-direct-n4.mpi-profile.cali"


def advise(dsn, *args):
    env = {**os.environ, "COMMSCOPE_DB_URL": dsn}
    return subprocess.run([*CLI, "advise", "barriers", *args], capture_output=True, text=True, env=env)


def stored(dsn) -> list:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT kind, run_id, summary, text FROM v_advice ORDER BY id").fetchall()


def test_debug_barriers_found_and_measured_against_the_run_without_them(dsn, tmp_path):
    with psycopg.connect(dsn) as conn:
        # these profiles predate the `loop` region: without --focus their focus window is cgsolve's own timers,
        # which have no call tree (test_a_profile_without_a_loop_region_names_the_focus_to_give); the region they
        # have, `timestep`, is named as a user would
        ingest(conn, [WITH, WITHOUT], Provenance(), focus="timestep")
        ids = dict(conn.execute("SELECT source, id FROM runs").fetchall())
        (campaign,) = conn.execute("SELECT DISTINCT campaign_id FROM runs").fetchone()
    run_with, run_without = ids[str(WITH)], ids[str(WITHOUT)]
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    rows = {run_id: (summary, text) for kind, run_id, summary, text in stored(dsn) if kind == "barriers"}
    # the run without debugging barriers has none in its focus window (its one timing barrier is before the loop)
    assert set(rows) == {run_with}
    assert f"skipped run {run_without}: no MPI_Barrier in the focus window (timestep)" in r.stdout
    s, text = rows[run_with]
    # the focus window: the region named at ingest, every call path through `timestep`
    assert s["window"] == "focus" and s["focus_region"] == "timestep"

    # independently, from the records
    loop_barrier, calls = caliper_per_rank(WITH, lambda p: p == ["main", "timestep", "debug_barrier", "MPI_Barrier"])
    all_barriers, all_calls = caliper_per_rank(WITH, lambda p: p[-1] == "MPI_Barrier" and "timestep" in p)
    # the window's MPI time (every MPI call in it, none left out by name; docs/measurement-model.md)
    mpi, _ = caliper_per_rank(WITH, lambda p: p[-1].startswith("MPI_") and "timestep" in p)
    ranks = len(mpi)
    assert ranks == 4
    mpi_avg = sum(mpi.values()) / ranks
    assert s["barrier_time_avg"] == pytest.approx(sum(all_barriers.values()) / ranks, rel=1e-9)
    assert s["barrier_calls"] == sum(all_calls.values())
    assert s["barrier_share_of_mpi"] == pytest.approx(sum(all_barriers.values()) / ranks / mpi_avg, rel=1e-9)
    assert s["likely_debug_sites"] == ["main/timestep/debug_barrier"]
    site = next(x for x in s["sites"] if x["region"] == "main/timestep/debug_barrier")
    _, halo_calls = caliper_per_rank(WITH, lambda p: p == ["main", "timestep", "halo_exchange"])
    _, dot_calls = caliper_per_rank(WITH, lambda p: p == ["main", "timestep", "allreduce"])
    assert site["calls"] == sum(calls.values()) == sum(halo_calls.values()) + sum(dot_calls.values())
    iterations = suite.parse_output(WITH.with_suffix(".out").read_text()).verify["iterations"][1]
    assert site["calls"] == 3 * int(iterations) * ranks      # one barrier per halo exchange and per dot
    assert site["time_min"] == pytest.approx(min(loop_barrier.values()), rel=1e-9)
    # the saving: the least-waiting rank's barrier time (latency) plus the annotations' cost, 1.5 x the
    # debug_barrier region's own time avg over ranks (the parent holds the other third)
    region_own, _ = caliper_per_rank(WITH, lambda p: p == ["main", "timestep", "debug_barrier"])
    assert len(region_own) == ranks and min(region_own.values()) > 0
    assert site["region_overhead"] == pytest.approx(1.5 * sum(region_own.values()) / ranks, rel=1e-9)
    assert site["latency"] == site["time_min"]
    assert s["predicted_saving"] == pytest.approx(min(loop_barrier.values()) + 1.5 * sum(region_own.values()) / ranks,
                                                  rel=1e-9)
    assert s["predicted_saving_without_caliper"] == pytest.approx(min(loop_barrier.values()), rel=1e-9)
    # the timing barrier before the loop and the one before the first dot are outside the window
    assert {x["region"]: x["likely_debug"] for x in s["sites"]} == {"main/timestep/debug_barrier": True}
    loop, _ = caliper_per_rank(WITH, lambda p: "timestep" in p)
    assert s["window_time"] == pytest.approx(max(loop.values()), rel=1e-9)
    # measured: the slowest rank's time in main/timestep, with against without
    loop_with, _ = caliper_per_rank(WITH, lambda p: p[:2] == ["main", "timestep"])
    loop_without, _ = caliper_per_rank(WITHOUT, lambda p: p[:2] == ["main", "timestep"])
    m = s["measured"]
    assert m["region"] == "main/timestep" and m["with_run_ids"] == [run_with] and m["without_run_ids"] == [run_without]
    assert m["measured_saving"] == pytest.approx(max(loop_with.values()) - max(loop_without.values()), rel=1e-9)
    assert m["ratio"] == pytest.approx(m["predicted_saving"] / m["measured_saving"], rel=1e-12)
    assert "main/timestep/debug_barrier" in text and "Measured on 1 run(s) with them and 1 without" in text
    # the static report shows the advice
    page = tmp_path / "report.html"
    r = subprocess.run([*CLI, "report", "-o", str(page)], capture_output=True, text=True,
                       env={**os.environ, "COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 0, r.stderr
    advice_section = page.read_text().split("<h2>Advice</h2>", 1)[1]
    assert html.escape(text) in advice_section


# cgsolve --debug-barriers profiled with runtime-profile,profile.mpi: no region.count
UNCOUNTED = DATA / "cgsolve-direct-barriers-uncounted-n2.mpi-profile.cali"


@pytest.mark.parametrize("how", ["store", "file"])
def test_a_profile_without_call_counts_says_they_were_not_measured(dsn, how, uncounted=UNCOUNTED):
    """A real profile of cgsolve with its debugging barriers, recorded without region.count (its Caliper
    options, read here from the file's globals): its barriers are reported with their time, but whether any
    is a debugging barrier is not measured, and the advice says so instead of 'no debugging barrier'."""
    records, g = caliperreader.read_caliper_contents(str(uncounted))
    assert "opts:profile.mpi" in g and "opts:region.count" not in g
    assert not any("sum#rc.count" in rec for rec in records)
    barrier, _ = caliper_per_rank(uncounted, lambda p: p[-1] == "MPI_Barrier" and "loop" in p)    # the focus window
    if how == "store":
        with psycopg.connect(dsn) as conn:
            ingest(conn, [uncounted], Provenance())
            (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
        r = advise(dsn, str(run_id))
    else:
        r = advise(dsn, str(uncounted))
    assert r.returncode == 0, r.stderr
    ((_, _, s, text),) = stored(dsn)
    assert "Call counts not measured" in text and "No barrier looks like a debugging barrier" not in text
    assert "Call counts not measured" in r.stdout
    assert s["calls_measured"] is False and s["barrier_calls"] is None
    assert s["likely_debug_sites"] is None and s["predicted_saving"] is None
    assert s["barrier_time_avg"] == pytest.approx(sum(barrier.values()) / len(barrier), rel=1e-9)
    assert all(x["calls"] is None and not x["likely_debug"] for x in s["sites"])
    # the run has cgsolve's debugging barriers, in every iteration
    assert "main/loop/timestep/debug_barrier" in {x["region"] for x in s["sites"]}


# A real cgsolve profile with debugging barriers, `loop` region and call counts (the barriers study's Ramble
# workspace, tests/data/ramble/README.md).
WITH_LOOP = next((DATA / "ramble" / "barriers-openmpi4-counts" / "experiments" / "cgsolve" / "cgsolve"
                  / "cgsolve-direct-barriers-on-debian-openmpi4-default-n2").glob("*.cali"))


def test_a_profile_file_is_advised_without_a_stored_run(dsn):
    r = advise(dsn, str(WITH_LOOP))
    assert r.returncode == 0, r.stderr
    (kind, run_id, summary, text), = stored(dsn)
    assert kind == "barriers" and run_id is None
    assert summary["likely_debug_sites"] == ["main/loop/timestep/debug_barrier"]
    assert str(WITH_LOOP) in r.stdout


def test_a_profile_without_a_loop_region_names_the_focus_to_give(dsn):
    """A profile made before the workloads had `loop`, read directly: its focus window is the workload's timers
    (its output is beside it), which have no call tree, so it is refused with what to do, not advised on another
    interval."""
    records, _ = caliperreader.read_caliper_contents(str(WITH))
    assert not any("loop" in (rec.get("path") or []) for rec in records)
    r = advise(dsn, str(WITH))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert str(WITH) in r.stderr and "the focus region loop is not in the call tree" in r.stderr
    assert "--focus timestep" in r.stderr
    assert stored(dsn) == []


@pytest.mark.parametrize("source, message", [
    ("999", "999: no run 999 in the store"),
    ("campaign:999", "campaign:999: no campaign 999 in the store"),
    ("run:x", "run:x: not a run id"),
    (str(DATA / "commgraph-pairs-n4.msgtrace"), "commgraph-pairs-n4.msgtrace: no call-tree times in this profile, so no barrier data"),
])
def test_bad_input_exits_2_and_stores_nothing(dsn, source, message):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WITH], Provenance())
    r = advise(dsn, source)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert stored(dsn) == []


def test_a_run_without_a_profile_has_no_barrier_data(dsn, tmp_path):
    out = tmp_path / "cgsolve.out"
    shutil.copy(WITH.with_suffix(".out"), out)   # the workload's stdout alone: a run without Caliper
    with psycopg.connect(dsn) as conn:
        ingest(conn, [out], Provenance())
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    r = advise(dsn, str(run_id))
    assert r.returncode == 2
    assert f"run {run_id}: no call-tree times (a run stored from its output alone" in r.stderr
    assert "so no barrier data" in r.stderr
    assert stored(dsn) == []


def test_live_cgsolve_with_and_without_debug_barriers(caliper_build, dsn, tmp_path):
    """Real runs: the advisor finds the debugging barriers of the run that has
    them (3 per CG iteration), none in the other, and stores both figures."""
    stack, bdir = caliper_build
    iterations = {}
    for b in (True, False):
        stem = tmp_path / f"cg-{'barriers' if b else 'plain'}"
        r = suite.run(stack, bdir, "cgsolve", suite.CGSOLVE + ["--allreduce", "direct"] + (["--debug-barriers"] if b else []),
                      2, env={"CALI_CONFIG": f"runtime-profile,profile.mpi,region.count,output={stem}.cali"})
        assert not suite.problems(r), suite.problems(r)
        Path(f"{stem}.out").write_text(r.stdout)
        iterations[b] = int(r.out.verify["iterations"][1])
    assert iterations[True] == iterations[False]
    with psycopg.connect(dsn) as conn:
        ingest(conn, [tmp_path], Provenance())
        runs = dict(conn.execute("SELECT source, id FROM runs").fetchall())
        (campaign,) = conn.execute("SELECT DISTINCT campaign_id FROM runs").fetchone()
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    rows = {run_id: summary for kind, run_id, summary, _ in stored(dsn)}
    s = rows[runs[str(tmp_path / "cg-barriers.cali")]]
    site = next(x for x in s["sites"] if x["likely_debug"])
    # the workloads mark their timed loop (`loop`) around the timesteps (workloads/README.md)
    assert site["region"] == "main/loop/timestep/debug_barrier" and site["calls"] == 3 * iterations[True] * 2
    assert s["measured"]["without_run_ids"] == [runs[str(tmp_path / "cg-plain.cali")]]
    assert site["time_min"] > 0 and site["region_overhead"] > 0
    assert s["predicted_saving"] == pytest.approx(site["time_min"] + site["region_overhead"], rel=1e-12)
    # the run without them has no barrier in its loop: skipped, and measured against
    assert runs[str(tmp_path / "cg-plain.cali")] not in rows and "no MPI_Barrier in the focus window (loop)" in r.stdout


def test_fastest_share_out_of_range_is_refused(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WITH, WITHOUT], Provenance(), focus="timestep")
    r = advise(dsn, "campaign:1", "--fastest", "0")
    assert r.returncode == 2 and "--fastest" in r.stderr
    assert stored(dsn) == []
