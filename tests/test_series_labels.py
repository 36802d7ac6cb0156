"""Series identity, scaling kind and labels for applications that are not commscope's (issue 33 items 3-5), on
real profiles of unmodified binaries: LULESH 2.0 profiled by a preloaded Caliper, with no Adiak
(tests/thirdparty/lulesh-unannotated/), and AMG2023, whose Adiak values record its command line, host and MPI
library (tests/thirdparty/amg2023/). The references are caliper-reader's reading of the same files and the
applications' own stdout, never commscope's formulas."""
from __future__ import annotations

import datetime as dt
import os
import re
import socket
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
from caliperreader import read_caliper_contents

from commscope.views import panels as P
from helpers import calipers_own

THIRD = Path(__file__).parent / "thirdparty"
LULESH = THIRD / "lulesh-unannotated"
S8N1, S8N8, S9N1 = (LULESH / f"lulesh-{n}.runtime-profile.cali" for n in ("s8-n1", "s8-n8", "s9-n1"))
AMG = THIRD / "amg2023"
TIME = ("sum#sum#time.duration", "sum#time.duration")


def ingest(dsn, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commscope.cli", "ingest", *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, "COMMSCOPE_DB_URL": dsn})


def lulesh(dsn, *args) -> subprocess.CompletedProcess:
    """LULESH records no name of its own (no Adiak): the user gives it."""
    return ingest(dsn, *args, "--app", "lulesh")


def slowest_rank_time(path: Path) -> float:
    """The run's time as caliper-reader reads the file: each rank's records summed (the record without a path,
    the time outside MPI, included; Caliper's own MPI_Comm_dup left out: helpers.calipers_own), the slowest rank's."""
    records, _ = read_caliper_contents(str(path))
    per_rank: dict = defaultdict(float)
    for r in records:
        t = next((float(r[a]) for a in TIME if a in r), None)
        if t is not None and not calipers_own(r, path):
            per_rank[int(r["mpi.rank"])] += t
    return max(per_rank.values())


def problem_size(path: Path) -> str:
    """LULESH's own statement of its -s, from its stdout."""
    return re.search(r"Problem size\s*=\s*(\d+)", path.with_suffix(".out").read_text()).group(1)


def test_a_profile_with_nothing_to_tell_problems_apart_is_stored_with_a_warning_naming_param(dsn):
    p = lulesh(dsn, S8N1, S9N1)
    assert p.returncode == 0, p.stderr
    warned = [line for line in p.stderr.splitlines() if "warning" in line and "lulesh" in line]
    assert len(warned) == 1 and "--param KEY=VALUE" in warned[0] and "2 runs" in warned[0], p.stderr
    with psycopg.connect(dsn) as conn:
        series = conn.execute("SELECT count(DISTINCT series_id), count(*) FROM runs WHERE app = 'lulesh'").fetchone()
    assert problem_size(S8N1) != problem_size(S9N1)
    assert series == (1, 2)   # what the warning is about: two problem sizes, one series


def test_given_parameters_tell_problem_sizes_apart_and_no_warning_is_given(dsn):
    for f in (S8N1, S9N1):
        p = lulesh(dsn, f, "--param", f"s={problem_size(f)}")
        assert p.returncode == 0 and "--param" not in p.stderr, p.stderr
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT s.parameters->>'s' FROM runs r JOIN series s ON s.id = r.series_id "
                            "WHERE r.app = 'lulesh' ORDER BY 1").fetchall()
    assert rows == [("8",), ("9",)]


def test_a_recorded_command_line_gives_one_parameter_per_argument(dsn):
    files = [AMG / f"amg2023-n{n}.runtime-profile.cali" for n in (1, 2)]
    p = ingest(dsn, *files)
    assert p.returncode == 0 and "--param" not in p.stderr, p.stderr
    with psycopg.connect(dsn) as conn:
        stored = dict(conn.execute("SELECT r.ranks, s.parameters FROM runs r JOIN series s ON s.id = r.series_id"))
    for f in files:
        _, g = read_caliper_contents(str(f))
        argv = g["cmdline"].strip("[]").split(",")   # Adiak's record of argv, as caliper-reader gives it
        assert argv[1:5] == ["-problem", "2", "-n", "32"]
        ranks = int(g["jobsize"])
        grid = ",".join(argv[argv.index("-P") + 1:])
        assert stored[ranks] == {"ranks": ranks, "nodes": 1, "problem": "2", "n": "32,32,32", "P": grid}


def test_lulesh_per_rank_size_makes_its_1_and_8_rank_runs_weak_scaling(dsn):
    for f in (S8N1, S8N8, S9N1):
        p = lulesh(dsn, f, "--param", f"s={problem_size(f)}", "--param", "i=10", "--per-rank", "s")
        assert p.returncode == 0, p.stderr
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT kind, ranks, base_ranks, speedup, efficiency, per_rank_parameters->>'s' "
                            "FROM v_scaling WHERE app = 'lulesh' ORDER BY 6, 2").fetchall()
    t1, t8 = slowest_rank_time(S8N1), slowest_rank_time(S8N8)
    assert [r[:3] for r in rows] == [("weak", 1, 1), ("weak", 8, 1), ("weak", 1, 1)]
    assert [r[5] for r in rows] == ["8", "8", "9"]
    assert all(r[3] is None for r in rows)   # a weak pair has no speedup
    assert rows[1][4] == pytest.approx(t1 / t8, rel=1e-9) and rows[0][4] == pytest.approx(1.0)


