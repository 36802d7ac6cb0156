"""The regression gate against a real PostgreSQL: synthetic series with known change points; a real history of
halo3d runs (tests/gate-history: two problem sizes, two Caliper configurations, a partial run) whose every
expected number comes from the profiles' records through caliper-reader; and real repeated runs where the
newest campaign silently switched to a slower transport."""
from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import suite
from commscope import regressions, windows
from commscope.ingest import Provenance, ingest, ingest_records
from commscope.records import Record
from conftest import stack_or_skip
from test_measurement_model import reference

CLI = [sys.executable, "-m", "commscope.cli"]
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
HISTORY = Path(__file__).parent / "gate-history"


def synthetic(app: str, night: int, i: int, wall: float, variant: str = "v") -> Record:
    """A run of APP whose run window took WALL seconds on its slowest rank."""
    h = hashlib.sha256(f"{app}/{variant}/{night}/{i}/{wall}".encode()).hexdigest()
    rec = Record(content_hash=h, source=f"synthetic/{app}/{night}/{i}", profile_kind="none", app=app, workload=app,
                 ranks=4, started_at=START + dt.timedelta(days=night, minutes=i), variant=variant,
                 system="testbox", stack="stack-a", mpi_library="lib 1.0", interconnect="shm")
    rec.parameters = {"ranks": 4, "variant": variant}
    window = dict.fromkeys(windows.COLUMNS) | {"window": "run", "time_s": wall, "ranks_measured": 4}
    rec.window_rows = [tuple(window[c] for c in windows.COLUMNS)]
    return rec


# (app, runs per night, relative shift on the last night). Noise: 3% gaussian.
SERIES = [("steady", 3, 0.0), ("slower", 3, 0.25), ("faster", 3, -0.25), ("single", 1, 0.30), ("tiny", 3, 0.02)]


@pytest.fixture
def history(dsn):
    rnd = random.Random(7)
    nights = 12
    with psycopg.connect(dsn) as conn:
        for night in range(nights):
            recs = []
            for app, per_night, shift in SERIES:
                for i in range(per_night):
                    level = 1.0 + (shift if night == nights - 1 else 0.0)
                    recs.append(synthetic(app, night, i, 10.0 * level * (1 + rnd.gauss(0, 0.03))))
            if night == nights - 1:
                recs.append(synthetic("newcomer", night, 0, 5.0))
            ingest_records(conn, iter(recs), Provenance(), f"night {night}")
    return dsn


def verdicts(findings) -> dict:
    return {f.series["app"]: f.verdict for f in findings}


def test_known_change_points_are_found_and_nothing_else(history):
    with psycopg.connect(history) as conn:
        found = regressions.check(conn)
    assert verdicts(found) == {"steady": "ok", "slower": "regression", "faster": "improvement",
                               "single": "regression", "tiny": "ok", "newcomer": "no baseline"}
    slower = next(f for f in found if f.series["app"] == "slower")
    assert slower.effect == pytest.approx(0.25, abs=0.08) and slower.p_value < 0.01
    assert (slower.n_new, slower.n_baseline) == (3, 30)
    assert slower.series["window"] == "run"   # these runs have no focus window


def test_min_effect_and_baseline_window_are_honoured(history):
    with psycopg.connect(history) as conn:
        # a 25% shift does not count when the smallest effect that counts is 50%
        large = {f.series["app"]: f for f in regressions.check(conn, min_effect=0.5)}
        assert large["slower"].verdict == "ok"
        last_but_one = conn.execute("SELECT max(id) - 1 FROM campaigns").fetchone()[0]
        before = regressions.check(conn, campaign=last_but_one)
        assert {f.verdict for f in before} == {"ok"}
        # 3 new against 6 baseline samples: Mann-Whitney's smallest p is 1/84, so
        # alpha 0.01 cannot be reached, and alpha 0.05 can
        short = {f.series["app"]: f for f in regressions.check(conn, baseline=2)}
        assert short["slower"].n_baseline == 6 and short["slower"].verdict == "ok"
        assert short["slower"].p_value == pytest.approx(1 / 84)
        short = {f.series["app"]: f for f in regressions.check(conn, baseline=2, alpha=0.05)}
        assert short["slower"].verdict == "regression"


