"""The overlap and imbalance advisor (commscope advise overlap) on real halo3d
profiles: exposed communication, overlap efficiency against blocking, the
Irecv gap, per-region imbalance and slowest rank, and the imbalance-or-network
verdict, each checked against the same figure computed here straight from the
.cali records with caliper-reader. Bad input exits 2 and stores nothing."""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import caliperreader
import psycopg
import pytest

import suite
from commscope.workflow.ingest import Provenance, ingest

from conftest import competing_tasks
from helpers import rank_of

DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-m", "commscope.cli"]
OVERLAP = DATA / "halo3d-overlap-n4.runtime-profile.cali"
BLOCKING = DATA / "halo3d-blocking-n4.per-rank"
NONBLOCKING = DATA / "halo3d-nonblocking-n4.comm-stats.cali"
# 4 ranks, blocking, --pml-width 16 against 0 (tests/data/README.md)
IMBALANCED = DATA / "halo3d-blocking-pml16-n4.comm-stats.cali"
BALANCED = DATA / "halo3d-blocking-pml0-n4.comm-stats.cali"
# 2 ranks, overlap, --pml-faces x- against x-,x+
OVERLAP_IMBALANCED = DATA / "halo3d-overlap-pml32-xlo-n2.comm-stats.cali"
OVERLAP_BALANCED = DATA / "halo3d-overlap-pml32-xboth-n2.comm-stats.cali"
POLLS = {"MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome", "MPI_Iprobe", "MPI_Win_test"}


def records_of(source: Path) -> list[tuple[int, list, dict]]:
    """(rank, path, record) of every record with a path, for one run."""
    files = sorted(source.glob("rank-*.cali")) if source.is_dir() else [source]
    out = []
    for f in files:
        records, _ = caliperreader.read_caliper_contents(str(f))
        for rec in records:
            p = rec.get("path")
            p = p if isinstance(p, list) else [p] if p else []
            if p:
                out.append((rank_of(rec, f), p, rec))
    return out


def globals_of(source: Path) -> dict:
    """The run's Caliper globals (Adiak metadata), from its first file."""
    first = sorted(source.glob("rank-*.cali"))[0] if source.is_dir() else source
    return caliperreader.read_caliper_contents(str(first))[1]


def expected(source: Path) -> dict:
    """The advisor's figures, computed independently from the records over the focus window: the workloads'
    `loop` region, or `timestep` in profiles made before it (docs/measurement-model.md)."""
    recs = records_of(source)
    t = lambda rec: float(rec["sum#sum#time.duration"])  # noqa: E731
    ranks = sorted({r for r, _, _ in recs})
    focus = "loop" if any("loop" in p for _, p, _ in recs) else "timestep"
    window = [(r, p, rec) for r, p, rec in recs if focus in p]
    # per rank over the window: useful (non-MPI) and MPI time; MPI time is each MPI node's exclusive time
    useful, mpi = defaultdict(float), defaultdict(float)
    for r, p, rec in window:
        (mpi if p[-1].startswith("MPI_") else useful)[r] += t(rec)
    mean_useful, max_useful = statistics.mean(useful[r] for r in ranks), max(useful[r] for r in ranks)
    exposed = statistics.mean(mpi[r] for r in ranks)
    excess = max_useful - mean_useful                                  # the compute excess, per rank
    balance = mean_useful / max_useful                                 # POP load balance
    # the regions: the children of the step (the timestep region inside the focus)
    step = next(p[:p.index("timestep") + 1] for _, p, _ in window if "timestep" in p)
    n = len(step)
    inside = [(r, p, rec) for r, p, rec in window if p[:n] == step and len(p) > n]
    regions = {}
    for name in sorted({p[n] for _, p, _ in inside if not p[n].startswith("MPI_")}):
        incl, rmpi, funcs = defaultdict(float), defaultdict(float), set()
        for r, p, rec in inside:
            if p[n] == name:
                incl[r] += t(rec)
                if p[-1].startswith("MPI_"):
                    rmpi[r] += t(rec)
                    funcs.add(p[-1])
        per = [incl[r] for r in ranks]
        regions[name] = {"avg": statistics.mean(per), "max": max(per), "imbalance": max(per) / statistics.mean(per),
                         "slowest": ranks[per.index(max(per))], "mpi_avg": sum(rmpi.values()) / len(ranks),
                         "kind": "comm" if funcs - POLLS else "compute"}
    # set against all of the window's MPI time (the polls inside overlap's interior hold part of the transfer);
    # imbalance: the larger loss (share >= 0.5) and a material one (POP load balance below 0.8);
    # descheduled (no verdict) when a rank waited for a core 5% of the loop or more (Adiak, since session 5)
    waited = float(globals_of(source).get("runqueue_wait_share_max", 0.0))
    causes = {n: ("descheduled" if waited >= 0.05 else
                  "imbalance" if excess / exposed >= 0.5 and balance < 0.8 else "network")
              for n, g in regions.items() if g["kind"] == "comm" and g["mpi_avg"]}
    # the Irecv gap of the window's comm.stats regions (the workloads' `halo`): per region the mean over ranks,
    # then the mean over regions (the loop's first exchange and the per-step one)
    by_region = defaultdict(list)
    for _, p, rec in window:
        if p[-1] == "halo" and "avg#cs.irecv_gap.avg" in rec:
            by_region[tuple(p)].append(float(rec["avg#cs.irecv_gap.avg"]))
    gaps = [statistics.mean(g) for g in by_region.values()]
    loop = [useful[r] + mpi[r] for r in ranks]
    return {"focus": focus, "exposed": exposed, "loop": statistics.mean(loop), "loop_slowest": max(loop),
            "compute": mean_useful, "regions": regions, "causes": causes, "excess": excess, "load_balance": balance,
            "user": dict(useful), "gap": statistics.mean(gaps) if gaps else None}


