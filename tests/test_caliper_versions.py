"""Profiles written by older Caliper releases (issue 15: "any Caliper 2.x, from 2.3 where the format allows"),
stored with `commscope ingest` and checked against references taken by another route: the upstream
caliper-reader's records of each .cali file (or Python's json module for json-split), summed by hand here.

The files are real 2-rank runs of the halo3d workload built against Caliper 2.3.0, 2.6.0 and 2.9.0 with each
release's own configurations; tests/thirdparty/caliper-<version>/README.md says exactly how each was made and which
configurations that release lacks."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
from caliperreader import read_caliper_contents

from conftest import fresh_database
from helpers import CALIPERS_OWN_PATH, calipers_own

THIRD = Path(__file__).parent / "thirdparty"
VERSIONS = sorted(d for d in THIRD.glob("caliper-*") if d.is_dir())
CLI = [sys.executable, "-m", "commscope.cli"]
# Caliper's names for a record's summed time: the mpireport/cross-rank sum, or one process's aggregate
TIME = ("sum#sum#time.duration", "sum#time.duration")
SPOT_SUM = "sum#inclusive#sum#time.duration"


def profiles_of(folder: Path) -> list[Path]:
    """Each run of a folder: a .cali or .json file, or a folder of per-rank files."""
    runs = [p for p in folder.iterdir() if p.suffix in (".cali", ".json")]
    runs += [p for p in folder.iterdir() if p.is_dir() and list(p.glob("rank-*.cali"))]
    return sorted(runs)


HALO3D = [p for d in VERSIONS for p in profiles_of(d)]   # the workload's runs, at each version folder's top
# Caliper 2.3.0's own MPI test program started with a ConfigManager config (no Adiak: no name, no jobsize)
CI_APP = "ci_test_mpi_before_cali"
CI = profiles_of(THIRD / "caliper-2.3.0" / "ci-mpi")
RUNS = HALO3D + CI
SPOT_FORMAT1 = THIRD / "caliper-2.3.0" / "spot-format1" / "ci-mpi-n2.spot.cali"


def cli(*args, dsn):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env={**os.environ, "COMMSCOPE_DB_URL": dsn})


def caliper_version(run: Path) -> str:
    return run.relative_to(THIRD).parts[0].removeprefix("caliper-")


def stdout_of(run: Path) -> str:
    """The workload's own stdout kept beside the profile."""
    out = run / "halo3d.out" if run.is_dir() else run.with_suffix(".out")
    return out.read_text()


# ---- references, by hand ------------------------------------------------------------------------------

def _records(run: Path) -> tuple[list[tuple[int, tuple, float, bool]], dict]:
    """(rank, call path, seconds, is an MPI function) per record with a time, and the globals. Ranks come from
    mpi.rank, or from the rank-N.cali name of a per-rank file; a json-split file's rows are resolved through its
    node table here."""
    out, globals_ = [], {}
    if run.suffix == ".json":
        doc = json.loads(run.read_text())
        cols = doc["columns"]
        def labels(i):
            names = []
            while i is not None:
                names.append(doc["nodes"][i]["label"])
                i = doc["nodes"][i].get("parent")
            return tuple(reversed(names))
        ti = next(i for i, c in enumerate(cols) if c in ("time", *TIME))
        for row in doc["data"]:
            if row[ti] is None:
                continue
            path = labels(row[cols.index("path")]) if row[cols.index("path")] is not None else ()
            if path == CALIPERS_OWN_PATH:   # Caliper's own MPI_Comm_dup (helpers.calipers_own)
                continue
            # Caliper 2.6-2.9's json-split has no mpi.function column: an MPI function is a node named by it
            is_mpi = (row[cols.index("mpi.function")] is not None if "mpi.function" in cols
                      else bool(path) and path[-1].startswith("MPI_"))
            out.append((int(row[cols.index("mpi.rank")]), path, float(row[ti]), is_mpi))
        return out, {k: v for k, v in doc.items() if k not in ("nodes", "columns", "column_metadata", "data")}
    files = sorted(run.glob("rank-*.cali")) if run.is_dir() else [run]
    for f in files:
        records, globals_ = read_caliper_contents(str(f))
        m = re.search(r"rank-(\d+)\.cali$", f.name)
        for r in records:
            t = next((float(r[a]) for a in TIME if a in r), None)
            if t is None or calipers_own(r, f):
                continue
            p = r.get("path") or []
            rank = int(r["mpi.rank"]) if "mpi.rank" in r else int(m.group(1))
            out.append((rank, tuple(p if isinstance(p, list) else [p]), t, "mpi.function" in r))
    return out, globals_