def test_undeclared_scaling_is_of_unknown_kind_never_strong(dsn):
    for f in (S8N1, S8N8):
        assert lulesh(dsn, f, "--param", "s=8").returncode == 0
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT kind, ranks, base_ranks, speedup, efficiency FROM v_scaling "
                            "WHERE app = 'lulesh' ORDER BY ranks").fetchall()
    assert rows == [(None, 1, 1, None, None), (None, 8, 1, None, None)]


def test_a_global_size_held_equal_is_strong_scaling(dsn):
    """The same two files declared the other way (as if -s were the whole job's problem): strong, with
    caliper-reader's speedup; the declaration, not the data, says which kind a pair is."""
    for f in (S8N1, S8N8):
        assert lulesh(dsn, f, "--param", "s=8", "--global", "s").returncode == 0
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT kind, ranks, speedup, efficiency FROM v_scaling WHERE app = 'lulesh' "
                            "ORDER BY ranks").fetchall()
    speedup = slowest_rank_time(S8N1) / slowest_rank_time(S8N8)
    assert [r[:2] for r in rows] == [("strong", 1), ("strong", 8)]
    assert rows[1][2] == pytest.approx(speedup, rel=1e-9) and rows[1][3] == pytest.approx(speedup / 8, rel=1e-9)


def test_declaring_a_parameter_the_run_lacks_is_refused_and_nothing_is_stored(dsn):
    p = lulesh(dsn, S8N1, "--param", "s=8", "--per-rank", "size")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "--per-rank names 'size'" in p.stderr and "it has: s" in p.stderr and "Traceback" not in p.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_the_scaling_panels_show_lulesh_as_weak_scaling_only(dsn):
    for f in (S8N1, S8N8):
        assert lulesh(dsn, f, "--param", "s=8", "--per-rank", "s").returncode == 0
    t0, t1 = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
    with psycopg.connect(dsn) as conn:
        values = P.all_values(conn)
        got = {p.title: conn.execute(P.expand(p.sql, t0, t1, values)).fetchall() for p in P.SCALING.panels}
    weak = got["Weak scaling: parallel efficiency"]
    assert [r[1] for r in weak] == [1, 8] and "s=8" in weak[0][0]
    assert weak[1][2] == pytest.approx(slowest_rank_time(S8N1) / slowest_rank_time(S8N8), rel=1e-9)
    assert got["Strong scaling: speedup"] == [] and got["Strong scaling: parallel efficiency"] == []


def test_labels_name_the_host_the_mpi_library_and_the_parameters_never_unknown(dsn):
    assert lulesh(dsn, S8N8, "--param", "s=8").returncode == 0
    assert ingest(dsn, AMG / "amg2023-n2.runtime-profile.cali").returncode == 0
    with psycopg.connect(dsn) as conn:
        labels = dict(conn.execute("SELECT DISTINCT app, series_label FROM v_run_metrics_daily"))
        sources = dict(conn.execute("SELECT app, metadata->>'system_source' FROM runs"))
    _, amg = read_caliper_contents(str(AMG / "amg2023-n2.runtime-profile.cali"))
    assert "unknown" not in labels["lulesh"] and "unknown" not in labels["amg"], labels
    # LULESH's profile names no host and no MPI library: the host that ingested it, and a stack that says so
    assert labels["lulesh"].startswith(f"{socket.gethostname()} lulesh s=8 mpi-not-recorded ")
    assert sources == {"lulesh": "ingesting host", "amg": "cluster"}
    # AMG2023's Adiak names its cluster and its MPI library, and its command line its problem: the label names the
    # library's family (the stack), and the run keeps the library's version (records.mpi_family)
    assert labels["amg"].startswith(f"{amg['cluster']} amg P=2,1,1 n=32,32,32 problem=2 Open MPI "), labels["amg"]
    with psycopg.connect(dsn) as conn:
        (version,) = conn.execute("SELECT v.mpi_library FROM v_run_versions v JOIN runs r ON r.id = v.run_id "
                                  "WHERE r.app = 'amg'").fetchone()
    assert version == f"{amg['mpi_library_vendor']} {amg['mpi_library_version']}"
    assert " n2 " in labels["amg"] and " n8 " in labels["lulesh"]


def test_a_pair_whose_problem_grew_with_the_ranks_is_never_strong(dsn):
    """-s per rank and -i (the iteration count) global, both equal at 1 and 8 ranks: the mesh grew with the ranks,
    so the 8-rank run is weak scaling against the 1-rank run and no strong pair is made of them."""
    for f in (S8N1, S8N8):
        assert lulesh(dsn, f, "--param", "s=8", "--param", "i=10", "--per-rank", "s", "--global", "i").returncode == 0
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT kind, ranks, base_ranks FROM v_scaling WHERE app = 'lulesh' AND ranks = 8").fetchall()
    assert rows == [("weak", 8, 1)]