def test_cli_exits_1_on_regression_and_writes_annotations_once(history):
    env = {**os.environ, "COMMSCOPE_DB_URL": history}
    r = subprocess.run([*CLI, "check"], capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stderr
    assert "2 regressions" in r.stdout and "testbox slower v stack-a shm n4 #" in r.stdout
    r2 = subprocess.run([*CLI, "check"], capture_output=True, text=True, env=env)
    assert r2.returncode == 1
    with psycopg.connect(history) as conn:
        notes = conn.execute("SELECT app, text, tags FROM v_annotations ORDER BY app").fetchall()
    assert [n[0] for n in notes] == ["faster", "single", "slower"]  # re-checking replaced, not duplicated
    assert notes[2][1].startswith("regression: time_s [run] +") and "regression" in notes[2][2]
    r3 = subprocess.run([*CLI, "check", "--app", "steady"], capture_output=True, text=True, env=env)
    assert r3.returncode == 0 and "0 regressions" in r3.stdout


@pytest.mark.parametrize("args,message", [
    (["--metric", "speed"], "unknown metric 'speed'"),
    (["--metric", "fom:nope"], "no FOM named 'nope'"),
    (["--campaign", "999999"], "campaign 999999 has no successful runs"),
    (["--alpha", "0"], "--alpha"),
    (["--app", "no-such-app"], "no successful runs with time_s match"),
])
def test_bad_arguments_exit_2_and_name_the_problem(history, args, message):
    r = subprocess.run([*CLI, "check", *args], capture_output=True, text=True,
                       env={**os.environ, "COMMSCOPE_DB_URL": history})
    assert r.returncode == 2 and message in r.stderr, (r.returncode, r.stderr)


def test_runs_stored_before_the_model_are_not_judged_and_the_message_says_why(history):
    """Runs without a series (stored before migration 0012) cannot be put in one: the gate counts them and says
    what to do."""
    with psycopg.connect(history) as conn:
        (n,) = conn.execute("SELECT count(*) FROM runs").fetchone()
        conn.execute("UPDATE runs SET series_id = NULL, model_version = NULL")
    r = subprocess.run([*CLI, "check"], capture_output=True, text=True, env={**os.environ, "COMMSCOPE_DB_URL": history})
    assert r.returncode == 2, r.stdout
    assert f"{n} runs stored before the measurement model have no series: re-ingest" in r.stderr, r.stderr


# ---- a real history (tests/gate-history/README.md) ----------------------------------------------------------
# Three series of halo3d blocking at 2 ranks that the gate before the measurement model took for one (same system,
# app, workload, variant, stack, interconnect, ranks): 24^3 and 48^3 with MPI wrapped, 24^3 without MPI wrapping;
# and 24^3 at 4 ranks recorded one file per rank, with a partial run. Night 5 is judged; 24^3's night 5 at 2 ranks
# ran beside two busy loops.

NIGHTS = {
    "24-mpi": {n: f"halo3d-blocking-24-n2.mpi.night{n}.cali" for n in (1, 2, 3, 4, 5)},
    "48-mpi": {n: f"halo3d-blocking-48-n2.mpi.night{n}.cali" for n in (2, 3, 4, 5)},
    "24-nompi": {n: f"halo3d-blocking-24-n2.nompi.night{n}.cali" for n in (1, 2, 3, 5)},
    "24-per-rank": {n: f"halo3d-blocking-24-n4.per-rank.night{n}" for n in (1, 2, 3, 5)},
}
# The per-rank series' loaded night 4 is stored as a partial run (rank 1's file left out), and, with rank 0's
# file left out instead, once more in night 5: neither may count.
PARTIAL = "halo3d-blocking-24-n4.per-rank.night4"


def focus_time(name: str) -> float:
    """The loop's time on its slowest rank, summed from the file's records with caliper-reader."""
    return max(t for t, _mpi, _sync in reference(f"../gate-history/{name}")["focus"].values())


def focus_mpi_fraction(name: str) -> float:
    per_rank = reference(f"../gate-history/{name}")["focus"].values()
    return sum(mpi + sync for _t, mpi, sync in per_rank) / sum(t for t, _mpi, _sync in per_rank)


def partial_copy(tmp_path: Path, drop: int) -> Path:
    d = tmp_path / f"without-rank-{drop}" / PARTIAL
    shutil.copytree(HISTORY / PARTIAL, d)
    (d / f"rank-{drop}.cali").unlink()
    return d


@pytest.fixture
def real_history(dsn, tmp_path):
    """Nights 1-5 as five campaigns; returns the DSN and each series' night-5 series_id."""
    prov = Provenance(system="ci-box", stack="debian-openmpi4")
    with psycopg.connect(dsn) as conn:
        for night in (1, 2, 3, 4, 5):
            paths = [HISTORY / files[night] for files in NIGHTS.values() if night in files]
            if night == 4:
                paths.append(partial_copy(tmp_path, 1))
            if night == 5:
                paths.append(partial_copy(tmp_path, 0))
            res = ingest(conn, paths, prov, allow_partial=True)
            assert len(res.inserted) == len(paths), res
        sids = {s: conn.execute("SELECT series_id FROM runs WHERE source LIKE %s",
                                (f"%{files[5]}",)).fetchone()[0] for s, files in NIGHTS.items()}
        partial = conn.execute("SELECT status, series_id FROM runs WHERE source LIKE %s",
                               ("%/without-rank-_/%",)).fetchall()
    # the premise: four series, and the partial runs are stored as such, in the per-rank series
    assert len(set(sids.values())) == 4
    assert partial == [("partial", sids["24-per-rank"])] * 2
    return dsn, sids


def by_series(findings, sids) -> dict:
    return {s: next(f for f in findings if f.series["series_id"] == sid) for s, sid in sids.items()}


def test_runs_of_another_problem_size_or_caliper_mode_are_never_the_baseline(real_history):
    """Each series is judged against its own earlier runs only, on its focus window (the timed loop): the medians
    are those of its own files' loop times, read with caliper-reader."""
    dsn, sids = real_history
    with psycopg.connect(dsn) as conn:
        found = regressions.check(conn)
    assert len(found) == 4
    got = by_series(found, sids)
    for s, files in NIGHTS.items():
        f = got[s]
        base = [focus_time(files[n]) for n in sorted(files) if n < 5]
        assert f.series["window"] == "focus", s
        assert (f.n_baseline, f.n_new) == (len(base), 1), s
        assert f.baseline_median == pytest.approx(statistics.median(base), rel=1e-9), s
        assert f.new_median == pytest.approx(focus_time(files[5]), rel=1e-9), s
    # 48^3's loop is 4-5x 24^3's: mixed into one baseline it would have moved the median by far more than noise
    assert got["48-mpi"].baseline_median > 3 * got["24-mpi"].baseline_median
    assert got["24-mpi"].series["global_size"] != got["48-mpi"].series["global_size"]


def test_the_verdict_s_numbers_are_the_files_loop_times(real_history):
    """24^3 night 5 (run beside two busy loops) is a regression by the loop times in its records; 48^3's night 5
    is within the smallest effect that counts, so it is ok; effect = new / baseline median - 1."""
    dsn, sids = real_history
    with psycopg.connect(dsn) as conn:
        got = by_series(regressions.check(conn), sids)
    files = NIGHTS["24-mpi"]
    base, new = [focus_time(files[n]) for n in (1, 2, 3, 4)], focus_time(files[5])
    assert new > 1.5 * max(base)   # the premise, from the files
    f = got["24-mpi"]
    assert f.verdict == "regression"
    assert f.effect == pytest.approx(new / statistics.median(base) - 1, rel=1e-9)
    files = NIGHTS["48-mpi"]
    effect = focus_time(files[5]) / statistics.median(focus_time(files[n]) for n in (2, 3, 4)) - 1
    assert abs(effect) < 0.05   # the premise
    assert got["48-mpi"].verdict == "ok" and got["48-mpi"].effect == pytest.approx(effect, rel=1e-9)


def test_a_partial_run_neither_moves_the_baseline_nor_is_judged(real_history):
    """The per-rank series' night 4 lost a rank file and ran under load: counted, it would move the baseline's
    median; its night-5 copy would be a second new run. Neither counts."""
    dsn, sids = real_history
    files = NIGHTS["24-per-rank"]
    complete = [focus_time(files[n]) for n in (1, 2, 3)]
    kept_rank = reference(f"../gate-history/{PARTIAL}")["focus"][0]   # the partial run holds rank 0 only
    with_partial = complete + [kept_rank[0]]
    assert statistics.median(with_partial) != pytest.approx(statistics.median(complete), rel=1e-3)   # the premise
    with psycopg.connect(dsn) as conn:
        f = by_series(regressions.check(conn), sids)["24-per-rank"]
    assert (f.n_baseline, f.n_new) == (3, 1)
    assert f.baseline_median == pytest.approx(statistics.median(complete), rel=1e-9)
    assert f.new_median == pytest.approx(focus_time(files[5]), rel=1e-9)


def test_a_metric_not_measured_is_not_judged_as_zero(real_history):
    """mpi_fraction_avg: the series recorded without MPI wrapping has no value (NULL), so no finding; the others'
    values are Σ MPI / Σ time over ranks in the loop, from the records."""
    dsn, sids = real_history
    with psycopg.connect(dsn) as conn:
        found = regressions.check(conn, metric="mpi_fraction_avg")
    assert sids["24-nompi"] not in {f.series["series_id"] for f in found}
    got = by_series(found, {s: sids[s] for s in ("24-mpi", "48-mpi", "24-per-rank")})
    for s, f in got.items():
        files = NIGHTS[s]
        base = [focus_mpi_fraction(files[n]) for n in sorted(files) if n < 5]
        assert f.baseline_median == pytest.approx(statistics.median(base), rel=1e-9), s
        assert f.new_median == pytest.approx(focus_mpi_fraction(files[5]), rel=1e-9), s


def test_cli_on_the_real_history_names_series_and_window_and_keeps_wall_time(real_history):
    dsn, sids = real_history
    env = {**os.environ, "COMMSCOPE_DB_URL": dsn}
    r = subprocess.run([*CLI, "check"], capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if f"#{sids['24-mpi']} [focus]" in ln)
    assert line.startswith("ci-box halo3d blocking debian-openmpi4 default n2 24,24,24 ") and "regression" in line
    alias = subprocess.run([*CLI, "check", "--metric", "wall_time", "--no-annotate"], capture_output=True, text=True,
                           env=env)
    assert alias.returncode == 1 and alias.stdout.splitlines()[:-1] == r.stdout.splitlines()[:-1]
    with psycopg.connect(dsn) as conn:
        notes = conn.execute("SELECT text, tags FROM v_annotations").fetchall()
    assert [tags for _t, tags in notes if f"series:{sids['24-mpi']}" in tags]
    assert all(text.startswith("regression: time_s [focus] +") for text, _tags in notes)


def test_real_runs_gate_a_silent_switch_to_tcp(dsn, tmp_path):
    """Real repeated commgraph runs on Debian Open MPI: four nights over shared
    memory, then a night where the same series ran over TCP loopback."""
    stack = stack_or_skip("debian-openmpi4")
    bdir = suite.build(stack)
    args = ["--pattern", "pairs", "--iters", "200", "--small-bytes", "8", "--large-bytes", "8"]
    with psycopg.connect(dsn) as conn:
        for night, btl in enumerate(["self,vader"] * 4 + ["self,tcp"]):
            d = tmp_path / f"night{night}"
            d.mkdir()
            for i in range(3):
                r = suite.run(stack, bdir, "commgraph", args, 2, env={"OMPI_MCA_btl": btl, "OMPI_MCA_pml": "ob1"})
                assert not suite.problems(r), suite.problems(r)
                (d / f"run{i}.out").write_text(r.stdout)
            res = ingest(conn, [d], Provenance(system="ci-box", stack="debian-openmpi4", interconnect="shm"))
            assert len(res.inserted) == 3
        found = regressions.check(conn, metric="fom:total_time")
    assert len(found) == 1
    f = found[0]
    assert f.verdict == "regression", f
    assert f.effect > 0.5 and (f.n_new, f.n_baseline) == (3, 12)
