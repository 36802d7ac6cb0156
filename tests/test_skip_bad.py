"""A value the store cannot hold is bad input (issue 46): refused when read, in one line naming the file, the field
and the limit (read.records.check_storable), so `--skip-bad` skips that input, lists it and stores the good ones of
the same campaign (exit 3), and without it nothing is stored (exit 2). The store's own failures still say the store
failed (exit 1). Each hostile input is a real workload output or Caliper profile from tests/data, damaged at test
time, ingested beside a good output through the real command, in this process (click's runner)."""
from __future__ import annotations

import random
import string
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from helpers import assert_one_clear_line

from commscope.cli import main

TESTS = Path(__file__).parent
PROFILE = TESTS / "data" / "halo3d-overlap-n2.runtime-profile.cali"
OUTPUT = TESTS / "data" / "halo3d-overlap-n2.runtime-profile.out"
JSON_PROFILE = TESTS / "data" / "stencil2d-cart-n2.json-split.json"
GOOD = TESTS / "live-runs" / "tcp-switch" / "night0" / "run0.out"


@dataclass
class Ran:
    """What assert_one_clear_line reads of a finished command."""
    returncode: int
    stdout: str
    stderr: str


def ingest(dsn: str, *args) -> Ran:
    r = CliRunner(mix_stderr=False).invoke(main, ["ingest", "-q", *map(str, args)], env={"COMMSCOPE_DB_URL": dsn})
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exc_info   # never a traceback
    return Ran(r.exit_code, r.stdout, r.stderr)


def runs(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM runs").fetchone()[0]


def letters(n: int) -> str:
    """N letters that do not compress (the store's indexes compress what repeats)."""
    rnd = random.Random(46)
    return "".join(rnd.choice(string.ascii_letters) for _ in range(n))


def replaced(path: Path, old: bytes, new: bytes) -> bytes:
    data = path.read_bytes()
    assert data.count(old) >= 1, old
    return data.replace(old, new, 1)


# (file name, its bytes, what the one line must say besides the file)
HOSTILE = {
    "a region name of 5,000 characters": (
        "long-region.cali", lambda: replaced(PROFILE, b"data=setup,", f"data={letters(5000)},".encode()),
        ("region name", "5,000 bytes", "at most 1,024 bytes", "shorten it")),
    "a NUL in a region name": (
        "nul-region.cali", lambda: replaced(PROFILE, b"data=setup,", b"data=set\x00up,"),
        ("region name", "NUL character", "cannot hold")),
    "a NUL in a PARAM value": (
        "nul-param.out", lambda: replaced(OUTPUT, b"PARAM fused off", b"PARAM fused o\x00ff"),
        ("param.fused", "NUL character", "cannot hold")),
    "a lone surrogate in a region name": (
        "surrogate.json", lambda: replaced(JSON_PROFILE, b'"label": "setup"', b'"label": "se\\ud800tup"'),
        ("region name", "lone surrogate", "cannot hold")),
    "a time of 1e308": (
        "huge-time.out", lambda: replaced(OUTPUT, b"FOM total_time 0.003186041 s", b"FOM total_time 1e308 s"),
        ("FOM total_time", "1e+308", "numbers up to 1e+300")),
    "a call count beyond bigint": (
        "huge-count.cali", lambda: replaced(PROFILE, b"data=0=0.000992554=1=2", b"data=0=0.000992554=1e23=2"),
        ("main/setup", "integers up to 9,223,372,036,854,775,807")),
    "a workload name of 2,000 characters": (
        "long-name.out", lambda: replaced(OUTPUT, b"workload=halo3d", f"workload={letters(2000)}".encode()),
        ("labels take", "at most 768 bytes", "shorten it")),
    "a PARAM value of 2,000 characters": (
        "long-param.out", lambda: replaced(OUTPUT, b"PARAM fused off", f"PARAM fused {letters(2000)}".encode()),
        ("parameters take", "param.fused", "at most 1,664 bytes", "shorten it")),
}


def write_hostile(folder: Path) -> dict[Path, tuple]:
    """Each hostile input in FOLDER: its path -> what its line must say."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, make, needles in HOSTILE.values():
        (folder / name).write_bytes(make())
        out[folder / name] = needles
    return out


def test_each_value_the_store_cannot_hold_is_refused_in_one_line_and_nothing_is_stored(dsn, tmp_path):
    for case, (name, make, needles) in HOSTILE.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "good.out").write_bytes(GOOD.read_bytes())
        (folder / name).write_bytes(make())
        r = ingest(dsn, folder)
        assert_one_clear_line(r, str(folder / name), *needles, "nothing was stored", code=2)
        assert runs(dsn) == 0, case


def test_skip_bad_lists_each_such_input_and_stores_the_good_ones(dsn, tmp_path):
    (tmp_path / "good.out").write_bytes(GOOD.read_bytes())
    bad = write_hostile(tmp_path)
    r = ingest(dsn, "--skip-bad", tmp_path)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "store failed" not in r.stderr, r.stderr
    assert f"skipped {len(bad)} bad inputs" in r.stderr, r.stderr
    for path, needles in bad.items():
        (listed,) = [ln for ln in r.stderr.splitlines() if str(path) in ln]
        assert all(n in listed for n in needles), (needles, listed)
    assert runs(dsn) == 1


def test_the_largest_number_the_store_holds_is_stored_in_every_sum(dsn, tmp_path):
    """1e300 is within the limit: two runs of one series and day whose times are 1e300 are stored, and the rollups'
    sums of them (2e300) hold; 1e308 is not (above: two such runs overflowed the rollups' sums)."""
    for n in (1, 2):
        (tmp_path / f"run{n}.out").write_bytes(replaced(OUTPUT, b"FOM total_time 0.003186041 s",
                                                         b"FOM total_time 1e300 s") + f"RANK {n}\n".encode())
    r = ingest(dsn, tmp_path)
    assert r.returncode == 0, r.stderr
    assert runs(dsn) == 2


def test_a_param_at_its_documented_limit_is_refused_at_once_naming_the_stores(dsn, tmp_path):
    """--param takes values of up to 4096 characters, more than a run's parameters can take in the store: refused
    before anything is read, with or without --skip-bad (it would make every input bad)."""
    (tmp_path / "good.out").write_bytes(GOOD.read_bytes())
    for skip in ((), ("--skip-bad",)):
        r = ingest(dsn, *skip, "--param", "k=" + letters(4096), tmp_path)
        assert_one_clear_line(r, "--param 'k'", "4,105 bytes", "at most 1,664 bytes", "shorten it", code=2)
    assert runs(dsn) == 0


def test_a_param_the_store_holds_is_stored(dsn, tmp_path):
    (tmp_path / "good.out").write_bytes(GOOD.read_bytes())
    (tmp_path / "other.out").write_bytes(OUTPUT.read_bytes())
    value = letters(1000)
    r = ingest(dsn, "--param", f"k={value}", tmp_path)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT count(*) FROM runs r JOIN series s ON s.id = r.series_id "
                         "WHERE s.parameters->>'k' = %s", (value,)).fetchone()[0] == 2


def test_a_failure_of_the_store_itself_still_says_the_store_failed(dsn, tmp_path):
    """The server refusing every write (a read-only database) is the store's failure, not bad input."""
    (tmp_path / "good.out").write_bytes(GOOD.read_bytes())
    read_only = dsn + ("&" if "?" in dsn else "?") + "options=-c%20default_transaction_read_only%3Don"
    r = ingest(read_only, "--skip-bad", tmp_path)
    assert_one_clear_line(r, "the store failed during ingest", "read-only", code=1)
    assert runs(dsn) == 0