def advise(dsn, *args):
    return subprocess.run([*CLI, "advise", "overlap", *args], capture_output=True, text=True,
                          env={**os.environ, "COMMSCOPE_DB_URL": dsn})


def stored(dsn) -> list:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT kind, run_id, summary, text FROM v_advice ORDER BY id").fetchall()


# Most fixtures of tests/data predate the workloads' `loop` region: without --focus their focus window is the
# workload's own timers, which have no call tree to advise on (see the test of that refusal below). The tests
# name the region these profiles have, as a user would: `commscope ingest --focus timestep`.
LEGACY = "timestep"


def ingest_campaign(dsn, paths, focus: str | None = None) -> tuple[int, dict]:
    with psycopg.connect(dsn) as conn:
        ingest(conn, paths, Provenance(), focus=focus)
        ids = dict(conn.execute("SELECT source, id FROM runs").fetchall())
        (campaign,) = conn.execute("SELECT max(campaign_id) FROM runs").fetchone()
    return campaign, ids


def check_run(summary: dict, exp: dict) -> None:
    assert summary["window"] == "focus" and summary["focus_region"] == exp["focus"]
    assert summary["exposed_comm_avg"] == pytest.approx(exp["exposed"], rel=1e-9)
    assert summary["loop_time_avg"] == pytest.approx(exp["loop"], rel=1e-9)
    assert summary["loop_time_slowest"] == pytest.approx(exp["loop_slowest"], rel=1e-9)
    assert summary["compute_avg"] == pytest.approx(exp["compute"], rel=1e-9)
    assert summary["load_balance"] == pytest.approx(exp["load_balance"], rel=1e-9)
    assert summary["excess"] == pytest.approx(exp["excess"], rel=1e-9)
    got = {r["path"].rsplit("/", 1)[-1]: r for r in summary["regions"]}
    assert set(got) == set(exp["regions"])
    for name, e in exp["regions"].items():
        g = got[name]
        assert g["kind"] == e["kind"], name
        assert g["imbalance"] == pytest.approx(e["imbalance"], rel=1e-9), name
        assert g["slowest_rank"] == e["slowest"], name
        assert g["mpi_avg"] == pytest.approx(e["mpi_avg"], rel=1e-9, abs=1e-15), name
    assert {k.rsplit("/", 1)[-1]: v for k, v in summary["waits"].items() if v} == exp["causes"]
    for g in summary["regions"]:
        if g["cause"]:
            assert g["excess"] == pytest.approx(exp["excess"], rel=1e-9)
            assert g["explained"] == pytest.approx(exp["excess"] / exp["exposed"], rel=1e-9)
    if exp["gap"] is None:
        assert summary["irecv_gap_avg"] is None
    else:
        assert summary["irecv_gap_avg"] == pytest.approx(exp["gap"], rel=1e-9)


