"""The report's "Reference studies" section (reference.py) on real runs: the workloads run here (Debian Open MPI
4.1, 2 ranks, small problems, repeats; recorded by ci/record_live_runs.py), their outputs are ingested into a real PostgreSQL, and each effect's
figure is checked against the same ratio computed straight from the workloads' own printed timers (the FOM lines
of their output files, parsed here). Also: repeats carrying a Ramble repeat index are paired by it (the
committed real workspace with two repeats), an effect without runs says "not run" and what to run, swapping a
contrast's sides gives "not", and the section sits after the findings in the rendered report."""
from __future__ import annotations

import dataclasses
import itertools
import re
import statistics
from pathlib import Path

import numpy
import psycopg
import pytest

from commscope.views import reference, report
from commscope.workflow.ingest import Provenance, ingest

import suite
from record_live_runs import LIVE, REFERENCE, REFERENCE_REPEATS
from conftest import built_once

DATA = Path(__file__).parent / "data"
REPEATS_WS = DATA / "ramble" / "smoke-openmpi4-repeats"
REPEATS = REFERENCE_REPEATS
FOM = re.compile(r"^FOM (\S+) (\S+) (\S+)$", re.M)
PARAM = re.compile(r"^PARAM (\S+) (.*)$", re.M)

OTHERS = REFERENCE["others"]


def parse(out: str) -> tuple[dict, dict]:
    """FOMs (name -> value) and PARAMs of one output, read from its text."""
    return ({n: float(v) for n, v, _ in FOM.findall(out)}, dict(PARAM.findall(out)))


@pytest.fixture(scope="module")
def runs():
    """Real runs (tests/live-runs/reference, recorded by ci/record_live_runs.py): {config: [parsed output of
    each repeat]} and the two directories of .out files (halo3d; the rest), each ingested as its own campaign by
    the store fixture."""
    out: dict[str, list] = {}
    dirs = {}
    for part, configs in REFERENCE.items():
        d = dirs[part] = LIVE / "reference" / part
        for name in configs:
            out[name] = [parse((d / f"{name}.{rep}.out").read_text()) for rep in range(REPEATS)]
    return out, dirs


@pytest.fixture
def store(dsn, runs):
    out, dirs = runs
    with psycopg.connect(dsn) as conn:
        campaigns = {part: ingest(conn, [d], Provenance(system="ref-box", stack="debian-openmpi4")).campaign_id
                     for part, d in dirs.items()}
        conn.commit()
    return dsn, campaigns, out


def all_pairs(out, base: str, treat: str, value) -> list[float]:
    return [value(t) / value(b) for b, t in itertools.product(out[base], out[treat])]


def by_key(rows, key) -> list[reference.Row]:
    return [r for r in rows if r.effect.key == key]


def check(rows, key: str, ratios: list[float], runs_each=REPEATS):
    """The effect has exactly one measured condition here, and it agrees with the ratios from the outputs."""
    (row,) = by_key(rows, key)
    assert row.verdict != "not run", (key, row.reason)
    assert row.runs_baseline == runs_each and row.runs_treatment == runs_each, (key, row)
    assert row.pairs == len(ratios)
    assert row.ratio == pytest.approx(statistics.median(ratios), rel=1e-9), key
    assert (row.ratio_min, row.ratio_max) == pytest.approx((min(ratios), max(ratios)), rel=1e-9), key
    assert (row.ratio_q1, row.ratio_q3) == pytest.approx(tuple(numpy.percentile(ratios, [25, 75])), rel=1e-9), key
    assert row.paired_by == "all pairs"   # outputs given directly carry no repeat index
    return row


