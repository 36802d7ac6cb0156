"""A Fortran MPI application not written here, through `commscope run STUDY --caliper mpi`: UK-MAC's CloverLeaf
(`use mpi`), Ramble's builtin application, on Debian Open MPI 4.1, Debian MPICH 4.0 and Intel MPI 2021 (PyPI),
profiled by preloading the no-GOTCHA Caliper, with libcommscope-mpif where the stack's bindings need it
(tests/thirdparty/cloverleaf-fortran/README.md says how the files were made). Each stack's workspace is ingested with `commscope ingest` into a real store: every experiment is a run with
its profile, none stored as "profile missing", and every MPI function's stored time and call count equal
caliper-reader's sums over the same .cali file's records."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from caliperreader import read_caliper_contents

from conftest import ROOT

DATA = ROOT / "tests" / "thirdparty" / "cloverleaf-fortran"
STACKS = ("debian-openmpi4", "debian-mpich4", "pypi-impi2021")
# CloverLeaf's source calls no MPI_Comm_dup (`git grep -i comm_dup` finds none): the one in each profile is the
# preloaded Caliper's own, made when it merges the ranks' profiles in MPI_Finalize, and no call of the application.
CALIPERS_OWN = "MPI_Comm_dup"
# What CloverLeaf calls (clover.f90): the reductions of its time step and field summary, and the halo exchange,
# whose sends and receives a single rank, having no neighbour, never posts.
CLOVERLEAF_CALLS = {"MPI_Init", "MPI_Waitall", "MPI_Allreduce", "MPI_Reduce", "MPI_Barrier", "MPI_Finalize"}
HALO_CALLS = {"MPI_Isend", "MPI_Irecv"}


def caliper_reader_mpi(cali: Path) -> tuple[dict[str, float], dict[str, int], int]:
    """(MPI function -> exclusive time summed over every record, -> call count summed likewise, mpi.world.size)
    read with caliper-reader, Caliper's own MPI_Comm_dup left out."""
    records, globals_ = read_caliper_contents(str(cali))
    time: dict[str, float] = {}
    calls: dict[str, int] = {}
    for r in records:
        fn = r.get("mpi.function")
        if fn is None or fn == CALIPERS_OWN:
            continue
        time[fn] = time.get(fn, 0.0) + float(r["sum#sum#time.duration"])
        calls[fn] = calls.get(fn, 0) + int(r["sum#rc.count"])
    return time, calls, int(globals_["mpi.world.size"])


@pytest.mark.parametrize("stack", STACKS)
def test_every_cloverleaf_experiment_is_stored_with_caliper_reader_s_mpi_times_and_calls(dsn, tmp_path, stack):
    ws = tmp_path / "cloverleaf"
    shutil.copytree(DATA / stack, ws)
    experiments = json.loads((ws / "results.latest.json").read_text())["experiments"]
    assert len(experiments) == 6 and {e["RAMBLE_STATUS"] for e in experiments} == {"SUCCESS"}
    p = subprocess.run([sys.executable, "-m", "commscope.cli", "ingest", str(ws)], capture_output=True, text=True,
                       env={**os.environ, "COMMSCOPE_DB_URL": dsn}, cwd=ROOT, timeout=300)
    assert p.returncode == 0 and "stored 6 runs" in p.stdout, p.stdout + p.stderr
    assert "profile" not in p.stderr.lower(), p.stderr
    with psycopg.connect(dsn) as conn:
        missing = conn.execute("SELECT experiment FROM runs WHERE metadata ? 'profile_missing' "
                               "OR profile_kind = 'none'").fetchall()
        assert missing == []
        for exp in experiments:
            name = exp["name"].rsplit(".", 1)[-1]
            run_dir = ws / "experiments" / "cloverleaf" / exp["workload_name"] / name
            time, calls, world = caliper_reader_mpi(run_dir / f"{name}.cali")
            expected = CLOVERLEAF_CALLS | (HALO_CALLS if world > 1 else set())
            assert expected <= time.keys(), (name, sorted(time))
            run_id, ranks, source = conn.execute("SELECT id, ranks, source FROM runs WHERE experiment = %s",
                                                 (exp["name"],)).fetchone()
            assert Path(source).resolve() == (run_dir / f"{name}.cali").resolve()
            assert ranks == world == int(exp["n_ranks"]), name
            stored = {fn: (t, c) for fn, t, c in conn.execute(
                "SELECT function, sum(time_total), sum(calls) FROM mpi_metrics WHERE run_id = %s GROUP BY function",
                (run_id,))}
            assert stored.keys() == time.keys(), name
            for fn, (t, c) in stored.items():
                assert t == pytest.approx(time[fn], rel=1e-12, abs=1e-15), (name, fn)
                assert c == calls[fn], (name, fn)


def test_cloverleaf_makes_the_same_mpi_calls_through_either_stack_s_fortran_bindings(dsn, tmp_path):
    """Open MPI's bindings reach Caliper through libcommscope-mpif, MPICH's and Intel MPI's `use mpi` call MPI_*
    themselves: the same deterministic program then shows the same call count per function on each, and each
    rank's one MPI_Init and MPI_Finalize, so no route drops or doubles a call."""
    for stack in STACKS:
        shutil.copytree(DATA / stack, tmp_path / stack)
        p = subprocess.run([sys.executable, "-m", "commscope.cli", "ingest", str(tmp_path / stack)], capture_output=True,
                           text=True, env={**os.environ, "COMMSCOPE_DB_URL": dsn}, cwd=ROOT, timeout=300)
        assert p.returncode == 0 and "stored 6 runs" in p.stdout, p.stdout + p.stderr
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT r.workload, r.ranks, st.name, m.function, sum(m.calls) FROM runs r "
                            "JOIN stacks st ON st.id = r.stack_id JOIN mpi_metrics m ON m.run_id = r.id "
                            "GROUP BY 1, 2, 3, 4").fetchall()
    by_stack: dict[str, dict] = {s: {} for s in STACKS}
    for workload, ranks, stack, fn, calls in rows:
        by_stack[stack][(workload, ranks, fn)] = calls
    assert len(by_stack[STACKS[0]]) == 2 * (6 + 8 + 8)   # sodx and sodxy: 1 rank has no halo sends and receives
    assert by_stack[STACKS[0]] == by_stack[STACKS[1]] == by_stack[STACKS[2]]
    for (workload, ranks, fn), calls in by_stack[STACKS[0]].items():
        if fn in ("MPI_Init", "MPI_Finalize"):
            assert calls == ranks, (workload, ranks, fn)
