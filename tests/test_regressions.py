"""The regression gate against a real PostgreSQL: synthetic series with known
change points, and real repeated runs where the newest campaign silently
switched to a slower transport."""
from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
import subprocess
import sys

import psycopg
import pytest

import suite
from commscope import regressions
from commscope.ingest import Provenance, ingest, ingest_records
from commscope.records import Record
from conftest import stack_or_skip

CLI = [sys.executable, "-m", "commscope.cli"]
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def synthetic(app: str, night: int, i: int, wall: float, variant: str = "v") -> Record:
    h = hashlib.sha256(f"{app}/{variant}/{night}/{i}/{wall}".encode()).hexdigest()
    rec = Record(content_hash=h, source=f"synthetic/{app}/{night}/{i}", profile_kind="none", app=app, workload=app,
                 ranks=4, started_at=START + dt.timedelta(days=night, minutes=i), variant=variant,
                 system="testbox", stack="stack-a", mpi_library="lib 1.0", interconnect="shm")
    rec.summary["wall_time"] = wall
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
    assert "2 regressions" in r.stdout and "testbox/slower/slower/v/stack-a/shm/4" in r.stdout
    r2 = subprocess.run([*CLI, "check"], capture_output=True, text=True, env=env)
    assert r2.returncode == 1
    with psycopg.connect(history) as conn:
        notes = conn.execute("SELECT app, text, tags FROM v_annotations ORDER BY app").fetchall()
    assert [n[0] for n in notes] == ["faster", "single", "slower"]  # re-checking replaced, not duplicated
    assert notes[2][1].startswith("regression: wall_time +") and "regression" in notes[2][2]
    r3 = subprocess.run([*CLI, "check", "--app", "steady"], capture_output=True, text=True, env=env)
    assert r3.returncode == 0 and "0 regressions" in r3.stdout


@pytest.mark.parametrize("args,message", [
    (["--metric", "speed"], "unknown metric 'speed'"),
    (["--metric", "fom:nope"], "no FOM named 'nope'"),
    (["--campaign", "999999"], "campaign 999999 has no successful runs"),
    (["--alpha", "0"], "--alpha"),
    (["--app", "no-such-app"], "no successful runs match"),
])
def test_bad_arguments_exit_2_and_name_the_problem(history, args, message):
    r = subprocess.run([*CLI, "check", *args], capture_output=True, text=True,
                       env={**os.environ, "COMMSCOPE_DB_URL": history})
    assert r.returncode == 2 and message in r.stderr, (r.returncode, r.stderr)


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
