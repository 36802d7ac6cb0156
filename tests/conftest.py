"""Shared fixtures: the MPI stack catalog and one build of the workloads per stack.

Set COMMSCOPE_REQUIRE_STACKS=1 (as .ci/run does) to turn a missing stack
into a failure instead of a skip.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "ci"))

import mpi_stacks  # noqa: E402
import suite  # noqa: E402

STACK_NAMES = [s.name for s in mpi_stacks.catalog()]
_builds: dict[str, Path] = {}


def stack_or_skip(name: str) -> mpi_stacks.Stack:
    stack = mpi_stacks.by_name(name)
    if not stack.present():
        msg = f"MPI stack {name} is not installed ({stack.mpicc}); run bash ci/setup.sh"
        if os.environ.get("COMMSCOPE_REQUIRE_STACKS"):
            pytest.fail(msg)
        pytest.skip(msg)
    return stack


@pytest.fixture(params=STACK_NAMES)
def built(request):
    """(stack, build dir) for each stack, built once per session."""
    stack = stack_or_skip(request.param)
    if stack.name not in _builds:
        _builds[stack.name] = suite.build(stack)
    return stack, _builds[stack.name]
