"""Only the application's MPI time: the MPI calls Caliper makes itself (the MPI_Comm_dup with which it merges the
ranks' records, inside the application's MPI_Finalize) are not the application's (profiles.drop_calipers_own).

Checked against the application's own timers and counters: a small MPI program, written here, times and counts
each of its MPI calls with MPI_Wtime and prints them per rank; it runs under a preloaded Caliper (no-GOTCHA build,
runtime-profile with profile.mpi and region.count) and is ingested. Its rank 0 reaches MPI_Finalize 0.3 s after
rank 1, which Caliper's MPI_Comm_dup waits out on rank 1."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest

from conftest import ROOT, stack_or_skip
from helpers import read

NOGOTCHA = os.environ.get("COMMSCOPE_CALIPER_NOGOTCHA_PREFIX", "")
ITERS = 2000

PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

/* Each MPI call timed and counted by the program itself. */
static const char *NAMES[] = {"MPI_Allreduce", "MPI_Bcast", "MPI_Barrier"};
static double seconds[3];
static long calls[3];
#define TIMED(i, call) do { double t0_ = MPI_Wtime(); call; seconds[i] += MPI_Wtime() - t0_; calls[i]++; } while (0)

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double x = rank, y = 0;
    for (int i = 0; i < ITERS; i++) {
        TIMED(0, MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        if (i % 10 == 0) TIMED(1, MPI_Bcast(&y, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    }
    TIMED(2, MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < 3; i++)
        printf("OWN rank=%d function=%s calls=%ld seconds=%.9f\n", rank, NAMES[i], calls[i], seconds[i]);
    fflush(stdout);
    if (rank == 0) usleep(300000);   /* the other rank waits for this one in MPI_Finalize */
    MPI_Finalize();
    return 0;
}
"""


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory):
    """(profile, stdout) of the program at 2 ranks under the preloaded Caliper."""
    if not NOGOTCHA:
        pytest.skip("no no-GOTCHA Caliper: set COMMSCOPE_CALIPER_NOGOTCHA_PREFIX (ci/toolchain.py builds it)")
    stack = stack_or_skip("debian-openmpi4")
    d = tmp_path_factory.mktemp("own-timers")
    (d / "own.c").write_text(PROGRAM)
    subprocess.run([stack.mpicc, "-O2", f"-DITERS={ITERS}", "-o", str(d / "own"), str(d / "own.c")], check=True)
    cali = d / "own-n2.cali"
    env = stack.environ({"LD_PRELOAD": str(Path(NOGOTCHA) / "lib" / "libcaliper.so"),
                         "CALI_CONFIG": f"runtime-profile,profile.mpi,region.count,output={cali}"})
    p = subprocess.run(stack.launch(2, [str(d / "own")]), env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert cali.exists(), p.stdout + p.stderr
    return cali, p.stdout


def own_timers(stdout: str) -> dict[str, dict[int, tuple[int, float]]]:
    """function -> rank -> (calls, seconds), as the program printed them."""
    out: dict = defaultdict(dict)
    for rank, fn, calls, secs in re.findall(r"^OWN rank=(\d+) function=(\S+) calls=(\d+) seconds=(\S+)$", stdout,
                                            re.M):
        out[fn][int(rank)] = (int(calls), float(secs))
    return out


def test_stored_mpi_time_is_the_application_s_own(profiled_run, dsn):
    cali, stdout = profiled_run
    own = own_timers(stdout)
    assert sorted(own) == ["MPI_Allreduce", "MPI_Barrier", "MPI_Bcast"] and all(len(v) == 2 for v in own.values())
    # the premise: Caliper's own MPI_Comm_dup outside every region, one call per rank, and rank 1's waits out
    # most of rank 0's 0.3 s
    dup = {int(r["mpi.rank"]): (int(float(r["sum#rc.count"])), float(r["sum#sum#time.duration"]))
           for r in read(cali)[0] if r.get("path") == ["MPI_Comm_dup"]}
    assert sorted(dup) == [0, 1] and all(c == 1 for c, _ in dup.values()) and dup[1][1] > 0.2, dup

    e = {**os.environ, "COMMSCOPE_DB_URL": dsn}
    p = subprocess.run([sys.executable, "-m", "commscope.cli", "ingest", "--app", "own-timers", str(cali)], env=e,
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    with psycopg.connect(dsn) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
        stored = {fn: (calls, t) for fn, calls, t in conn.execute(
            "SELECT function, sum(calls), sum(time_total) FROM mpi_metrics WHERE run_id = %s GROUP BY 1", (run_id,))}
        cur = conn.execute("SELECT * FROM v_run_metrics WHERE run_id = %s AND \"window\" = 'run'", (run_id,))
        row = dict(zip([d.name for d in cur.description], cur.fetchone()))
    # MPI_Init and MPI_Finalize: the program cannot time what Caliper measures of them (Caliper starts inside the
    # one and writes its profile inside the other); they are a few microseconds
    start_end = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize"}
    ends = sum(t for fn, (_, t) in stored.items() if fn in start_end)
    assert ends < 1e-3, stored
    # Caliper times each call inside the program's own timer, so it is below it, by the wrapper's cost (and any
    # wait for a core between the two clocks on this shared machine)
    own_mean = sum(t for per_rank in own.values() for _, t in per_rank.values()) / 2
    calls = sum(c for per_rank in own.values() for c, _ in per_rank.values())
    mpi_mean = float(row["mpi_time_avg_s"]) - ends / 2
    assert 0.75 * own_mean - 1e-5 * calls / 2 <= mpi_mean <= own_mean + 1e-4, (mpi_mean, own_mean, calls)
    assert set(stored) - start_end == set(own), sorted(stored)
    for fn, per_rank in own.items():
        assert stored[fn][0] == sum(c for c, _ in per_rank.values()), fn   # the program's own counts
