"""The gate at facility scale (issue 45): a suspect says which way it moved and only the worse way alerts; a
campaign's alerts are held to one budget (--false-alarms E by default, Bonferroni over the campaign's findings; or
--fdr, Benjamini-Hochberg) that leaves a series judged alone as it was; a platform whose series moved as a whole is
one alert without a canary; many cannot tells are said once, with what would change them. Expected values come
from the synthetic plan (which series moved, which way) and from the budgets' rules written out here."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import psycopg
import pytest

from commscope.gate import campaign, outputs, regressions
from commscope.store.ingest import Provenance, ingest_records
from helpers import synthetic

CLI = [sys.executable, "-m", "commscope.cli"]
NIGHTS = 12


@pytest.fixture
def moved(dsn):
    """Three series, 3 runs a night with 3 % noise; on the last night 'up' runs 30 % slower, 'down' 30 % faster."""
    rnd = random.Random(45)
    level = {"up": 1.30, "down": 0.70, "flat": 1.0}
    with psycopg.connect(dsn) as conn:
        for night in range(NIGHTS):
            recs = [synthetic(app, night, i, 10.0 * (level[app] if night == NIGHTS - 1 else 1.0)
                              * (1 + rnd.gauss(0, 0.03))) for app in level for i in range(3)]
            ingest_records(conn, iter(recs), Provenance(), f"night {night}")
    return dsn


def check(dsn: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "check", "--no-annotate", *args], capture_output=True, text=True,
                          env={**os.environ, "COMMSCOPE_DB_URL": dsn})


def test_a_suspect_says_slower_or_faster_and_only_slower_alerts(moved, tmp_path):
    r = check(moved, "--format", "json", "--junit", str(tmp_path / "j.xml"), "--markdown", str(tmp_path / "m.md"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    by = {s["app"]: s for s in doc["series"]}
    assert by["up"]["verdict"] == by["down"]["verdict"] == "suspect"
    assert (by["up"]["direction"], by["up"]["alert"]) == ("slower", True)
    assert (by["down"]["direction"], by["down"]["alert"]) == ("faster", False)
    assert by["flat"]["alert"] is False and doc["alerts"] == 1
    assert "suspect: better in this campaign alone (faster)" in by["down"]["reason"]
    assert "(faster)" in (tmp_path / "j.xml").read_text() and "(slower)" in (tmp_path / "j.xml").read_text()
    md = (tmp_path / "m.md").read_text()
    assert any("faster" in ln for ln in md.splitlines() if ln.startswith("| **suspect**") and "up" not in ln)
    text = check(moved).stdout
    assert "suspect: worse in this campaign alone (slower)" in text and "1 on the worse side" in text


def finding(sid: int, verdict: str, alert_p: float | None = None, moved: str | None = None, **kw):
    series = {"series_id": sid, "key": f"k{sid}", "parameters": {}, "environment": {}, "window": "run", "system": "s",
              "app": "a", "workload": "a", "variant": None, "stack": "x",
              "interconnect": "shm", "ranks": 2, "global_size": None}
    p = 0.5 if alert_p is None else alert_p
    return regressions.Finding(series, "time_s", verdict, 1.0, 1.3, 0.3, p, 30, 3, moved=moved, alert_p=alert_p, **kw)


def benjamini_hochberg(ps: list[float], q: float, m: int) -> set[int]:
    """Indices of PS that BH at Q over M hypotheses rejects (written out: the largest k with p_(k) <= q k / m)."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    k = max((k for k in range(1, len(ps) + 1) if ps[order[k - 1]] <= q * k / m), default=0)
    return set(order[:k])


def test_a_campaign_s_alerts_are_held_to_its_false_discovery_budget():
    ps = [1e-6, 2e-4, 0.003, 0.008, 0.009]
    alerts = [finding(i, "suspect" if i % 2 else "regression", p, "worse") for i, p in enumerate(ps)]
    quiet = [finding(100 + i, "cannot tell") for i in range(95)]
    faster = finding(999, "suspect", 1e-9, "better")   # the better side: no alert, not counted against the budget
    findings = alerts + quiet + [faster]
    held = campaign.hold(findings, 0.05, 0.01)
    stand = benjamini_hochberg(ps, 0.05, len(findings))
    assert {i for i, f in enumerate(alerts) if f.alert} == stand == {0, 1}
    assert held == 3 and all("Benjamini-Hochberg" in f.held for f in alerts[2:])
    assert faster.held is None and not faster.alert
    d = outputs.as_dict(alerts[3], 0.01, 0.05)
    assert d["alert"] is False and d["held"].startswith("held back")


