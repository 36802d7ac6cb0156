"""One cause, one alert (commscope/gate/campaign.py, one_alert_per_cause): series that moved together in the same
campaign because their platform moved are one alert that lists its members, not one alert each.

The runs are the recorded real ones of tests/live-runs/attribution (Debian Open MPI 4.1): commgraph over shared
memory for five nights, then two nights over TCP loopback ("canary-first", "platform"), with the pingpong canary
beside it, and halo3d, whose time TCP does not move. Six commgraph series are made from the one recorded: each
night's four outputs stored six times, under six values of PARAM seed (a parameter of the pairs pattern's random
map, unused by it), so six series of one system, stack and interconnect moved with their canary. Expected, from
the scenario and not from commscope: the six and the canary are one platform alert (two TCP nights: regressions),
halo3d no alert; one JUnit failure; the text names the group once and each member in it."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from commscope.cli import main
from commscope.workflow.ingest import Provenance, ingest
from record_live_runs import BASE_NIGHTS, LIVE

NIGHTS = (*BASE_NIGHTS, "canary-first", "platform")
SEEDS = range(1, 7)


@pytest.fixture
def store(dsn, tmp_path):
    """The seven nights, each a campaign; commgraph six times (PARAM seed 1-6), pingpong and halo3d once."""
    for night in NIGHTS:
        d = tmp_path / night
        d.mkdir()
        for out in sorted((LIVE / "attribution" / night).glob("*.out")):
            text = out.read_text()
            if out.name.startswith("commgraph"):
                for seed in SEEDS:
                    (d / f"seed{seed}-{out.name}").write_text(re.sub(r"^PARAM seed \d+$", f"PARAM seed {seed}",
                                                                     text, flags=re.M))
            else:
                (d / out.name).write_text(text)
    with psycopg.connect(dsn) as conn:
        for night in NIGHTS:
            res = ingest(conn, [tmp_path / night], Provenance(system="ci-box", stack="debian-openmpi4",
                                                             interconnect="shm", git_commit="c0ffee1"))
            assert len(res.inserted) == 4 * (len(SEEDS) + 2), res
        (campaign,) = conn.execute("SELECT max(id) FROM campaigns").fetchone()
    return dsn, campaign


def check(dsn: str, *args: str):
    return CliRunner().invoke(main, ["check", "--no-annotate", *args], env={"COMMSCOPE_DB_URL": dsn},
                              catch_exceptions=False)


def test_series_that_moved_with_their_platform_are_one_alert(store, tmp_path):
    dsn, campaign = store
    junit = tmp_path / "check.xml"
    r = check(dsn, "--campaign", str(campaign), "--format", "json", "--junit", str(junit))
    assert r.exit_code == 1, r.output   # regressions
    doc = json.loads(r.stdout)
    by_app: dict[str, list] = {}
    for s in doc["series"]:
        by_app.setdefault(s["app"], []).append(s)
    assert len(by_app["commgraph"]) == len(SEEDS)
    moved = by_app["commgraph"] + by_app["pingpong"]
    assert all(s["verdict"] == "regression" and s["attribution"]["cause"] == "platform" for s in moved), \
        [(s["label"], s["verdict"], (s["attribution"] or {}).get("cause")) for s in moved]
    assert [s["verdict"] for s in by_app["halo3d"]] in (["no change"], ["cannot tell"])
    (group,) = doc["groups"]
    assert group["cause"] == "platform" and sorted(group["members"]) == sorted(s["series_id"] for s in moved)
    assert group["where"] == {"system": "ci-box", "stack": "debian-openmpi4", "interconnect": "shm"}
    assert all(s["group"] == group for s in moved) and by_app["halo3d"][0]["group"] is None
    assert (doc["alerts"], doc["regressions"], doc["series_alerting"]) == (1, len(moved), len(moved))
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "1"
    (failure,) = root.iter("failure")
    assert "one alert: platform on ci-box debian-openmpi4 shm: 7 series slower together" in failure.text
    members = [c for c in root.iter("testcase") if c.find("skipped") is not None
               and "one alert with its cause, led by" in c.find("skipped").get("message")]
    assert len(members) == len(moved) - 1


def test_the_text_says_the_group_once(store):
    dsn, campaign = store
    r = check(dsn, "--campaign", str(campaign))
    assert r.exit_code == 1, r.output
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("one alert: platform")]
    assert line.count(" commgraph ") == len(SEEDS) and " pingpong " in line
    last = r.stdout.splitlines()[-1]
    assert last.startswith("8 series, 7 regressions") and "; 7 of the alerting series are 1 alert of one cause each" \
        in last, r.stdout
