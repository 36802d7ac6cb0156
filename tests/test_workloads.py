"""Every workload variant on every MPI stack: each run verifies against its
serial reference, and the VERIFY values agree across variants, rank counts and
stacks. One stack per MPI family runs every variant at 1, 2 and 4 ranks; the
family's other stack runs every variant at 4 ranks and each workload's first
variant at 1 and 2 (matrix_runs says why that suffices)."""
from __future__ import annotations

from pathlib import Path

import pytest

import suite
from conftest import STACK_NAMES, built_once, competing_tasks, stack_or_skip

RANKS = (1, 2, 4)
WORKLOADS = ("halo3d", "stencil2d", "commgraph", "collsweep", "cgsolve", "pio")
LIBRARY_NAME = {"openmpi": "Open MPI", "mpich": "MPICH", "impi": "Intel(R) MPI"}
_runs: dict[str, dict[str, list]] = {w: {} for w in WORKLOADS}
# The stack of each MPI family that runs the whole matrix (every variant at every rank count).
FULL_MATRIX_STACKS = ("debian-openmpi4", "debian-mpich4", "pypi-impi2021")


def matrix_runs(stack_name: str, workload: str) -> list[tuple[str, list[str], int]]:
    """(case, arguments, ranks) of the workload's matrix on a stack. A stack of FULL_MATRIX_STACKS runs every
    case at 1, 2 and 4 ranks. The other stack of its family (another version of the same library and launcher)
    runs every case at 4 ranks, where each case's whole exchange runs (interior and edge ranks, both dimensions
    of a 2x2 grid, more than one I/O group, collectives over a tree), and the first case at 1 and 2 ranks, so the
    library and launcher are still proven at every rank count and every case still agrees across all five stacks.
    The cases' behaviour at 1 and 2 ranks is the workloads' own code, the same source proven on the family's
    full stack."""
    cases = [(case, args) for w, case, args in suite.MATRIX if w == workload]
    if stack_name in FULL_MATRIX_STACKS:
        return [(case, args, n) for case, args in cases for n in RANKS]
    first_case, first_args = cases[0]
    return [(first_case, first_args, n) for n in RANKS if n < 4] + [(case, args, 4) for case, args in cases]


def test_every_family_has_a_stack_running_the_full_matrix():
    """The reduced matrix is only sound beside a full one of the same MPI family."""
    families = {s.name: s.family for s in suite.mpi_stacks.catalog()}
    assert set(FULL_MATRIX_STACKS) <= set(families)
    assert {families[n] for n in FULL_MATRIX_STACKS} == set(families.values()) == set(LIBRARY_NAME)
    for name in families:
        for workload in WORKLOADS:
            got = matrix_runs(name, workload)
            assert {c for c, _a, _n in got} == {c for w, c, _a in suite.MATRIX if w == workload}, (name, workload)
            assert {n for _c, _a, n in got} == set(RANKS), (name, workload)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_case_verifies_on_stack(built, workload):
    stack, bdir = built
    suite.scratch_dir()
    runs = [suite.run(stack, bdir, workload, args, n, case, env=suite.case_env(stack.family, workload, case))
            for case, args, n in matrix_runs(stack.name, workload)]
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
    if workload == "cgsolve":
        # The iteration count is exact (AGREE). The true residual and the sum
        # of the solution depend on the reduction order, pipelined CG rounds
        # differently again: they agree to relative 1e-5 and 1e-9.
        res = [float(r.out.verify["residual"][1]) for r in runs]
        sums = [float(r.out.verify["solution_sum"][1]) for r in runs]
        assert max(res) - min(res) <= 1e-5 * max(res), res
        assert max(sums) - min(sums) <= 1e-9 * max(sums), sums
        # --debug-barriers changes no arithmetic: every VERIFY value is
        # bitwise the same as without it, per stack, method and rank count.
        plain = {(r.stack, r.case, r.ranks): r.out.verify for r in runs if not r.case.endswith("-barriers")}
        for r in runs:
            if r.case.endswith("-barriers"):
                assert r.out.verify == plain[r.stack, r.case[: -len("-barriers")], r.ranks], r.label()
                assert r.out.foms["barrier_time_max"][0] > 0, r.label()
            else:
                assert r.out.foms["barrier_time_max"][0] == 0, r.label()
    if workload == "pio":
        sizes = {r.out.verify["file_size"][1] for r in runs}
        assert sizes == {str(21 * 17 * 12 * 8)}, sizes
    if workload == "commgraph":
        # Traffic depends on the graph, so it must agree per pattern and size.
        by_case: dict = {}
        for r in runs:
            by_case.setdefault((r.case, r.ranks), set()).add(r.out.verify["traffic"][1])
        assert all(len(v) == 1 for v in by_case.values()), by_case


