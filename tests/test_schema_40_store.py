"""A store written by the code before model version 5 and migration 0041 (tests/stores/README.md,
schema-40-model-4-nodes.dump), migrated by this code:
- Caliper's own MPI_Comm_dup, which that code counted as the application's, is listed for re-ingest
  (v_runs_needing_reingest), and re-ingesting the files leaves it out (profiles.drop_calipers_own);
- one rule for which runs are one experiment (docs/measurement-model.md): a series of unknown node count (a workload
  output ingested alone) and one on 1 node (the same experiment through Ramble) stay two series with their runs,
  and the scaling view and panels no longer pool them into one point.
References: caliper-reader's records of the same files, the workloads' own total_time FOMs, and the dump as
pg_restore gives it, read without commscope's code."""
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

from conftest import ROOT, pg_restored, private_home
from helpers import TIME, calipers_own, read

DUMP = Path(__file__).parent / "stores" / "schema-40-model-4-nodes.dump"
CLI = [sys.executable, "-m", "commscope.cli"]
IMPI_OVERLAP = ("tests/data/ramble/smoke-mixed-caliper/experiments/halo3d/halo3d/halo3d-overlap-pypi-impi2021-default-n2/"
                "halo3d-overlap-pypi-impi2021-default-n2.out")
ALONE = "tests/data/halo3d-overlap-n2.runtime-profile.out"   # ingested alone, with the impi experiment's labels


def total_time(out: Path) -> float:
    return float(re.search(r"^FOM total_time (\S+) s$", out.read_text(), re.M).group(1))


@pytest.fixture(scope="module")
def old_store(server):
    """(url, env, the dump's runs as pg_restore gives them): the dump restored into a fresh embedded store by
    `commscope db restore`, which migrates it."""
    from commscope.store import db
    emb, _ = server
    with pg_restored(emb, DUMP) as ref, psycopg.connect(ref) as c:
        assert c.execute("SELECT max(version) FROM schema_version").fetchone()[0] == 40
        before = {"runs": c.execute("SELECT id, content_hash, series_id, nodes, source, model_version FROM runs "
                                    "ORDER BY id").fetchall(),
                  "series": c.execute("SELECT id, key, app, parameters, environment FROM series ORDER BY id").fetchall()}
    home = private_home()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG") and k != "COMMSCOPE_DB_URL"}
    env["COMMSCOPE_HOME"] = str(home)
    try:
        assert subprocess.run([*CLI, "db", "start"], capture_output=True, text=True, env=env).returncode == 0
        r = subprocess.run([*CLI, "db", "restore", str(DUMP)], capture_output=True, text=True, env=env)
        assert r.returncode == 0 and "applied 0042_model_version_5.sql" in r.stdout, r.stdout + r.stderr
        yield db.Embedded(home).url(), env, before
    finally:
        db.Embedded(home).stop()