def test_every_effect_equals_the_ratio_of_the_workloads_own_timers(store):
    dsn, campaigns, out = store
    comm = lambda p: p[0]["comm_time_avg"]  # noqa: E731
    total = lambda p: p[0]["total_time"]  # noqa: E731
    with psycopg.connect(dsn) as conn:
        rows = reference.compute(conn)
    check(rows, "seismic-overlap", all_pairs(out, "halo-blocking", "halo-overlap", comm))
    check(rows, "seismic-rma", all_pairs(out, "halo-blocking", "halo-rma", comm))
    skew = lambda p: p[0]["comm_time_max"] - p[0]["comm_time_avg"]  # noqa: E731
    check(rows, "seismic-fusion-skew", all_pairs(out, "halo-pml-unfused", "halo-pml-fused", skew))
    check(rows, "stencil-row-vs-col", all_pairs(out, "st-col-send", "st-row-send", comm))
    check(rows, "stencil-ssend-vs-send", all_pairs(out, "st-col-send", "st-col-ssend", comm))
    check(rows, "stencil-isend", all_pairs(out, "st-col-send", "st-col-isend", comm))
    check(rows, "reservoir-debug-barriers", all_pairs(out, "cg-direct-barriers", "cg-direct", comm))
    check(rows, "groundwater-allreduce-hierarchical", all_pairs(out, "cg-direct", "cg-hierarchical", comm))
    check(rows, "groundwater-allreduce-nonblocking", all_pairs(out, "cg-direct", "cg-nonblocking", comm))
    row = check(rows, "groundwater-two-phase-read",
                all_pairs(out, "pio-independent", "pio-two-phase", lambda p: p[0]["read_time"]))
    assert "group-size=2" in row.treatment_value
    check(rows, "groundwater-two-phase-write",
          all_pairs(out, "pio-independent", "pio-two-phase", lambda p: p[0]["write_time"]))
    check(rows, "weather-advised-time", all_pairs(out, "cg-identity", "cg-advised", total))
    check(rows, "weather-advised-mpi", all_pairs(out, "cg-identity", "cg-advised", comm))
    check(rows, "weather-random-time", all_pairs(out, "cg-identity", "cg-random", total))

    # A level: cgsolve's MPI share (direct, no debugging barriers) over its runs.
    (share,) = by_key(rows, "reservoir-mpi-share")
    assert share.ratio == pytest.approx(statistics.median(comm(p) / total(p) for p in out["cg-direct"]), rel=1e-9)
    assert share.runs_treatment == REPEATS

    # collsweep: the sum over sizes of t_avg with the algorithm of lowest median at each size, against the
    # default's sum; without repeat indices, the spread runs over every combination of runs.
    t = {c: [{int(m.group(1)): v for n, v in p[0].items() if (m := re.fullmatch(r"allreduce_(\d+)B_t_avg", n))}
             for p in out[c]] for c in ("coll-default", "coll-forced")}
    sizes = sorted(t["coll-default"][0])
    assert sizes == [8, 1024, 65536]
    med = {c: {s: statistics.median(run[s] for run in t[c]) for s in sizes} for c in t}
    best = {s: "coll-forced" if med["coll-forced"][s] < med["coll-default"][s] else "coll-default" for s in sizes}
    # every combination: a default run, and per size a run of the best (that same default run where it is best)
    combos = [sum(run[s] for run, s in zip(combo, sizes)) / sum(d.values())
              for d in t["coll-default"]
              for combo in itertools.product(*[[d] if best[s] == "coll-default" else t[best[s]] for s in sizes])]
    (row,) = by_key(rows, "reservoir-best-algorithm")
    assert row.ratio == pytest.approx(sum(med[best[s]][s] for s in sizes) / sum(med["coll-default"][s] for s in sizes))
    extremes = (min(combos), max(combos))
    assert (row.ratio_min, row.ratio_max) == pytest.approx(extremes)
    assert (row.ratio_q1, row.ratio_q3) == pytest.approx(extremes)   # no quartiles of combinations: the extremes
    assert "allreduce" in row.condition

    # Every figure shown is the ratio in the study's form, e.g. a change in % for the overlap.
    (row,) = by_key(rows, "seismic-overlap")
    assert reference.figure_text(row).startswith(f"{(row.ratio - 1) * 100:+.1f} %")


