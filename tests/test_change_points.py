"""Change points over each series' whole history (commscope/gate/changepoints.py, migration 0024), against the
real PostgreSQL test store, on real halo3d runs (tests/gate-history/README.md):

- the five nights of profiles that tests/test_regressions.py judges (conftest's real_history fixture), where 24^3 at
  2 ranks ran beside two busy loops on night 5 and every other series ran idle (the per-rank series' loaded
  night 4 is stored as a partial run, which counts for nothing);
- a longer series made of the same runs' workload outputs alone (`.out`, no profile beside them), ingested one
  night at a time with `commscope ingest --started-at`: the eight idle 24^3 2-rank runs (nights 1-4 of the
  `mpi` set and nights 1-3, 5 of the `nompi` set, alternating: without their profiles they are one experiment
  in one environment) on nights 1-8, then the loaded run on night 9; the 48^3 runs of nights 2-5 beside them
  on nights 1-4, as another series. Each file is ingested once (a copy of the same bytes would be the same
  run), so nine nights is as long as this real history gets.

Where a change must be comes from how the runs were made (the README's loaded runs), and its levels from the
runs' own numbers: the loop times caliper-reader sums from the profiles' records, or the `FOM total_time` line
each workload printed. Apache Otava must be installed (the `changepoints` extra, in `test`)."""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
from pathlib import Path

import psycopg
import pytest

from commscope.views import panels as P
from conftest import grant_local
from helpers import HISTORY, NIGHTS, cli_in_process, focus_time

pytest.importorskip("otava", reason="Apache Otava is not installed: pip install -e '.[changepoints]'")



def cli(dsn: str, *args: str) -> subprocess.CompletedProcess:
    """The real command, in this process (cli_in_process)."""
    return cli_in_process(args, {**os.environ, "COMMSCOPE_DB_URL": dsn})


def run_of(conn, name: str) -> tuple[int, int, dt.datetime]:
    """(run id, campaign id, start) of the run stored from the file or directory NAME."""
    rows = conn.execute("SELECT id, campaign_id, started_at FROM runs WHERE source LIKE %s AND status = 'ok'",
                        (f"%/{name}",)).fetchall()
    assert len(rows) == 1, (name, rows)
    return rows[0]