def _first_built():
    return built_once("debian-openmpi4")


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


@pytest.fixture(scope="module")
def dropped_halo_face_build(tmp_path_factory):
    """The workloads built for Debian Open MPI 4.1 with one halo face never exchanged
    (-DCOMMSCOPE_DROP_HALO_FACE), once for the module: halo3d and stencil2d both read it."""
    stack = stack_or_skip("debian-openmpi4")
    return suite.build(stack, build_dir=tmp_path_factory.mktemp("faulty") / "build",
                       extra=["-DCMAKE_C_FLAGS=-DCOMMSCOPE_DROP_HALO_FACE"])


@pytest.mark.parametrize("workload,args", [
    ("halo3d", suite.HALO3D + ["--variant", "overlap"]),
    ("stencil2d", suite.STENCIL2D + ["--decomp", "cart"]),
])
def test_verification_catches_a_dropped_halo_face(dropped_halo_face_build, workload, args):
    """A build that skips one halo face must FAIL its VERIFY: the check can fail."""
    stack, built = built_once("debian-openmpi4")
    good = suite.run(stack, built, workload, args, 2)
    bdir = dropped_halo_face_build
    bad = suite.run(stack, bdir, workload, args, 2)
    assert bad.returncode == 0
    assert bad.out.verify["checksum"][0] == "FAIL"
    assert bad.out.verify["checksum"][1] != good.out.verify["checksum"][1]
    # A single rank has no halo to drop and still verifies.
    assert suite.run(stack, bdir, workload, args, 1).out.verify["checksum"][0] == "PASS"


# ---- collsweep --------------------------------------------------------------

def test_collsweep_sizes_range_list_and_iteration_cut():
    stack, bdir = _first_built()
    r = suite.run(stack, bdir, "collsweep", ["--coll", "Allreduce,bcast", "--sizes", "8:64", "--iters", "30",
                                             "--warmup", "1"], 2)
    assert not suite.problems(r), suite.problems(r)
    names = {n for n in r.out.foms if n.endswith("_t_avg")}
    assert names == {f"{c}_{s}B_t_avg" for c in ("allreduce", "bcast") for s in (8, 16, 32, 64)}, names
    for c in ("allreduce", "bcast"):
        for s in (8, 16, 32, 64):
            lo, avg, hi = (r.out.foms[f"{c}_{s}B_t_{k}"][0] for k in ("min", "avg", "max"))
            assert 0 < lo <= avg <= hi, (c, s, lo, avg, hi)
            assert r.out.foms[f"{c}_{s}B_busbw"][1] == "MB/s"
    # 30 timed + 10% (at least --warmup 1) warm-up calls per size, plus one
    # untimed call checked in full, each checked.
    assert r.out.params["iterations.allreduce_8B"] == "30 timed, 3 warm-up"
    assert r.out.verify["checked_calls"][1] == str(2 * 4 * 34)
    # IMB's cut: a 64 KiB size with --volume 1 MiB runs 16 timed calls.
    cut = suite.run(stack, bdir, "collsweep", ["--coll", "alltoall", "--sizes", "8,64K", "--volume", "1048576"], 2)
    assert not suite.problems(cut), suite.problems(cut)
    assert cut.out.params["iterations.alltoall_65536B"] == "16 timed, 10 warm-up"
    assert cut.out.params["iterations.alltoall_8B"] == "1000 timed, 100 warm-up"
    # Barrier is timed once, without a size or a bandwidth.
    bar = suite.run(stack, bdir, "collsweep", ["--coll", "barrier", "--iters", "50"], 2)
    assert set(bar.out.foms) >= {"barrier_t_min", "barrier_t_avg", "barrier_t_max"}
    assert not any("busbw" in n for n in bar.out.foms)


