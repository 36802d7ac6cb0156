"""Partial runs and measurement-model versions (docs/measurement-model.md, issue 14).

- A run with a rank's data missing is refused naming the rank, or stored with status `partial` under
  --allow-partial, from a Ramble workspace as from plain profiles, and kept out of every series statistic:
  the rollups and comparison views, and the advisors' baselines.
- Runs measured under an older version of the model are listed for re-ingest, `commscope db status` counts
  them, and re-ingesting their files replaces them.
- v_run_metrics has the columns the issue names.

Everything runs on a real PostgreSQL store with the real fixtures of tests/data. The references are the
fixtures' own files (the rank files present, Ramble's results.latest.json, caliper-reader's records) and the
store's views computed with and without the partial run."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import caliperreader
import psycopg
import pytest
from helpers import calipers_own, cli_in_process

from caliperreader import read_caliper_contents

from commscope.store.ingest import MODEL_VERSION
from commscope.workflow.ingest import Provenance, ingest
from commscope.read.records import ReadOptions

DATA = Path(__file__).parent / "data"
RAMBLE = DATA / "ramble"
THIRD_AMG = Path(__file__).parent / "thirdparty" / "amg2023"
MATRIX_WS = RAMBLE / "smoke-mpich4-matrix"           # message tracing, one Caliper file per rank
REPEATS_WS = RAMBLE / "smoke-openmpi4-repeats"       # halo3d blocking and overlap, each twice
BARRIERS_WS = RAMBLE / "barriers-openmpi4-counts"    # cgsolve with debug barriers off and on
PER_RANK_N4 = DATA / "halo3d-blocking-n4.per-rank"
PER_RANK_N2 = DATA / "halo3d-blocking-n2.per-rank"
TIME = "sum#sum#time.duration"

# Base tables, and views that list single runs (a run_id column) or the series catalog: a partial run is in
# them by design. Every other view and every rollup table is a statistic over runs.
PER_RUN = {"campaigns", "runs", "run_day", "run_windows", "node_metrics", "mpi_metrics", "rank_metrics",
           "rank_spread", "comm_matrix", "comm_stats", "foms", "halo_times", "collective_latency", "io_bandwidth",
           "v_runs", "v_run_metrics", "v_foms", "v_text_foms", "v_node_metrics", "v_mpi_routines", "v_rank_groups",
           "v_rank_spread", "v_comm_matrix", "v_comm_stats", "v_halo", "v_collectives", "v_io",
           "v_experiment_series", "v_runs_needing_reingest", "v_campaign_ids", "v_run_versions"}


def cli(dsn, *args):
    """The real command, in this process (cli_in_process)."""
    return cli_in_process(args, {**os.environ, "COMMSCOPE_DB_URL": dsn})


def snapshot(conn) -> dict:
    """Every view and table of the store, its rows as sorted text (a partitioned table's rows once, through
    the table, not again through its partitions)."""
    names = [r[0] for r in conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p', 'v') "
        "AND NOT relispartition")]
    return {n: sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"').fetchall())) for n in names}


def changed(a: dict, b: dict) -> set:
    return {k for k in a if a[k] != b[k]}


def rank_totals(run_dir: Path) -> dict:
    """Each rank's run-window time from its rank file's records (caliper-reader): every record's time
    summed, the time outside every region included."""
    totals = {}
    for f in run_dir.glob("rank-*.cali"):
        records, _ = caliperreader.read_caliper_contents(str(f))
        totals[int(f.stem.split("-")[1])] = sum(float(r[TIME]) for r in records if TIME in r)
    return totals


def partial_copy(src: Path, dest: Path, drop: str) -> Path:
    shutil.copytree(src, dest)   # copy2: file times kept, so the run keeps its day
    (dest / drop).unlink()
    return dest


# ---- 1. a Ramble experiment with a rank file missing ----------------------------------------------------

def test_a_ramble_experiment_with_a_rank_file_missing_is_refused_or_stored_as_partial(dsn, tmp_path):
    """The matrix-mode workspace keeps one Caliper file per rank. With rank 1's file of one experiment gone,
    the workspace is refused naming the experiment and the rank, and nothing is stored; with --allow-partial
    that experiment is stored as partial (missing_ranks [1]) and the other as ok, and the partial run enters
    no statistic until it is made ok."""
    ws = tmp_path / "ws"
    shutil.copytree(MATRIX_WS, ws)
    doc = json.loads((ws / "results.latest.json").read_text())
    exps = {e["experiment_name"]: e for e in doc["experiments"]}
    cut = "commgraph-pairs-debian-mpich4-tcp-n2"
    run_dir = ws / "experiments" / "commgraph" / "commgraph" / cut
    (run_dir / f"{cut}.rank-1.cali").unlink()
    assert [p.name for p in run_dir.glob("*.cali")] == [f"{cut}.rank-0.cali"]
    assert int(exps[cut]["n_ranks"]) == 2 and exps[cut]["RAMBLE_STATUS"] == "SUCCESS"

    r = cli(dsn, "ingest", "-q", str(ws))
    assert r.returncode == 2, r.stderr
    assert cut in r.stderr and "rank 1 of the 2" in r.stderr and "--allow-partial" in r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM campaigns)").fetchone() == (0, 0)

    r = cli(dsn, "ingest", "-q", "--allow-partial", str(ws))
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        rows = {e: (s, m) for e, s, m in conn.execute("SELECT experiment, status, metadata->'missing_ranks' FROM runs")}
        assert rows == {exps[cut]["name"]: ("partial", [1]),
                        exps["commgraph-pairs-debian-mpich4-default-n2"]["name"]: ("ok", None)}
        partial_id = conn.execute("SELECT id FROM runs WHERE status = 'partial'").fetchone()[0]
        # what was stored of it is rank 0's own messages
        senders = conn.execute("SELECT DISTINCT src FROM comm_matrix WHERE run_id = %s", (partial_id,)).fetchall()
        assert senders == [(0,)]
        kept_out = snapshot(conn)
        # the premise: as an ok run it would enter the heatmap's daily matrix
        conn.execute("UPDATE runs SET status = 'ok' WHERE id = %s", (partial_id,))
        as_ok = snapshot(conn)
        conn.rollback()
        assert "v_comm_matrix_daily" in changed(kept_out, as_ok) - PER_RUN


# ---- 2. partial runs and series statistics --------------------------------------------------------------

STATISTICS = ("run_metrics_daily", "v_run_metrics_daily", "v_run_compared", "v_scaling", "v_stack_comparison",
              "v_system_comparison", "v_mpi_fraction", "v_mpi_fraction_daily", "v_wall_time_daily",
              "v_rank_groups_daily", "v_halo_daily", "v_mpi_routines_daily")


def test_a_partial_run_enters_no_series_statistic(dsn, tmp_path):
    """The 4-rank per-rank halo3d run and, in its series and on its day, a copy with its slowest rank's file
    missing stored as partial. Every view and rollup over runs is the same with and without the partial run;
    made ok, the same run changes each of them (so they would see it). The run window's time of the series is
    the complete run's, from its rank files' records."""
    totals = rank_totals(PER_RANK_N4)
    slowest = max(totals, key=totals.get)
    part = partial_copy(PER_RANK_N4, tmp_path / PER_RANK_N4.name, f"rank-{slowest}.cali")
    with psycopg.connect(dsn) as conn:
        ingest(conn, [PER_RANK_N4, PER_RANK_N2], Provenance())
        conn.commit()
        without = snapshot(conn)
        ingest(conn, [part], Provenance(), allow_partial=True)
        conn.commit()
        status, missing, sid = conn.execute(
            "SELECT status, metadata->'missing_ranks', series_id FROM runs WHERE source = %s", (str(part),)).fetchone()
        assert (status, missing) == ("partial", [slowest])
        complete_sid, = conn.execute("SELECT series_id FROM runs WHERE source = %s", (str(PER_RANK_N4),)).fetchone()
        assert sid == complete_sid                                # the premise: one series, one day
        with_partial = snapshot(conn)
        assert changed(without, with_partial) <= PER_RUN, changed(without, with_partial) - PER_RUN
        (time_n, time_sum), = conn.execute(
            "SELECT time_n, time_sum FROM v_run_metrics_daily WHERE series_id = %s AND \"window\" = 'run'", (sid,))
        assert time_n == 1
        assert time_sum == pytest.approx(totals[slowest], rel=1e-9)
        # the partial run's own run window (its slowest rank present) is not the complete run's, so it would
        # move the series' mean
        (own,) = conn.execute("SELECT time_s FROM v_run_metrics WHERE run_id = (SELECT id FROM runs WHERE source = %s) "
                              "AND \"window\" = 'run'", (str(part),)).fetchone()
        assert own == pytest.approx(max(t for r, t in totals.items() if r != slowest), rel=1e-9)
        assert own < time_sum
        conn.execute("UPDATE runs SET status = 'ok' WHERE source = %s", (str(part),))
        as_ok = snapshot(conn)
        conn.rollback()
    moved = changed(without, as_ok)
    assert set(STATISTICS) <= moved, set(STATISTICS) - moved


def advise(dsn, what, *args):
    return cli(dsn, "advise", what, *args)


def advice(dsn, kind) -> dict:
    with psycopg.connect(dsn) as conn:
        return {run_id: (s, text) for run_id, s, text in conn.execute(
            "SELECT run_id, summary, text FROM v_advice WHERE kind = %s ORDER BY id", (kind,))}


@pytest.mark.parametrize("status", ["partial", "failed"])
def test_the_overlap_advisor_takes_only_ok_runs_as_baseline(dsn, status):
    """Two repeats of blocking and of overlap (one experiment but the variant). One blocking repeat stored as
    STATUS (set in the store: these aggregated profiles have no rank file to lose) is no baseline: every run's
    baseline is the other blocking repeat alone, and the run itself gets no efficiency."""
    with psycopg.connect(dsn) as conn:
        # these profiles predate the workloads' `loop` region: the advisor reads the call tree of the region named
        # (without it their focus window is the workloads' timers, which the advisor refuses: no call tree)
        ingest(conn, [REPEATS_WS], Provenance(), focus="timestep")
        runs = conn.execute("SELECT id, variant, campaign_id FROM runs ORDER BY id").fetchall()
        blocking = [i for i, v, _ in runs if v == "blocking"]
        assert len(blocking) == 2 and len(runs) == 4
        bad, good = blocking
        conn.execute("UPDATE runs SET status = %s WHERE id = %s", (status, bad))
        conn.commit()
        (good_exposed,) = conn.execute("SELECT mpi_time_avg_s FROM v_run_metrics WHERE run_id = %s AND "
                                       "\"window\" = 'focus'", (good,)).fetchone()
    r = advise(dsn, "overlap", f"campaign:{runs[0][2]}")
    assert r.returncode == 0, r.stderr
    got = advice(dsn, "overlap")
    assert set(got) == {i for i, _, _ in runs}
    for run_id, (s, text) in got.items():
        if run_id != bad:
            assert s["blocking_run_ids"] == [good]
            assert s["blocking_exposed_comm_avg"] == pytest.approx(good_exposed, rel=1e-12)
            assert s["status"] == "ok"
    s, text = got[bad]
    assert s["overlap_efficiency"] is None and s["blocking_run_ids"] == [] and s["status"] == status
    assert f"status {status}" in text and "overlap efficiency" not in text


@pytest.mark.parametrize("which", ["off", "on"])
def test_the_barrier_advisor_measures_only_between_ok_runs(dsn, which):
    """The barriers study's pair (debug barriers off and on). With either run stored as partial, no saving is
    measured: the partial run is no side of the comparison."""
    with psycopg.connect(dsn) as conn:
        ingest(conn, [BARRIERS_WS], Provenance())
        ids = {p["param.debug-barriers"]: i
               for i, p in conn.execute("SELECT r.id, s.parameters FROM runs r JOIN series s ON s.id = r.series_id")}
        (campaign,) = conn.execute("SELECT max(campaign_id) FROM runs").fetchone()
    assert set(ids) == {"off", "on"}
    r = advise(dsn, "barriers", f"campaign:{campaign}", "--no-store")
    assert r.returncode == 0 and "Measured on 1 run(s) with them and 1 without" in r.stdout, r.stdout + r.stderr
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE runs SET status = 'partial' WHERE id = %s", (ids[which],))
    r = advise(dsn, "barriers", f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    got = advice(dsn, "barriers")
    s, text = got[ids["on"]]
    assert "measured" not in s and "Measured on" not in text
    assert s["status"] == ("partial" if which == "on" else "ok")
    assert ("Status partial: not compared with other runs." in text) == (which == "on")


def test_placement_refuses_a_partial_run(dsn, tmp_path):
    """A message-tracing run stored with rank 1's file missing has only rank 0's messages: no placement is
    computed from it; the complete run of the same workspace is advised."""
    ws = tmp_path / "ws"
    shutil.copytree(MATRIX_WS, ws)
    cut = "commgraph-pairs-debian-mpich4-tcp-n2"
    (ws / "experiments" / "commgraph" / "commgraph" / cut / f"{cut}.rank-1.cali").unlink()
    with psycopg.connect(dsn) as conn:
        ingest(conn, [ws], Provenance(), allow_partial=True)
        ids = dict(conn.execute("SELECT status, id FROM runs").fetchall())
    topo = tmp_path / "topology.yaml"
    topo.write_text("nodes: [hostA, hostB]\nranks_per_node: 1\nnetwork: {type: flat}\n")
    r = advise(dsn, "placement", str(ids["partial"]), "--topology", str(topo), "--no-store")
    assert r.returncode == 2
    assert f"run {ids['partial']} is partial" in r.stderr and "rank(s) 1 of its 2" in r.stderr
    r = advise(dsn, "placement", str(ids["ok"]), "--topology", str(topo), "--no-store")
    assert r.returncode == 0, r.stderr


# ---- 4. model versions ------------------------------------------------------------------------------------

def test_runs_of_an_older_model_version_are_listed_and_reingest_replaces_them(dsn):
    """Runs stored by this code are current. Marked as measured under an older version that measured them
    differently (as stores written before version 3 hold them), they are listed for re-ingest with the
    reason, `db status` counts them, and ingesting their files again replaces them (same runs, same series,
    same statistics)."""
    inputs = [PER_RANK_N4, DATA / "halo3d-overlap-n2.runtime-profile.cali", REPEATS_WS]
    with psycopg.connect(dsn) as conn:
        first = ingest(conn, inputs[:2], Provenance())
        first_ws = ingest(conn, inputs[2:], Provenance())
        conn.commit()
        n = len(first.inserted) + len(first_ws.inserted)
        assert n == 6
        assert conn.execute("SELECT count(*) FROM v_runs_needing_reingest").fetchone()[0] == 0
        assert conn.execute("SELECT DISTINCT model_version FROM runs").fetchall() == [(MODEL_VERSION,)]
        before = snapshot(conn)
    assert "older version" not in cli(dsn, "db", "status").stdout

    with psycopg.connect(dsn) as conn:
        # version 3 measured these multi-rank runs as version 4 does: not listed
        conn.execute("UPDATE runs SET model_version = 3")
        conn.commit()
        assert conn.execute("SELECT count(*) FROM v_runs_needing_reingest").fetchone()[0] == 0
        conn.execute("UPDATE runs SET model_version = 2")
        conn.commit()
        listed = conn.execute("SELECT model_version, reason FROM v_runs_needing_reingest").fetchall()
        assert len(listed) == n and {v for v, _ in listed} == {2}
        # each older version's reason names what it measured differently (docs/measurement-model.md)
        assert all("timestep" in reason and "spot" in reason for _, reason in listed)
        conn.execute("UPDATE runs SET model_version = 1 WHERE id = (SELECT min(id) FROM runs)")
        conn.commit()
        reasons = dict(conn.execute("SELECT model_version, reason FROM v_runs_needing_reingest"))
        assert "verify" in reasons[1] and "outside every region" in reasons[1], reasons
    status = cli(dsn, "db", "status").stdout
    assert f"{n} runs were measured under an older version of the measurement model" in status, status
    assert "stored before the measurement model" not in status

    with psycopg.connect(dsn) as conn:
        again = ingest(conn, inputs[:2], Provenance())
        again_ws = ingest(conn, inputs[2:], Provenance())
        conn.commit()
        assert not again.skipped and not again_ws.skipped
        assert len(again.inserted) + len(again_ws.inserted) == n
        assert conn.execute("SELECT count(*) FROM v_runs_needing_reingest").fetchone()[0] == 0
        assert conn.execute("SELECT count(*), min(model_version) FROM runs").fetchone() == (n, MODEL_VERSION)
        after = snapshot(conn)
    assert "older version" not in cli(dsn, "db", "status").stdout
    # the same measurements, series and rollups as first stored (new run and campaign ids aside)
    for name in ("series", "run_metrics_daily", "v_run_metrics_daily", "v_scaling", "v_stack_comparison",
                 "halo_daily", "routines_daily"):
        assert after[name] == before[name], name


# ---- 5. the columns of v_run_metrics ---------------------------------------------------------------------

ISSUE_COLUMNS = ("run_id, series_id, started_at, app, ranks, nodes, window, time_s, mpi_time_avg_s, mpi_fraction_avg, "
                 "mpi_fraction_slowest, load_balance, communication_efficiency, parallel_efficiency, parameters, "
                 "environment").split(", ")


def test_v_run_metrics_has_the_columns_the_issue_names(dsn):
    with psycopg.connect(dsn) as conn:
        cols = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                                 "WHERE table_schema = 'public' AND table_name = 'v_run_metrics'").fetchall())
    assert set(ISSUE_COLUMNS) <= set(cols), set(ISSUE_COLUMNS) - set(cols)
    assert cols["parameters"] == cols["environment"] == "jsonb"
    for c in ("time_s", "mpi_time_avg_s", "mpi_fraction_avg", "mpi_fraction_slowest", "load_balance",
              "communication_efficiency", "parallel_efficiency"):
        assert cols[c] == "double precision", c
    assert cols["started_at"] == "timestamp with time zone" and cols["window"] == "text"
    assert cols["ranks"] == cols["nodes"] == cols["series_id"] == "integer" and cols["run_id"] == "bigint"


def test_a_one_rank_spot_run_of_version_3_is_listed_and_reingest_gives_its_slowest_rank(dsn):
    """Version 3 left a one-rank spot profile's slowest-rank figures NULL, as for any spot profile. Marked as
    version 3, such a run is listed (and a multi-rank spot run is not); ingesting it again gives its run time,
    which for one rank is the sum of every record's exclusive time (caliper-reader), the time outside regions
    included."""
    one, two = THIRD_AMG / "amg2023-n1.spot.cali", THIRD_AMG / "amg2023-n2.spot.cali"
    records, g = read_caliper_contents(str(one))
    assert g["mpi.world.size"] == "1"
    total = sum(float(r["sum#scale#sum#time.duration.ns"]) for r in records
                if "sum#scale#sum#time.duration.ns" in r and not calipers_own(r))
    keys = ReadOptions(param_keys=("Problem", "Size-x", "Solver"))
    with psycopg.connect(dsn) as conn:
        ingest(conn, [one, two], Provenance(), read=keys)
        conn.commit()
        conn.execute("UPDATE runs SET model_version = 3")
        conn.execute("UPDATE run_windows SET time_s = NULL")   # as version 3 stored them
        conn.commit()
        listed = conn.execute("SELECT r.source, v.reason FROM v_runs_needing_reingest v "
                              "JOIN runs r ON r.id = v.run_id").fetchall()
        assert [Path(s).name for s, _ in listed] == [one.name], listed
        assert "one-rank spot" in listed[0][1]
        again = ingest(conn, [one], Provenance(), read=keys)
        conn.commit()
        assert len(again.inserted) == 1
        assert conn.execute("SELECT count(*) FROM v_runs_needing_reingest").fetchone()[0] == 0
        time_s = conn.execute("SELECT m.time_s FROM v_run_metrics m JOIN runs r ON r.id = m.run_id "
                              "WHERE r.source LIKE %s AND m.window = 'run'", (f"%{one.name}",)).fetchone()[0]
    assert time_s == pytest.approx(total, rel=1e-6)
