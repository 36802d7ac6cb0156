"""The measurement model (docs/measurement-model.md) on real profiles, against
an independent reference: caliper-reader's records read here (MPI time is the
records carrying `mpi.function`, the focus window the records whose `region`
stack holds `loop`, time outside regions the records with no path; for spot,
each record's sum across ranks over the job's rank count), the json-split file
read as JSON, and the workloads' own timers read from their stdout's FOM lines
(the focus window of a run whose profile has no `loop` region). Nothing here
calls commscope's metric code; the store's v_run_metrics is compared with them."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
from caliperreader import read_caliper_contents

from commscope.read.workload_output import parse_output
from commscope.workflow.ingest import Provenance, ingest
from commscope.read.records import ReadOptions
from helpers import PER_RANK_PROFILES, SYNC, TIME, calipers_own, reference

DATA = Path(__file__).parent / "data"
THIRD = Path(__file__).parent / "thirdparty"
MESSAGE_TRACES = sorted(d.name for d in DATA.glob("*.msgtrace"))
# spot profiles: the workloads' (tests/data) and the third-party applications' (stored with the --app a user gives)
SPOT_PROFILES = sorted(DATA.glob("*.spot.cali")) + sorted(THIRD.glob("*/*.spot.cali"))

def third_party_app(f: Path) -> str:
    """The application's name a user gives with --app (these files record none): the file name's first part."""
    return re.sub(r"-n\d+$", "", f.name.split(".")[0])


def workload_output(fixture: Path) -> Path | None:
    """The workload's stdout kept with a fixture: X.out beside X.cali/X.json, or the one .out in a run directory."""
    if fixture.is_dir():
        outs = sorted(fixture.glob("*.out"))
        assert len(outs) <= 1, outs
        return outs[0] if outs else None
    out = fixture.with_suffix(".out")
    return out if out.exists() else None


def own_timers(out: Path) -> dict[str, float]:
    """The FOMs in seconds, straight from the `FOM <name> <value> s` lines (workloads/README.md), plus the
    workload's name from its `COMMSCOPE workload=` header."""
    text = out.read_text()
    foms = {name: float(v) for name, v in re.findall(r"^FOM (\S+) (\S+) s$", text, re.M)}
    foms["workload"] = re.search(r"^COMMSCOPE workload=(\S+)", text, re.M).group(1)
    return foms


WORKLOAD_FIXTURES = sorted(p.name for p in list(DATA.glob("*.cali")) + list(DATA.glob("*.json-split.json"))
                           + [d for d in DATA.iterdir() if d.is_dir() and d.suffix in (".per-rank", ".msgtrace")]
                           if workload_output(p))





@pytest.fixture(scope="module")
def stored(server):
    """Every fixture ingested once into a database of this module, the v_run_metrics rows by source name."""
    emb, _ = server
    with emb.admin("postgres") as a:
        a.execute('DROP DATABASE IF EXISTS "model_fixtures" WITH (FORCE)')
        a.execute('CREATE DATABASE "model_fixtures"')
    emb.prepare_database("model_fixtures")
    url = emb.url("model_fixtures")
    from commscope.store import db
    with psycopg.connect(url) as conn:
        db.migrate(conn)
        ingest(conn, [DATA], Provenance(system="testbox"))
        for f in SPOT_PROFILES:
            if f.parent.parent == THIRD:   # no Adiak name: the application's name as a user gives it
                ingest(conn, [f], Provenance(system="testbox"), read=ReadOptions(app=third_party_app(f)))
        rows = conn.execute("SELECT r.source, r.metadata->>'focus_source', m.* FROM v_run_metrics m "
                            "JOIN runs r ON r.id = m.run_id").fetchall()
        cols = ["source", "focus_source"] + [d.name for d in conn.execute("SELECT * FROM v_run_metrics LIMIT 0").description]
    out: dict = defaultdict(dict)
    for row in rows:
        d = dict(zip(cols, row))
        out[Path(d["source"]).name][d["window"]] = d
    yield out
    with emb.admin("postgres") as a:
        a.execute('DROP DATABASE "model_fixtures" WITH (FORCE)')


