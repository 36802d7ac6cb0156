"""Faults the store survives, each on a real embedded PostgreSQL of its own:
the server killed with SIGKILL mid-ingest, `db stop` during an ingest, and
the data directory's disk filling up. Every time the ingest exits non-zero
with a message that says what happened, nothing of its campaign is stored,
and the same ingest completes once the fault is gone."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from commscope.store import db
from conftest import private_home
from corpus import varied_copies

DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-m", "commscope.cli"]


def base_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG") and k != "COMMSCOPE_DB_URL"}
    return {**env, "COMMSCOPE_HOME": str(home)}


def counts(url: str) -> tuple[int, int, int]:
    with psycopg.connect(url) as c:
        return tuple(c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("campaigns", "runs", "node_metrics"))


def ingest_until_writing(env: dict, corpus: Path, url: str) -> subprocess.Popen:
    """An ingest of CORPUS, returned once its campaign transaction is writing call-tree rows."""
    p = subprocess.Popen([*CLI, "ingest", "-q", str(corpus)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.monotonic() + 120
    with psycopg.connect(url, autocommit=True) as watch:
        while time.monotonic() < deadline and p.poll() is None:
            if watch.execute("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE '%%COPY node_metrics%%' "
                             "AND pid <> pg_backend_pid()").fetchone()[0]:
                return p
            time.sleep(0.01)
    pytest.fail(f"the ingest never started writing (exit {p.poll()}): {p.stderr.read() if p.poll() is not None else ''}")


@pytest.fixture
def store(tmp_path):
    home = private_home()
    env = base_env(home)
    r = subprocess.run([*CLI, "db", "start"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    corpus = tmp_path / "corpus"
    varied_copies(DATA / "halo3d-overlap-n4.runtime-profile.cali", 600, corpus)
    yield home, env, corpus, r.stdout.strip().splitlines()[-1]
    db.Embedded(home).stop()
    shutil.rmtree(home, ignore_errors=True)


def rerun_completes(env: dict, corpus: Path, url: str) -> None:
    r = subprocess.run([*CLI, "ingest", "-q", str(corpus)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert counts(url)[:2] == (1, len(list(corpus.iterdir())))


def test_server_killed_mid_ingest(store):
    home, env, corpus, url = store
    p = ingest_until_writing(env, corpus, url)
    postmaster = int((db.Embedded(home).data / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, signal.SIGKILL)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1, err
    assert "the store failed during ingest" in err and "Nothing of this campaign was stored" in err, err
    assert "Traceback" not in err
    # the children of a SIGKILLed postmaster notice and exit; then db start recovers the data directory
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and db.Embedded(home).running():
        time.sleep(0.2)
    r = subprocess.run([*CLI, "db", "start"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert counts(url) == (0, 0, 0)
    rerun_completes(env, corpus, url)


def test_db_stop_during_an_ingest(store):
    home, env, corpus, url = store
    p = ingest_until_writing(env, corpus, url)
    r = subprocess.run([*CLI, "db", "stop"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "stopped", r.stderr
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "the store failed during ingest" in err and "Traceback" not in err, err
    assert subprocess.run([*CLI, "db", "start"], env=env, capture_output=True).returncode == 0
    assert counts(url) == (0, 0, 0)
    rerun_completes(env, corpus, url)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs for the data directory")
def test_the_data_directory_s_disk_fills_up(tmp_path):
    """The whole store on a tmpfs with 16 MiB left once the server is up; 1,500 profiles need more."""
    mnt = private_home() / "small"   # a path the server's user can reach
    mnt.mkdir(mode=0o711)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=120m,mode=711", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("this machine does not allow mounting a tmpfs (no CAP_SYS_ADMIN)")
    try:
        home = mnt / "home"
        home.mkdir(mode=0o711)
        env = base_env(home)
        r = subprocess.run([*CLI, "db", "start"], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        url = r.stdout.strip().splitlines()[-1]
        used = shutil.disk_usage(mnt).used
        subprocess.run(["mount", "-o", f"remount,size={used // 2**20 + 16}m", str(mnt)], check=True)
        corpus = tmp_path / "corpus"
        varied_copies(DATA / "halo3d-overlap-n4.runtime-profile.cali", 1500, corpus)
        r = subprocess.run([*CLI, "ingest", "-q", str(corpus)], env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 1, r.stderr
        assert "No space left on device" in r.stderr, r.stderr  # from the error, or quoted from the server log
        assert "Nothing of this campaign was stored" in r.stderr and "Traceback" not in r.stderr
        # More room, the server (restarted if the full disk stopped it), and a consistent, empty store.
        subprocess.run(["mount", "-o", "remount,size=1g", str(mnt)], check=True)
        r = subprocess.run([*CLI, "db", "start"], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert counts(url) == (0, 0, 0)
        with psycopg.connect(url) as c:  # what the aborted campaign wrote is not visible anywhere
            assert c.execute("SELECT count(*) FROM run_day").fetchone()[0] == 0
        rerun_completes(env, corpus, url)
    finally:
        db.Embedded(mnt / "home").stop()
        subprocess.run(["umount", "-l", str(mnt)])
        shutil.rmtree(mnt.parent, ignore_errors=True)