def test_repeats_with_a_repeat_index_are_paired_by_it(dsn):
    """The committed Ramble workspace (real halo3d runs, blocking and overlap, two repeats each): one ratio per
    repeat index, from the experiments' own comm_time_avg lines."""
    with psycopg.connect(dsn) as conn:
        ingest(conn, [REPEATS_WS], Provenance())
        conn.commit()
        rows = by_key(reference.compute(conn), "seismic-overlap")
    comm = {}
    for f in (REPEATS_WS / "experiments" / "halo3d" / "halo3d").glob("*/*.out"):
        variant, repeat = re.search(r"halo3d-(\w+)-.*\.(\d+)\.out$", f.name).groups()
        comm[variant, int(repeat)] = parse(f.read_text())[0]["comm_time_avg"]
    ratios = [comm["overlap", i] / comm["blocking", i] for i in (1, 2)]
    (row,) = rows
    assert row.paired_by == "repeat index" and row.pairs == 2
    assert row.ratio == pytest.approx(statistics.median(ratios), rel=1e-9)
    assert (row.ratio_min, row.ratio_max) == pytest.approx((min(ratios), max(ratios)), rel=1e-9)


def test_an_effect_without_runs_says_not_run_and_what_to_run(store):
    dsn, campaigns, _ = store
    with psycopg.connect(dsn) as conn:
        rows = reference.compute(conn, (campaigns["halo"],))
    for key in ("reservoir-debug-barriers", "stencil-row-vs-col", "groundwater-two-phase-read",
                "reservoir-best-algorithm", "reservoir-mpi-share"):
        (row,) = by_key(rows, key)
        assert row.verdict == "not run", key
        assert "commscope run reference" in row.reason
    assert by_key(rows, "seismic-overlap")[0].verdict != "not run"


def test_a_selection_of_one_study_shows_its_table_alone(dsn, runs, tmp_path):
    """Issue 37: real halo3d runs of the blocking and overlap variants alone (no rma, no absorbing layer, as the
    stored series' own parameters say) measure one effect of the seismic study: the section holds that study's
    table alone, with no row of an effect without runs; its two other effects are named in one line under it,
    and the four other studies in one line."""
    _, dirs = runs
    files = sorted(f for name in ("halo-blocking", "halo-overlap") for f in dirs["halo"].glob(f"{name}.*.out"))
    with psycopg.connect(dsn) as conn:
        ingest(conn, files, Provenance(system="ref-box", stack="debian-openmpi4"))
        conn.commit()
        ran = set(conn.execute("SELECT DISTINCT app, parameters->>'param.variant', parameters->>'param.pml-width' "
                               "FROM series").fetchall())
        html_text = reference.section_html(conn)
    assert ran == {("halo3d", "blocking", "0"), ("halo3d", "overlap", "0")}, ran
    assert html_text.count("<table") == 1 and f"<h3>The {reference.SEISMIC}</h3>" in html_text
    shown = re.sub(r"<details.*?</details>", "", html_text, flags=re.S)   # the verdict rule, folded, defines it
    assert "verdict verdict-not-run" not in html_text and shown.lower().count("not run") == 2, html_text
    (studies,) = re.findall(r"<p class='note not-run'>(.*?)</p>", html_text, re.S)
    assert all((s in studies) == (s != reference.SEISMIC) for s in reference.STUDIES), studies
    (effects,) = re.findall(r"<p class='note effects-not-run'[^>]*>(.*?)</p>", html_text, re.S)
    seismic = [e for e in reference.EFFECTS if e.study == reference.SEISMIC]
    assert all((e.name in effects) == (e.key != "seismic-overlap") for e in seismic), effects