@pytest.mark.parametrize("name", PER_RANK_PROFILES)
def test_windows_equal_the_records_of_the_file(stored, name):
    ref = reference(name)
    for window in ("run", "focus"):
        per_rank = ref[window]
        if not per_rank:
            timers = own_timers(workload_output(DATA / name)) if workload_output(DATA / name) else {}
            if window == "focus" and "total_time" in timers:
                # no `loop` region in the file: the focus window is the workload's timers over its loop
                assert stored[name]["focus"]["time_s"] == timers["total_time"], name
                assert stored[name]["focus"]["focus_region"] == "loop", name
            else:
                assert window not in stored[name]
            continue
        got = stored[name][window]
        times = {r: v[0] for r, v in per_rank.items()}
        mpis = {r: v[1] + v[2] for r, v in per_rank.items()}
        slowest = max(times, key=times.get)
        n = len(times)
        useful = {r: times[r] - mpis[r] for r in times}
        expect = {
            "time_s": times[slowest], "ranks_measured": n,
            "mpi_time_avg_s": sum(mpis.values()) / n, "mpi_time_max_s": max(mpis.values()),
            "mpi_fraction_avg": sum(mpis.values()) / sum(times.values()),
            "mpi_fraction_slowest": mpis[slowest] / times[slowest],
            "mpi_sync_time_avg_s": sum(v[2] for v in per_rank.values()) / n,
            "load_balance": (sum(useful.values()) / n) / max(useful.values()),
            "communication_efficiency": max(useful.values()) / times[slowest],
            "parallel_efficiency": (sum(useful.values()) / n) / times[slowest],
        }
        if not any(v[1] + v[2] for v in per_rank.values()):
            # recorded without MPI wrapping (no record names an MPI function): not measured, so NULL, never 0
            assert "profile.mpi" not in (DATA / name).read_text(errors="replace")
            for k in expect:
                if k not in ("time_s", "ranks_measured"):
                    assert got[k] is None, (name, window, k)
            assert got["time_s"] == pytest.approx(expect["time_s"], rel=1e-9)
            continue
        for k, v in expect.items():
            assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-12), (name, window, k)
        # the multiplicative form: parallel efficiency is the product of the other two
        assert got["parallel_efficiency"] == pytest.approx(got["load_balance"] * got["communication_efficiency"])


@pytest.mark.parametrize("name", MESSAGE_TRACES)
def test_a_message_trace_has_no_window_from_its_records(stored, name):
    """Message tracing records counts and bytes, no time: nothing in the records measures a window, so no
    window claims to come from them (no run window of zeros). A focus window, if stored, is the
    workload's own timers from its output (test_the_focus_window_is_the_workload_s_timed_loop)."""
    files = sorted((DATA / name).glob("rank-*.cali"))
    assert files
    for f in files:
        records, _ = read_caliper_contents(str(f))
        assert records and not any(a in r for r in records for a in TIME + ("time",)), f
    assert reference(name) == {"run": {}, "focus": {}}
    assert "run" not in stored[name]
    if "focus" in stored[name]:
        timers = own_timers(workload_output(DATA / name))
        assert stored[name]["focus"]["time_s"] == timers["total_time"]


SPOT_EXCL = "sum#scale#sum#time.duration.ns"   # spot's exclusive time (time.exclusive), summed over ranks
SPOT_NULL = ("time_s", "mpi_time_max_s", "mpi_fraction_slowest", "load_balance", "communication_efficiency",
             "parallel_efficiency", "ranks_measured")


