"""Hostile input, round two (issue 46), in what is read: impossible values (nan, inf, '1_000', a negative time, a
FOM printed twice) in a workload's output or a Caliper profile are refused, naming the file, the line and the value,
and nothing is stored; never stored as an ok run. Real outputs and profiles from tests/data are damaged at test
time; everything runs through the real command against a real PostgreSQL."""
from __future__ import annotations

import os
import re
from pathlib import Path

import psycopg
import pytest
from helpers import assert_one_clear_line, cli_in_process

DATA = Path(__file__).parent / "data"
PROFILE = DATA / "halo3d-overlap-n2.runtime-profile.cali"
OUTPUT = DATA / "halo3d-overlap-n2.runtime-profile.out"


def cli(dsn: str, *args):
    """The real command in this process (cli_in_process), with DSN as COMMSCOPE_DB_URL and no PG* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")} | {"COMMSCOPE_DB_URL": dsn}
    return cli_in_process(args, env)


def runs(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM runs").fetchone()[0]


# ---- in a workload's output -------------------------------------------------------------------------------------

def _output_with(tmp: Path, old: str, new: str | None, extra: str = "") -> Path:
    """The real workload output alone (no profile beside it), line OLD replaced by NEW (or removed), EXTRA
    appended."""
    lines = OUTPUT.read_text().splitlines()
    assert old in lines
    path = tmp / "run.out"
    path.write_text("\n".join([ln if ln != old else new for ln in lines if ln != old or new is not None]) + "\n"
                    + extra)
    return path


@pytest.mark.parametrize("line,needle", [
    ("FOM total_time nan s", "'nan' is not a finite number"),
    ("FOM total_time inf s", "'inf' is not a finite number"),
    ("FOM total_time -inf s", "'-inf' is not a finite number"),
    ("FOM total_time 1_000 s", "'1_000' is not a finite number"),
    ("FOM total_time 1e999 s", "'1e999' is not a finite number"),
    ("FOM total_time -1.5 s", "below zero"),
    ("FOM comm_time_avg -0.000548495 s", "below zero"),
    ("FOM halo_bandwidth_avg NaN MB/s", "'NaN' is not a finite number")])
def test_an_impossible_fom_is_refused_naming_file_line_and_value(dsn, tmp_path, line, needle):
    name = line.split()[1]
    old = next(ln for ln in OUTPUT.read_text().splitlines() if ln.startswith(f"FOM {name} "))
    number = OUTPUT.read_text().splitlines().index(old) + 1
    out = _output_with(tmp_path, old, line)
    r = cli(dsn, "ingest", "-q", out)
    assert_one_clear_line(r, str(out), f"line {number}", name, needle, "nothing was stored", code=2)
    assert runs(dsn) == 0


def test_a_fom_printed_twice_is_refused_naming_both_lines(dsn, tmp_path):
    lines = OUTPUT.read_text().splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("FOM total_time ")) + 1
    out = _output_with(tmp_path, lines[first - 1], lines[first - 1], "FOM total_time 0.001 s\n")
    r = cli(dsn, "ingest", "-q", out)
    assert_one_clear_line(r, str(out), f"line {len(lines) + 1}", f"line {first}", "total_time", code=2)
    assert runs(dsn) == 0


def test_an_impossible_fom_in_the_output_beside_a_profile_is_refused(dsn, tmp_path):
    cali = tmp_path / PROFILE.name
    cali.write_bytes(PROFILE.read_bytes())
    beside = _output_with(tmp_path, next(ln for ln in OUTPUT.read_text().splitlines()
                                         if ln.startswith("FOM total_time ")), "FOM total_time -2 s")
    beside.rename(cali.with_suffix(".out"))
    r = cli(dsn, "ingest", "-q", cali)
    assert_one_clear_line(r, str(cali.with_suffix(".out")), "total_time", "below zero", code=2)
    assert runs(dsn) == 0


# ---- in a Caliper profile -----------------------------------------------------------------------------------------

def _profile_with_time(tmp: Path, value: str) -> Path:
    """The real profile with one record's exclusive time (sum#sum#time.duration) written as VALUE."""
    lines = PROFILE.read_text().splitlines(keepends=True)
    attr = next(re.search(r",id=(\d+),", ln)[1] for ln in lines if ",data=sum#sum#time.duration," in ln)
    i = next(i for i, ln in enumerate(lines) if ln.startswith("__rec=ctx") and "ref=" in ln
             and attr in ln.split("attr=")[1].split(",")[0].split("="))
    head, data = lines[i].rstrip("\n").split(",data=")
    values = data.split("=")
    values[head.split("attr=")[1].split("=").index(attr)] = value
    lines[i] = f"{head},data={'='.join(values)}\n"
    path = tmp / f"time-{value}.cali"
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize("value", ["-0.5", "nan", "inf", "-inf", "1_000"])
def test_an_impossible_time_in_a_profile_is_refused_naming_file_and_field(dsn, tmp_path, value):
    bad = _profile_with_time(tmp_path, value)
    r = cli(dsn, "ingest", "-q", bad)
    assert_one_clear_line(r, str(bad), "sum#sum#time.duration", repr(value), "not a time", code=2)
    assert runs(dsn) == 0