def rank_reference(run: Path) -> tuple[dict, dict, dict, dict]:
    """Per rank: total seconds (every record, the ones outside every region included) and MPI seconds; per call
    path: exclusive seconds per rank; the globals."""
    records, g = _records(run)
    total, mpi, excl = defaultdict(float), defaultdict(float), defaultdict(lambda: defaultdict(float))
    for rank, path, t, is_mpi in records:
        total[rank] += t
        if is_mpi:
            mpi[rank] += t
        if path:
            excl[path][rank] += t
    return dict(total), dict(mpi), {p: dict(v) for p, v in excl.items()}, g


# ---- the store -----------------------------------------------------------------------------------------

def _stored(dsn) -> dict:
    """'<version folder>/<profile name>' -> (runs row, run-window v_run_metrics row, {node path: node_metrics' exclusive min, mean, max
    and inclusive min, mean, max})."""
    with psycopg.connect(dsn) as conn:
        cur = conn.execute("SELECT id, source, app, ranks, caliper_version, metadata FROM runs")
        runs = {row[0]: dict(zip([d.name for d in cur.description], row)) for row in cur.fetchall()}
        cur = conn.execute("SELECT * FROM v_run_metrics WHERE \"window\" = 'run'")
        cols = [d.name for d in cur.description]
        windows = {d["run_id"]: d for d in (dict(zip(cols, row)) for row in cur.fetchall())}
        nodes = defaultdict(dict)
        for run_id, path, *values in conn.execute(
                "SELECT nm.run_id, n.path, nm.excl_min, nm.excl_avg, nm.excl_max, nm.incl_min, nm.incl_avg, nm.incl_max "
                "FROM node_metrics nm JOIN nodes n ON n.id = nm.node_id"):
            nodes[run_id][path] = tuple(values)
    return {"/".join(Path(r["source"]).parts[-2:]): (r, windows[i], nodes[i]) for i, r in runs.items()}


@pytest.fixture(scope="module")
def stored(server):
    """Every profile stored by the commands a user types: the workload's with no flags, Caliper's test program's
    with --app (it records no name); stored once in a fresh database for the module, whose tests only read it."""
    with fresh_database(server[0]) as dsn:
        r = cli("ingest", *map(str, HALO3D), dsn=dsn)
        assert r.returncode == 0, r.stderr
        r = cli("ingest", "--app", CI_APP, str(THIRD / "caliper-2.3.0" / "ci-mpi"), dsn=dsn)
        assert r.returncode == 0, r.stderr
        yield _stored(dsn)


def test_the_fixtures_are_what_the_readmes_say():
    """Each version folder holds profiles written by that Caliper release, and each run's stdout."""
    assert [d.name for d in VERSIONS] == ["caliper-2.3.0", "caliper-2.6.0", "caliper-2.9.0"]
    for run in RUNS + [SPOT_FORMAT1]:
        _, g = _records(run) if run != SPOT_FORMAT1 else read_caliper_contents(str(run))
        assert g["cali.caliper.version"] == caliper_version(run), run
    for run in HALO3D:
        assert "COMMSCOPE workload=halo3d" in stdout_of(run) and "VERIFY fields_vs_serial PASS" in stdout_of(run)
    assert len(HALO3D) == 13 and len(CI) == 3