def spot_reference(path: Path) -> dict:
    """Per window: the mean rank's time, MPI time and MPI_SYNC time (each record's exclusive time summed
    over ranks, over the job's rank count: a record a rank did not make is 0 for that rank), and the
    focus node's inclusive max over ranks at each call path where the focus region starts."""
    records, g = read_caliper_contents(str(path))
    ranks = int(g.get("mpi.world.size", 1))   # a program that never initialised MPI is one process
    assert "time.exclusive" in g["spot.options"].split(","), path
    names = {n for r in records for n in (r.get("path") or [])} if records else set()
    focus = "loop" if "loop" in names else None
    out = {"ranks": ranks, "focus": focus, "run": [0.0, 0.0, 0.0], "focus_window": [0.0, 0.0, 0.0],
           "focus_roots": {}, "mpi_measured": "profile.mpi" in g["spot.options"].split(",")}
    for r in records:
        if r.get("spot.channel", "regionprofile") != "regionprofile" or SPOT_EXCL not in r or calipers_own(r):
            continue
        t = float(r[SPOT_EXCL]) / ranks
        path = r.get("path") or []
        path = path if isinstance(path, list) else [path]
        fn = r.get("mpi.function")
        fn = fn[-1] if isinstance(fn, list) else fn
        for w in ("run",) + (("focus_window",) if focus and focus in path else ()):
            out[w][0] += t
            if fn:
                out[w][2 if fn in SYNC else 1] += t
        if focus and path and path[-1] == focus and focus not in path[:-1]:
            out["focus_roots"][tuple(path)] = float(r["max#inclusive#sum#time.duration"])
    return out


@pytest.mark.parametrize("path", SPOT_PROFILES, ids=lambda p: str(p.relative_to(DATA.parent)))
def test_spot_windows_give_what_aggregates_allow_and_null_for_the_rest(stored, path):
    """spot keeps each node's min/max/avg/sum across ranks: the mean rank's times over a window are exact,
    the slowest rank's are not (a max of sums is not a sum of maxes), save the focus time where the focus
    region starts at one call path (its inclusive max), and every figure of a one-rank job."""
    ref = spot_reference(path)
    got = stored[path.name]
    for window, acc in (("run", ref["run"]), ("focus", ref["focus_window"])):
        if window == "focus" and ref["focus"] is None:
            out = path.with_suffix(".out")
            timers = own_timers(out) if out.exists() and out.read_text().startswith("COMMSCOPE ") else {}
            if "total_time" in timers:   # no `loop` region: the workload's timers over its loop
                assert got["focus"]["time_s"] == timers["total_time"], path.name
            else:
                assert "focus" not in got, path.name
            continue
        row = got[window]
        time, mpi, sync = acc
        where = (path.name, window)
        if ref["mpi_measured"]:
            assert row["mpi_time_avg_s"] == pytest.approx(mpi + sync, rel=1e-5), where
            assert row["mpi_fraction_avg"] == pytest.approx((mpi + sync) / time, rel=1e-5), where
            assert row["mpi_sync_time_avg_s"] == pytest.approx(sync, rel=1e-5, abs=1e-12), where
            assert row["user_time_avg_s"] == pytest.approx(time - mpi - sync, rel=1e-5), where
        else:   # recorded without profile.mpi: no MPI figure, and no useful time without it (NULL, never 0)
            assert mpi == sync == 0, where
            for k in ("mpi_time_avg_s", "mpi_fraction_avg", "mpi_sync_time_avg_s", "user_time_avg_s"):
                assert row[k] is None, (*where, k)
        if ref["ranks"] == 1:
            # one rank is the slowest and the mean: POP's efficiencies of one process (useful time over runtime;
            # load balance 1); without MPI measured, only the time and the rank are known
            useful = time - mpi - sync
            known = {"time_s": time, "ranks_measured": 1}
            if ref["mpi_measured"]:
                known.update(mpi_time_max_s=mpi + sync, mpi_fraction_slowest=(mpi + sync) / time, load_balance=1.0,
                             communication_efficiency=useful / time, parallel_efficiency=useful / time)
            for k in SPOT_NULL:
                if k in known:
                    assert row[k] == pytest.approx(known[k], rel=1e-5), (*where, k)
                else:
                    assert row[k] is None, (*where, k)
            continue
        for k in SPOT_NULL:
            if window == "focus" and k == "time_s" and len(ref["focus_roots"]) == 1:
                assert row[k] == pytest.approx(next(iter(ref["focus_roots"].values())), rel=1e-9), where
            else:
                assert row[k] is None, (*where, k)
    if ref["focus"]:
        assert got["focus"]["focus_region"] == ref["focus"]


