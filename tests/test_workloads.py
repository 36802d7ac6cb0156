"""Every workload variant at 1, 2 and 4 ranks on every MPI stack: each run
verifies against its serial reference, and the VERIFY values agree across
variants, rank counts and stacks."""
from __future__ import annotations

import math

import pytest

import suite
from conftest import STACK_NAMES, stack_or_skip

RANKS = (1, 2, 4)
WORKLOADS = ("halo3d", "stencil2d", "commgraph")
LIBRARY_NAME = {"openmpi": "Open MPI", "mpich": "MPICH", "impi": "Intel(R) MPI"}
_runs: dict[str, dict[str, list]] = {w: {} for w in WORKLOADS}


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_case_verifies_on_stack(built, workload):
    stack, bdir = built
    runs = [suite.run(stack, bdir, w, args, n, case)
            for w, case, args in suite.MATRIX if w == workload for n in RANKS]
    problems = [f"{r.label()}: {p}" for r in runs for p in suite.problems(r)]
    problems += suite.disagreements(runs)
    # The binary must have been built and run by this stack, not by whatever
    # mpicc or mpirun came first on PATH.
    problems += [f"{r.label()}: MPI_LIBRARY {r.out.mpi_library!r}" for r in runs
                 if LIBRARY_NAME[stack.family] not in r.out.mpi_library]
    assert not problems, "\n".join(problems)
    _runs[workload][stack.name] = runs


@pytest.mark.parametrize("workload", WORKLOADS)
def test_verify_agrees_across_stacks(workload):
    for name in STACK_NAMES:
        stack_or_skip(name)
    missing = [n for n in STACK_NAMES if n not in _runs[workload]]
    if missing:
        pytest.fail(f"no verified runs of {workload} on {', '.join(missing)}; see test_every_case_verifies_on_stack")
    runs = [r for rs in _runs[workload].values() for r in rs]
    assert not suite.disagreements(runs)
    if workload == "halo3d":
        # The energy is a floating-point reduction whose order changes with
        # the rank count, so it agrees to a tolerance, not bit for bit.
        energies = [float(r.out.verify["energy"][1]) for r in runs]
        assert max(energies) - min(energies) <= 1e-12 * abs(energies[0]), energies
    if workload == "commgraph":
        # Traffic depends on the graph, so it must agree per pattern and size.
        by_case: dict = {}
        for r in runs:
            by_case.setdefault((r.case, r.ranks), set()).add(r.out.verify["traffic"][1])
        assert all(len(v) == 1 for v in by_case.values()), by_case


def _first_built():
    stack = stack_or_skip("debian-openmpi4")
    return stack, suite.build(stack)


def test_halo3d_weak_scaling_keeps_the_per_rank_grid():
    stack, bdir = _first_built()
    for n, grid in ((1, "1,1,1"), (2, "2,1,1"), (4, "2,2,1")):
        r = suite.run(stack, bdir, "halo3d", ["--local", "6,5,4", "--iters", "3", "--pml-width", "1"], n)
        assert not suite.problems(r), suite.problems(r)
        dims = [int(x) for x in grid.split(",")]
        assert r.out.params["process_grid"] == grid
        assert r.out.params["global"] == ",".join(str(a * b) for a, b in zip((6, 5, 4), dims))


def test_halo3d_reordered_cartesian_grid_still_verifies():
    stack, bdir = _first_built()
    plain = suite.run(stack, bdir, "halo3d", suite.HALO3D, 4)
    for variant in ("blocking", "rma"):
        r = suite.run(stack, bdir, "halo3d", suite.HALO3D + ["--reorder", "--variant", variant], 4)
        assert not suite.problems(r), suite.problems(r)
        assert r.out.params["reorder"] == "on"
        assert r.out.verify["checksum"] == plain.out.verify["checksum"]


def test_halo3d_overlap_variants_report_their_exchange():
    """Each variant moves the same halo bytes; only the timing may differ."""
    stack, bdir = _first_built()
    volumes = {}
    for variant in ("blocking", "nonblocking", "overlap", "rma"):
        r = suite.run(stack, bdir, "halo3d", suite.HALO3D + ["--variant", variant], 2)
        assert not suite.problems(r)
        volumes[variant] = r.out.foms["halo_bytes_per_iter_avg"][0]
        assert r.out.foms["comm_time_max"][0] >= r.out.foms["comm_time_avg"][0]
    assert len(set(volumes.values())) == 1 and volumes["blocking"] > 0, volumes


def test_commgraph_rank_map_changes_placement_not_traffic(tmp_path):
    stack, bdir = _first_built()
    args = ["--pattern", "random-sparse", "--iters", "2", "--large-bytes", "4096"]
    ident = suite.run(stack, bdir, "commgraph", args, 4)
    rmap = tmp_path / "reverse.map"
    rmap.write_text("# world rank -> application rank\n3\n2\n1\n0\n")
    mapped = suite.run(stack, bdir, "commgraph", args + ["--rank-map", str(rmap)], 4)
    for r in (ident, mapped):
        assert not suite.problems(r), suite.problems(r)
        assert len(r.out.rank_lines) == 4
        # Per-rank received bytes add up to the graph's traffic.
        recv = sum(float(x["bytes_recv"]) for x in r.out.rank_lines)
        assert recv == float(r.out.verify["traffic"][1])
        # One host here, so nothing crosses a node boundary.
        assert r.out.foms["internode_bytes_per_iter"][0] == 0
    assert [x["world"] for x in ident.out.rank_lines] == ["0", "1", "2", "3"]
    assert [x["world"] for x in mapped.out.rank_lines] == ["3", "2", "1", "0"]
    assert ident.out.verify["traffic"] == mapped.out.verify["traffic"]
    # Application rank r sends the same bytes wherever it is placed.
    assert [x["bytes_sent"] for x in ident.out.rank_lines] == [x["bytes_sent"] for x in mapped.out.rank_lines]


@pytest.mark.parametrize("workload,args", [
    ("halo3d", suite.HALO3D + ["--variant", "overlap"]),
    ("stencil2d", suite.STENCIL2D + ["--decomp", "cart"]),
])
def test_verification_catches_a_dropped_halo_face(tmp_path, workload, args):
    """A build that skips one halo face must FAIL its VERIFY: the check can fail."""
    stack = stack_or_skip("debian-openmpi4")
    good = suite.run(stack, suite.build(stack), workload, args, 2)
    bdir = suite.build(stack, build_dir=tmp_path / "faulty", extra=["-DCMAKE_C_FLAGS=-DCOMMSCOPE_DROP_HALO_FACE"])
    bad = suite.run(stack, bdir, workload, args, 2)
    assert bad.returncode == 0
    assert bad.out.verify["checksum"][0] == "FAIL"
    assert bad.out.verify["checksum"][1] != good.out.verify["checksum"][1]
    # A single rank has no halo to drop and still verifies.
    assert suite.run(stack, bdir, workload, args, 1).out.verify["checksum"][0] == "PASS"