@pytest.mark.parametrize("run", [r for r in RUNS if ".spot" not in r.name], ids=lambda r: str(r.relative_to(THIRD)))
def test_each_profile_stores_the_records_numbers(stored, run):
    """Run window: the slowest rank's time (Σ of all its records), the mean rank's MPI time and the MPI
    fraction (Σ over ranks of records carrying mpi.function over Σ of all); per node, exclusive time min/mean/max
    over ranks (a rank without a record at a path has 0 there), inclusive the same over each rank's subtree sums.
    Without MPI wrapping the MPI numbers are NULL."""
    total, mpi, excl, g = rank_reference(run)
    row, window, nodes = stored[f"{run.parent.name}/{run.name}"]
    if run in CI:   # no Adiak: the name is --app's, the rank count Caliper's own
        ranks = int(g["mpi.world.size"])
        assert row["app"] == CI_APP and row["metadata"]["ranks_source"] == "mpi.world.size" and "jobsize" not in g
    else:           # the workload's Adiak name and jobsize, and the ranks it printed
        ranks = int(re.search(r"^RANKS (\d+)$", stdout_of(run), re.M).group(1))
        assert row["app"] == "halo3d" and row["metadata"]["ranks_source"] == "jobsize" and g["jobsize"] in ("2", 2)
    assert ranks == 2 and sorted(total) == list(range(ranks)), run   # every rank left records
    assert row["ranks"] == ranks
    assert row["caliper_version"] == caliper_version(run)
    assert window["ranks_measured"] == ranks
    slowest = max(total, key=total.get)
    assert window["time_s"] == pytest.approx(total[slowest], rel=1e-9, abs=1e-12)
    if not mpi:
        # recorded without MPI functions among the records: MPI time was not measured, which is not 0
        for col in ("mpi_time_avg_s", "mpi_fraction_avg", "mpi_fraction_slowest"):
            assert window[col] is None, (run.name, col)
    else:
        assert window["mpi_time_avg_s"] == pytest.approx(sum(mpi.values()) / ranks, rel=1e-9, abs=1e-12)
        assert window["mpi_fraction_avg"] == pytest.approx(sum(mpi.values()) / sum(total.values()), rel=1e-9)
        assert window["mpi_fraction_slowest"] == pytest.approx(mpi.get(slowest, 0.0) / total[slowest], rel=1e-9)
    prefixes = {p[:i] for p in excl for i in range(1, len(p) + 1)}
    assert set(nodes) == {"/".join(p) for p in prefixes}
    for p in prefixes:
        ex = [excl.get(p, {}).get(r, 0.0) for r in range(ranks)]
        inc = [sum(v.get(r, 0.0) for q, v in excl.items() if q[:len(p)] == p) for r in range(ranks)]
        want = (min(ex), sum(ex) / ranks, max(ex), min(inc), sum(inc) / ranks, max(inc))
        assert nodes["/".join(p)] == pytest.approx(want, rel=1e-9, abs=1e-12), p


SPOT = [r for r in RUNS if ".spot" in r.name]