SPOT = Path(__file__).parent / "thirdparty" / "caliper-2.9.0" / "halo3d-blocking-n2.spot-mpi.cali"


def test_a_spot_profile_whose_mpi_call_outlasts_the_run_is_refused(dsn, tmp_path):
    """Spot keeps inclusive times only (no time.exclusive before Caliper 2.10): one MPI call's record (node 44)
    made 1000 s, in a run of 0.04 s, gives an MPI fraction over 1, which no run can have."""
    lines = SPOT.read_text().splitlines(keepends=True)
    ids = {re.search(r",data=([^,]+)", ln)[1]: re.search(r",id=(\d+),", ln)[1]
           for ln in lines if ln.startswith("__rec=node") and ",attr=8," in ln}
    (i,) = [i for i, ln in enumerate(lines) if ln.startswith("__rec=ctx,ref=44=98,")]
    head, data = lines[i].rstrip("\n").split(",data=")
    attrs, values = head.split("attr=")[1].split("="), data.split("=")
    for k in ("min", "max", "avg", "avg.sum", "sum"):   # its inclusive time over the two ranks
        values[attrs.index(ids[f"{k}#inclusive#sum#time.duration"])] = "1000"
    lines[i] = f"{head},data={'='.join(values)}\n"
    bad = tmp_path / SPOT.name
    bad.write_text("".join(lines))
    r = cli(dsn, "ingest", "-q", bad)
    assert_one_clear_line(r, str(bad), "mpi_fraction_avg", "no run can have", code=2)
    assert runs(dsn) == 0


def test_a_file_whose_name_is_not_utf8_is_refused_saying_to_rename_it(dsn, tmp_path):
    """A name's bytes that are not UTF-8 (read as lone surrogates) cannot be stored as the run's source: one line
    naming the file and saying to rename it, not calling the file damaged; nothing stored."""
    folder = tmp_path / "outputs"
    folder.mkdir()
    (folder / os.fsdecode(b"run\xff\xfe.out")).write_bytes(OUTPUT.read_bytes())
    r = cli(dsn, "ingest", "-q", folder)
    line = assert_one_clear_line(r, "name is not UTF-8", "rename the file", "nothing was stored", code=2)
    assert "damaged" not in line
    assert runs(dsn) == 0


def test_a_folder_below_an_input_that_cannot_be_read_is_said_not_skipped(tmp_path):
    """A subfolder the user may not list is named in one line (read.discover), never left out in silence with the
    profiles in it. Root may list any folder, so the reading runs in a process that setpriv has taken root's
    override of file permissions from; the store's socket is out of that process's reach, so this reads only."""
    import shutil
    import subprocess
    import sys
    top = tmp_path / "outputs"
    (top / "locked").mkdir(parents=True)
    shutil.copy(OUTPUT, top / "one.out")
    shutil.copy(DATA / "cgsolve-direct-n4.mpi-profile.out", top / "locked" / "two.out")
    (top / "locked").chmod(0)
    read = ("import sys; from pathlib import Path; from commscope.read.files import discover; "
            "from commscope.read.profiles import BadProfile\n"
            "try:\n    print(discover([Path(sys.argv[1])]))\n"
            "except BadProfile as e:\n    sys.exit(f'refused: {e}')")
    try:
        r = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-c", read,
                            str(top)], capture_output=True, text=True, timeout=120)
    finally:
        (top / "locked").chmod(0o755)
    assert_one_clear_line(r, "refused:", str(top / "locked"), "cannot be read")
