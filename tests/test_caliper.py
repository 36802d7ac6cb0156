"""Caliper is optional at compile time. Without it the annotations compile to
nothing (every other test runs such builds). With it, these tests build and
profile the workloads for real.

Caliper and Adiak are in no package registry, so a fresh CI machine has
neither and the live tests skip. Point COMMSCOPE_CALIPER_PREFIX (a
CMAKE_PREFIX_PATH list, e.g. "<caliper prefix>;<adiak prefix>") at an install
built with Debian Open MPI 4.1 to run them."""
from __future__ import annotations

import os
import subprocess

import suite
from conftest import built_once, stack_or_skip
from helpers import matrix, read, regions


def test_caliper_on_without_caliper_fails_clearly(tmp_path):
    stack = stack_or_skip("debian-openmpi4")
    env = {k: v for k, v in os.environ.items() if k not in ("CMAKE_PREFIX_PATH", "caliper_DIR", "adiak_DIR")}
    p = subprocess.run(["cmake", "-S", str(suite.WORKLOADS), "-B", str(tmp_path / "b"),
                        f"-DMPI_C_COMPILER={stack.mpicc}", "-DCOMMSCOPE_WITH_CALIPER=ON",
                        "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF", "-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF"],
                       env=env, capture_output=True, text=True)
    assert p.returncode != 0
    assert "COMMSCOPE_WITH_CALIPER=ON but caliper" in p.stderr, p.stderr


def test_caliper_off_reports_it(tmp_path):
    stack = stack_or_skip("debian-openmpi4")
    p = subprocess.run(["cmake", "-S", str(suite.WORKLOADS), "-B", str(tmp_path / "b"),
                        f"-DMPI_C_COMPILER={stack.mpicc}", "-DCOMMSCOPE_WITH_CALIPER=OFF"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and "Caliper annotations OFF" in p.stdout


def test_profile_has_regions_mpi_and_adiak_and_same_results(caliper_build, tmp_path):
    stack, bdir = caliper_build
    args = suite.HALO3D + ["--variant", "overlap"]
    prof = tmp_path / "p.cali"
    r = suite.run(stack, bdir, "halo3d", args, 2, env={"CALI_CONFIG": f"hatchet-region-profile,profile.mpi,output={prof}"})  # in 2.12 and 2.14
    assert not suite.problems(r), suite.problems(r)
    plain = suite.run(stack, built_once(stack.name)[1], "halo3d", args, 2)
    assert r.out.verify["checksum"] == plain.out.verify["checksum"]
    records, g = read(prof)
    assert g["workload"] == "halo3d" and g["variant"] == "overlap" and g["jobsize"] == "2"
    seen = set().union(*(regions(x) for x in records))
    assert {"main", "setup", "timestep", "compute_boundary", "compute_interior", "halo_exchange"} <= seen
    assert {"MPI_Isend", "MPI_Irecv", "MPI_Waitall"} <= {x.get("mpi.function") for x in records}


def test_message_tracing_matrix_matches_commgraph(caliper_build, tmp_path):
    stack, bdir = caliper_build
    env = {"CALI_SERVICES_ENABLE": "aggregate,mpi,recorder", "CALI_MPI_MSG_TRACING": "true",
           "CALI_MPI_BLACKLIST": "MPI_Wtime,MPI_Wtick,MPI_Comm_rank,MPI_Comm_size",
           "CALI_AGGREGATE_KEY": "mpi.rank,mpi.msg.dst,mpi.msg.src", "CALI_CHANNEL_CONFIG_CHECK": "false",
           "CALI_RECORDER_FILENAME": str(tmp_path / "rank-%mpi.rank%.cali")}
    r = suite.run(stack, bdir, "commgraph", ["--pattern", "random-sparse", "--iters", "2", "--large-bytes", "8192"],
                  4, env=env)
    assert not suite.problems(r), suite.problems(r)
    cells = matrix(tmp_path)
    for line in r.out.rank_lines:
        sent = sum(b for (src, dst), (_, b) in cells.items() if src == int(line["rank"]) and dst >= 0)
        assert sent == int(float(line["bytes_sent"])), line
