"""The accuracy bench's bookkeeping (bench/regression_accuracy.py), on the committed measured samples
(bench/results/regression_accuracy_samples.json): cases whose answer follows by hand from the samples'
own spread, not from the bench's code. Not a timed test: no workload runs here."""
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "regression_accuracy.py"
SAMPLES = ROOT / "bench" / "results" / "regression_accuracy_samples.json"
sys.path.insert(0, str(BENCH.parent))
import regression_accuracy as ra  # noqa: E402


def quiet_samples(ratio: float) -> list[tuple]:
    """The largest set of one measured cell's runs (value, run-queue wait share where the value is the timed loop's,
    else None; in measured order) whose values' max/min is below `ratio`: the values nearest their cell's median,
    from the cell where that set is largest."""
    doc = json.loads(SAMPLES.read_text())
    cells, shares = {}, {}
    for s in doc["samples"]:
        cells.setdefault((s["workload"], s["level"]), []).append(s["value"])
        loop = doc["how"]["workloads"][s["workload"]]["fom"] == "total_time"   # what the share covers
        shares.setdefault((s["workload"], s["level"]), []).append(s["runqueue_wait_share_max"] if loop else None)
    best = []
    for cell, vals in cells.items():
        med = statistics.median(vals)
        near = sorted(range(len(vals)), key=lambda i: abs(vals[i] - med))
        keep = []
        for i in near:
            trial = [vals[j] for j in keep + [i]]
            if max(trial) / min(trial) >= ratio:
                break
            keep.append(i)
        if len(keep) > len(best):
            best = [(vals[i], shares[cell][i]) for i in sorted(keep)]
    assert len(best) >= 12, f"no measured cell has 12 values within a factor {ratio}: premise of the test fails"
    return best


def test_fifty_percent_on_quiet_samples_is_found_by_every_method_at_once():
    # With max/min < 1.36 a 50 % shift puts every shifted value above every unshifted one, the shifted night's mean
    # above 1.05 x any earlier night's mean (1.5 > 1.05 x 1.36) and above 1.10 x any mean of unshifted values
    # (1.5 > 1.10 x 1.36): by hand, the gate's per-run test (all new above all baseline), Benchpark's rule and the
    # fixed reference must all alarm on the change night, and a 50 % step with no overlap is a change point. The
    # gate before (2 nights) calls a shift a regression once it persisted over 2 nights: on the night after the
    # change (delay 1). The gate ranks the last 5 nights (by their medians, and by their best runs: the gate with
    # medians only too) against the nights before them: on the 5th shifted night all 5 lie above all of those
    # either way, p = 1 / C(15, 5), below even half of 0.01, so it alarms by then (delay 4) at the latest; earlier
    # when the unshifted nights in its window happen to rank high too. The gate that takes its best runs less their
    # wait for a core still ranks the medians as measured, so the same holds for it.
    vals = quiet_samples(1.36)
    assert max(v for v, _ in vals) / min(v for v, _ in vals) < 1.36
    res = ra.cell(vals, 3, 4, seed=7, shifts=(0.5,))
    for m in ra.METHODS:
        assert res[m]["detected"][0.5] == 4, (m, res[m])
        # (ra.FLAGGED, the gate's suspect or regression, alarms no later than its regression)
        if m in ("gate", ra.FLAGGED, "gate (no load discount)", "gate (medians only)"):
            assert all(0 <= d <= 4 for d in res[m]["delays"][0.5]), res[m]
        else:
            assert res[m]["delays"][0.5] == [1 if m == "gate (2 nights)" else 0] * 4, (m, res[m])


def test_no_shift_within_ten_percent_gives_no_fixed_reference_alarm():
    # Every value within a factor 1.1 of every other: every night's mean is below 1.10 x any mean of the values,
    # so the reference rule can never alarm; the bench judges nights 10-24 of each of 6 series.
    vals = quiet_samples(1.10)
    assert max(v for v, _ in vals) / min(v for v, _ in vals) < 1.10
    res = ra.cell(vals, 3, 6, seed=3, shifts=())
    assert res["ReFrame ±10%"]["false_alarms"] == 0
    assert res["ReFrame ±10%"]["judged_nights"] == 6 * 15


def test_a_one_night_spike_is_one_alarm_of_the_fixed_reference_on_that_night():
    # Nights of 3 consecutive quiet values (max/min < 1.10); night 12 alone x 1.3: its mean exceeds 1.3 x min >
    # 1.10 x max >= 1.10 x the reference, every other night's mean stays below 1.10 x min: exactly night 12. Night
    # 12's mean also exceeds 1.05 x night 11's (1.3 > 1.05 x 1.10), so Benchpark's rule alarms on it too, and
    # night 13 (back to the old level) is no fixed-reference alarm.
    vals = [v for v, _ in quiet_samples(1.10)]
    nights = [[vals[(3 * t + k) % len(vals)] for k in range(3)] for t in range(20)]
    nights[12] = [v * 1.3 for v in nights[12]]
    got = ra.alarms(nights, 10, ra._change_points()[0])
    assert got["ReFrame ±10%"] == [12]
    assert 12 in got["Benchpark x1.05"]


def test_bad_samples_file_is_refused_with_its_name(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"samples": [{"workload": "halo3d", "level": "idle", "value": -1}]}))
    for f in (bad, tmp_path / "missing.json"):
        p = subprocess.run([sys.executable, str(BENCH), "analyse", "--samples", str(f), "--series", "1"],
                           capture_output=True, text=True)
        assert p.returncode != 0
        assert str(f) in p.stderr and not p.stdout


@pytest.fixture(autouse=True)
def _samples_present():
    if not SAMPLES.exists():
        pytest.fail(f"{SAMPLES} is missing: it is committed with the bench")


def test_by_night_2_counts_the_series_found_on_the_shift_s_first_two_nights():
    # On values within a factor 1.36, +50 % puts the change night's mean above 1.05 x the night before's (1.5 >
    # 1.05 x 1.36): Benchpark's rule alarms on the change night itself in every series, so all are found by night 2.
    # No method finds a series by night 2 that it did not find at all.
    vals = quiet_samples(1.36)
    res = ra.cell(vals, 3, 4, seed=7, shifts=(0.2, 0.5), skip=("change points",))
    assert ra._by_night_2(res["Benchpark x1.05"], 0.5) == 4
    for m in ra.REPORTED:
        for s in (0.2, 0.5):
            assert ra._by_night_2(res[m], s) <= res[m]["detected"][s], (m, s)
    table = ra.report({"how": json.loads(SAMPLES.read_text())["how"],
                       "samples": [{"workload": "w", "level": "quiet", "value": v, "unit": "s"} for v, _ in vals]},
                      2, 7, skip=("change points",))
    assert "| by night 2: 20% / 50% |" in table
    assert any(line.startswith("| w | quiet | Benchpark x1.05 |") and line.endswith("| 100% / 100% |")
               for line in table.splitlines())