def test_variants_against_blocking_from_the_records(dsn):
    """Three real 4-rank runs of one experiment but the variant, each recorded with another Caliper
    configuration: every figure over the focus window equals the records', and no variant is measured against
    the blocking run, whose Caliper configuration (so its environment) differs: only series that differ in
    the variant alone are compared (docs/measurement-model.md)."""
    campaign, ids = ingest_campaign(dsn, [OVERLAP, BLOCKING, NONBLOCKING], LEGACY)
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    rows = {run_id: (s, text) for kind, run_id, s, text in stored(dsn) if kind == "overlap"}
    assert len(rows) == 3
    for src in (OVERLAP, BLOCKING, NONBLOCKING):
        check_run(rows[ids[str(src)]][0], expected(src))
    configs = {frozenset(k for k in globals_of(src) if k.startswith("opts:") and k != "opts:output")
               for src in (OVERLAP, BLOCKING, NONBLOCKING)}
    assert len(configs) == 3                                  # the three were recorded differently
    for src in (OVERLAP, NONBLOCKING):
        s, text = rows[ids[str(src)]]
        assert s["blocking_run_ids"] == [] and s["overlap_efficiency"] is None
        assert "overlap efficiency" not in text
    # the blocking run is its own experiment's baseline
    s, _ = rows[ids[str(BLOCKING)]]
    assert s["blocking_run_ids"] == [ids[str(BLOCKING)]] and s["overlap_efficiency"] == 0
    assert rows[ids[str(OVERLAP)]][0]["variant"] == "overlap"
    # only the comm.stats profile has the Irecv gap
    assert rows[ids[str(NONBLOCKING)]][0]["irecv_gap_avg"] > 0 and "Irecv gap" in rows[ids[str(NONBLOCKING)]][1]
    assert "halo3d" in r.stdout and "focus window" in r.stdout


VARIANTS = {v: DATA / f"halo3d-{v}-loop-n2.comm-stats.cali" for v in ("blocking", "nonblocking", "overlap")}


def test_variants_of_one_experiment_against_blocking(dsn):
    """Three variants of one experiment, recorded with one Caliper configuration (tests/data/make_fixtures.sh
    ONLY=advisors): each is measured against the blocking run, over the focus window (`loop`), and every figure
    equals the records'."""
    campaign, ids = ingest_campaign(dsn, list(VARIANTS.values()))
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    rows = {run_id: s for _, run_id, s, _ in stored(dsn)}
    base = expected(VARIANTS["blocking"])
    for v, src in VARIANTS.items():
        s, e = rows[ids[str(src)]], expected(src)
        check_run(s, e)
        assert e["focus"] == "loop" and s["variant"] == v
        assert s["blocking_run_ids"] == [ids[str(VARIANTS["blocking"])]]
        assert s["overlap_efficiency"] == pytest.approx(1 - e["exposed"] / base["exposed"], rel=1e-9)
    assert f"run {ids[str(VARIANTS['overlap'])]}: halo3d overlap" in r.stdout and "against blocking" in r.stdout


def test_the_loop_not_the_whole_run(dsn):
    """The overlap run's whole-run figures (setup, the verification's gather on rank 0, the time outside every
    region) differ from its loop's: the advisor's load balance and MPI time are the loop's, and the whole
    run's stored run window is not what it used."""
    campaign, ids = ingest_campaign(dsn, [OVERLAP], LEGACY)
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    (s,) = [s for _, _, s, _ in stored(dsn)]
    e = expected(OVERLAP)
    with psycopg.connect(dsn) as conn:
        run_balance, run_mpi = conn.execute("SELECT load_balance, mpi_time_avg_s FROM v_run_metrics "
                                            "WHERE \"window\" = 'run'").fetchone()
    assert abs(run_balance - e["load_balance"]) > 0.1 and run_mpi > 2 * e["exposed"]
    assert s["load_balance"] == pytest.approx(e["load_balance"], rel=1e-9)
    assert s["exposed_comm_avg"] == pytest.approx(e["exposed"], rel=1e-9)


