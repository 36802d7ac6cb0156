"""The collectors' numbers equal what Hatchet computes on the same real files,
and the known upstream reader bug is handled. The exclusive/inclusive cross-check
covers every fixture with per-rank times (tests/data, its Ramble workspaces and
tests/thirdparty); a file Hatchet cannot read is skipped with Hatchet's reason."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import hatchet as ht
import pytest

from caliperreader import read_caliper_contents

from commscope.read import hatchet_io, measures, profiles
from commscope.read import records as records_mod
from helpers import CALIPERS_OWN_PATH

DATA = Path(__file__).parent / "data"
THIRD = Path(__file__).parent / "thirdparty"
RANK_FILE = re.compile(r"(?:^|\.)rank-(\d+)\.cali$")
WITH_RANK = ["halo3d-overlap-n2.runtime-profile.cali", "halo3d-overlap-n4.runtime-profile.cali",
             "halo3d-nonblocking-n2.comm-stats.cali", "halo3d-nonblocking-n4.comm-stats.cali",
             "halo3d-nonblocking-n2.caliper-2.12.cali"]


def node_path(node) -> tuple:
    return tuple(n.frame["name"] for n in node.path())


def hatchet_times(gf, rank_of_file=None) -> dict:
    """(call path, rank) -> exclusive time, from a Hatchet GraphFrame."""
    df = gf.dataframe.reset_index()
    out = {}
    for _, row in df.iterrows():
        rank = int(row["rank"]) if "rank" in df.columns else rank_of_file
        if node_path(row["node"]) != CALIPERS_OWN_PATH:   # Caliper's own MPI_Comm_dup (helpers.calipers_own)
            out[node_path(row["node"]), rank] = float(row["time"])
    return out


@pytest.mark.parametrize("name", WITH_RANK)
def test_upstream_reader_duplicates_roots_and_ours_does_not(name):
    raw = ht.GraphFrame.from_caliperreader(str(DATA / name))
    assert raw.dataframe.index.duplicated().any(), "upstream fixed the duplicate-root bug: drop the workaround"
    with pytest.raises(AttributeError):
        raw.update_inclusive_columns()
    gf = hatchet_io.read_cali(DATA / name)
    assert not gf.dataframe.index.duplicated().any()
    gf.update_inclusive_columns()  # crashed before
    # the dropped rows were all zeros
    assert gf.dataframe["time"].sum() == pytest.approx(raw.dataframe["time"].sum())


def _single_files() -> list:
    """Every single-file profile with per-rank records (runtime-profile, hatchet-region-profile and the like;
    not spot, which keeps no ranks, and not the message traces, which keep no time) in tests/data (Ramble
    workspaces included) and tests/thirdparty."""
    out = []
    for root in (DATA, THIRD):
        for f in sorted(root.rglob("*.cali")):
            if ".spot." in f.name or RANK_FILE.search(f.name) or f.parent.suffix in (".per-rank", ".msgtrace"):
                continue
            out.append(f)
    return out


def _per_rank_dirs() -> list:
    """Every directory of one file per rank (rank-N.cali, or Ramble's EXPERIMENT.rank-N.cali)."""
    return sorted({f.parent for root in (DATA, THIRD) for f in root.rglob("*.cali") if RANK_FILE.search(f.name)})


def _id(p: Path) -> str:
    return str(p.relative_to(DATA.parent))


def upstream_frame(path: Path):
    """GraphFrame.from_caliperreader as upstream gives it, with the duplicate-root quirk
    (/work/shared/notes/offline-toolchain.md) undone here: of each duplicated (node, rank) index, the
    rows beyond one are all-zero fillers, so the one row with time is kept. None, with the reason,
    when Hatchet cannot give per-node times for the file."""
    try:
        gf = ht.GraphFrame.from_caliperreader(str(path))
    except Exception as e:   # noqa: BLE001 - the reason is reported as the skip message
        return None, f"Hatchet cannot read it: {type(e).__name__}: {e}"
    df = gf.dataframe
    if "time" not in df.columns:
        kind = "a message trace, " if any("mpi.msg" in str(c) for c in df.columns) else ""
        return None, f"Hatchet finds no time metric in it ({kind}{len(df.columns)} columns, none named time)"
    dup = df.index.duplicated(keep=False)
    if dup.any():
        extra = df[dup].groupby(level=list(range(df.index.nlevels)))["time"].apply(lambda s: int((s != 0).sum()))
        assert (extra <= 1).all(), f"{path}: duplicated rows with time in more than one copy"
        df = df.assign(_t=df["time"].abs()).sort_values("_t", kind="stable").drop(columns="_t")
        df = df[~df.index.duplicated(keep="last")]
        gf.dataframe = df
    return gf, None


def exclusive_and_inclusive(gf, rank_of_file=None) -> tuple[dict, dict]:
    """(call path, rank) -> exclusive time and -> inclusive time (Hatchet's update_inclusive_columns)."""
    gf.update_inclusive_columns()
    df = gf.dataframe.reset_index()
    paths = {n: node_path(n) for n in df["node"].unique()}
    ranks = df["rank"].astype(int) if "rank" in df.columns else [rank_of_file] * len(df)
    keys = [(paths[n], r) for n, r in zip(df["node"], ranks)]
    # Caliper's own MPI_Comm_dup, a root of its own (helpers.calipers_own), is not the application's
    return tuple({k: v for k, v in zip(keys, df[col].astype(float)) if k[0] != CALIPERS_OWN_PATH}
                 for col in ("time", "time (inc)"))


def check_against_hatchet(prof, exclusive: dict, inclusive: dict, where: str) -> None:
    """commscope's per-rank exclusive times and its per-node inclusive mean/max over ranks equal Hatchet's."""
    # Hatchet zero-fills ranks where a node did not occur; commscope keeps which ranks have a record.
    ours = {(p, int(prof.rank_ids[c])): float(arr[c]) for p, arr in prof.excl.items()
            for c in prof.present[p].nonzero()[0]}
    assert ours, where
    for key, t in ours.items():
        assert exclusive.get(key, 0.0) == pytest.approx(t, abs=1e-12), (where, key)
    assert {k for k, v in exclusive.items() if v} == {k for k, v in ours.items() if v}, where
    by_node = defaultdict(dict)
    for (path, rank), t in inclusive.items():
        by_node[path][rank] = t
    ranks = len(prof.measured_ranks)
    stats = measures.node_stats(prof)
    assert {p for p, s in stats.items() if s.incl_max} == {p for p, v in by_node.items() if any(v.values())}, where
    for path, s in stats.items():
        vals = list(by_node[path].values()) + [0.0] * (ranks - len(by_node[path]))
        assert s.incl_avg == pytest.approx(sum(vals) / ranks, abs=1e-12), (where, path)
        assert s.incl_max == pytest.approx(max(vals), abs=1e-12), (where, path)


@pytest.mark.parametrize("path", _single_files(), ids=_id)
def test_exclusive_and_inclusive_times_equal_hatchet(path):
    gf, why = upstream_frame(path)
    if gf is None:
        pytest.skip(f"{_id(path)}: {why}")
    exclusive, inclusive = exclusive_and_inclusive(gf)
    check_against_hatchet(profiles.read_files([path]), exclusive, inclusive, _id(path))


@pytest.mark.parametrize("run", _per_rank_dirs(), ids=_id)
def test_per_rank_directories_equal_hatchet_file_by_file(run):
    """One file per rank, read by Hatchet one at a time (the rank is in the file name only): each rank's
    exclusive times, and the node's inclusive mean and max over the ranks, equal commscope's reading of
    the whole directory."""
    files = sorted(f for f in run.glob("*.cali") if RANK_FILE.search(f.name))
    exclusive, inclusive = {}, {}
    for f in files:
        gf, why = upstream_frame(f)
        if gf is None:
            pytest.skip(f"{_id(f)}: {why}")
        e, i = exclusive_and_inclusive(gf, int(RANK_FILE.search(f.name).group(1)))
        exclusive.update(e)
        inclusive.update(i)
    prof = profiles.read_files(files)
    assert len(prof.measured_ranks) == len(files)
    check_against_hatchet(prof, exclusive, inclusive, _id(run))


@pytest.mark.parametrize("name", WITH_RANK + ["halo3d-blocking-n2.per-rank", "halo3d-blocking-n4.per-rank"])
def test_mpi_fraction_equals_hatchet(name):
    """The run window (and the runs table's legacy columns, which are its numbers) against Hatchet's call
    tree plus the time outside every region, which Hatchet leaves out and caliper-reader gives as the
    records without a path. Nothing is left out by name (the workloads' verify region counts)."""
    path = DATA / name
    files = sorted(path.glob("rank-*.cali")) if path.is_dir() else [path]
    prof = profiles.read_files(files)
    total, mpi = defaultdict(float), defaultdict(float)
    for f in files:
        file_rank = int(f.stem.split("-")[1]) if f.stem.startswith("rank-") else None
        for (p, rank), t in hatchet_times(hatchet_io.read_cali(f), file_rank).items():
            total[rank] += t
            if p[-1].startswith("MPI_"):
                mpi[rank] += t
        records, _ = read_caliper_contents(str(f))
        for r in records:
            if "path" not in r and "sum#sum#time.duration" in r:   # time outside every region
                total[int(r.get("mpi.rank", file_rank))] += float(r["sum#sum#time.duration"])
    slowest = max(total, key=total.get)
    ours = records_mod.from_profile(prof, measures.measure_profile(prof, None)).summary
    assert ours["wall_time"] == pytest.approx(total[slowest])
    assert ours["mpi_fraction_avg"] == pytest.approx(sum(mpi.values()) / sum(total.values()))
    assert ours["mpi_fraction_slowest"] == pytest.approx(mpi[slowest] / total[slowest])


def test_per_rank_files_read_cleanly_in_hatchet_and_thicket():
    import thicket as th
    files = [str(f) for f in sorted((DATA / "halo3d-blocking-n4.per-rank").glob("rank-*.cali"))]
    tk = th.Thicket.from_caliperreader(files)
    assert not tk.dataframe.index.duplicated().any()
    assert len(tk.profile) == 4


def test_spot_average_exclusive_time_equals_hatchet():
    name = DATA / "stencil2d-row-naive-n2.spot.cali"
    prof = profiles.read_files([name])
    gf = ht.GraphFrame.from_caliperreader(str(name))
    # Hatchet labels spot's inclusive columns as exclusive; its "(exc)" columns are the real exclusive ones.
    exc_col = next(c for c in gf.dataframe.columns if "Avg" in str(c) and "exc" in str(c))
    theirs = {node_path(n): float(v) for n, v in gf.dataframe[exc_col].items()}
    for path, s in measures.node_stats(prof).items():
        if path in theirs:
            assert s.excl_avg == pytest.approx(theirs[path], rel=1e-12, abs=1e-15), path


@pytest.mark.parametrize("name", ["stencil2d-cart-n2.json-split.json", "stencil2d-cart-n4.json-split.json"])
def test_hatchet_from_caliper_breaks_on_new_json_and_our_reader_keeps_its_numbers(name):
    """Known upstream bug: GraphFrame.from_caliper on Caliper >= 2.10 json-split
    loses the parent links in the dataframe (every node's path is itself) and
    update_inclusive_columns() fails. commscope reads json-split itself; its
    exclusive times are Hatchet's, row for row, with the real call paths."""
    gf = ht.GraphFrame.from_caliper(str(DATA / name))
    df = gf.dataframe.reset_index()
    flat = sum(1 for n in df["node"] if len(n.path()) == 1)
    broken_inclusive = False
    try:
        gf.update_inclusive_columns()
    except KeyError:
        broken_inclusive = True
    assert flat > len({n.frame["name"] for n in df["node"]}) // 2 or broken_inclusive, \
        "upstream fixed from_caliper on new json: compare paths directly"
    prof = profiles.read_files([DATA / name])
    # Caliper's own MPI_Comm_dup (helpers.calipers_own) is not the application's
    theirs = sorted((n.frame["name"], int(r), round(float(t), 12)) for n, r, t in zip(df["node"], df["rank"], df["time"])
                    if float(t) and not (n.frame["name"] == CALIPERS_OWN_PATH[0] and not n.parents))
    ours = sorted((p[-1], int(prof.rank_ids[c]), round(float(arr[c]), 12)) for p, arr in prof.excl.items()
                  for c in prof.present[p].nonzero()[0] if arr[c])
    assert ours == theirs
    assert any(len(p) >= 4 for p in prof.excl)  # main/timestep/halo_exchange/halo/...: real paths