def test_collsweep_header_echoes_controls_from_environment():
    stack, bdir = _first_built()
    env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_bcast_algorithm": "6",
           "MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial", "I_MPI_ADJUST_BCAST": "1", "UNRELATED_VARIABLE": "x"}
    r = suite.run(stack, bdir, "collsweep", ["--coll", "bcast", "--sizes", "8", "--iters", "20"], 2, env=env)
    assert not suite.problems(r), suite.problems(r)
    for name in ("OMPI_MCA_coll_tuned_bcast_algorithm", "MPIR_CVAR_BCAST_INTRA_ALGORITHM", "I_MPI_ADJUST_BCAST"):
        assert r.out.params[f"env.{name}"] == env[name]
    assert "env.UNRELATED_VARIABLE" not in r.out.params
    assert int(r.out.params["algorithm_controls"]) >= 4
    # Open MPI's own value, read back through MPI_T, with its enum name.
    assert r.out.params["mpit.coll_tuned_bcast_algorithm"] == "6 binomial"
    assert r.out.params["mpit.coll_tuned_use_dynamic_rules"].startswith("1")
    plain = suite.run(stack, bdir, "collsweep", ["--coll", "bcast", "--sizes", "8", "--iters", "20"], 2)
    assert plain.out.params["mpit.coll_tuned_bcast_algorithm"] == "0 ignore"