def test_without_mpi_wrapping_nothing_is_reported_as_zero(dsn):
    """A real profile recorded without profile.mpi: the exposed communication, the load balance, the
    efficiency and the verdict are not measured (NULL), never 0 or `network`."""
    src = DATA / "halo3d-blocking-n2.nompi-profile.cali"
    assert not any("mpi.function" in rec for _, _, rec in records_of(src))
    campaign, ids = ingest_campaign(dsn, [src])
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    ((s, text),) = [(s, text) for _, _, s, text in stored(dsn)]
    assert s["exposed_comm_avg"] is None and s["load_balance"] is None and s["overlap_efficiency"] is None
    assert s["excess"] is None and s["exposed_share"] is None
    assert all(g["cause"] is None and g["mpi_avg"] is None and g["kind"] is None for g in s["regions"])
    assert {g["path"].rsplit("/", 1)[-1] for g in s["regions"]} == {"compute", "halo_exchange"}
    assert "MPI time not measured" in text


def test_a_single_run_finds_its_blocking_baseline_in_its_campaign(dsn):
    """The imbalanced overlap run of the 2-rank pair asked about alone: its baseline would be a blocking run of
    its campaign; there is none of the same experiment, so it has no efficiency, and a blocking run of
    another experiment (another size and layer) is not taken."""
    campaign, ids = ingest_campaign(dsn, [OVERLAP_IMBALANCED, IMBALANCED], LEGACY)
    r = advise(dsn, str(ids[str(OVERLAP_IMBALANCED)]), "--no-store")
    assert r.returncode == 0, r.stderr
    assert stored(dsn) == []
    assert "overlap efficiency" not in r.stdout
    # the blocking run alone finds itself
    r = advise(dsn, str(ids[str(IMBALANCED)]), "--no-store")
    assert "overlap efficiency 0% against blocking" in r.stdout


@pytest.mark.parametrize("source, message", [
    ("999", "999: no run 999 in the store"),
    ("campaign:999", "campaign:999: no campaign 999 in the store"),
    ("halo", "halo: not a run id"),
])
def test_bad_input_exits_2_and_stores_nothing(dsn, source, message):
    ingest_campaign(dsn, [OVERLAP])
    r = advise(dsn, source)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert stored(dsn) == []


def test_runs_without_a_loop_or_a_profile_are_refused(dsn, tmp_path):
    out = tmp_path / "halo3d.out"
    shutil.copy(OVERLAP.with_suffix(".out"), out)      # the workload's stdout alone: no call tree
    campaign, ids = ingest_campaign(dsn, [out, DATA / "commgraph-pairs-n4.msgtrace"])
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 2
    assert f"run {ids[str(out)]}: no call-tree times (a run stored from its output alone" in r.stderr
    assert f"run {ids[str(DATA / 'commgraph-pairs-n4.msgtrace')]}: no call-tree times" in r.stderr
    assert stored(dsn) == []


def test_a_profile_without_a_loop_region_is_refused_with_what_to_do(dsn):
    """Without --focus, a profile made before the workloads had `loop`, its output beside it, has the workload's
    timers as its focus window: the advisor refuses it naming the region to give, and advises nothing."""
    assert not any("loop" in p for _, p, _ in records_of(OVERLAP))
    campaign, ids = ingest_campaign(dsn, [OVERLAP])
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"run {ids[str(OVERLAP)]}: the focus region loop is not in the stored call tree" in r.stderr
    assert "--focus timestep" in r.stderr
    assert stored(dsn) == []


