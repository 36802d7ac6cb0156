"""A Fortran MPI application profiled by the preload route: fjacobi (mpi_f08, or `use mpi` where gfortran cannot
read the stack's mpi_f08 module, plus an mpif.h routine) run under libcommscope-mpif and a no-GOTCHA Caliper,
ingested with `commscope ingest`; every stored MPI time per function equals caliper-reader's reading of the same
.cali file. On every stack that ships a Fortran wrapper (Debian Open MPI 4.1 and MPICH 4.0, PyPI Intel MPI 2021)
where its no-GOTCHA Caliper is built; the PyPI Open MPI 5 and MPICH 5 wheels ship none and skip, naming why."""
from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

from commscope.read.workload_output import parse_output
from commscope.workflow import stacks as mpi_stacks
from conftest import ROOT, STACK_NAMES, built_once, private_home, stack_or_skip
from helpers import FORTRAN_CALLS, fortran_preload, fortran_wrapper, nogotcha, profile_reference


@pytest.mark.parametrize("stack_name", STACK_NAMES)
def test_fortran_mpi_calls_are_profiled_and_ingested_as_caliper_reader_reads_them(dsn, tmp_path, stack_name):
    if fortran_wrapper(stack_or_skip(stack_name)) is None:
        pytest.skip(f"{stack_name} ships no Fortran MPI bindings (no mpif90 or mpifort beside its mpicc), so setup "
                    f"builds no fjacobi there")
    prefix = nogotcha(stack_name)
    stack, bdir = built_once(stack_name)
    assert (bdir / "fjacobi").exists(), f"the {stack_name} build has its Fortran workload: it ships Fortran bindings"
    out, cali = tmp_path / "fjacobi-n2.out", tmp_path / "fjacobi-n2.cali"
    env = stack.environ({"LD_PRELOAD": fortran_preload(bdir, prefix), "CALI_CONFIG": f"runtime-profile,profile.mpi,output={cali}"})
    p = subprocess.run(stack.launch(2, [str(bdir / "fjacobi"), "--n", "4000", "--iters", "300"]), env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out.write_text(p.stdout)
    parsed = parse_output(p.stdout)
    assert parsed.verify and all(status == "PASS" for status, _v in parsed.verify.values()), p.stdout
    assert parsed.params["variant"] == ("mpi" if stack_name in mpi_stacks.NO_F08 else "f08"), p.stdout
    assert cali.exists(), "no profile: the preloaded Caliper never saw the Fortran program's MPI_Init"
    total, mpi, per_function = profile_reference(cali)
    assert FORTRAN_CALLS <= per_function.keys(), sorted(per_function)
    assert sorted(total) == [0, 1]

    e = {**os.environ, "COMMSCOPE_DB_URL": dsn}
    p = subprocess.run([sys.executable, "-m", "commscope.cli", "ingest", "--app", "fjacobi", str(cali)], env=e, capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    with psycopg.connect(dsn) as conn:
        run_id, kind, app = conn.execute("SELECT id, profile_kind, app FROM runs").fetchone()
        stored = dict(conn.execute("SELECT function, time_total FROM mpi_metrics WHERE run_id = %s", (run_id,)))
    assert app == "fjacobi" and kind != "none"
    assert stored.keys() == per_function.keys()
    for fn, t in per_function.items():
        assert stored[fn] == pytest.approx(t, rel=1e-9), fn


def test_the_fortran_study_labels_each_series_with_the_binding_its_binary_printed(dsn):
    """`commscope setup` then `commscope run fortran` through Ramble on a stack with mpi_f08 and Intel MPI, where
    fjacobi takes `use mpi`: every stored run's variant is the binding the binary itself printed (its output's
    PARAM variant line), never a default that names another binding."""
    names = ["debian-openmpi4", "pypi-impi2021"]
    for name in names:
        stack_or_skip(name)
    if not os.environ.get("RAMBLE_ROOT"):
        pytest.skip("Ramble is in no package registry: set RAMBLE_ROOT (ci/setup.sh writes it) to run the study")
    home = private_home()
    e = {**os.environ, "COMMSCOPE_HOME": str(home), "COMMSCOPE_DB_URL": dsn, "SPACK_ROOT": ""}
    for args in (["setup", "--stacks", ",".join(names)], ["run", "fortran", "--stacks", ",".join(names)]):
        p = subprocess.run([sys.executable, "-m", "commscope.cli", *args], env=e, capture_output=True, text=True,
                           cwd=ROOT, timeout=900)
        assert p.returncode == 0, p.stdout + p.stderr
    printed = {}
    for out in home.glob("workspaces/fortran-*/experiments/fjacobi/fjacobi/*/*.out"):
        printed[f"fjacobi.fjacobi.{out.parent.name}"] = parse_output(out.read_text()).params["variant"]
    assert sorted(set(printed.values())) == ["f08", "mpi"], printed
    with psycopg.connect(dsn) as conn:
        stored = dict(conn.execute("SELECT experiment, variant FROM v_runs WHERE app = 'fjacobi'").fetchall())
    assert stored == printed