def test_one_series_judged_alone_keeps_its_alert_under_the_budget():
    alone = finding(1, "suspect", 0.009, "worse")
    assert campaign.hold([alone], 0.05, 0.01) == 0 and alone.alert
    assert campaign.hold([finding(2, "regression", 0.009, "worse")], None, 0.01) == 0


def test_many_cannot_tells_are_said_once_with_what_would_change_them():
    unsure = [finding(i, "cannot tell", detectable=0.5 + i / 100, runs_a_night=8 if i % 3 else None,
                      night_spread={"between": 0.3, "within": 0.1}) for i in range(30)]
    judged = unsure + [finding(100, "no change", detectable=0.1)]
    lines = outputs.unsure_lines(judged, 0.01, 0.05)
    assert len(lines) == 1, lines
    assert lines[0].startswith("cannot tell on 30 of 31 series")
    assert "typical detectable effect is +64%" in lines[0] and "20 would show 20% with more runs a night" in lines[0]
    assert "10 would not with up to 50 runs a night" in lines[0]
    few = outputs.unsure_lines(unsure[:3] + judged[-1:], 0.01, 0.05)
    assert len(few) == 3 and all("could not show shifts below" in ln for ln in few)
    md = outputs.markdown(judged, 0.01, 0.05).splitlines()
    assert [ln for ln in md if ln.startswith("- ")] == ["- " + lines[0]]


def test_the_default_budget_keeps_a_large_campaign_to_its_expected_false_alarms():
    """Bonferroni over the campaign's m findings, written out: with --false-alarms E an alert stands where its p is at
    most E / m; a campaign of m findings with E / m at least alpha keeps every alert."""
    ps = [1e-5, 5e-4, 9.9e-4, 1.5e-3, 5e-3]
    alerts = [finding(i, "suspect" if i % 2 else "regression", p, "worse") for i, p in enumerate(ps)]
    findings = alerts + [finding(100 + i, "cannot tell") for i in range(995)]
    held = campaign.hold(findings, None, 0.01, false_alarms=1.0)
    assert {i for i, f in enumerate(alerts) if f.alert} == {i for i, p in enumerate(ps) if p <= 1.0 / len(findings)}
    assert held == 2 and all("--false-alarms 1" in f.held for f in alerts[3:])
    small = [finding(i, "regression", p, "worse") for i, p in enumerate(ps)] + \
        [finding(100 + i, "cannot tell") for i in range(45)]
    assert campaign.hold(small, None, 0.01, false_alarms=1.0) == 0   # 1 / 50 >= alpha: each judged as alone


@pytest.fixture
def platform_moved(dsn):
    """40 series, 3 runs a night with 3 % noise: 20 on stack-b all 30 % slower on the last night (their platform
    moved); 20 on stack-a, of which 'solo1' and 'solo2' are 30 % slower on the last night, each for itself."""
    rnd = random.Random(450)
    series = [(f"b{i}", "stack-b", 1.30) for i in range(20)] + [(f"a{i}", "stack-a", 1.0) for i in range(18)] + \
        [("solo1", "stack-a", 1.30), ("solo2", "stack-a", 1.30)]
    with psycopg.connect(dsn) as conn:
        for night in range(NIGHTS):
            recs = []
            for app, stack, level in series:
                for i in range(3):
                    rec = synthetic(app, night, i, 10.0 * (level if night == NIGHTS - 1 else 1.0)
                                    * (1 + rnd.gauss(0, 0.03)))
                    rec.stack = stack
                    recs.append(rec)
            ingest_records(conn, iter(recs), Provenance(), f"night {night}")
    return dsn


