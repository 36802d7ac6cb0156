"""Which binding the Fortran workload takes on each MPI stack: `use mpi_f08` where the stack's own Fortran wrapper
(mpif90 or mpifort beside its mpicc) compiles, links and runs a `use mpi_f08` program with gfortran. FORTRAN_STACKS
minus NO_F08, the stacks whose fjacobi setup builds with mpi_f08, must be exactly those; every other stack's reason
is the wrapper's own error (no wrapper at all, or no mpi_f08 module gfortran can read), so a wheel that gains
gfortran's mpi_f08 fails here until it leaves NO_F08 or joins FORTRAN_STACKS."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from commscope.workflow import stacks as mpi_stacks
from conftest import STACK_NAMES, stack_or_skip
from helpers import fortran_wrapper

F08 = """program f08
  use mpi_f08
  integer :: rank, total
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Allreduce(rank + 1, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0) print '(a,i0)', 'total ', total
  call MPI_Finalize()
end program f08
"""


def mpi_f08_runs(stack: mpi_stacks.Stack, tmp: Path) -> tuple[bool, str]:
    """(whether a `use mpi_f08` program builds with the stack's wrapper and runs on 2 ranks, what said why not)."""
    wrapper = fortran_wrapper(stack)
    if wrapper is None:
        return False, f"no mpif90 or mpifort beside {stack.mpicc}"
    (tmp / "f08.f90").write_text(F08)
    p = subprocess.run([str(wrapper), "f08.f90", "-o", "f08"], cwd=tmp, env=stack.environ(), capture_output=True,
                       text=True, timeout=120)
    if p.returncode:
        return False, f"{wrapper} cannot build a use-mpi_f08 program: {(p.stderr or p.stdout).strip()[-300:]}"
    p = subprocess.run(stack.launch(2, [str(tmp / "f08")]), cwd=tmp, env=stack.environ(), capture_output=True,
                       text=True, timeout=120)
    if p.returncode or "total 3" not in p.stdout:
        return False, f"the use-mpi_f08 program built by {wrapper} fails at 2 ranks: {(p.stdout + p.stderr)[-300:]}"
    return True, ""


@pytest.mark.parametrize("name", STACK_NAMES)
def test_fjacobi_takes_mpi_f08_exactly_where_the_stacks_wrapper_builds_mpi_f08(name, tmp_path):
    stack = stack_or_skip(name)
    runs, why = mpi_f08_runs(stack, tmp_path)
    if name in mpi_stacks.FORTRAN_STACKS and name not in mpi_stacks.NO_F08:
        assert runs, why
    else:
        assert not runs, f"{name} builds and runs mpi_f08: add it to FORTRAN_STACKS, or drop it from NO_F08"


def test_setup_says_why_each_stack_without_fortran_or_mpi_f08_has_none():
    """Every catalog stack outside FORTRAN_STACKS has one line saying why it has no Fortran workload, and every
    stack of NO_F08 one saying why its fjacobi takes `use mpi` (setup prints them after its build); the Fortran
    stacks have no line of the first kind."""
    for stack in mpi_stacks.catalog():
        why = mpi_stacks.no_fortran(stack)
        if stack.name in mpi_stacks.FORTRAN_STACKS and stack.present():
            assert why is None, (stack.name, why)
        elif stack.name not in mpi_stacks.FORTRAN_STACKS:
            assert why and "\n" not in why, stack.name
    for name, why in mpi_stacks.NO_F08.items():
        assert name in mpi_stacks.FORTRAN_STACKS and why and "\n" not in why, name