def stored(conn) -> list[dict]:
    cur = conn.execute("SELECT * FROM v_change_points ORDER BY series_id, metric, \"time\"")
    cols = [c.name for c in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def changepoints(dsn: str, *args: str) -> dict:
    r = cli(dsn, "changepoints", "--format", "json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# ---- the five nights of profiles ------------------------------------------------------------------------------

def test_the_loaded_night_is_the_one_change_point_and_idle_series_have_none(real_history):
    """24^3's night 5 ran beside two busy loops: its one change point starts at that run, with the loop times
    caliper-reader sums from the files before and after it. The 48^3, no-MPI-wrapping and per-rank series ran idle
    (the per-rank series' loaded night is partial): they have none, though the per-rank series' first night took
    3x its others (one run is an outlier, not a level)."""
    dsn, sids = real_history
    out = changepoints(dsn)
    assert out["recomputed"] == [{"metric": "time_s", "series": 4, "change_points": 1,
                                  "seconds": out["recomputed"][0]["seconds"]}]
    with psycopg.connect(dsn) as conn:
        got = stored(conn)
        run5, campaign5, start5 = run_of(conn, NIGHTS["24-mpi"][5])
        _, _, start4 = run_of(conn, NIGHTS["24-mpi"][4])
    assert len(got) == 1, got
    (cp,) = got
    files = NIGHTS["24-mpi"]
    before, after = [focus_time(files[n]) for n in (1, 2, 3, 4)], focus_time(files[5])
    assert (cp["series_id"], cp["metric"], cp["window"]) == (sids["24-mpi"], "time_s", "focus")
    assert (cp["run_id"], cp["campaign_id"], cp["time"], cp["previous_time"]) == (run5, campaign5, start5, start4)
    assert (cp["n_before"], cp["n_after"], cp["direction"]) == (4, 1, "regression")
    assert cp["mean_before"] == pytest.approx(statistics.fmean(before), rel=1e-9)
    assert cp["mean_after"] == pytest.approx(after, rel=1e-9)
    assert cp["change"] == pytest.approx(after / statistics.fmean(before) - 1, rel=1e-9)
    assert 0 <= cp["p_value"] < 0.01
    assert cp["method"].startswith("apache-otava 0.8.0 e-divisive")
    assert cp["detected_campaign"] == campaign5
    # the premise of "the per-rank series has none": its first night's loop took 3x its other idle nights
    per_rank = [focus_time(f"{NIGHTS['24-per-rank'][n]}") for n in (1, 2, 3, 5)]
    assert per_rank[0] > 2.5 * max(per_rank[1:])
    # nothing new: nothing recomputed, the same rows
    again = changepoints(dsn)
    assert again["recomputed"][0]["series"] == 0
    with psycopg.connect(dsn) as conn:
        assert stored(conn) == got


def test_check_reports_the_change_point_its_campaign_completes(real_history, tmp_path):
    """check keeps its per-campaign verdicts and exit code, and also names the change point that the judged
    campaign completes: night 5 does (its run starts the new level), night 4 does not. The gate calls the one
    loaded night suspect (with 4 earlier campaigns, a shift counts as a regression once it persists over 2): exit 0."""
    dsn, sids = real_history
    with psycopg.connect(dsn) as conn:
        run5, campaign5, _ = run_of(conn, NIGHTS["24-mpi"][5])
        _, campaign4, _ = run_of(conn, NIGHTS["24-mpi"][4])
    md = tmp_path / "summary.md"
    r = cli(dsn, "check", "--campaign", str(campaign5), "--format", "json", "--markdown", str(md))
    assert r.returncode == 0, r.stderr   # suspect does not fail the gate
    out = json.loads(r.stdout)
    verdicts = {s["series_id"]: s["verdict"] for s in out["series"]}
    assert verdicts[sids["24-mpi"]] == "suspect"
    assert [(c["series_id"], c["run_id"], c["direction"]) for c in out["change_points"]] == \
        [(sids["24-mpi"], run5, "regression")]
    # moved worse, and called as the gate calls the campaign: one night of the new level is not yet a regression
    assert [c["verdict"] for c in out["change_points"]] == ["suspect"]
    per_series = {s["series_id"]: [c["run_id"] for c in s["change_points"]] for s in out["series"]}
    assert per_series == {sid: ([run5] if s == "24-mpi" else []) for s, sid in sids.items()}
    assert "Change points this campaign completes" in md.read_text() and f"#{sids['24-mpi']}" in md.read_text()
    text = cli(dsn, "check", "--campaign", str(campaign5), "--no-annotate")
    lines = [x for x in text.stdout.splitlines() if x.startswith("change point:")]
    assert len(lines) == 1 and f"#{sids['24-mpi']} [focus]: time_s" in lines[0] and f"run {run5} " in lines[0]
    r4 = cli(dsn, "check", "--campaign", str(campaign4), "--format", "json", "--no-annotate")
    assert r4.returncode == 0, r4.stderr
    assert json.loads(r4.stdout)["change_points"] == []


def test_the_panel_the_annotations_and_the_report_show_it(real_history):
    """The dashboards' change points table and annotation layer, expanded as Grafana would for every series, and
    the static report, read the stored change point from the real store."""
    from commscope.views import grafana as D
    from commscope.views import report
    dsn, sids = real_history
    changepoints(dsn)
    with psycopg.connect(dsn) as conn:
        run5, campaign5, start5 = run_of(conn, NIGHTS["24-mpi"][5])
        _, _, start4 = run_of(conn, NIGHTS["24-mpi"][4])
        values = P.all_values(conn)
        t0, t1 = start5 - dt.timedelta(days=1), start5 + dt.timedelta(days=1)
        panel = next(p for p in P.MPI_FRACTION.panels if p.title == "Change points")
        cur = conn.execute(P.expand(panel.sql, t0, t1, values))
        rows = [dict(zip([c.name for c in cur.description], r)) for r in cur.fetchall()]
        assert [c.name for c in cur.description] == panel.columns
        # called as check and the report call it (below): its new level is held by one campaign so far
        assert [(r["run"], r["campaign"], r["verdict"], r["time"]) for r in rows] == \
            [(run5, campaign5, "suspect, worse", start5)]
        assert rows[0]["series"].endswith(f"#{sids['24-mpi']}")
        cur = conn.execute(P.expand(P.CHANGE_POINTS_ANNOTATION_SQL, t0, t1, values))
        ann = cur.fetchall()
        assert len(ann) == 1
        t, t_end, text, tags = ann[0]
        assert (float(t), float(t_end)) == (start4.timestamp() * 1000, start5.timestamp() * 1000)
        assert text.startswith("change point (suspect, worse):") and "time_s" in text
        assert tags.split(",") == ["commscope-changepoint", "time_s", "suspect", f"series:{sids['24-mpi']}"]
        # a selection without the series shows nothing
        other = dict(values, ranks=["4"])
        assert conn.execute(P.expand(P.CHANGE_POINTS_ANNOTATION_SQL, t0, t1, other)).fetchall() == []
        page = report.render(conn)
    assert [x for x in findings_changed(page) if x.startswith("Change point")] == \
        [x for x in findings_changed(page) if x.startswith("Change point (suspect, worse): ")] != []
    assert "<h3>Change points</h3>" in page
    section = page.split("<h3>Change points</h3>", 1)[1].split("</div>", 1)[0]
    assert f"#{sids['24-mpi']}</td>" in section and f"<td>{run5}</td>" in section
    anns = {a["name"]: a for a in D.build_dashboard(P.MPI_FRACTION)["annotations"]["list"]}
    assert anns["Change points"]["target"]["rawSql"] == P.CHANGE_POINTS_ANNOTATION_SQL


def test_read_only_roles_read_the_view_and_write_nothing(real_history):
    """The view (Grafana), and the table `changepoints` reads (db.READER_TABLES); no write."""
    dsn, _ = real_history
    changepoints(dsn)
    ro = grant_local(dsn, "cp_reader")
    with psycopg.connect(ro) as conn:
        assert conn.execute("SELECT count(*) FROM v_change_points").fetchone()[0] == 1
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM change_points")


def test_an_unknown_metric_is_refused_naming_it(real_history):
    dsn, _ = real_history
    r = cli(dsn, "changepoints", "--metric", "wall_tiem")
    assert r.returncode == 2 and "'wall_tiem'" in r.stderr and "time_s" in r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM change_point_state").fetchone()[0] == 0


# ---- a longer series: the runs' own outputs, one night at a time -------------------------------------------------

# The idle runs alternate between the two Caliper modes they were made with. Run alone, their outputs are one
# series, but the runs made with MPI wrapping took about 7 % longer (Caliper's wrappers; the premise is checked
# below), so in mode order the series would hold a real step of its own.
MPI_IDLE = [f"halo3d-blocking-24-n2.mpi.night{n}.out" for n in (1, 2, 3, 4)]
NOMPI_IDLE = [f"halo3d-blocking-24-n2.nompi.night{n}.out" for n in (1, 2, 3, 5)]
IDLE = [name for pair in zip(MPI_IDLE, NOMPI_IDLE) for name in pair]
LOADED = "halo3d-blocking-24-n2.mpi.night5.out"
OTHER = [f"halo3d-blocking-48-n2.mpi.night{n}.out" for n in (2, 3, 4, 5)]   # another series, idle


def total_time(name: str) -> float:
    """The loop's time as the workload printed it."""
    (v,) = re.findall(r"^FOM total_time (\S+) s$", (HISTORY / name).read_text(), re.M)
    return float(v)


def night_inputs(tmp_path: Path, night: int) -> tuple[Path, list[str]]:
    """Night NIGHT's outputs, copied alone (no profile beside them)."""
    names = ([IDLE[night - 1]] if night <= len(IDLE) else [LOADED]) + ([OTHER[night - 1]] if night <= 4 else [])
    d = tmp_path / f"night{night}"
    d.mkdir()
    for n in names:
        shutil.copy(HISTORY / n, d / n)
    return d, names


def computed(dsn: str) -> dict[int, dt.datetime]:
    """series_id -> when its time_s change points were last computed."""
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute("SELECT series_id, computed_at FROM change_point_state WHERE metric = 'time_s'"))


def test_a_longer_real_series_incrementally_and_in_full(dsn, tmp_path):
    """Nights 1-8 (idle) have no change point; night 9 (the loaded run) starts one, whose levels are the printed
    loop times. Each night's ingest recomputes only the series that got runs (nothing is left for `commscope
    changepoints`), and the change points after the last night equal those of a recompute from scratch and of
    --full."""
    campaigns, recomputed = [], []
    for night in range(1, len(IDLE) + 2):
        d, names = night_inputs(tmp_path, night)
        before = computed(dsn)
        r = cli(dsn, "ingest", str(d), "--system", "ci-box", "--stack", "debian-openmpi4", "--format", "json",
                "--started-at", f"2026-10-{night:02d}T02:00:00Z")
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["stored"] == len(names), res
        campaigns.append(res["campaign_id"])
        after = computed(dsn)
        recomputed.append(sum(before.get(sid) != t for sid, t in after.items()))
        out = changepoints(dsn)
        assert out["recomputed"][0]["series"] == 0   # ingest left nothing stale
        if night == len(IDLE):
            assert out["change_points"] == []   # eight idle nights: a flat real series
    with psycopg.connect(dsn) as conn:
        series = conn.execute("SELECT DISTINCT series_id FROM runs WHERE source LIKE '%24-n2%'").fetchall()
        assert len(series) == 1   # the premise: without profiles the nine 24^3 runs are one series
        (sid,) = series[0]
        loaded_run, _, loaded_start = run_of(conn, LOADED)
        incremental = stored(conn)
    # nights 1-4 bring a run of each series, nights 5-9 of the 24^3 series only
    assert recomputed == [2, 2, 2, 2, 1, 1, 1, 1, 1]
    (cp,) = incremental
    idle = [total_time(n) for n in IDLE]
    assert statistics.median(map(total_time, MPI_IDLE)) > 1.05 * statistics.median(map(total_time, NOMPI_IDLE))
    assert (cp["series_id"], cp["window"], cp["run_id"], cp["campaign_id"]) == (sid, "focus", loaded_run,
                                                                                 campaigns[-1])
    assert cp["time"] == loaded_start == dt.datetime(2026, 10, 9, 2, tzinfo=dt.timezone.utc)
    assert (cp["n_before"], cp["n_after"], cp["direction"]) == (8, 1, "regression")
    assert cp["mean_before"] == pytest.approx(statistics.fmean(idle), rel=1e-9)
    assert cp["mean_after"] == pytest.approx(total_time(LOADED), rel=1e-9)
    assert cp["stddev_before"] == pytest.approx(statistics.pstdev(idle), rel=1e-9)
    assert cp["detected_campaign"] == campaigns[-1]

    def comparable(rows):
        return [{k: v for k, v in r.items() if k != "detected_at"} for r in rows]
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM change_points")
        conn.execute("DELETE FROM change_point_state")
    scratch = changepoints(dsn)
    assert scratch["recomputed"][0]["series"] == 2
    with psycopg.connect(dsn) as conn:
        assert comparable(stored(conn)) == comparable(incremental)
    full = changepoints(dsn, "--full")
    assert full["recomputed"][0]["series"] == 2
    with psycopg.connect(dsn) as conn:
        assert comparable(stored(conn)) == comparable(incremental)


def test_ingest_recomputes_the_series_it_touched_and_equals_a_recompute_from_scratch(dsn, tmp_path):
    """Real workload outputs in two batches through `commscope ingest`: first the eight idle 24^3 runs and the four
    48^3 runs (each file's start is its modification time, one day apart), then the loaded 24^3 run. The first
    ingest leaves both series computed, without a change point (idle); the second recomputes the 24^3 series only
    (the 48^3 series' state is not touched) and stores the change point at the loaded run, its levels the loop
    times the workloads printed. A recompute of every series from scratch gives the same rows."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    t0 = dt.datetime(2026, 10, 1, 2, tzinfo=dt.timezone.utc).timestamp()
    for i, name in enumerate(IDLE):
        shutil.copy(HISTORY / name, first / name)
        os.utime(first / name, (t0 + i * 86400, t0 + i * 86400))
    for i, name in enumerate(OTHER):
        shutil.copy(HISTORY / name, first / name)
        os.utime(first / name, (t0 + i * 86400 + 60, t0 + i * 86400 + 60))
    shutil.copy(HISTORY / LOADED, second / LOADED)
    os.utime(second / LOADED, (t0 + 8 * 86400, t0 + 8 * 86400))
    ingest = ["ingest", "--system", "ci-box", "--stack", "debian-openmpi4", "-q"]
    r = cli(dsn, *ingest, str(first))
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        sids = {name: conn.execute("SELECT series_id FROM runs WHERE source LIKE %s", (f"%/{name}",)).fetchone()[0]
                for name in (IDLE[0], OTHER[0])}
    assert len(set(sids.values())) == 2   # the premise: two series
    after_first = computed(dsn)
    assert set(after_first) == set(sids.values())
    with psycopg.connect(dsn) as conn:
        assert stored(conn) == []
        assert dict(conn.execute("SELECT series_id, runs FROM change_point_state")) == {
            sids[IDLE[0]]: len(IDLE), sids[OTHER[0]]: len(OTHER)}
    r = cli(dsn, *ingest, str(second))
    assert r.returncode == 0, r.stderr
    campaign = int(r.stdout.strip().splitlines()[-1])
    after_second = computed(dsn)
    assert after_second[sids[OTHER[0]]] == after_first[sids[OTHER[0]]]   # not recomputed
    assert after_second[sids[IDLE[0]]] > after_first[sids[IDLE[0]]]
    with psycopg.connect(dsn) as conn:
        loaded_run, _, _ = run_of(conn, LOADED)
        incremental = stored(conn)
    (cp,) = incremental
    idle = [total_time(n) for n in IDLE]
    assert (cp["series_id"], cp["run_id"], cp["campaign_id"], cp["detected_campaign"]) == (
        sids[IDLE[0]], loaded_run, campaign, campaign)
    assert (cp["n_before"], cp["n_after"], cp["direction"]) == (len(IDLE), 1, "regression")
    assert cp["mean_before"] == pytest.approx(statistics.fmean(idle), rel=1e-9)
    assert cp["mean_after"] == pytest.approx(total_time(LOADED), rel=1e-9)
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM change_points")
        conn.execute("DELETE FROM change_point_state")
    assert changepoints(dsn, "--full")["recomputed"][0]["series"] == 2
    with psycopg.connect(dsn) as conn:
        scratch = stored(conn)
    drop = ("detected_at",)
    assert [{k: v for k, v in c.items() if k not in drop} for c in scratch] == \
        [{k: v for k, v in c.items() if k not in drop} for c in incremental]


# ---- findings that agree: a change point is called as check calls it ----------------------------------------

def findings_changed(page: str) -> list[str]:
    """The lines of the report's "What changed" findings, as text."""
    import html
    part = page.split("<h3>What changed: regressions and change points</h3>", 1)[1].split("<h3>", 1)[0]
    return [html.unescape(re.sub(r"<[^>]+>", "", li)) for li in re.findall(r"<li.*?</li>", part, re.S)]


def test_a_change_point_without_the_gate_s_runs_is_no_regression_in_check_or_the_report(dsn):
    """Two series in the real store, one run-window time per run (helpers.synthetic): 'few' ran 2 runs at 1.0 s
    then 2 at 1.5 s (one campaign each), 'many' 5 campaigns of 4 runs at 1.0 s then 5 at 1.3 s. Both have a
    change point that moved worse. check calls few's newest campaign "no baseline" (2 earlier runs) and many's a
    regression (the shift held over CONFIRM campaigns); the change points are called the same, in check's lines
    and in the report's "What changed", and in the dashboards: the change-point table drawn through Grafana's own
    @grafana/data from the committed dashboard, and the annotation layer's texts and tags."""
    from commscope.gate import changepoints as cp
    from commscope.gate.pvalues import MIN_BASELINE
    from commscope.gate.stats import CONFIRM
    from commscope.store.ingest import Provenance, ingest_records
    from commscope.views import report
    from helpers import synthetic
    campaigns = {}
    with psycopg.connect(dsn) as conn:
        for night in range(2 * CONFIRM):
            recs = [synthetic("many", night, i, (1.3 if night >= CONFIRM else 1.0) * (1 + 0.01 * ((night + i) % 3)))
                    for i in range(4)]
            if night >= 2 * CONFIRM - 2:   # few: its two campaigns are the last two nights
                recs += [synthetic("few", night, i, (1.5 if night == 2 * CONFIRM - 1 else 1.0) + 0.01 * i)
                         for i in range(2)]
            campaigns[night] = ingest_records(conn, iter(recs), Provenance(), f"night {night}").campaign_id
        series = dict(conn.execute("SELECT DISTINCT app, series_id FROM runs").fetchall())
    last = campaigns[2 * CONFIRM - 1]
    cp_out = changepoints(dsn)
    found = {c["series_id"]: c for c in cp_out["change_points"]}
    # the premise: each series has one change point that moved worse, few's from 2 + 2 runs
    assert sorted(found) == sorted(series.values()), cp_out
    assert (found[series["few"]]["n_before"], found[series["few"]]["n_after"]) == (2, 2) and 2 < MIN_BASELINE
    assert {c["direction"] for c in found.values()} == {"regression"}
    r = cli(dsn, "check", "--campaign", str(last), "--no-annotate", "--format", "json")
    out = json.loads(r.stdout)
    verdicts = {s["series_id"]: s["verdict"] for s in out["series"]}
    assert verdicts == {series["few"]: "no baseline", series["many"]: "regression"}, r.stdout
    assert r.returncode == 1   # many regressed
    text = cli(dsn, "check", "--campaign", str(last), "--no-annotate").stdout
    lines = {sid: [x for x in text.splitlines() if x.startswith("change point:") and f"#{sid} " in x]
             for sid in series.values()}
    assert len(lines[series["few"]]) == 1 and "(no baseline, worse)" in lines[series["few"]][0], text
    assert len(lines[series["many"]]) == 1 and "(regression)" in lines[series["many"]][0], text
    with psycopg.connect(dsn) as conn:
        changed = findings_changed(report.render(conn))
    few = [x for x in changed if x.startswith("Change point") and "few" in x]
    many = [x for x in changed if x.startswith("Change point") and "many" in x]
    assert len(few) == 1 and few[0].startswith("Change point (no baseline, worse): "), changed
    assert len(many) == 1 and many[0].startswith("Change point (regression): "), changed
    called = {c["series_id"]: c["verdict"] for c in out["change_points"]}
    assert called == verdicts
    assert cp.verdict("regression", 2, 1, 1) == "no baseline"

    from grafana_draw import default_variables, frames_of, grafana_transform, node_or_skip, time_range
    node_or_skip()
    doc = json.loads((Path(__file__).resolve().parent.parent / "dashboards" / "json" /
                      "commscope-mpi-fraction.json").read_text())
    panel = next(p for p in doc["panels"] if p["title"] == "Change points")
    layer = next(a for a in doc["annotations"]["list"] if a["name"] == "Change points")
    with psycopg.connect(grant_local(dsn, "grafana_ro")) as conn:
        t0, t1 = time_range(conn)
        values = default_variables(conn, doc, t0, t1)
        frames, n = frames_of(conn, panel["targets"][0], values, t0, t1)
        notes = conn.execute(P.expand(layer["target"]["rawSql"], t0, t1, values)).fetchall()
    res = grafana_transform([{"key": "cp", "transformations": panel.get("transformations", []), "frames": frames}])
    (frame,) = res["cp"]["frames"]
    shown = {f["name"]: f["values"] for f in frame["fields"]}
    table = {int(label.rsplit("#", 1)[1]): v for label, v in zip(shown["series"], shown["verdict"])}
    said = {sid: re.search(r"\((no baseline, worse|regression)\)", lines[sid][0]).group(1) for sid in series.values()}
    assert n == 2 and table == said == {series["few"]: "no baseline, worse", series["many"]: "regression"}, table
    drawn = {int(tags.rsplit(":", 1)[1]): (text, tags.split(",")[2]) for _, _, text, tags in notes}
    assert {sid: (text.split(": ", 1)[0], tag) for sid, (text, tag) in drawn.items()} == {
        series["few"]: ("change point (no baseline, worse)", "no baseline"),
        series["many"]: ("change point (regression)", "regression")}, notes
