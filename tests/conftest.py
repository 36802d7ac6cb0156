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
from commscope.workflow.ingest import Provenance, ingest  # noqa: E402
from helpers import HISTORY, NIGHTS, partial_copy  # noqa: E402
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
    with emb.admin("postgres") as c:   # a test server: nothing in it must survive a crash of the machine
        c.execute("ALTER SYSTEM SET fsync = off")
        c.execute("ALTER SYSTEM SET synchronous_commit = off")
        c.execute("ALTER SYSTEM SET full_page_writes = off")
        c.execute("SELECT pg_reload_conf()")
    _server.append(emb)
    yield emb, url
    emb.stop()
    shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(emb: db.Embedded, template: str | None = None):
    """A fresh, migrated database on EMB, prepared as `commscope db start` prepares its own (the schema owned
    by commscope's role, which is no superuser); yields a DSN connecting as that role, and drops it after.
    It is a copy of one database migrated once per server (migrated_template), or of TEMPLATE: the same
    schema, made in a fraction of the time."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    template = template or migrated_template(emb)
    with emb.admin("postgres") as c:
        c.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield emb.url(name)
    finally:
        with emb.admin("postgres") as c:
            c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@contextlib.contextmanager
def pg_restored(emb: db.Embedded, dump: Path):
    """DUMP restored by PostgreSQL's own pg_restore into a scratch database on EMB, no commscope code: the
    reference a migration test reads the old store from. Yields a superuser DSN, and drops it after."""
    name = f"reference_{uuid.uuid4().hex[:12]}"
    with emb.admin("postgres") as a:
        a.execute(f'CREATE DATABASE "{name}"')
    try:
        ref = emb.url(name, db.SUPERUSER)
        subprocess.run([emb.bin("pg_restore"), "--no-owner", "--no-acl", f"--dbname={ref}", str(dump)], check=True,
                       capture_output=True)
        yield ref
    finally:
        with emb.admin("postgres") as a:
            a.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


_templates: dict[str, str] = {}


def migrated_template(emb: db.Embedded) -> str:
    """The name of a database on EMB created, prepared and migrated as `commscope db start` does it, once per
    server; nothing connects to it afterwards, so CREATE DATABASE can copy it."""
    key = str(emb.data)
    if key not in _templates:
        name = f"template_{uuid.uuid4().hex[:12]}"
        with emb.admin("postgres") as c:
            c.execute(f'CREATE DATABASE "{name}"')
        emb.prepare_database(name)
        with psycopg.connect(emb.url(name)) as conn:
            db.migrate(conn)
        _templates[key] = name
    return _templates[key]


@pytest.fixture
def dsn(server, request):
    """A fresh, migrated database per test (fresh_database); for a test that asks for `filled` or
    `real_history`, a fresh copy of the database that fixture's data was stored into once per session
    (filled_template, history_template)."""
    template = None
    wanted = {"filled", "real_history"} & set(request.fixturenames)
    assert len(wanted) <= 1, f"{request.node.name}: filled and real_history are two stores, not one"
    if wanted == {"filled"}:
        template = filled_template(server[0], request.getfixturevalue("workload_outputs"))
    elif wanted == {"real_history"}:
        template = history_template(server[0], request.getfixturevalue("tmp_path_factory"))
    with fresh_database(server[0], template) as url:
        yield url


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


# ---- real stores several test files read -------------------------------------------------------------------

DATA = ROOT / "tests" / "data"
# Real Ramble workspaces (tests/data/ramble/README.md): Caliper mpi mode with a
# failed experiment, matrix mode over two interconnects, repeats.
RAMBLE_WORKSPACES = ["smoke-openmpi4-mpi", "smoke-mpich4-matrix", "smoke-openmpi4-repeats"]


@pytest.fixture(scope="session")
def workload_outputs(tmp_path_factory):
    """Real runs of the workloads whose panels no committed fixture feeds:
    collsweep with the default and a forced Allreduce algorithm, pio with each
    method, halo3d weak scaling (same block per rank at 1 and 2 ranks). Their
    stdout files are ingested like any run without Caliper. halo3d strong scaling (same global grid at 1 and 2
    ranks)."""
    stack, bdir = built_once("debian-openmpi4")
    out = tmp_path_factory.mktemp("outputs")
    scratch = tmp_path_factory.mktemp("pio")
    forced = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": "3"}
    coll = ["--coll", "allreduce,bcast", "--sizes", "8,1K,64K", "--iters", "20", "--warmup", "2"]
    pio = ["--n", "21,17,12", "--iters", "2", "--dir", str(scratch)]
    runs = [("collsweep-default", "collsweep", coll, 2, None), ("collsweep-forced", "collsweep", coll, 2, forced)]
    runs += [(f"pio-{m}", "pio", pio + ["--method", m, "--group-size", "2"], 2, None)
             for m in ("independent", "collective", "two-phase")]
    runs += [(f"halo3d-weak-n{n}", "halo3d", ["--local", "12,12,8", "--iters", "4", "--variant", "blocking"], n, None)
             for n in (1, 2)]
    runs += [(f"halo3d-strong-n{n}", "halo3d", ["--n", "24,24,16", "--iters", "4", "--variant", "blocking"], n, None)
             for n in (1, 2)]
    for name, workload, args, n, env in runs:
        r = suite.run(stack, bdir, workload, args, n, env=env)
        assert r.returncode == 0, f"{name}: {r.stderr[-800:]}"
        (out / f"{name}.out").write_text(r.stdout)
    return out


@pytest.fixture
def filled(dsn):
    """The store with every kind of real data the panels read (fill_panel_data; dsn is a copy of
    filled_template), and a read-only role."""
    return grant_local(dsn, "grafana_ro")


_stored: dict[tuple[str, str], str] = {}


def stored_template(emb: db.Embedded, key: str, fill) -> str:
    """The name of a database on EMB copied from migrated_template and filled by FILL(dsn), once per server and
    KEY; nothing connects to it afterwards, so fresh_database can copy it for each test that reads that store."""
    if (str(emb.data), key) not in _stored:
        name = f"stored_{uuid.uuid4().hex[:12]}"
        with emb.admin("postgres") as c:
            c.execute(f'CREATE DATABASE "{name}" TEMPLATE "{migrated_template(emb)}"')
        fill(emb.url(name))
        _stored[str(emb.data), key] = name
    return _stored[str(emb.data), key]


def filled_template(emb: db.Embedded, outputs: Path) -> str:
    """The database fill_panel_data filled with OUTPUTS, once per server and outputs (stored_template)."""
    return stored_template(emb, f"filled {outputs}", lambda dsn: fill_panel_data(dsn, outputs))


def fill_panel_data(dsn: str, workload_outputs: Path) -> None:
    """Every kind of real data the panels read into the store behind DSN: tests/data's profiles and Ramble
    workspaces, the workloads' outputs, and one regression annotation, change point and series too noisy to
    gate."""
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA], Provenance(system="lab-a"))
        for ws in RAMBLE_WORKSPACES:
            ingest(conn, [DATA / "ramble" / ws], Provenance())
        ingest(conn, [workload_outputs], Provenance(system="lab-a", stack="debian-openmpi4"))
        # One regression annotation, as the detector (issue 7) writes them, on a real run.
        run = conn.execute("SELECT started_at, system, app, workload, stack, interconnect, ranks FROM v_runs "
                           "WHERE mpi_fraction_avg IS NOT NULL ORDER BY mpi_fraction_avg DESC LIMIT 1").fetchone()
        conn.execute("INSERT INTO annotations (\"time\", system, app, workload, stack, interconnect, ranks, text, tags) "
                     "VALUES (%s, %s, %s, %s, %s, %s, %s, 'regression: mpi_fraction_avg +12%%', "
                     "'{commscope-check,mpi_fraction_avg}')", run)
        # One change point, as changepoints.py stores them, on a real run (tests/data's series are too short to
        # have one: test_change_points.py finds them on the real gate history). It sits on its series' first run,
        # with no runs before it, so changepoints.verdict calls it "no baseline", as stored here.
        conn.execute("INSERT INTO change_points (series_id, metric, \"window\", run_id, campaign_id, \"time\", "
                     "n_before, n_after, mean_before, mean_after, stddev_before, stddev_after, change, direction, "
                     "p_value, method, verdict) SELECT series_id, 'time_s', 'run', id, campaign_id, started_at, 4, 1, "
                     "1.0, 1.12, 0.01, 0, 0.12, 'regression', 0.003, 'test', 'no baseline' FROM runs "
                     "WHERE status = 'ok' "
                     "AND series_id IS NOT NULL ORDER BY id LIMIT 1")
        # One series too noisy to gate, as `commscope check` records it (store/queries/gate.record_detectable);
        # tests/data's series are too short for the gate to have a baseline.
        conn.execute("INSERT INTO gate_detectable (series_id, metric, \"window\", campaign_id, run_id, \"time\", "
                     "verdict, detectable, max_undetectable, runs_a_night, n_new, n_baseline, reason) "
                     "SELECT series_id, 'time_s', 'run', campaign_id, id, started_at, 'cannot tell', 0.45, 0.2, 9, "
                     "3, 30, 'cannot tell: this series could not show shifts below 45 %' FROM runs "
                     "WHERE status = 'ok' AND series_id IS NOT NULL AND campaign_id IS NOT NULL ORDER BY id LIMIT 1")
        conn.commit()


@pytest.fixture
def real_history(dsn):
    """Nights 1-5 as five campaigns (store_history; dsn is a copy of history_template); returns the DSN and each
    series' night-5 series_id."""
    with psycopg.connect(dsn) as conn:
        sids = {s: conn.execute("SELECT series_id FROM runs WHERE source LIKE %s",
                                (f"%{files[5]}",)).fetchone()[0] for s, files in NIGHTS.items()}
        partial = conn.execute("SELECT status, series_id FROM runs WHERE source LIKE %s",
                               ("%/without-rank-_/%",)).fetchall()
    # the premise: four series, and the partial runs are stored as such, in the per-rank series
    assert len(set(sids.values())) == 4
    assert partial == [("partial", sids["24-per-rank"])] * 2
    return dsn, sids


def history_template(emb: db.Embedded, tmp_path_factory) -> str:
    """The database store_history filled, once per server (stored_template)."""
    return stored_template(emb, "real_history", lambda dsn: store_history(dsn, tmp_path_factory.mktemp("history")))


def store_history(dsn: str, tmp_path: Path) -> None:
    """Nights 1-5 of tests/gate-history into the store behind DSN as five campaigns, nights 4 and 5 each with a
    per-rank run missing one rank's file (copied under TMP_PATH)."""
    prov = Provenance(system="ci-box", stack="debian-openmpi4")
    with psycopg.connect(dsn) as conn:
        for night in (1, 2, 3, 4, 5):
            paths = [HISTORY / files[night] for files in NIGHTS.values() if night in files]
            if night == 4:
                paths.append(partial_copy(tmp_path, 1))
            if night == 5:
                paths.append(partial_copy(tmp_path, 0))
            res = ingest(conn, paths, prov, allow_partial=True)
            assert len(res.inserted) == len(paths), res
