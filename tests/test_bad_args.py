"""Bad arguments: every rank exits with status 2, rank 0 names the argument,
nothing runs and nothing hangs (each run is killed after TIMEOUT seconds).

The options are parsed by one C source, compiled once per MPI stack. Every case runs on PARSER_STACK, the stack
whose launcher starts and ends a run fastest (0.3 s against Open MPI's 1.6 s). The other stacks run each
workload's first case and the rank-count cases: that is where a stack's launcher and communicator size come in."""
from __future__ import annotations

from pathlib import Path

import pytest

import suite
from conftest import STACK_NAMES, built_once

TIMEOUT = 60
PARSER_STACK = "debian-mpich4"
# A regular file: root ignores permission bits, so an unwritable --dir for
# root is a path that is a file, or that runs through one.
A_FILE = str(Path(__file__).resolve())

# (workload, ranks, arguments, text the message must contain)
CASES = [
    ("halo3d", 2, ["--variant", "diagonal"], "--variant"),
    ("halo3d", 2, ["--n", "0,16,16"], "--n"),
    ("halo3d", 2, ["--n", "16,16"], "--n"),
    ("halo3d", 2, ["--n", "3,16,16", "--pml-width", "0", "--dims", "2,1,1"], "ghost width"),
    ("halo3d", 4, ["--n", "3,3,40", "--pml-width", "0"], "too many ranks"),
    ("halo3d", 2, ["--local", "1,8,8"], "--local"),
    ("halo3d", 2, ["--n", "16,16,16", "--local", "8,8,8"], "--local"),
    ("halo3d", 2, ["--iters", "0"], "--iters"),
    ("halo3d", 2, ["--iters", "ten"], "--iters"),
    ("halo3d", 2, ["--pml-width", "-1"], "--pml-width"),
    ("halo3d", 2, ["--pml-width", "40"], "--pml-width"),
    ("halo3d", 2, ["--pml-faces", "x-,w+"], "--pml-faces"),
    ("halo3d", 2, ["--pml-faces", "x-,"], "--pml-faces"),
    ("halo3d", 2, ["--pml-faces", "x"], "--pml-faces"),
    ("halo3d", 4, ["--dims", "3,1,1"], "--dims"),
    ("halo3d", 2, ["--fused=yes"], "--fused"),
    ("halo3d", 2, ["--no-such-option"], "--no-such-option"),
    ("stencil2d", 2, ["--decomp", "diagonal"], "--decomp"),
    ("stencil2d", 2, ["--send", "bsend"], "--send"),
    ("stencil2d", 2, ["--n", "-4,8"], "--n"),
    ("stencil2d", 4, ["--n", "3,64", "--decomp", "col"], "too many ranks"),
    ("stencil2d", 4, ["--n", "64,3", "--decomp", "row-naive"], "too many ranks"),
    ("stencil2d", 2, ["--iters"], "--iters"),
    ("commgraph", 2, ["--pattern", "ring"], "--pattern"),
    ("commgraph", 2, ["--large-bytes", "0"], "--large-bytes"),
    ("commgraph", 2, ["--rank-map", "/nonexistent/map"], "--rank-map"),
    ("collsweep", 2, ["--coll", "scan"], "--coll"),
    ("collsweep", 2, ["--coll", "bcast,Bcast"], "given twice"),
    ("collsweep", 2, ["--coll", ","], "--coll"),
    ("collsweep", 2, ["--sizes", "12"], "multiple of 8"),
    ("collsweep", 2, ["--sizes", "64:8"], "MIN above MAX"),
    ("collsweep", 2, ["--sizes", "8:2048M"], "above the limit"),
    ("collsweep", 2, ["--sizes", "8,lots"], "--sizes"),
    ("collsweep", 2, ["--sizes", "8,8"], "given twice"),
    ("collsweep", 2, ["--iters", "0"], "--iters"),
    ("collsweep", 2, ["--warmup", "-1"], "--warmup"),
    ("collsweep", 2, ["--volume", "0"], "--volume"),
    ("cgsolve", 2, ["--allreduce", "ring"], "--allreduce"),
    ("cgsolve", 2, ["--tol", "0"], "--tol"),
    ("cgsolve", 2, ["--tol", "1.5"], "--tol"),
    ("cgsolve", 2, ["--tol", "tight"], "--tol"),
    ("cgsolve", 2, ["--tol", "1e-20"], "--tol"),
    ("cgsolve", 2, ["--debug-barriers=yes"], "--debug-barriers"),
    ("cgsolve", 4, ["--n", "1,1,40"], "too many ranks"),
    ("cgsolve", 4, ["--dims", "3,1,1"], "--dims"),
    ("cgsolve", 2, ["--iters", "0"], "--iters"),
    ("pio", 2, ["--method", "mpiio"], "--method"),
    ("pio", 2, ["--group-size", "0"], "--group-size"),
    ("pio", 2, ["--dir", "/nonexistent/dir"], "--dir"),
    ("pio", 2, ["--dir", A_FILE], "not a directory"),
    ("pio", 2, ["--dir", A_FILE + "/sub"], "not a directory"),
    ("pio", 2, ["--n", "0,8,8"], "--n"),
    ("pio", 4, ["--n", "1,1,8"], "too many ranks"),
    ("pio", 2, ["--keep=1"], "--keep"),
    ("pio", 4, ["--dims", "3,1,1"], "--dims"),
    ("pio", 2, ["--n", "8,8"], "--n"),
    ("pio", 2, ["--iters", "0"], "--iters"),
]