def test_an_opposite_effect_is_not_reproduced(store):
    """row-naive sends one message per element, col one per face: the swapped contrast (col against row-naive)
    goes the other way from the study's 12x, which must read as not reproduced."""
    dsn, _, out = store
    effect = next(e for e in reference.EFFECTS if e.key == "stencil-row-vs-col")
    swapped = dataclasses.replace(effect, baseline=effect.treatment, treatment=effect.baseline)
    with psycopg.connect(dsn) as conn:
        (row,) = reference.compute(conn, effects=[swapped])
        (unswapped,) = reference.compute(conn, effects=[effect])
    comm = [p[0]["comm_time_avg"] for p in out["st-row-send"]], [p[0]["comm_time_avg"] for p in out["st-col-send"]]
    assert min(comm[0]) > max(comm[1])   # the runs really are apart: every row-naive run slower than every col run
    assert row.verdict == "not" and "opposite" in row.reason
    assert unswapped.verdict in ("reproduced", "partly")
    # The same runs against a study figure at our own median, and at ten times our effect on the same side.
    x = unswapped.figure
    with psycopg.connect(dsn) as conn:
        (mine,) = reference.compute(conn, effects=[dataclasses.replace(effect, paper=(x, x))])
        (far,) = reference.compute(conn, effects=[dataclasses.replace(effect, paper=(10 * x, 20 * x))])
    assert mine.verdict == "reproduced"
    assert far.verdict == "partly" and "weaker" in far.reason


def test_the_report_shows_the_section_after_the_findings(store):
    dsn, _, _ = store
    with psycopg.connect(dsn) as conn:
        page = report.render(conn)
        rows = reference.compute(conn)
    findings, section = page.find("<section id='findings'>"), page.find("<section id='reference'>")
    first_dashboard = page.find("<h2>MPI time fraction over time</h2>")
    assert 0 < findings < section < first_dashboard
    body = page[section:first_dashboard]
    assert "Verdict rule." in body and "Reproduced: the spread overlaps" in body
    # a table for each study with a measured row; the others named once, in one line, with no table
    ran = {r.effect.study for r in rows if r.verdict != "not run"}
    assert ran, "the fixture's runs measure at least one study"
    not_run = re.findall(r"<p class='note not-run'>(.*?)</p>", body, re.S)
    assert len(not_run) == (0 if ran == set(reference.STUDIES) else 1), not_run
    for study in reference.STUDIES:
        assert (f"<h3>The {study}</h3>" in body) == (study in ran), study
        assert (study in "".join(not_run)) == (study not in ran), study
    assert body.count("<table") == len(ran)
    # within a study that ran, an effect without runs is no table row: its study's one line names it
    assert "verdict verdict-not-run" not in body
    idle = {r.effect.name for r in rows if r.effect.study in ran} - {r.effect.name for r in rows
                                                                    if r.verdict != "not run"}
    lines = "".join(re.findall(r"<p class='note effects-not-run'[^>]*>(.*?)</p>", body, re.S))
    assert all(name in lines for name in idle), (idle, lines)
    for r in rows:
        if r.verdict != "not run":
            assert reference.figure_text(r).replace("×", "&#215;") in body or reference.figure_text(r) in body


def test_an_empty_selection_says_why_and_what_to_run(dsn):
    with psycopg.connect(dsn) as conn:
        html_text = reference.section_html(conn)
    # no table of rows that all say "not run": one line names the five studies and what runs them
    assert "<table" not in html_text and html_text.lower().count("not run") == 1, html_text
    (line,) = re.findall(r"<p class='note not-run'>(.*?)</p>", html_text, re.S)
    assert all(study in line for study in reference.STUDIES) and "commscope run reference" in line