def test_nested_and_root_level_mpi_count_once(stored):
    """ROMIO's MPI_File_write_all calls MPI functions Caliper records beneath it, and MPI_Comm_dup/MPI_Finalize run
    outside every region: the run window's MPI time is every MPI record's time once, whatever its depth, but Caliper's
    own MPI_Comm_dup (helpers.calipers_own)."""
    name = "pio-collective-romio-n2.mpi-profile.cali"
    records, _ = read_caliper_contents(str(DATA / name))
    mpi, nested, root = defaultdict(float), 0.0, 0.0
    for r in records:
        if calipers_own(r):
            continue
        t = float(r.get("sum#sum#time.duration", 0) or 0)
        path = r.get("path") or []
        path = path if isinstance(path, list) else [path]
        calls = [p for p in path if p.startswith("MPI_")]
        if calls:
            mpi[int(r["mpi.rank"])] += t
            nested += t if len(calls) > 1 else 0
            root += t if path[0].startswith("MPI_") else 0
    assert nested > 0 and root > 0
    assert stored[name]["run"]["mpi_time_avg_s"] == pytest.approx(sum(mpi.values()) / len(mpi), rel=1e-9)


def test_the_run_window_counts_time_outside_every_region(stored):
    """The records without a path are in the run's time: the issue's 'setup and finalize dropped' case."""
    name = "halo3d-overlap-n2.runtime-profile.cali"
    records, _ = read_caliper_contents(str(DATA / name))
    outside = defaultdict(float)
    inside = defaultdict(float)
    for r in records:
        t = float(r.get("sum#sum#time.duration", 0) or 0)
        if not calipers_own(r):
            (inside if r.get("path") else outside)[int(r["mpi.rank"])] += t
    assert all(v > 0 for v in outside.values())
    assert stored[name]["run"]["time_s"] == pytest.approx(max(inside[r] + outside[r] for r in inside))


def check_focus_against_timers(where: str, focus: dict | None, focus_source: str | None, timers: dict,
                               files: list[Path]) -> None:
    """The issue's rule for a workload run with its output: the focus window's time is within 15 % + 2 ms of
    the loop's total_time FOM, and its MPI time of the comm-time FOM where the workload prints one. FILES are
    the run's profile files (none: a run without a profile). Where they hold a `loop` region (read here with
    caliper-reader) the window is the profile's, and without MPI wrapping it has no MPI time; where they do
    not, it is the workload's own timers, and the run says so."""
    assert focus, f"{where}: no focus window"
    total = timers["total_time"]
    assert focus["time_s"] is not None, f"{where}: no focus time"
    assert abs(focus["time_s"] - total) <= 0.15 * total + 0.002, (where, focus["time_s"], total)
    assert focus["focus_region"] == "loop", where
    has_loop = any("loop" in region_names(f) for f in files)
    mpi_wrapped = any("profile.mpi" in f.read_text(errors="replace") for f in files)
    # pio's comm_time is its gather/scatter only; its MPI-IO calls are MPI time too (workloads/README.md)
    if has_loop and not mpi_wrapped:
        assert focus["mpi_time_avg_s"] is None, where   # recorded without MPI wrapping: not measured
    elif "comm_time_avg" in timers and timers["workload"] != "pio":
        comm = timers["comm_time_avg"]
        assert focus["mpi_time_avg_s"] is not None, f"{where}: no focus MPI time"
        assert abs(focus["mpi_time_avg_s"] - comm) <= 0.15 * comm + 0.002, (where, focus["mpi_time_avg_s"], comm)
    assert focus_source == ("profile" if has_loop else "workload timers"), (where, focus_source)


