"""Shared fixtures: the MPI stack catalog and one build of the workloads per stack.

Set COMMSCOPE_REQUIRE_STACKS=1 (as .ci/run does) to turn a missing stack
into a failure instead of a skip.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "ci"))

# The live toolchain ci/setup.sh made from a source mirror (ci/toolchain.py): RAMBLE_ROOT, the Caliper prefixes,
# IMB, Spack. A variable set by hand wins.
TOOLCHAIN_ENV = ROOT / ".venv" / "commscope-toolchain.env"
if TOOLCHAIN_ENV.exists():
    for _line in TOOLCHAIN_ENV.read_text().splitlines():
        _name, _sep, _value = _line.partition("=")
        if _sep:
            os.environ.setdefault(_name, _value)

from commscope.workflow import stacks as mpi_stacks
from commscope.store import db  # noqa: E402
import suite  # noqa: E402

STACK_NAMES = [s.name for s in mpi_stacks.catalog()]
_builds: dict[str, Path] = {}


def stack_or_skip(name: str) -> mpi_stacks.Stack:
    stack = mpi_stacks.by_name(name)
    if not stack.present():
        msg = f"MPI stack {name} is not installed ({stack.mpicc}); run bash ci/setup.sh"
        if os.environ.get("COMMSCOPE_REQUIRE_STACKS"):
            pytest.fail(msg)
        pytest.skip(msg)
    return stack


@contextlib.contextmanager
def competing_tasks():
    """One `yes` per core: every rank then shares its core with a runnable task."""
    hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def built_once(name: str) -> tuple[mpi_stacks.Stack, Path]:
    """(stack, build dir) of the workloads for the MPI stack NAME, built once per session and shared by every test
    (skips where the stack is not installed)."""
    stack = stack_or_skip(name)
    if stack.name not in _builds:
        _builds[stack.name] = suite.build(stack)
    return stack, _builds[stack.name]


@pytest.fixture(params=STACK_NAMES)
def built(request):
    """(stack, build dir) for each stack, built once per session."""
    return built_once(request.param)


# ---- a real PostgreSQL for the store tests ------------------------------------

def private_home() -> Path:
    """A fresh COMMSCOPE_HOME the `postgres` user can enter when tests run as
    root (pytest's own tmp dirs are mode 700 under a 700 parent)."""
    home = Path(tempfile.mkdtemp(prefix="commscope-test-"))
    home.chmod(0o711)
    return home


_server: list[db.Embedded] = []


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """A private PostgreSQL for the whole session, removed afterwards."""
    try:
        db.pg_bin("initdb")
    except db.DBError as e:
        pytest.fail(str(e))  # .ci/run installs postgresql: its absence is a failure
    home = private_home()
    emb = db.Embedded(home)
    url = emb.start()
    _server.append(emb)
    yield emb, url
    emb.stop()
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def dsn(server):
    """A fresh, migrated database per test, prepared as `commscope db start` prepares its own
    (the schema owned by commscope's role, which is no superuser); the DSN connects as that role."""
    emb, _ = server
    name = f"t_{uuid.uuid4().hex[:12]}"
    with emb.admin("postgres") as c:
        c.execute(f'CREATE DATABASE "{name}"')
    emb.prepare_database(name)
    test_url = emb.url(name)
    with psycopg.connect(test_url) as conn:
        db.migrate(conn)
    yield test_url
    with emb.admin("postgres") as c:
        c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def grant_local(dsn: str, role: str, grant=db.grant_readonly) -> str:
    """ROLE granted on the test database behind DSN as `commscope db grant-…` grants it (the
    session server's superuser creates it); returns a DSN that connects as ROLE."""
    emb = _server[0]
    with psycopg.connect(dsn) as conn, emb.admin() as admin:
        grant(conn, role, admin=admin)
        conn.commit()
    emb.allow_local(role)
    return dsn.replace(f"user={db.OWNER}", f"user={role}")


CALIPER_PREFIX = os.environ.get("COMMSCOPE_CALIPER_PREFIX", "")


@pytest.fixture(scope="module")
def caliper_build(tmp_path_factory):
    """(stack, build dir) of the workloads built with Caliper against Debian Open MPI 4.1; the
    live Caliper tests skip without COMMSCOPE_CALIPER_PREFIX."""
    if not CALIPER_PREFIX:
        pytest.skip("Caliper is not installed here (no registry carries it); set COMMSCOPE_CALIPER_PREFIX "
                    "to a Caliper+Adiak install built with Debian Open MPI 4.1 to run this test")
    stack = stack_or_skip("debian-openmpi4")
    return stack, suite.build(stack, caliper="ON", build_dir=tmp_path_factory.mktemp("caliper") / "b",
                              extra=[f"-DCMAKE_PREFIX_PATH={CALIPER_PREFIX}"])