def test_runs_on_one_rank_are_left_out(dsn, tmp_path):
    """One rank has no halo partner: its col and row-naive runs compare nothing, so the effect is not run."""
    stack, bdir = built_once("debian-openmpi4")
    for name in ("st-col-send", "st-row-send"):
        workload, args = OTHERS[name]
        r = suite.run(stack, bdir, workload, args, 1)
        assert not suite.problems(r, allow_skip=True), suite.problems(r, allow_skip=True)
        (tmp_path / f"{name}.out").write_text(r.stdout)
    with psycopg.connect(dsn) as conn:
        ingest(conn, [tmp_path], Provenance(system="ref-box", stack="debian-openmpi4"))
        conn.commit()
        assert conn.execute("SELECT count(*) FROM v_run_metrics WHERE app = 'stencil2d' AND ranks = 1").fetchone()[0] \
            == 2
        (row,) = by_key(reference.compute(conn), "stencil-row-vs-col")
    assert row.verdict == "not run"


# File system types of a local disk (or memory), as findmnt names them: no server between pio and its file.
LOCAL_DISK_FS = {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "tmpfs", "overlay"}


def test_rows_not_reproduced_say_what_the_runs_machine_lacked(store, runs):
    """Where a row is not or partly reproduced, its reason names what the runs' machine lacked of the study's
    conditions, read from the stored runs and checked here by another route: commgraph's own FOM
    internode_bytes_per_iter is 0 in every output (all traffic on one node); pio wrote to the file system findmnt
    named for its directory when they were recorded, a local disk. Workload outputs given alone record no node count, so nothing is
    said of cores (a NULL is not guessed as one node); test_reference_study's live test checks the cores and the
    stencil's trend on runs Ramble stored."""
    dsn, _, out = store
    with psycopg.connect(dsn) as conn:
        rows = reference.compute(conn)
        effects = {e.key: e for e in reference.EFFECTS}
        # a study figure far from ours on its own side: the same runs read as not or partly reproduced
        forced = {k: reference.compute(conn, effects=[dataclasses.replace(effects[k], paper=(1000, 2000))])
                  for k in ("weather-advised-time", "groundwater-two-phase-read")}
    fs = (runs[1]["others"].parent / "pio-dir.findmnt").read_text().strip()   # findmnt, when they were recorded

    # the reasons of rows forced to miss the study name the machine's lack
    (row,) = forced["weather-advised-time"]
    assert row.verdict in ("not", "partly") and "every placement keeps all traffic on the node" in row.reason, \
        row.reason
    if fs in LOCAL_DISK_FS:
        assert all(r.verdict in ("not", "partly") and f"the file went to {fs}, a local file system" in r.reason
                   for r in forced["groundwater-two-phase-read"]), [r.reason for r in forced[
                       "groundwater-two-phase-read"]]

    def says(row, text):
        assert any(text in m for m in row.machine), (row.effect.key, row.condition, text, row.machine)
        if row.verdict in ("not", "partly"):
            assert text in row.reason, (row.effect.key, row.reason)

    # placement: one node, as commgraph's own count says (nothing sent between hosts, everything within one)
    for c in ("cg-identity", "cg-advised", "cg-random"):
        assert all(p[0]["internode_bytes_per_iter"] == 0 and p[0]["intranode_bytes_per_iter"] > 0 for p in out[c])
    for key in ("weather-advised-time", "weather-advised-mpi", "weather-random-time"):
        for row in by_key(rows, key):
            says(row, "commgraph counted 0 bytes sent between nodes in every run")
    # two-phase I/O on the local disk findmnt names
    for key in ("groundwater-two-phase-read", "groundwater-two-phase-write"):
        for row in by_key(rows, key) + forced.get(key, []):
            if fs in LOCAL_DISK_FS:
                says(row, f"the file went to {fs}, a local file system")
            else:
                assert not any("the file went to" in m for m in row.machine), (fs, row.machine)
    # no node count stored: neither one node nor a number of cores is claimed; effects that need neither nodes
    # nor a file system name nothing
    for row in rows:
        assert not any("runs on one node" in m or " cores" in m for m in row.machine), row.machine
    for row in by_key(rows, "seismic-overlap") + by_key(rows, "stencil-row-vs-col"):
        assert row.machine == [], row.machine