def test_live_halo3d_variants_with_comm_stats(caliper_build, dsn, tmp_path):
    """Real runs of blocking, overlap and rma with comm.stats: every figure the
    advisor stores matches the records."""
    stack, bdir = caliper_build
    for v in ("blocking", "overlap", "rma"):
        stem = tmp_path / f"halo3d-{v}"
        r = suite.run(stack, bdir, "halo3d", suite.HALO3D + ["--variant", v], 2,
                      env={"CALI_CONFIG": f"runtime-profile,profile.mpi,region.count,comm.stats,output={stem}.cali"})
        assert not suite.problems(r), suite.problems(r)
        Path(f"{stem}.out").write_text(r.stdout)
    campaign, ids = ingest_campaign(dsn, [tmp_path])
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    rows = {run_id: s for _, run_id, s, _ in stored(dsn)}
    base = expected(tmp_path / "halo3d-blocking.cali")
    for v in ("blocking", "overlap", "rma"):
        src = tmp_path / f"halo3d-{v}.cali"
        s, e = rows[ids[str(src)]], expected(src)
        check_run(s, e)
        assert s["variant"] == v
        assert s["overlap_efficiency"] == pytest.approx(1 - e["exposed"] / base["exposed"], rel=1e-9)




def advise_pair(dsn, imbalanced: Path, balanced: Path):
    """Ingest two real runs as one campaign and advise on it: (the CLI's result,
    the imbalanced run's stored summary, the balanced one's), each summary
    checked against its Caliper records."""
    campaign, ids = ingest_campaign(dsn, [imbalanced, balanced], LEGACY)
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    rows = {run_id: s for _, run_id, s, _ in stored(dsn)}
    for src in (imbalanced, balanced):
        check_run(rows[ids[str(src)]], expected(src))
    return r, rows[ids[str(imbalanced)]], rows[ids[str(balanced)]]


def test_deliberate_imbalance_is_blamed_and_the_balanced_run_is_not(dsn):
    """Two real 4-rank runs that differ only in --pml-width (16: the end
    subdomains of a 4x1x1 grid carry the absorbing layer's x planes; 0: no
    layer). Over the loop (the focus window) the layer costs the end ranks
    enough for a material imbalance, POP load balance below 0.8, which
    explains most of the halo wait: blamed on imbalance. Without the layer the
    wait is the network's. Over the whole run (setup skew, the verification's
    gather on rank 0) both runs look imbalanced (load balance near 0.6), which
    says nothing about the loop."""
    r, imb, bal = advise_pair(dsn, IMBALANCED, BALANCED)
    e_imb, e_bal = expected(IMBALANCED), expected(BALANCED)
    assert e_imb["load_balance"] < 0.8 < e_bal["load_balance"], (e_imb["load_balance"], e_bal["load_balance"])
    assert imb["waits"] == {"main/timestep/halo_exchange": "imbalance"}
    assert bal["waits"] == {"main/timestep/halo_exchange": "network"}
    halo = next(g for g in imb["regions"] if g["path"] == "main/timestep/halo_exchange")
    assert halo["explained"] >= 0.5
    # the end ranks (0 and 3) carry the layer: they do the most useful work in the loop
    assert sorted(e_imb["user"], key=e_imb["user"].get)[-2:] in ([0, 3], [3, 0])
    compute = next(g for g in imb["regions"] if g["path"] == "main/timestep/compute")
    assert compute["slowest_rank"] in (0, 3)
    assert "IMBALANCE, not the network" in r.stdout
    with psycopg.connect(dsn) as conn:
        whole = [b for (b,) in conn.execute("SELECT load_balance FROM v_run_metrics WHERE \"window\" = 'run'")]
    assert all(b < 0.65 for b in whole), whole




def test_overlap_at_two_ranks_blames_the_one_sided_layer_and_not_the_two_sided_one(dsn):
    """Two real 2-rank `overlap` runs (no oversubscription on 2 cores) that differ
    only in --pml-faces: x- gives rank 0 the absorbing layer and rank 1 none;
    x-,x+ gives both the same layer. The first one's waits are blamed on
    imbalance, the second one's on the network. overlap polls the exchange
    inside its interior compute, so the loop's MPI time, not the completing
    region's alone, is what the excess is set against."""
    r, imb, bal = advise_pair(dsn, OVERLAP_IMBALANCED, OVERLAP_BALANCED)
    assert imb["variant"] == bal["variant"] == "overlap"
    assert imb["waits"] == {"main/timestep/halo_exchange": "imbalance"}
    assert bal["waits"] == {"main/timestep/halo_exchange": "network"}
    polls = next(g for g in imb["regions"] if g["path"] == "main/timestep/compute_interior")
    assert polls["kind"] == "compute" and polls["mpi_avg"] > 0          # MPI_Testall, counted in the loop's MPI time
    # rank 0 carries the layer: it is the slowest in the interior pass, and the load balance is the worse one
    assert polls["slowest_rank"] == 0
    assert imb["load_balance"] < bal["load_balance"]