def _profile_files(fixture: Path) -> list[Path]:
    return sorted(fixture.glob("rank-*.cali")) if fixture.is_dir() else [fixture]


def region_names(f: Path) -> set[str]:
    """Every region name in a profile: its json-split nodes' labels, or its records' `region`/`path` stacks."""
    if f.suffix == ".json":
        return {n["label"] for n in json.loads(f.read_text())["nodes"]}
    names = set()
    for r in read_caliper_contents(str(f))[0]:
        for a in ("region", "path"):
            v = r.get(a) or []
            names.update(v if isinstance(v, list) else [v])
    return names


@pytest.mark.parametrize("name", WORKLOAD_FIXTURES)
def test_the_focus_window_is_the_workload_s_timed_loop(stored, name):
    """Every workload fixture kept with its output (single files, json-split, per-rank and message-trace
    directories), read here from the output's FOM lines."""
    timers = own_timers(workload_output(DATA / name))
    if "total_time" not in timers:
        pytest.skip(f"{name}: the workload prints no total_time")
    focus = stored[name].get("focus")
    check_focus_against_timers(name, focus, focus and focus["focus_source"], timers, _profile_files(DATA / name))


RAMBLE = DATA / "ramble"


def ramble_experiments() -> list[tuple[str, str]]:
    """(workspace, experiment) of every experiment of the Ramble workspaces in tests/data/ramble whose log
    (<run dir>/<experiment>.out, the workload's stdout) holds a total_time FOM: the runs, not a repeated
    experiment's summary entry. A failed experiment that printed no timers is left out."""
    out = []
    for ws in sorted(RAMBLE.iterdir()):
        if not (ws / "results.latest.json").exists():
            continue
        for e in json.loads((ws / "results.latest.json").read_text())["experiments"]:
            if int(e.get("N_REPEATS") or 0):
                continue
            log = ramble_run_dir(ws.name, e["experiment_name"]).joinpath(f"{e['experiment_name']}.out")
            if log.exists() and re.search(r"^FOM total_time \S+ s$", log.read_text(errors="replace"), re.M):
                out.append((ws.name, e["experiment_name"]))
    return out


def ramble_run_dir(ws: str, experiment: str) -> Path:
    """experiments/<application>/<workload>/<experiment> (tests/data/ramble/README.md)."""
    dirs = list((RAMBLE / ws / "experiments").glob(f"*/*/{experiment}"))
    assert len(dirs) == 1, (ws, experiment, dirs)
    return dirs[0]


@pytest.fixture(scope="module")
def stored_ramble(server):
    """Every Ramble workspace of tests/data/ramble ingested as a workspace (one campaign each), the focus
    window and focus_source of each run by (workspace, run directory name)."""
    emb, _ = server
    with emb.admin("postgres") as a:
        a.execute('DROP DATABASE IF EXISTS "model_ramble" WITH (FORCE)')
        a.execute('CREATE DATABASE "model_ramble"')
    emb.prepare_database("model_ramble")
    from commscope.store import db
    out: dict = {}
    with psycopg.connect(emb.url("model_ramble")) as conn:
        db.migrate(conn)
        for ws in sorted({w for w, _ in ramble_experiments()}):
            ingest(conn, [RAMBLE / ws], Provenance(system="testbox"))
        cols = [d.name for d in conn.execute("SELECT * FROM v_run_metrics LIMIT 0").description]
        for source, focus_source, *row in conn.execute(
                "SELECT r.source, r.metadata->>'focus_source', m.* FROM runs r LEFT JOIN v_run_metrics m "
                "ON m.run_id = r.id AND m.\"window\" = 'focus'"):
            src = Path(source)
            run_dir = src if src.is_dir() else src.parent
            key = (run_dir.relative_to(RAMBLE).parts[0], run_dir.name)
            assert key not in out, key
            out[key] = (dict(zip(cols, row)) if row[0] is not None else None, focus_source)
    yield out
    with emb.admin("postgres") as a:
        a.execute('DROP DATABASE "model_ramble" WITH (FORCE)')