def test_a_platform_that_moved_as_a_whole_is_one_alert_without_a_canary(platform_moved):
    r = check(platform_moved, "--format", "json")
    doc = json.loads(r.stdout)
    by = {s["app"]: s for s in doc["series"]}
    moved_b = [by[f"b{i}"] for i in range(20)]
    assert all(s["alert"] for s in moved_b) and by["solo1"]["alert"] and by["solo2"]["alert"], r.stdout[-3000:]
    (group,) = doc["groups"]
    assert group["cause"] == "platform-wide" and group["where"]["stack"] == "stack-b"
    assert sorted(group["members"]) == sorted(s["series_id"] for s in moved_b)
    assert by["solo1"]["group"] is None and by["solo2"]["group"] is None   # stack-a as a whole did not move
    assert doc["alerts"] == 3 and doc["series_alerting"] == 22
    text = check(platform_moved).stdout
    assert "one alert: platform-wide on testbox stack-b shm: 20 series slower together" in text, text[-2000:]


def test_the_budget_weighs_an_alert_by_its_nights_not_its_runs_alone():
    """A night's runs are not independent draws: an alert whose runs' test is strong (alert_p 1e-5) but whose test
    with nights as units is not (nights_alert_p 4e-3) is held back at 1 / 1,000; one whose nights agree stands."""
    runs_only = finding(1, "suspect", 1e-5, "worse", nights_alert_p=4e-3)
    nights_too = finding(2, "suspect", 1e-5, "worse", nights_alert_p=5e-4)
    findings = [runs_only, nights_too] + [finding(100 + i, "cannot tell") for i in range(998)]
    assert campaign.hold(findings, None, 0.01, false_alarms=1.0) == 1
    assert not runs_only.alert and "0.004" in runs_only.held and nights_too.alert


def test_a_clear_five_night_shift_stands_under_a_ten_thousand_series_budget():
    """The confirmation's rank test cannot go below 2 / C(15, 5) = 6.7e-4 with 5 recent and 10 baseline nights, so
    at 1 false alarm over 10,000 findings (1e-4) it could never let a regression stand. A shift of +25 % held five
    nights on series with 2 % noise must: the budget weighs it by the same nights' Student's t there, far below
    1e-4, as scipy's two-sample t-test on the nights' best runs says by its own route. Over 1,000 findings (1e-3)
    the rank test reaches the level and is the one weighed."""
    import math
    from scipy import stats as scipy_stats
    from commscope.gate import stats
    rnd = random.Random(4500)
    nights = [[10.0 * (1.25 if n >= 10 else 1.0) * (1 + rnd.gauss(0, 0.02)) for _ in range(3)] for n in range(15)]
    logs = [math.log(min(c)) for c in nights]
    assert scipy_stats.ttest_ind(logs[10:], logs[:10], alternative="greater").pvalue < 1e-6
    j = stats.judge(nights[-1], nights[:-1], 0.05, 0.01, max_undetectable=None)
    assert j.verdict == "regression" and j.nights_alert_p == j.confirm_p == pytest.approx(2 / math.comb(15, 5))
    for m, weighed in ((10_000, "t"), (1_000, "rank")):
        shifted = finding(1, "regression", j.alert_p, "worse", nights_alert_p=j.nights_alert_p,
                          confirm_units_p=j.confirm_units_p, confirm_floor=j.confirm_floor)
        assert campaign.hold([shifted] + [finding(100 + i, "cannot tell") for i in range(m - 1)], None, 0.01,
                             false_alarms=1.0) == 0 and shifted.alert, shifted.held
        assert campaign.budget_p(shifted, 1 / m) == (j.confirm_units_p if weighed == "t" else j.confirm_p)
    assert j.confirm_units_p < 1e-5


def test_a_suspect_is_never_weighed_by_the_confirmation_s_t():
    """A night that moved alone (a suspect) raised its alert by the night's own tests: the budget weighs it by those
    (nights_alert_p), never by the confirmation's t, which only a confirmed shift carries."""
    from commscope.gate import stats
    rnd = random.Random(4502)
    nights = [[10.0 * (1.40 if n == 14 else 1.0) * (1 + rnd.gauss(0, 0.02)) for _ in range(3)] for n in range(15)]
    j = stats.judge(nights[-1], nights[:-1], 0.05, 0.01, max_undetectable=None)
    assert j.verdict == "suspect" and j.confirm_units_p is None and j.confirm_floor is not None
    suspect = finding(1, "suspect", j.alert_p, "worse", nights_alert_p=j.nights_alert_p,
                      confirm_units_p=j.confirm_units_p, confirm_floor=j.confirm_floor)
    assert campaign.budget_p(suspect, 1e-4) == j.nights_alert_p