def test_a_rank_waiting_for_a_core_gets_no_verdict(dsn):
    """The real 2-rank overlap pair, with the imbalanced run's record of how long
    its most-delayed rank waited for a core set as a run beside a competing task
    records it (Adiak runqueue_wait_share_max; 0.36-0.45 in the session-5
    campaigns). Its wait is then `descheduled`, not `imbalance`; the balanced
    run, at the 0.7-1.1% a quiet run records, keeps its verdict. Profiles
    without the value (the pair as made) keep theirs (test above)."""
    campaign, ids = ingest_campaign(dsn, [OVERLAP_IMBALANCED, OVERLAP_BALANCED], LEGACY)
    with psycopg.connect(dsn) as conn:
        for src, share in ((OVERLAP_IMBALANCED, "0.38"), (OVERLAP_BALANCED, "0.009")):
            conn.execute("UPDATE runs SET metadata = metadata || jsonb_build_object('runqueue_wait_share_max', %s::text)"
                         " WHERE id = %s", (share, ids[str(src)]))
    r = advise(dsn, f"campaign:{campaign}")
    assert r.returncode == 0, r.stderr
    rows = {run_id: s for _, run_id, s, _ in stored(dsn)}
    imb, bal = rows[ids[str(OVERLAP_IMBALANCED)]], rows[ids[str(OVERLAP_BALANCED)]]
    assert imb["waits"] == {"main/timestep/halo_exchange": "descheduled"}
    assert imb["runqueue_wait_share_max"] == pytest.approx(0.38)
    assert bal["waits"] == {"main/timestep/halo_exchange": "network"}
    assert "waited for a core 38% of the run" in r.stdout and "DESCHEDULED ranks, no verdict" in r.stdout
    # the figures the verdict would rest on are still reported
    halo = next(g for g in imb["regions"] if g["path"] == "main/timestep/halo_exchange")
    assert halo["explained"] >= 0.5


def test_live_run_beside_competing_tasks_is_flagged_descheduled(caliper_build, dsn, tmp_path):
    """A real imbalanced 2-rank run beside one busy task per core: the workload
    records its ranks' wait for a core (Adiak, and the FOM in its output), and
    the advisor gives no imbalance-or-network verdict for it."""
    stack, bdir = caliper_build
    stem = tmp_path / "halo3d-overlap-contended"
    with competing_tasks():
        r = suite.run(stack, bdir, "halo3d", ["--n", "64,64,64", "--iters", "40", "--variant", "overlap",
                                              "--dims", "2,1,1", "--pml-width", "4", "--pml-faces", "x-"], 2,
                      env={"CALI_CONFIG": f"runtime-profile,profile.mpi,region.count,comm.stats,output={stem}.cali"})
    assert not suite.problems(r), suite.problems(r)
    Path(f"{stem}.out").write_text(r.stdout)
    share = r.out.foms["runqueue_wait_share_max"][0]
    assert share >= 0.05, share
    _, globals_ = caliperreader.read_caliper_contents(f"{stem}.cali")
    assert float(globals_["runqueue_wait_share_max"]) == pytest.approx(share, rel=1e-5)
    campaign, ids = ingest_campaign(dsn, [tmp_path])
    a = advise(dsn, f"campaign:{campaign}")
    assert a.returncode == 0, a.stderr
    (s,) = [s for _, run_id, s, _ in stored(dsn) if run_id == ids[f"{stem}.cali"]]
    assert set(s["waits"].values()) == {"descheduled"}, s["waits"]