# The forcing reaches the collective that runs, shown by algorithms that
# cannot run: Open MPI's two_proc barrier on 4 ranks returns an error, and
# MPICH with FALLBACK=error refuses reduce_scatter_allgather for an 8-byte
# Allreduce on 4 ranks (count below the power of two) instead of quietly
# running another one. The same control with a valid algorithm passes.
@pytest.mark.parametrize("name,env,args", [
    ("debian-openmpi4", {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_barrier_algorithm": "5"},
     ["--coll", "barrier", "--iters", "20"]),
    ("pypi-openmpi5", {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_barrier_algorithm": "5"},
     ["--coll", "barrier", "--iters", "20"]),
    ("debian-mpich4", {"MPIR_CVAR_COLLECTIVE_FALLBACK": "error",
                       "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "reduce_scatter_allgather"},
     ["--coll", "allreduce", "--sizes", "8", "--iters", "20"]),
])
def test_collsweep_forced_algorithm_is_the_one_that_runs(name, env, args):
    stack, bdir = built_once(name)
    two = suite.run(stack, bdir, "collsweep", args, 2, env=env)
    four = suite.run(stack, bdir, "collsweep", args, 4, env=env, timeout=60)
    if stack.family == "openmpi":
        assert not suite.problems(two), suite.problems(two)  # two_proc is valid on 2 ranks
    assert four.returncode != 0 and "VERIFY" not in four.stdout, four.stdout[-2000:]


def test_collsweep_verification_catches_a_wrong_reduction(tmp_path):
    stack = stack_or_skip("debian-openmpi4")
    bdir = suite.build(stack, build_dir=tmp_path / "faulty", extra=["-DCMAKE_C_FLAGS=-DCOMMSCOPE_CORRUPT_REDUCTION"])
    for datatype in ("double", "float"):
        r = suite.run(stack, bdir, "collsweep", ["--coll", "allreduce,bcast", "--sizes", "8,64", "--iters", "10",
                                                 "--datatype", datatype], 2)
        assert r.returncode == 0
        assert r.out.verify["wrong_elements"][0] == "FAIL" and int(r.out.verify["wrong_elements"][1]) > 0, datatype


# IMB-MPI1's way (float reductions, buffers from MPI_Alloc_mem), on every
# stack and on 3 ranks, where Allgather and Alltoall blocks are not a power of
# two apart: every collective still verifies, and the header says how it ran.
@pytest.mark.parametrize("name", STACK_NAMES)
def test_collsweep_float_payload_in_mpi_alloc_mem_verifies(name):
    stack, bdir = built_once(name)
    r = suite.run(stack, bdir, "collsweep", ["--sizes", "8,4K,12K", "--iters", "20", "--datatype", "float",
                                             "--alloc", "mpi"], 3, timeout=120)
    assert not suite.problems(r), suite.problems(r)
    assert r.out.params["datatype"] == "float" and r.out.params["alloc"] == "mpi"
    # 6 collectives: Barrier 20 timed + 10 warm-up; 5 with payload x 3 sizes x (20 + 10 + 1 full check)
    assert r.out.verify["checked_calls"][1] == str(30 + 5 * 3 * 31)
    assert set(r.out.foms) >= {f"{c}_12288B_t_avg" for c in ("bcast", "reduce", "allreduce", "allgather", "alltoall")}


# ---- the ranks' wait for a core ----------------------------------------------

@pytest.mark.skipif(not Path("/proc/thread-self/schedstat").exists(), reason="no Linux schedstat for this thread")
def test_a_run_beside_busy_tasks_reports_its_ranks_waiting_for_a_core():
    """Every workload reports runqueue_wait_share_max (suite.problems checks it
    is there and a share). Beside one busy task per core, every rank shares its
    core, so the most-delayed rank waits for it far beyond the advisor's 5%
    line (0.35-0.45 measured here; alone, 0.001-0.015)."""
    stack, bdir = _first_built()
    args = ["--n", "64,64,64", "--iters", "40", "--dims", "2,1,1"]
    alone = suite.run(stack, bdir, "halo3d", args, 2)
    with competing_tasks():
        shared = suite.run(stack, bdir, "halo3d", args, 2)
    for r in (alone, shared):
        assert not suite.problems(r), suite.problems(r)
    assert shared.out.foms["runqueue_wait_share_max"][0] >= 0.05, shared.out.foms["runqueue_wait_share_max"]


# ---- cgsolve ----------------------------------------------------------------

def test_cgsolve_allreduce_methods_count_their_reductions():
    stack, bdir = _first_built()
    runs = {m: suite.run(stack, bdir, "cgsolve", suite.CGSOLVE + ["--allreduce", m], 4)
            for m in ("direct", "hierarchical", "nonblocking")}
    for m, r in runs.items():
        assert not suite.problems(r), (m, suite.problems(r))
    iters = int(runs["direct"].out.verify["iterations"][1])
    # Textbook CG: ||b|| once, then two 8-byte dots per iteration.
    for m in ("direct", "hierarchical"):
        assert runs[m].out.foms["allreduces"][0] == 1 + 2 * iters
        assert runs[m].out.foms["allreduce_bytes_per_call"][0] == 8
    # Pipelined CG: ||b||, then one 16-byte (r.r, w.r) per iteration plus the final check.
    nb = runs["nonblocking"].out
    assert nb.foms["allreduces"][0] == 1 + iters + 1
    assert nb.foms["allreduce_bytes_per_call"][0] == pytest.approx((8 + 16 * (iters + 1)) / (iters + 2), rel=1e-8)
    assert runs["hierarchical"].out.params["nodes"] == "1"
    assert "Iallreduce" in nb.params["allreduce_scheme"]


def test_cgsolve_tolerance_sets_the_iterations():
    stack, bdir = _first_built()
    loose = suite.run(stack, bdir, "cgsolve", ["--n", "20,18,16", "--tol", "1e-4"], 2)
    tight = suite.run(stack, bdir, "cgsolve", ["--n", "20,18,16", "--tol", "1e-10"], 2)
    for r in (loose, tight):
        assert not suite.problems(r), suite.problems(r)
    assert int(loose.out.verify["iterations"][1]) < int(tight.out.verify["iterations"][1])
    assert float(tight.out.verify["residual"][1]) <= 1e-9
    # Too few iterations to converge is a FAIL, not a silent result.
    short = suite.run(stack, bdir, "cgsolve", ["--n", "20,18,16", "--iters", "5"], 2)
    assert short.returncode == 0 and short.out.verify["converged"] == ("FAIL", "5")


# ---- pio --------------------------------------------------------------------

def test_pio_keep_leaves_the_file_and_default_removes_it(tmp_path):
    stack, bdir = _first_built()
    args = ["--n", "9,8,7", "--iters", "1", "--dir", str(tmp_path)]
    r = suite.run(stack, bdir, "pio", args + ["--method", "two-phase", "--group-size", "3"], 4)
    assert not suite.problems(r), suite.problems(r)
    assert r.out.params["writers"] == "2"  # groups {0,1,2} and {3}
    assert list(tmp_path.iterdir()) == []
    kept = suite.run(stack, bdir, "pio", args + ["--method", "independent", "--keep"], 2)
    assert not suite.problems(kept), suite.problems(kept)
    f = tmp_path / "commscope-pio-independent.dat"
    assert f.stat().st_size == 9 * 8 * 7 * 8
    assert kept.out.foms["write_bandwidth"][0] > 0 and kept.out.foms["read_bandwidth"][0] > 0


@pytest.mark.parametrize("method", ["independent", "collective", "two-phase"])
def test_pio_disk_full_exits_2_on_every_rank_and_removes_the_file(built, tmp_path, method):
    """The shared file is a link to /dev/full, where every write fails with
    ENOSPC: the run names --dir and the failure, exits 2 and leaves nothing."""
    stack, bdir = built
    target = tmp_path / f"commscope-pio-{method}.dat"
    target.symlink_to("/dev/full")
    r = suite.run(stack, bdir, "pio", ["--n", "8,8,8", "--dir", str(tmp_path), "--method", method], 2, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert f"pio: error: --dir {tmp_path}:" in r.stderr, r.stderr[-2000:]
    assert not r.out.verify and "write_bandwidth" not in r.out.foms
    assert not target.exists() and not target.is_symlink()


def test_intel_mpi_ranks_are_started_by_intels_own_launcher():
    """Intel's `mpirun` is a script that execs the first mpiexec.hydra on PATH, which is Debian MPICH's where that
    is installed. That launcher mapped each rank to a node of its own: Intel MPI left shared memory for libfabric,
    and Caliper-linked workloads hung in MPI_Init. As commscope launches the stack, the process that starts each rank
    is the hydra proxy in the stack's own prefix (read from /proc, not from commscope), and a 2-rank run is one node
    in Intel MPI's own start-up report (I_MPI_DEBUG): shared memory, no multi-node fallback, no libfabric."""
    import subprocess
    stack, bdir = built_once("pypi-impi2021")
    proxies = subprocess.run(stack.launch(2, ["sh", "-c", 'readlink -f /proc/$PPID/exe']), env=stack.environ(),
                             capture_output=True, text=True, timeout=120)
    assert proxies.returncode == 0, proxies.stderr[-2000:]
    started_by = set(proxies.stdout.split())
    assert started_by == {str(Path(stack.prefix, "bin", "hydra_pmi_proxy").resolve())}, started_by
    r = suite.run(stack, bdir, "pingpong", ["--iters", "10"], 2, env={"I_MPI_DEBUG": "5", "I_MPI_FABRICS": "shm"})
    report = r.stdout + r.stderr
    assert r.returncode == 0, report[-2000:]
    assert "multi node launch is detected" not in report, report[-2000:]
    assert "libfabric provider:" not in report, report[-2000:]
    assert "Load tuning file:" in report and "_shm.dat" in report, report[-2000:]
