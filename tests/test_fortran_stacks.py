"""Which MPI stacks can build the Fortran workload: those whose own Fortran wrapper (mpif90 or mpifort beside its
mpicc) compiles, links and runs a `use mpi_f08` program with gfortran. FORTRAN_STACKS, the stacks setup builds
fjacobi and libcommscope-mpif on, must be exactly those; each other stack's reason is the wrapper's own error (no
wrapper at all, or no mpi_f08 module gfortran can read), so a wheel that gains Fortran bindings fails here until
it is added."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from commscope.workflow import stacks as mpi_stacks
from conftest import STACK_NAMES, stack_or_skip

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


def fortran_wrapper(stack: mpi_stacks.Stack) -> Path | None:
    """The stack's Fortran wrapper: mpif90 or mpifort beside its mpicc (mpicc.mpich -> mpif90.mpich)."""
    cc = Path(stack.mpicc)
    for name in ("mpif90", "mpifort"):
        f = cc.with_name(cc.name.replace("mpicc", name))
        if f.exists():
            return f
    return None


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
def test_fortran_stacks_are_the_stacks_whose_wrapper_builds_mpi_f08(name, tmp_path):
    stack = stack_or_skip(name)
    runs, why = mpi_f08_runs(stack, tmp_path)
    if name in mpi_stacks.FORTRAN_STACKS:
        assert runs, why
    else:
        assert not runs, f"{name} builds and runs mpi_f08: add it to FORTRAN_STACKS"


def test_setup_says_why_each_stack_without_fortran_has_no_fortran_workload():
    """Every catalog stack outside FORTRAN_STACKS has one line saying why (setup prints it after its build), and
    the stacks inside have none."""
    for stack in mpi_stacks.catalog():
        why = mpi_stacks.no_fortran(stack)
        if stack.name in mpi_stacks.FORTRAN_STACKS and stack.present():
            assert why is None, (stack.name, why)
        elif stack.name not in mpi_stacks.FORTRAN_STACKS:
            assert why and "\n" not in why, stack.name