@pytest.mark.parametrize("ws,experiment", ramble_experiments(), ids=lambda v: v)
def test_a_ramble_experiment_s_focus_window_is_its_timed_loop(stored_ramble, ws, experiment):
    """Every experiment of the real Ramble workspaces, profiled (runtime-profile with or without a `loop`
    region, message traces) or not: the same rule, against the FOM lines of the experiment's log."""
    run_dir = ramble_run_dir(ws, experiment)
    timers = own_timers(run_dir / f"{experiment}.out")
    focus, focus_source = stored_ramble[(ws, experiment)]
    check_focus_against_timers(f"{ws}/{experiment}", focus, focus_source, timers, sorted(run_dir.glob("*.cali")))


def test_a_run_without_profile_takes_its_focus_window_from_its_timers(dsn, tmp_path):
    out_file = tmp_path / "halo3d.out"
    shutil.copy(DATA / "halo3d-overlap-n4.runtime-profile.out", out_file)
    foms = parse_output(out_file.read_text()).foms
    with psycopg.connect(dsn) as conn:
        ingest(conn, [out_file], Provenance())
        rows = conn.execute("SELECT \"window\", time_s, mpi_time_avg_s, mpi_fraction_avg, load_balance "
                            "FROM v_run_metrics").fetchall()
    assert rows == [("focus", foms["total_time"][0], foms["comm_time_avg"][0], None,
                     pytest.approx(foms["compute_time_avg"][0] / foms["compute_time_max"][0]))]


def test_series_split_by_problem_size_caliper_mode_and_stack_but_keep_repeats(dsn, tmp_path):
    from corpus import varied_copies
    a, b = varied_copies(DATA / "halo3d-overlap-n2.runtime-profile.cali", 2, tmp_path / "copies")
    for copy in (a, b):   # a repeat is a whole run: its output beside its profile, as the original has
        shutil.copy(DATA / "halo3d-overlap-n2.runtime-profile.out", copy.with_suffix(".out"))
    shutil.copy(DATA / "halo3d-overlap-n2.runtime-profile.out", tmp_path / "loop.out")   # no profile beside it
    with psycopg.connect(dsn) as conn:
        ingest(conn, [a], Provenance(stack="stack-a"))
        ingest(conn, [b], Provenance(stack="stack-b"))                    # only the stack differs
        ingest(conn, [DATA / "halo3d-overlap-n2.runtime-profile.cali"], Provenance(stack="stack-a"))  # a repeat of a
        ingest(conn, [DATA / "halo3d-overlap-pml32-xboth-n2.comm-stats.cali"], Provenance(stack="stack-a"))  # 64^3
        ingest(conn, [tmp_path / "loop.out"], Provenance(stack="stack-a"))  # the same loop without Caliper
        ingest(conn, [DATA / "ramble" / "smoke-openmpi4-repeats"], Provenance())
        series = conn.execute("SELECT r.source, r.series_id FROM runs r").fetchall()
        ramble = conn.execute("SELECT r.experiment, count(DISTINCT r.series_id), count(*) FROM runs r "
                              "JOIN campaigns c ON c.id = r.campaign_id WHERE c.kind = 'ramble' "
                              "GROUP BY r.experiment").fetchall()
    sid = {Path(s).name: i for s, i in series}
    assert sid["copy-000000.cali"] == sid["halo3d-overlap-n2.runtime-profile.cali"]      # repeats: one series
    assert sid["copy-000001.cali"] != sid["copy-000000.cali"]                            # stack
    assert sid["halo3d-overlap-pml32-xboth-n2.comm-stats.cali"] != sid["copy-000000.cali"]  # problem size
    assert sid["loop.out"] != sid["copy-000000.cali"]                                    # Caliper mode
    assert ramble and all(n_series == 1 for _, n_series, _ in ramble)
    assert any(n > 1 for *_, n in ramble)  # the workspace's repeats share their experiment's series


