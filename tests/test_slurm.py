"""Slurm for real: a single-node cluster (munged, slurmctld, slurmd from
Debian's slurm-wlm and munge) started in a temporary directory, workloads
submitted through `sbatch --wait` and launched with `srun --mpi=<the stack's
PMI>`. Every run checks the world size it reports, because a wrong PMI can
still exit 0 with every process a 1-rank world. The daemons stop afterwards."""
from __future__ import annotations

import re
import shlex
import time

import pytest

import interconnects
from commscope.workflow import stacks as mpi_stacks
import slurm_local
import suite
from conftest import STACK_NAMES, _builds, stack_or_skip

HALO3D = ["--n", "16,16,16", "--iters", "2"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = slurm_local.unavailable()
    if reason:
        pytest.skip(reason)
    t0 = time.monotonic()
    with slurm_local.running(tmp_path_factory.mktemp("slurm")) as c:
        print(f"[slurm] node {c.node} idle after {time.monotonic() - t0:.1f} s")
        yield c
    assert not c.running(), "daemons still running after stop()"


def build_of(name: str):
    stack = stack_or_skip(name)
    if stack.name not in _builds:
        _builds[stack.name] = suite.build(stack)
    return stack, _builds[stack.name]


def job(lines: list[list[str]], stack) -> str:
    body = "\n".join(" ".join(shlex.quote(a) for a in cmd) for cmd in lines)
    return f"#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --time=00:05:00\nset -e\n{body}\n"


def world_sizes(output: str) -> list[int]:
    """RANKS of every header printed: one header with 2 when the PMI wired the
    processes together, one header per process with 1 when it did not."""
    return [int(n) for n in re.findall(r"^RANKS (\d+)$", output, re.M)]


@pytest.mark.parametrize("name", STACK_NAMES)
def test_workload_runs_as_one_world_under_srun(cluster, tmp_path, name):
    stack, bdir = build_of(name)
    t0 = time.monotonic()
    rc, out = cluster.sbatch_wait(job([slurm_local.srun(stack, 2, [str(bdir / "halo3d"), *HALO3D])], stack),
                                  cwd=tmp_path, env=stack.env, name=f"halo3d-{name}")
    print(f"[slurm] {name}: sbatch --wait returned after {time.monotonic() - t0:.1f} s")
    assert rc == 0, out
    assert world_sizes(out) == [2], f"srun --mpi={mpi_stacks.SRUN_MPI[stack.family]}: world sizes {world_sizes(out)}\n{out}"
    assert re.search(r"^VERIFY checksum PASS ", out, re.M), out


@pytest.mark.parametrize("name,wrong_pmi", [("debian-mpich4", "none"), ("pypi-openmpi5", "pmi2")])
def test_world_size_check_catches_the_wrong_pmi(cluster, tmp_path, name, wrong_pmi):
    # The job still exits 0: two processes, each rank 0 of a world of 1.
    stack, bdir = build_of(name)
    line = ["srun", f"--mpi={wrong_pmi}", "-n", "2", str(bdir / "halo3d"), *HALO3D]
    rc, out = cluster.sbatch_wait(job([line], stack), cwd=tmp_path, env=stack.env, name=f"{name}-{wrong_pmi}")
    assert rc == 0, out
    assert world_sizes(out) == [1, 1], out


def test_sbatch_wait_returns_the_job_exit_status(cluster, tmp_path):
    stack, bdir = build_of("debian-openmpi4")
    # A bad argument: every rank exits 2, and so must the job and sbatch --wait.
    line = slurm_local.srun(stack, 2, [str(bdir / "halo3d"), "--variant", "diagonal"])
    rc, out = cluster.sbatch_wait(job([line], stack), cwd=tmp_path, env=stack.env, name="bad-arg")
    assert rc == 2, out
    assert "halo3d: error: --variant" in out


def test_interconnect_selection_takes_effect_under_srun(cluster, tmp_path):
    # Catalog entries are environment variables, so they reach every rank
    # through srun as they do through mpirun; the stack's report proves it.
    # TCP's latency floor is relative: the same stack's shared memory, run
    # the same way under srun just before.
    stack, bdir = build_of("debian-openmpi4")
    lat = {}
    for name in ("openmpi4/shm", "openmpi4/tcp"):
        entry = interconnects.get(name)
        env = {**stack.env, **interconnects.REPORT_ENV[entry.family], **entry.environ()}
        line = slurm_local.srun(stack, 2, [str(bdir / "pingpong"), "--iters", "200", "--batches", "5"])
        rc, out = cluster.sbatch_wait(job([line], stack), cwd=tmp_path, env=env, name=f"pingpong-{entry.label}")
        assert rc == 0 and world_sizes(out) == [2], out
        found, missing, rejected = interconnects.check_report(entry, out)
        assert not missing and not rejected, out
        assert re.search(rf"^PARAM interconnect {re.escape(name)}$", out, re.M), out
        lat[entry.transport] = float(re.search(r"^FOM latency (\S+) us$", out, re.M).group(1))
        lo, hi = entry.band(lat.get("shm"))
        assert lo <= lat[entry.transport] < hi, f"{name}: {lat[entry.transport]} us outside [{lo}, {hi})"


def test_a_failed_start_stops_what_it_started(tmp_path):
    reason = slurm_local.unavailable()
    if reason:
        pytest.skip(reason)

    class NoSuchNode(slurm_local.Cluster):
        def _node_line(self):  # slurmd on this host finds no node of its name
            return "NodeName=commscope-no-such-host CPUs=1 RealMemory=100 State=UNKNOWN"

    c = NoSuchNode(tmp_path)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out waiting for") as err:
        c.start(timeout=20)
    assert time.monotonic() - t0 < 60
    assert not any(c._alive(d) for d in slurm_local.DAEMONS), str(err.value)
