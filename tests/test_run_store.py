"""`commscope run` makes sure of its store before any experiment runs (issue 17): without COMMSCOPE_DB_URL or
PG* it starts and migrates the embedded store under COMMSCOPE_HOME; a named server that does not answer stops the
run before it starts, naming the server. Real PostgreSQL; no Ramble needed (workflow_run.ensure_store is the step
`commscope run` takes before its experiments)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from commscope.store import db
from commscope.workflow import errors, run as workflow_run
from conftest import private_home


@pytest.fixture
def home(monkeypatch):
    h = private_home()
    monkeypatch.setenv("COMMSCOPE_HOME", str(h))
    for v in ("COMMSCOPE_DB_URL", "PGHOST", "PGDATABASE", "PGSERVICE"):
        monkeypatch.delenv(v, raising=False)
    yield h
    db.Embedded(h).stop()
    shutil.rmtree(h, ignore_errors=True)


def test_without_a_server_the_embedded_store_is_started_and_migrated(home):
    assert not db.Embedded(home).running()
    said = []
    workflow_run.ensure_store(said.append)
    assert db.Embedded(home).running()
    assert any(str(home) in s and "starting the embedded store" in s for s in said), said
    with psycopg.connect(db.Embedded(home).url()) as conn:
        applied = {r[0] for r in conn.execute("SELECT name FROM schema_version")}
    assert applied == {name for _v, name, _sql in db.migrations()}
    said.clear()
    workflow_run.ensure_store(said.append)     # running already: nothing started, nothing said
    assert said == []


def test_a_named_server_that_does_not_answer_stops_the_run_before_it_starts(home, monkeypatch):
    monkeypatch.setenv("COMMSCOPE_DB_URL", f"postgresql:///commscope?host={home}/no-such-socket-dir&user=x")
    monkeypatch.setenv("COMMSCOPE_CONNECT_TIMEOUT", "2")
    with pytest.raises(errors.WorkflowError, match="nothing was run.*cannot connect.*no-such-socket-dir"):
        workflow_run.ensure_store(lambda s: None)
    assert not db.Embedded(home).running()   # a named server is never replaced by the embedded one


# ---- what a run says about profiles, per stack ----------------------------------------------------------------

def _links_caliper(binary: Path) -> bool:
    """Whether the ELF file needs libcaliper, from its dynamic section (binutils' readelf), not from commscope."""
    out = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    return bool(re.search(r"\(NEEDED\).*libcaliper", out))


def test_a_run_says_per_stack_whether_it_records_profiles_and_how_many_experiments_carry_none(tmp_path):
    """Setup with Caliper for one stack only (Debian Open MPI 4.1, COMMSCOPE_CALIPER_PREFIX) and another stack
    without, then `commscope run smoke --dry-run`: the run names each stack's profiling, and the count of
    experiments without a profile equals the experiments whose rendered script puts a build on PATH whose
    binaries do not link libcaliper (readelf)."""
    import os
    ramble, cali = os.environ.get("RAMBLE_ROOT"), os.environ.get("COMMSCOPE_CALIPER_PREFIX")
    if not ramble or not cali:
        pytest.skip("needs RAMBLE_ROOT (Ramble, versions.yaml) and COMMSCOPE_CALIPER_PREFIX (a Caliper+Adiak built "
                    "with Debian Open MPI 4.1); neither is in a package registry")
    home = private_home()
    env = {k: v for k, v in os.environ.items() if k not in ("SPACK_ROOT", "COMMSCOPE_DB_URL")}
    env["COMMSCOPE_HOME"] = str(home)
    cli = [sys.executable, "-m", "commscope.cli"]
    try:
        r = subprocess.run([*cli, "setup", "--stacks", "debian-openmpi4,debian-mpich4", "--caliper-prefix",
                            f"debian-openmpi4={cali}"], env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        r = subprocess.run([*cli, "run", "smoke", "--dry-run"], env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        ws = Path(re.search(r"^workspace: (\S+)$", r.stdout, re.M).group(1))
        scripts = sorted(ws.glob("experiments/*/*/*/execute_experiment"))
        bare = 0
        for script in scripts:
            build = Path(re.search(r'export PATH="([^:"]+):', script.read_text()).group(1))
            app = script.parent.parent.parent.name
            bare += not _links_caliper(build / app)
        assert 0 < bare < len(scripts), (bare, len(scripts))
        assert f"{bare} of {len(scripts)} experiments will carry no profile" in r.stdout, r.stdout
        assert re.search(r"profiles on debian-openmpi4: Caliper mpi ", r.stdout), r.stdout
        assert re.search(r"profiles on debian-mpich4: none ", r.stdout), r.stdout
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("args, code, says", [
    (["run", "no-such-study", "--dry-run"], 2, "unknown study 'no-such-study'; valid: "),
    (["run", "smoke", "--site", "no-such-site", "--dry-run"], 2, "unknown site 'no-such-site'; valid: "),
    (["run", "smoke", "--dry-run", "--no-spack"], 1, "run `commscope setup` first"),
])
def test_run_exits_2_on_a_name_that_does_not_exist_and_1_on_what_is_missing(home, args, code, says):
    """A usage error (a study or site that does not exist) exits 2, like click's own; a missing piece the user
    can make (no workload builds yet) exits 1. Both name what is wrong."""
    r = subprocess.run([sys.executable, "-m", "commscope.cli", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == code and says in r.stderr, (r.returncode, r.stderr)