@pytest.mark.parametrize("run", SPOT, ids=lambda r: str(r.relative_to(THIRD)))
def test_each_spot_profile_stores_the_mean_rank(stored, run):
    """spot keeps statistics across ranks of each node's inclusive time (these releases write no exclusive time).
    The mean rank's time is Σ over the top-level nodes and the record outside every region of their across-rank
    sums, over the job's rank count; its MPI time the same over the nodes carrying mpi.function (leaves); per node,
    the inclusive min/mean/max are the record's own (spot's mean is over the ranks that reached the node), the
    exclusive mean is a parent's sum less its children's sums over the rank count (every rank reaches the parents
    here) and a leaf's own mean, and exclusive min/max are known only for leaves. The slowest rank is unknown; without
    profile.mpi in spot.options the MPI numbers are NULL."""
    records, g = read_caliper_contents(str(run))
    ranks = int(g["mpi.world.size"])
    by_path = {}
    for r in records:
        if SPOT_SUM in r and not calipers_own(r):
            p = r.get("path") or []
            by_path[tuple(p if isinstance(p, list) else [p])] = r
    total = sum(float(r[SPOT_SUM]) for p, r in by_path.items() if len(p) <= 1) / ranks
    mpi_nodes = [p for p, r in by_path.items() if "mpi.function" in r]
    assert not any(q[:len(p)] == p and q != p for p in mpi_nodes for q in by_path)   # MPI nodes are leaves
    mpi = sum(float(by_path[p][SPOT_SUM]) for p in mpi_nodes) / ranks
    row, window, nodes = stored[f"{run.parent.name}/{run.name}"]
    assert row["app"] == "halo3d" and row["ranks"] == ranks == 2 and g["jobsize"] == "2"
    assert row["metadata"]["ranks_source"] == "jobsize"
    assert row["caliper_version"] == caliper_version(run) and g["spot.format.version"] == "2"
    assert window["time_s"] is None and window["mpi_fraction_slowest"] is None
    if "profile.mpi" in g["spot.options"].split(","):
        assert mpi_nodes
        assert window["mpi_time_avg_s"] == pytest.approx(mpi, rel=1e-9, abs=1e-12)
        assert window["mpi_fraction_avg"] == pytest.approx(mpi / total, rel=1e-9)
    else:
        assert not mpi_nodes and window["mpi_time_avg_s"] is None and window["mpi_fraction_avg"] is None
    assert set(nodes) == {"/".join(p) for p in by_path if p}
    for p, r in by_path.items():
        if not p:
            continue
        kids = [q for q in by_path if len(q) == len(p) + 1 and q[:len(p)] == p]
        stat = {k: float(r[f"{k}#inclusive#sum#time.duration"]) for k in ("min", "avg", "max")}
        if kids:
            # every rank reached each node that has children here (spot's avg is over the ranks with the node)
            assert float(r[SPOT_SUM]) == pytest.approx(ranks * stat["avg"], abs=(ranks + 1) * 5e-7), p
            excl_mean = (float(r[SPOT_SUM]) - sum(float(by_path[q][SPOT_SUM]) for q in kids)) / ranks
        else:
            excl_mean = stat["avg"]   # a leaf, perhaps reached by some ranks only: its own mean over them
        ex_min, ex_avg, ex_max, in_min, in_avg, in_max = nodes["/".join(p)]
        assert (in_min, in_avg, in_max) == pytest.approx((stat["min"], stat["avg"], stat["max"]), rel=1e-9, abs=1e-12)
        # spot's avg is rounded to 6 decimals on its own, the sums likewise: half a microsecond each
        assert ex_avg == pytest.approx(excl_mean, abs=(len(kids) + 2) * 5e-7), p
        if kids:
            assert ex_min is None and ex_max is None, p
        else:
            assert (ex_min, ex_max) == pytest.approx((stat["min"], stat["max"]), rel=1e-9, abs=1e-12), p


def test_spot_format_1_is_refused_naming_the_file_the_version_and_what_is_missing(dsn):
    """Caliper 2.3-2.4's spot (format 1) keeps min/max/avg over ranks of inclusive time but no sum across ranks
    (caliper-reader's records show it), so the mean rank cannot be computed: refused with exit 2, naming the file,
    the Caliper version and the missing sum; nothing stored, also beside a good profile in the same command."""
    records, g = read_caliper_contents(str(SPOT_FORMAT1))
    assert g["spot.format.version"] == "1" and records
    assert all(SPOT_SUM not in r for r in records) and any("avg#inclusive#sum#time.duration" in r for r in records)
    good = THIRD / "caliper-2.6.0" / "halo3d-blocking-n2.spot-mpi.cali"
    r = cli("ingest", str(good), str(SPOT_FORMAT1), dsn=dsn)
    assert r.returncode == 2, r.stderr
    assert str(SPOT_FORMAT1) in r.stderr and "Caliper 2.3.0" in r.stderr and "format 1" in r.stderr
    assert "sum across ranks" in r.stderr and "nothing was stored" in r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
