"""The MPI-fraction dashboard's "Series too noisy to gate" panel (migration 0036, v_noisy_series): what commscope check
stored of each judged series' detectable effect, drawn through Grafana's own code (tests/grafana_draw.py)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import random
import subprocess
import sys

import psycopg
import pytest

import conftest
import grafana_draw as G
from commscope.read import measures
from commscope.read.records import Record
from commscope.store.ingest import Provenance, ingest_records

CLI = [sys.executable, "-m", "commscope.cli"]
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
NIGHTS = 15


def run(app: str, night: int, i: int, wall: float) -> Record:
    """A run of APP on NIGHT whose run window took WALL seconds."""
    h = hashlib.sha256(f"{app}/{night}/{i}/{wall}".encode()).hexdigest()
    rec = Record(content_hash=h, source=f"synthetic/{app}/{night}/{i}", profile_kind="none", app=app, workload=app,
                 ranks=4, started_at=START + dt.timedelta(days=night, minutes=i), variant="v", system="testbox",
                 stack="stack-a", mpi_library="lib 1.0", interconnect="shm")
    rec.parameters = {"ranks": 4, "variant": "v"}
    window = dict.fromkeys(measures.COLUMNS) | {"window": "run", "time_s": wall, "ranks_measured": 4}
    rec.window_rows = [tuple(window[c] for c in measures.COLUMNS)]
    return rec


def test_the_panel_of_series_too_noisy_to_gate_lists_what_check_could_not_see_and_draws(dsn):
    """commscope check stores each judged series' detectable effect; the panel, run as the read-only role with
    Grafana's first-load variables and through @grafana/data, lists the noisy series (40 % between nights, 3 runs a
    night) with the figure and verdict check's JSON gave, and not the quiet one (3 %), whose figure is within
    --max-undetectable."""
    G.node_or_skip()
    rnd = random.Random(35)
    with psycopg.connect(dsn) as conn:
        for night in range(NIGHTS):
            recs = [run("steady", night, i, 10.0 * (1 + rnd.gauss(0, 0.03))) for i in range(3)]
            recs += [run("noisy", night, i, 10.0 * math.exp(rnd.gauss(0, 0.4))) for i in range(3)]
            ingest_records(conn, iter(recs), Provenance(), f"night {night}")
        conn.commit()
        (last,) = conn.execute("SELECT max(id) FROM campaigns").fetchone()
    out = subprocess.run([*CLI, "check", "--campaign", str(last), "--format", "json"], capture_output=True,
                         text=True, env={**os.environ, "COMMSCOPE_DB_URL": dsn})
    assert out.returncode in (0, 1), out.stderr
    said = {s["app"]: s for s in json.loads(out.stdout)["series"]}
    assert said["noisy"]["detectable_effect"] > 0.20 and said["noisy"]["verdict"] == "cannot tell", said["noisy"]
    assert said["steady"]["detectable_effect"] <= 0.20 and said["steady"]["verdict"] == "no change"
    ro = conftest.grant_local(dsn, "grafana_ro")
    doc = json.loads((G.JSON_DIR / "commscope-mpi-fraction.json").read_text())
    (panel,) = [p for p in doc["panels"] if p["title"] == "Series too noisy to gate"]
    with psycopg.connect(ro) as conn:
        t0, t1 = G.time_range(conn)
        frames, rows = G.frames_of(conn, panel["targets"][0], G.default_variables(conn, doc, t0, t1), t0, t1)
    (res,) = G.grafana_transform([{"key": "noisy", "transformations": panel.get("transformations", []),
                                   "frames": frames}]).values()
    assert not G.panel_problems(panel, res) and G.drawn(res)
    fields = {f["name"]: f["values"] for f in res["frames"][0]["fields"]}
    assert rows == 1 and fields["series"][0].startswith("testbox noisy v "), fields["series"]
    assert fields["detectable"][0] == pytest.approx(said["noisy"]["detectable_effect"])
    assert fields["verdict"] == ["cannot tell"] and "could not show shifts below" in fields["reason"][0]
    # a read-only role gets the same verdicts, and one line saying the figures were not stored (exit 4); nothing
    # is written
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM gate_detectable")
    viewer = subprocess.run([*CLI, "check", "--campaign", str(last), "--format", "json"], capture_output=True,
                            text=True, env={**os.environ, "COMMSCOPE_DB_URL": ro})
    assert viewer.returncode == 4 and [s["verdict"] for s in json.loads(viewer.stdout)["series"]] == [
        s["verdict"] for s in said.values()]
    (line,) = viewer.stderr.strip().splitlines()
    assert "role grafana_ro may not store detectable effects" in line and "--no-annotate" in line, line
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM gate_detectable").fetchone() == (0,)