def test_series_and_their_runs_are_kept_and_scaling_pools_no_two_series(old_store, tmp_path):
    url, env, before = old_store
    (alone,) = [run for run in before["runs"] if run[4].endswith(Path(ALONE).name)]
    (ramble,) = [run for run in before["runs"] if run[4] == IMPI_OVERLAP]
    # the premise: the same experiment, its node count unknown in one series and 1 in the other
    assert alone[3] is None and ramble[3] == 1 and alone[2] != ramble[2]
    params = {sid: p for sid, _, _, p, _ in before["series"]}
    assert {k: v for k, v in params[alone[2]].items() if k != "nodes"} == \
           {k: v for k, v in params[ramble[2]].items() if k != "nodes"}
    with psycopg.connect(url) as c:
        # every run in its series, every series with its key: the gate's history is the dump's
        assert c.execute("SELECT id, content_hash, series_id, nodes, source, model_version FROM runs "
                         "ORDER BY id").fetchall() == before["runs"]
        assert c.execute("SELECT id, key, app, parameters, environment FROM series ORDER BY id").fetchall() == \
            before["series"]
        points = c.execute("SELECT series_id, nodes, samples, time_s, base_ranks FROM v_scaling "
                           "WHERE series_id = ANY(%s) ORDER BY series_id",
                           ([alone[2], ramble[2]],)).fetchall()
        # each point is one series' runs at its own total_time (the workload's timer), never the two runs' mean,
        # and paired only with a point of its own kind of node count (here: each is its own base)
        got = {s: (n, k, b) for s, n, k, _, b in points}
        assert got == {alone[2]: (None, 1, 2), ramble[2]: (1, 1, 2)}, points
        times = {s: t for s, _, _, t, _ in points}
        assert times[alone[2]] == pytest.approx(total_time(ROOT / ALONE), rel=1e-9)
        assert times[ramble[2]] == pytest.approx(total_time(ROOT / IMPI_OVERLAP), rel=1e-9)
        # the stored rollup keys are the series' keys as this code computes them, and differ between the two
        assert c.execute("SELECT count(*) FROM run_metrics_daily d JOIN series s ON s.id = d.series_id "
                         "WHERE d.strong_key <> strong_scaling_key(s.app, s.parameters, s.environment) "
                         "OR d.weak_key <> weak_scaling_key(s.app, s.parameters, s.environment)").fetchone()[0] == 0
        keys = dict(c.execute("SELECT DISTINCT series_id, strong_key FROM run_metrics_daily WHERE series_id = ANY(%s)",
                              ([alone[2], ramble[2]],)).fetchall())
        assert len(keys) == 2 and keys[alone[2]] != keys[ramble[2]]

    # The Strong scaling panel, once the experiment of unknown node count also ran at 4 ranks (the fixture's
    # 4-rank output, ingested alone with the same labels): its line starts from its own 2-rank run, not from the
    # mean of that run and the 1-node series' run.
    n4 = tmp_path / "halo3d-overlap-n4.runtime-profile.out"
    shutil.copy(ROOT / "tests" / "data" / n4.name, n4)
    r = subprocess.run([*CLI, "ingest", "--system", "local", "--stack", "pypi-impi2021", "--interconnect",
                        "impi2021/default", "--param", "ramble_workload=halo3d", str(n4)],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    with psycopg.connect(url) as c:
        from commscope.views import panels as P
        t0, t1 = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
        rows = c.execute(P.expand(P.SCALING.panel("Strong scaling: speedup").sql, t0, t1, P.all_values(c))).fetchall()
    line = sorted((ranks, speedup) for series, ranks, speedup in rows if series.startswith("pypi-impi2021"))
    assert [x for x, _ in line] == [2, 4], rows
    assert line[1][1] == pytest.approx(total_time(ROOT / ALONE) / total_time(n4), rel=1e-9), line


def test_calipers_own_call_is_listed_for_reingest_and_reingest_leaves_it_out(old_store):
    url, env, before = old_store
    cali = {run[0]: ROOT / run[4] for run in before["runs"] if run[4].endswith(".cali")}
    own = {}   # run id -> seconds of Caliper's own MPI_Comm_dup over ranks, by caliper-reader
    for run_id, path in cali.items():
        records = read(path)[0]
        mine = [r for r in records if calipers_own(r, path)]
        if mine:
            own[run_id] = sum(float(next(r[k] for k in TIME if k in r)) for r in mine)
    assert own and set(own) < {run[0] for run in before["runs"]}   # some runs hold it, some (per-rank, outputs) not
    with psycopg.connect(url) as c:
        listed = dict(c.execute("SELECT run_id, reason FROM v_runs_needing_reingest").fetchall())
    assert set(listed) == set(own), (listed, own)
    assert all("MPI_Comm_dup" in reason for reason in listed.values())
    status = subprocess.run([*CLI, "db", "status"], capture_output=True, text=True, env=env).stdout
    assert f"{len(own)} runs were measured under an older version of the measurement model" in status, status

    hashes = {run[0]: run[1] for run in before["runs"]}
    series = {run[1]: run[2] for run in before["runs"]}
    fixture = [str(cali[i].relative_to(ROOT)) for i in own if "ramble" not in str(cali[i])]
    for args in (["--system", "testbox", *fixture, *[f[:-len(".cali")] + ".out" for f in fixture]],
                 ["tests/data/ramble/smoke-mixed-caliper"]):
        r = subprocess.run([*CLI, "ingest", *args], capture_output=True, text=True, env=env, cwd=ROOT)
        assert r.returncode == 0, r.stdout + r.stderr
    with psycopg.connect(url) as c:
        assert c.execute("SELECT count(*) FROM v_runs_needing_reingest").fetchone()[0] == 0
        for run_id, seconds in own.items():
            new_id, series_id, kept = c.execute(
                "SELECT id, series_id, (metadata->'calipers_own_mpi_s'->>'MPI_Comm_dup')::float8 FROM runs WHERE content_hash = %s",
                (hashes[run_id],)).fetchone()
            assert series_id == series[hashes[run_id]]            # measured anew, in the same series
            assert kept == pytest.approx(seconds, rel=1e-9)
            assert c.execute("SELECT count(*) FROM mpi_metrics m JOIN nodes n ON n.id = m.node_id "
                             "WHERE m.run_id = %s AND n.path = '(outside regions)' AND m.function = 'MPI_Comm_dup'",
                             (new_id,)).fetchone()[0] == 0