RANKMAP = DATA / "commgraph-pairs-reverse-n4.msgtrace"


def test_a_rank_mapped_message_trace_is_stored_in_world_ranks(dsn):
    """commgraph --rank-map reverse: world rank w is application rank 3-w. Caliper keys the sender by
    world rank and the destination by the split communicator's rank; the stored matrix is all world."""
    import re
    to_world = {int(a): int(w) for a, w in re.findall(r"^RANK (\d+) world=(\d+)", (RANKMAP / "commgraph.out").read_text(),
                                                       re.M)}
    assert to_world == {0: 3, 1: 2, 2: 1, 3: 0}
    expected = defaultdict(lambda: [0, 0])
    for f in sorted(RANKMAP.glob("rank-*.cali")):
        records, _ = read_caliper_contents(str(f))
        for r in records:
            if "mpi.msg.dst" in r and int(r["mpi.msg.dst"]) >= 0:
                cell = expected[int(r["mpi.rank"]), to_world[int(r["mpi.msg.dst"])]]
                cell[0] += int(r.get("count", 0))
                cell[1] += int(float(r.get("sum#mpi.msg.size", 0)))
    with psycopg.connect(dsn) as conn:
        ingest(conn, [RANKMAP], Provenance())
        got = {(s, d): [m, b] for s, d, m, b in conn.execute("SELECT src, dst, messages, bytes FROM comm_matrix")}
    assert got == dict(expected)
    assert all(s != d for s, d in got)                            # no self-messages
    assert all(got[s, d][1] == got[d, s][1] for s, d in got)      # the pairs pattern is symmetric
    # pairs: application rank a sends its large messages to a+2 (mod 4); in world ranks w -> 3-((3-w+2)%4)
    for w in range(4):
        partner = to_world[(3 - w + 2) % 4]
        assert max(got[w, d][1] for d in range(4) if d != w) == got[w, partner][1]


def test_a_rank_mapped_trace_without_its_mapping_is_refused_not_stored_wrong(dsn, tmp_path):
    bare = tmp_path / "trace"
    bare.mkdir()
    for f in RANKMAP.glob("rank-*.cali"):
        shutil.copy(f, bare / f.name)   # the output with the RANK lines left behind
    from commscope.read.profiles import BadProfile
    with psycopg.connect(dsn) as conn:
        with pytest.raises(BadProfile, match="renumbered communicator") as e:
            ingest(conn, [bare], Provenance())
        assert str(bare) in str(e.value)
        assert conn.execute("SELECT count(*) FROM comm_matrix").fetchone()[0] == 0


