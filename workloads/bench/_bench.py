"""Shared helpers of the benchmark scripts: build once, run repeatedly, take medians.

Benchmarks print measurements and ratios against a baseline measured in the
same run. They assert nothing about speed: this machine is noisy."""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ci"))
from commscope.workflow import stacks as mpi_stacks
import suite  # noqa: E402


def parser(doc: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stack", default="debian-openmpi4", help="MPI stack from commscope/workflow/stacks.py")
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration; the median is reported")
    ap.add_argument("--build-dir", type=Path, help="use this build instead of build/<stack>")
    return ap


def setup(args) -> tuple[mpi_stacks.Stack, Path]:
    stack = mpi_stacks.by_name(args.stack)
    if not stack.present():
        sys.exit(f"bench: error: --stack {stack.name} is not installed; run bash ci/setup.sh")
    return stack, args.build_dir or suite.build(stack)


def measure(stack, bdir, workload, wargs, ranks, repeats, foms, env=None) -> dict:
    """Median of each FOM over `repeats` runs. No run may FAIL; large runs may
    SKIP their serial reference."""
    values: dict = {f: [] for f in foms}
    for _ in range(repeats):
        r = suite.run(stack, bdir, workload, wargs, ranks, env=env)
        bad = suite.problems(r, allow_skip=True)
        if bad:
            sys.exit(f"bench: {workload} {' '.join(wargs)} failed: {'; '.join(bad)}")
        for f in foms:
            values[f].append(r.out.foms[f][0])
    return {f: statistics.median(v) for f, v in values.items()}
