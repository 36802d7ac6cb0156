"""A fuzz test of ingest's readers and store (issue 32): Hypothesis mutates real profiles and workload outputs
from tests/data (truncations, byte flips, inserted junk, duplicated, repeated or deleted records, huge or negative
numbers, odd file names). Every case must end in a run or in one line naming the file, never a traceback and never
commscope's "bug in the reader" line; memory must stay under a cap; and where nothing was stored the store is
unchanged. The budget is fixed (derandomized, a set number of examples) so CI takes seconds, not minutes."""
from __future__ import annotations

import re
import resource
import shutil
from pathlib import Path

import psycopg
from hypothesis import HealthCheck, given, settings, strategies as st

from commscope.read.profiles import BadProfile
from commscope.read.records import ReadOptions, Record
from commscope.read.pipeline import read_group
from commscope.workflow.ingest import Provenance, ingest, prepared

DATA = Path(__file__).parent / "data"
SEEDS = [DATA / n for n in ("halo3d-overlap-n2.runtime-profile.cali", "stencil2d-row-naive-n2.spot.cali",
                            "halo3d-nonblocking-n2.comm-stats.cali", "halo3d-nonblocking-n2.caliper-2.12.cali",
                            "stencil2d-cart-n2.json-split.json", "halo3d-overlap-n2.runtime-profile.out")]
# values a damaged or hostile file may carry where a number was
ODD_NUMBERS = [b"2000000000", b"99999999999999999999", b"-1", b"-2", b"0", b"1e308", b"nan", b"inf", b"", b"0x10"]
ODD_NAMES = ["plain", "new\nline", "esc\x1b[31mred", "tab\there", "bidi\u202eilac", "sp ace", "d\u00e9j\u00e0"]
MEMORY_HEADROOM = 3 * 2**30   # bytes of address space a read may add to what the test process already maps


def _mutate(data: bytes, op: str, a: int, b: int, junk: bytes) -> bytes:
    lines = data.split(b"\n")
    if not data and op in ("flip", "odd-number"):
        return data
    if op == "truncate":
        return data[:a % (len(data) + 1)]
    if op == "flip":
        i = a % len(data)
        return data[:i] + bytes([data[i] ^ (1 << (b % 8))]) + data[i + 1:]
    if op == "insert":
        i = a % (len(data) + 1)
        return data[:i] + junk + data[i:]
    if op == "duplicate-line":
        i = a % len(lines)
        return b"\n".join(lines[:i + 1] + lines[i:])
    if op == "repeat-block":   # a stretch of records written again, as when two copies of a file are joined
        i, j = sorted((a % len(lines), b % len(lines)))
        return b"\n".join(lines[:j + 1] + lines[i:j + 1] + lines[j + 1:])
    if op == "delete-line":
        i = a % len(lines)
        return b"\n".join(lines[:i] + lines[i + 1:])
    if op == "odd-number":
        numbers = list(re.finditer(rb"(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?", data))
        if not numbers:
            return data
        m = numbers[a % len(numbers)]
        return data[:m.start()] + ODD_NUMBERS[b % len(ODD_NUMBERS)] + data[m.end():]
    raise AssertionError(op)


@st.composite
def damaged_inputs(draw):
    """(seed, mutated bytes, file name) from a real input and one to three mutations."""
    seed = draw(st.sampled_from(SEEDS))
    data = seed.read_bytes()
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["truncate", "flip", "insert", "duplicate-line", "repeat-block", "delete-line",
                                   "odd-number"]))
        data = _mutate(data, op, draw(st.integers(0, 2**31)), draw(st.integers(0, 2**31)),
                       draw(st.binary(min_size=1, max_size=40)))
    name = draw(st.sampled_from(ODD_NAMES)) + seed.suffix
    return seed, data, name


def _vm_bytes() -> int:
    return int(re.search(r"VmSize:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024


class _MemoryCap:
    """An address-space cap of MEMORY_HEADROOM above what this process maps now, for one read."""

    def __enter__(self):
        self.old = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (_vm_bytes() + MEMORY_HEADROOM, self.old[1]))

    def __exit__(self, *exc):
        resource.setrlimit(resource.RLIMIT_AS, self.old)


def _check_outcome(out, path: Path) -> None:
    """A run whose numbers hold together, or one line naming the file."""
    if isinstance(out, BadProfile):
        msg = str(out)
        assert msg.startswith(str(path)), msg
        assert "\n" not in msg.replace(str(path), "", 1), msg     # one line (the name may hold a newline)
        assert "a bug in commscope's reader" not in msg, msg       # the safety net caught a crash
        assert not re.search(r"memory this process may use|MemoryError|Unable to allocate", msg), msg   # memory grew
        return
    assert isinstance(out, Record), out
    assert 1 <= out.ranks < 2**31 and out.status in ("ok", "partial", "failed")
    assert len(out.rank_rows) <= out.ranks


def _case_file(tmp_path, case) -> Path:
    """The damaged input written alone into a fresh folder (Hypothesis reuses tmp_path across examples)."""
    _seed, data, name = case
    d = tmp_path / "case"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    path = d / name
    path.write_bytes(data)
    return path


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=damaged_inputs())
def test_every_damaged_input_reads_to_a_run_or_one_line(tmp_path, case):
    path = _case_file(tmp_path, case)
    with _MemoryCap():
        out = read_group([path], ReadOptions(), prepared)
    _check_outcome(out, path)


def _store_counts(conn) -> tuple:
    return conn.execute("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM campaigns), "
                        "(SELECT count(*) FROM series), (SELECT count(*) FROM node_metrics)").fetchone()


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=damaged_inputs())
def test_a_damaged_input_ingests_whole_or_leaves_the_store_unchanged(dsn, tmp_path, case):
    path = _case_file(tmp_path, case)
    with psycopg.connect(dsn) as conn:
        before = _store_counts(conn)
        try:
            with _MemoryCap():
                res = ingest(conn, [path], Provenance())
        except BadProfile as e:
            _check_outcome(e, path)
            conn.rollback()
            assert _store_counts(conn) == before
            return
        conn.commit()
        after = _store_counts(conn)
    assert len(res.inserted) + len(res.skipped) == 1
    if res.skipped:
        assert after == before   # the same bytes stored before: nothing new
    else:
        assert after[0] == before[0] + 1 and after[1] == before[1] + 1