def test_a_per_rank_set_with_a_rank_missing_is_refused_or_stored_as_partial(dsn, tmp_path):
    import os
    import subprocess
    import sys
    run = tmp_path / "halo3d-blocking-n4.per-rank"
    shutil.copytree(DATA / "halo3d-blocking-n4.per-rank", run)
    (run / "rank-2.cali").unlink()
    env = {**os.environ, "COMMSCOPE_DB_URL": dsn}
    cli = [sys.executable, "-m", "commscope.cli", "ingest", "-q"]
    r = subprocess.run([*cli, str(run)], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and str(run) in r.stderr and "rank 2 of the 4" in r.stderr and "--allow-partial" in r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    r = subprocess.run([*cli, "--allow-partial", str(run)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        status, missing = conn.execute("SELECT status, metadata->'missing_ranks' FROM runs").fetchone()
        ranks = {w: n for w, n in conn.execute('SELECT "window", ranks_measured FROM v_run_metrics')}
        kept_out = conn.execute("SELECT count(*) FROM v_mpi_fraction").fetchone()[0]
    assert (status, missing) == ("partial", [2])
    # the run window holds the 3 ranks the profile has; these files have no `loop` region, so the focus window is
    # the workload's timers, which count no ranks of the profile
    assert ranks == {"run": 3, "focus": None} and kept_out == 0


def test_focus_names_the_region_a_study_is_about(dsn):
    """`commscope ingest --focus REGION`: the focus window is that region's subtrees."""
    name = "halo3d-overlap-n4.runtime-profile.cali"
    per_rank = reference(name, focus="halo_exchange")["focus"]
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA / name], Provenance(), focus="halo_exchange")
        got = conn.execute('SELECT focus_region, time_s, mpi_time_avg_s FROM v_run_metrics WHERE "window" = \'focus\''
                           ).fetchone()
    assert got[0] == "halo_exchange"
    assert got[1] == pytest.approx(max(v[0] for v in per_rank.values()), rel=1e-9)
    assert got[2] == pytest.approx(sum(v[1] + v[2] for v in per_rank.values()) / len(per_rank), rel=1e-9)


def test_where_a_run_put_its_files_is_not_a_parameter(dsn, tmp_path):
    """pio prints the folder and file it wrote (PARAM dir, PARAM file): two real runs of one experiment in two
    folders are one series, with neither folder among its parameters, but with the file system they are on (PARAM
    fs, checked against util-linux's findmnt). An input file is a parameter: commgraph
    runs with two different rank maps are two series."""
    import suite
    from conftest import built_once
    stack, bdir = built_once("debian-openmpi4")
    outs = tmp_path / "outs"
    outs.mkdir()
    for name in ("a", "b"):
        where = tmp_path / name
        where.mkdir()
        r = suite.run(stack, bdir, "pio", ["--n", "16,16,16", "--method", "independent", "--dir", str(where)], 2)
        assert r.returncode == 0 and r.out.params["dir"] == str(where), r.stderr
        fstype = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", str(where)], capture_output=True, text=True,
                                check=True).stdout.strip()
        assert r.out.params["fs"] == fstype, (r.out.params.get("fs"), fstype)
        (outs / f"pio-{name}.out").write_text(r.stdout)
        rank_map = tmp_path / f"{name}.map"
        rank_map.write_text("0 1\n" if name == "a" else "1 0\n")
        r = suite.run(stack, bdir, "commgraph", ["--iters", "2", "--rank-map", str(rank_map)], 2)
        assert r.returncode == 0, r.stderr
        (outs / f"commgraph-{name}.out").write_text(r.stdout)
    with psycopg.connect(dsn) as conn:
        ingest(conn, [outs], Provenance(system="testbox"))
        conn.commit()
        rows = conn.execute("SELECT r.app, r.series_id, s.parameters FROM runs r JOIN series s ON s.id = r.series_id "
                            "WHERE r.source LIKE %s ORDER BY r.source", (f"{outs}%",)).fetchall()
    by_app = {app: [(sid, params) for a, sid, params in rows if a == app] for app, _s, _p in rows}
    pio, commgraph = by_app["pio"], by_app["commgraph"]
    assert len(pio) == 2 and pio[0][0] == pio[1][0], pio
    assert pio[0][1]["param.method"] == "independent"
    assert pio[0][1]["param.fs"] == fstype   # the file system written to is a parameter: another one, another series
    assert not [v for v in pio[0][1].values() if str(tmp_path) in str(v)], pio[0][1]
    assert len(commgraph) == 2 and commgraph[0][0] != commgraph[1][0], commgraph