def on_every_stack(case: tuple) -> bool:
    """Whether CASE runs on every stack: a workload's first case, or one that needs more ranks than the workload has
    room for."""
    workload = case[0]
    return case is next(c for c in CASES if c[0] == workload) or case[3] == "too many ranks"


MATRIX = [(name, case) for name in STACK_NAMES for case in CASES
          if name == PARSER_STACK or on_every_stack(case)]


@pytest.mark.parametrize("stack_name,workload,ranks,args,needle", [(n, *c) for n, c in MATRIX],
                         ids=[f"{n}-{w}-n{r}-{' '.join(a)}" for n, (w, r, a, _) in MATRIX])
def test_bad_argument_exits_2_naming_it(stack_name, workload, ranks, args, needle):
    stack, bdir = built_once(stack_name)
    r = suite.run(stack, bdir, workload, args, ranks, timeout=TIMEOUT)
    assert r.returncode == 2, f"{r.label()} {args}: status {r.returncode}\n{r.stderr}"
    assert f"{workload}: error:" in r.stderr and needle in r.stderr, r.stderr
    assert not r.out.foms and not r.out.verify, "a rejected run must not report results"


@pytest.mark.parametrize("content,needle", [
    ("0 1 2", "3 entries for 4 ranks"),
    ("0 1 1 2", "appears twice"),
    ("0 1 2 9", "outside 0..3"),
    ("0 1 2 x", "not an integer"),
])
def test_bad_rank_map_exits_2(tmp_path, content, needle):
    stack, bdir = built_once(PARSER_STACK)
    path = tmp_path / "bad.map"
    path.write_text(content + "\n")
    r = suite.run(stack, bdir, "commgraph", ["--rank-map", str(path)], 4, timeout=TIMEOUT)
    assert r.returncode == 2, r.stderr
    assert str(path) in r.stderr and needle in r.stderr, r.stderr


@pytest.mark.parametrize("workload", ["halo3d", "stencil2d", "commgraph", "collsweep", "cgsolve", "pio"])
def test_help_lists_every_option_with_its_default(workload):
    stack, bdir = built_once(PARSER_STACK)
    r = suite.run(stack, bdir, workload, ["--help"], 1, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    options = [ln.split()[0] for ln in r.stdout.splitlines() if ln.startswith("  --")]
    assert "--iters" in options
    for option in {"collsweep": ["--coll", "--sizes", "--warmup", "--volume"],
                   "cgsolve": ["--allreduce", "--debug-barriers", "--tol"],
                   "pio": ["--method", "--group-size", "--dir", "--keep"]}.get(workload, []):
        assert option in options, (option, options)
    for line in r.stdout.splitlines():
        if line.startswith("  --") and not line.startswith("  --help"):
            assert "(default: " in line, line
