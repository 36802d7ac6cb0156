"""The committed Caliper fixtures (tests/data, see its README) are real
profiles of these workloads: readable with caliper-reader, carrying the
regions, MPI functions and Adiak metadata the workloads promise, and
consistent with the FOM lines the same runs printed."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import caliperreader
import pytest

import suite
from helpers import matrix, rank_of, read, regions

DATA = Path(__file__).parent / "data"


def fixture_runs():
    """(profile files, the run's parsed stdout) for every fixture."""
    runs = []
    for out in sorted(DATA.glob("*.out")):
        stem = out.name[: -len(".out")]
        files = [p for p in (DATA / f"{stem}.cali", DATA / f"{stem}.json") if p.exists()]
        runs.append((stem, files, suite.parse_output(out.read_text())))
    for d in sorted(DATA.glob("*.per-rank")):
        out = next(d.glob("*.out"))
        runs.append((d.name, sorted(d.glob("rank-*.cali")), suite.parse_output(out.read_text())))
    return runs


RUNS = fixture_runs()
CALI_RUNS = [r for r in RUNS if r[1] and r[1][0].suffix == ".cali"]

EXPECTED_MPI = {
    "overlap": {"MPI_Isend", "MPI_Irecv", "MPI_Waitall"},
    "nonblocking": {"MPI_Isend", "MPI_Irecv", "MPI_Waitall"},
    "blocking": {"MPI_Sendrecv"},
    "ssend": {"MPI_Ssend", "MPI_Recv"},
    "direct": {"MPI_Allreduce", "MPI_Isend", "MPI_Irecv", "MPI_Waitall"},  # cgsolve
    "two-phase": {"MPI_Gatherv", "MPI_Scatterv", "MPI_File_write_at", "MPI_File_read_at"},  # pio
    "collective": {"MPI_File_write_all", "MPI_File_read_all"},  # pio through ROMIO, with MPI calls nested in these
}
# Regions every profile of a workload must show (workloads/README.md).
EXPECTED_REGIONS = {"pio": {"main", "setup", "timestep", "write", "read", "verify"}}
HALO_REGIONS = {"main", "setup", "timestep", "halo_exchange", "verify"}


def test_every_fixture_has_its_profile_and_passed():
    assert len(RUNS) >= 10
    for stem, files, out in RUNS:
        assert files, f"{stem}: no profile beside its .out"
        assert out.verify and all(s == "PASS" for s, _ in out.verify.values()), (stem, out.verify)
        assert out.ranks in (2, 4), stem


@pytest.mark.parametrize("stem,files,out", CALI_RUNS, ids=[r[0] for r in CALI_RUNS])
def test_profile_carries_regions_mpi_and_adiak(stem, files, out):
    variant = out.params.get("variant") or out.params.get("send")
    seen_regions, seen_mpi, ranks = set(), set(), set()
    for f in files:
        records, g = read(f)
        # Adiak metadata from the workload, and Caliper's own.
        assert g["workload"] == out.workload
        assert g["variant"] == variant
        assert int(g["ranks"]) == int(g["jobsize"]) == out.ranks
        assert g["global_size"] == out.params["global"]
        # cgsolve's Adiak iterations are the CG iterations done; --iters is its limit.
        done = out.verify["iterations"][1] if out.workload == "cgsolve" else out.params["iters"]
        assert int(g["iterations"]) == int(done)
        assert g["cali.caliper.version"].startswith("2.")
        assert g["mpi_library_vendor"] == "Open MPI"
        for rec in records:
            seen_regions.update(regions(rec))
            if "mpi.function" in rec:
                fn = rec["mpi.function"]
                seen_mpi.update(fn if isinstance(fn, list) else [fn])   # nested calls list their callers too
            if rank_of(rec, f) is not None:
                ranks.add(rank_of(rec, f))
    assert EXPECTED_REGIONS.get(out.workload, HALO_REGIONS) <= seen_regions, seen_regions
    if "nompi" in stem:
        assert not seen_mpi, "recorded without profile.mpi, yet MPI calls were wrapped"   # the edge case it is for
    else:
        assert EXPECTED_MPI[variant] <= seen_mpi, seen_mpi
    if "spot" not in stem:  # spot aggregates across ranks; the others keep them
        assert ranks == set(range(out.ranks)), ranks


HALO_RUNS = [r for r in CALI_RUNS if "spot" not in r[0] and r[2].workload != "pio"]


@pytest.mark.parametrize("stem,files,out", HALO_RUNS, ids=[r[0] for r in HALO_RUNS])
def test_halo_exchange_time_matches_the_workload_timer(stem, files, out):
    """Caliper's inclusive halo_exchange time per rank is what the workload's
    own timer measured around the same code: comm_time, or halo_time for
    cgsolve, whose comm_time also counts its reductions."""
    per_rank = defaultdict(float)
    for f in files:
        for rec in read(f)[0]:
            path = regions(rec)
            if "halo_exchange" in path and "timestep" in path:
                per_rank[rank_of(rec, f)] += float(rec["sum#sum#time.duration"])
    assert len(per_rank) == out.ranks
    avg = sum(per_rank.values()) / out.ranks
    timer = "halo_time" if out.workload == "cgsolve" else "comm_time"
    for mine, cali in ((out.foms[f"{timer}_avg"][0], avg), (out.foms[f"{timer}_max"][0], max(per_rank.values()))):
        assert abs(cali - mine) <= 0.1 * mine + 1e-4, (stem, mine, cali)


def test_per_rank_files_cover_every_rank_and_name_it_only_in_the_file_name():
    dirs = list(DATA.glob("*.per-rank"))
    assert dirs
    for d in dirs:
        files = sorted(d.glob("rank-*.cali"))
        records, g = read(files[0])
        assert [int(f.stem.split("-")[1]) for f in files] == list(range(int(g["mpi.world.size"])))
        assert g["opts:use.mpi"] == "false"
        assert not any("mpi.rank" in r for f in files for r in read(f)[0])


def test_comm_stats_count_the_halo_messages():
    for f in DATA.glob("*.comm-stats.cali"):
        out = suite.parse_output(f.with_suffix(".out").read_text())
        sends = sum(int(r.get("sum#sum#total.send.count", 0)) for r in read(f)[0] if r.get("comm.region") == "halo")
        assert sends > 0, f
        # Each rank sends one message per neighbour face per exchange; the
        # profile counts them all, including the initial ghost fill.
        iters = int(out.params["iters"])
        assert sends >= 2 * iters * (out.ranks - 1), (f, sends)


def test_message_statistics_are_recorded():
    for f in DATA.glob("*.runtime-profile.cali"):
        records = read(f)[0]
        sent = sum(int(r.get("sum#mmc.send", 0)) for r in records if r.get("mpi.function") == "MPI_Isend")
        assert sent > 0, f


def test_spot_profile_aggregates_min_max_avg():
    for f in DATA.glob("*.spot.cali"):
        records, g = read(f)
        timed = [r for r in records if "max#inclusive#sum#time.duration" in r]
        assert timed, f
        for r in timed:
            lo, avg, hi = (float(r[f"{k}#inclusive#sum#time.duration"]) for k in ("min", "avg", "max"))
            assert lo <= avg * (1 + 1e-9) and avg <= hi * (1 + 1e-9), r


def test_json_split_profile_names_the_call_tree():
    for f in DATA.glob("*.json-split.json"):
        doc = json.loads(f.read_text())
        labels = {n["label"] for n in doc["nodes"]}
        assert {"main", "timestep", "halo_exchange", "compute"} <= labels
        assert doc["workload"] == "stencil2d" and doc["columns"][:2] == ["Node order", "mpi.rank"]
        ranks = {row[doc["columns"].index("mpi.rank")] for row in doc["data"]}
        assert ranks == set(range(int(doc["jobsize"])))


def test_older_caliper_fixture_is_present():
    versions = {read(f)[1]["cali.caliper.version"] for f in DATA.glob("*.cali")}
    assert any(v.startswith("2.12") for v in versions) and any(v.startswith("2.14") for v in versions), versions


@pytest.mark.parametrize("directory", sorted(DATA.glob("commgraph-*.msgtrace")), ids=lambda p: p.name)
def test_message_trace_matrix_equals_commgraph_ground_truth(directory):
    out = suite.parse_output((directory / "commgraph.out").read_text())
    cells = matrix(directory)
    assert len({src for src, _ in cells}) == out.ranks
    for line in out.rank_lines:
        rank = int(line["rank"])
        sent = [v for (src, dst), v in cells.items() if src == rank and dst >= 0]
        assert sum(m for m, _ in sent) == int(float(line["msgs_sent"])), line
        assert sum(b for _, b in sent) == int(float(line["bytes_sent"])), line
        recv = sum(b for (src, dst), (_, b) in cells.items() if dst == rank)
        assert recv == int(float(line["bytes_recv"])), line
    assert sum(b for _, b in cells.values()) == int(out.verify["traffic"][1])


def test_message_trace_shows_proc_null_as_minus_two():
    directory = DATA / "halo3d-blocking-n4.msgtrace"
    out = suite.parse_output((directory / "halo3d.out").read_text())
    cells = matrix(directory)
    null = {k: v for k, v in cells.items() if k[1] == -2}
    real = {k: v for k, v in cells.items() if k[1] >= 0}
    # Every rank of a 2x2x1 grid has one boundary side per split axis with
    # no neighbour: blocking Sendrecv sends 0 bytes to MPI_PROC_NULL there.
    assert {src for src, _ in null} == set(range(4)) and all(b == 0 for _, b in null.values())
    steps = 2 * int(out.params["iters"]) + 1  # two phases per step plus the initial ghost fill
    assert all(m == steps for m, _ in real.values()), real
    assert len(real) == 8  # two neighbours per rank



def test_fast_record_splitter_equals_caliper_reader_on_every_fixture_line():
    """caliper.split_record must give exactly what caliper-reader's own splitter gives."""
    from caliperreader.caliperstreamreader import _read_cali_record

    from commscope.read.caliper import read_caliper_contents, split_record
    files = sorted(DATA.rglob("*.cali"))
    assert len(files) >= 10
    lines = 0
    for f in files:
        assert read_caliper_contents(str(f)) == caliperreader.read_caliper_contents(str(f)), f
        for line in f.read_text().splitlines():
            assert split_record(line) == _read_cali_record(line), (f, line)
            lines += 1
    # escaped separators, backslashes and newlines, a private-use character, trailing empty values
    for line in ["__rec=ctx,data=", "a=1,,b=2", "a=1=2=", r"x=a\,b,y=1", r"n=a\nb", "k", r"x=a\\,b=1",
                 r"x=a\=b=c\,", r"x=\\\\=\q,y", r"p=C:\\dir\\f,z=\n", "x=a\ue001\\,b", r"x=a\\=", r"x=\,"]:
        assert split_record(line) == _read_cali_record(line), line
    assert lines > 1000


def test_debug_barriers_show_in_the_cgsolve_profiles():
    """The cgsolve fixtures differ only by --debug-barriers: the same CG
    iterations and results, and MPI_Barrier calls in a debug_barrier region
    (one per reduction and one per halo exchange) only in the second."""
    plain, barriers = (DATA / f"cgsolve-direct{b}-n4.mpi-profile.cali" for b in ("", "-barriers"))
    outs = [suite.parse_output(f.with_suffix(".out").read_text()) for f in (plain, barriers)]
    assert outs[0].verify == outs[1].verify
    iters = int(outs[0].verify["iterations"][1])

    def barrier_calls(f):
        calls = defaultdict(int)
        for r in read(f)[0]:
            if r.get("mpi.function") == "MPI_Barrier" and "debug_barrier" in regions(r):
                calls[int(r["mpi.rank"])] += int(r["sum#rc.count"])
        return calls
    assert not barrier_calls(plain)
    got = barrier_calls(barriers)
    # Per iteration: one halo exchange and two reductions; plus the first r.r.
    assert got == {rank: 3 * iters + 1 for rank in range(4)}, got


def test_pio_profile_shows_the_two_phase_roots_doing_the_io():
    f = DATA / "pio-two-phase-n4.mpi-profile.cali"
    out = suite.parse_output(f.with_suffix(".out").read_text())
    writes = defaultdict(int)
    for r in read(f)[0]:
        if r.get("mpi.function") == "MPI_File_write_at":
            writes[int(r["mpi.rank"])] += int(r["sum#rc.count"])
    # Groups {0,1} and {2,3}: only ranks 0 and 2 write, once per run per round.
    assert set(writes) == {0, 2}, writes
    assert out.params["writers"] == "2" and int(out.params["iters"]) == 2
    assert all(n >= 2 for n in writes.values()), writes
