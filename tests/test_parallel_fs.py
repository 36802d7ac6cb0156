"""pio on a real GlusterFS volume (ci/parallel_fs.py): 4 bricks in their own network namespace, sharded, FUSE-
mounted with the client cache off, and 4 ranks of Debian Open MPI writing and reading one shared file with
independent, collective and two-phase MPI-IO.

Each run is checked by routes other than pio's own: the file read back through the mount with numpy against the
value every element must hold (workloads/README.md, pio), the file reassembled from the shard files on the bricks'
own directories, and the bricks' `gluster volume profile` counters (writes reached two bricks or more; with the
cache off every byte reaches a brick exactly once). Then the volume is stopped and nothing may be left.

Needs root and the Debian packages glusterfs-server and glusterfs-client (ci/setup.sh installs them); skips with
the reason otherwise. The test does not install them itself: a test run should not change the machine's packages.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pytest

import parallel_fs
import suite
from conftest import built_once

N = (256, 128, 128)          # 32 MiB: 8 shards of 4 MiB, so a file spreads over several bricks
BYTES = N[0] * N[1] * N[2] * 8
SHARD = 4 << 20
CASES = {"independent": ["--method", "independent"], "collective": ["--method", "collective"],
         "two-phase": ["--method", "two-phase", "--group-size", "2"]}

lack = parallel_fs.missing()
pytestmark = pytest.mark.skipif(bool(lack), reason="GlusterFS cannot run here: " + "; ".join(lack))


def expected() -> np.ndarray:
    """The global array as workloads/README.md defines pio's file: element g holds (g mod 1000003) + 0.25 (g mod 7)."""
    g = np.arange(BYTES // 8, dtype=np.int64)
    return (g % 1000003).astype(np.float64) + 0.25 * (g % 7).astype(np.float64)


@pytest.fixture(scope="module")
def pfs():
    stack, bdir = built_once("debian-openmpi4")
    root = Path(tempfile.mkdtemp(prefix="commscope-pfs-test-"))
    try:
        mnt = parallel_fs.start(root, bricks=4, layout="shard", cache=False)
        yield root, mnt, stack, bdir
    finally:
        parallel_fs.stop(root)


def _from_bricks(root: Path, name: str) -> tuple[bytes, set[str]]:
    """The file as the bricks hold it: the base file (first shard) on one brick, shard i as .shard/<gfid>.<i> on
    whichever brick DHT put it; DHT link files (empty, sticky) are skipped. Returns the bytes and the bricks that
    hold data."""
    bricks = sorted((root / "bricks").iterdir())
    holders, base = set(), None
    for b in bricks:
        f = b / name
        if f.is_file() and f.stat().st_size and not (f.stat().st_mode & 0o1000):
            base = f
            holders.add(b.name)
    assert base is not None, f"no brick holds {name}"
    gfid = str(uuid.UUID(bytes=os.getxattr(base, "trusted.gfid")))
    parts = [base.read_bytes().ljust(SHARD, b"\0")]
    for i in range(1, -(-BYTES // SHARD)):
        found = [b / ".shard" / f"{gfid}.{i}" for b in bricks if (b / ".shard" / f"{gfid}.{i}").is_file()
                 and (b / ".shard" / f"{gfid}.{i}").stat().st_size]
        assert len(found) == 1, f"shard {i} of {name}: found on {[str(f) for f in found]}"
        holders.add(found[0].parent.parent.name)
        parts.append(found[0].read_bytes().ljust(SHARD, b"\0"))
    return b"".join(parts)[:BYTES], holders


@pytest.mark.parametrize("method", list(CASES))
def test_pio_on_glusterfs(pfs, method):
    root, mnt, stack, bdir = pfs
    parallel_fs.profile_clear(root)
    args = ["--n", ",".join(map(str, N)), "--iters", "1", "--dir", str(mnt), "--keep", *CASES[method]]
    r = suite.run(stack, bdir, "pio", args, 4, timeout=120)
    assert not suite.problems(r), suite.problems(r)
    prof = parallel_fs.profile(root)
    path = mnt / f"commscope-pio-{method}.dat"
    try:
        assert int(r.out.params["file_bytes"]) == BYTES
        # the file system pio says it wrote to is the one util-linux finds under the mount: GlusterFS's client
        fstype = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", str(mnt)], capture_output=True, text=True,
                                check=True).stdout.strip()
        assert r.out.params["fs"] == fstype == "fuse.glusterfs", (r.out.params.get("fs"), fstype)
        assert path.stat().st_size == BYTES
        want = expected()
        got = np.fromfile(path, dtype="<f8")
        assert got.size == want.size
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"{bad.size} elements differ through the mount, first at index {bad[0]}"

        raw, holders = _from_bricks(root, path.name)
        on_bricks = np.frombuffer(raw, dtype="<f8")
        bad = np.flatnonzero(on_bricks != want)
        assert bad.size == 0, f"{bad.size} elements differ on the bricks, first at index {bad[0]}"
        assert len(holders) >= 2, f"the file's shards are all on {holders}"
    finally:
        path.unlink(missing_ok=True)

    writers = {b for b, p in prof.items() if p.calls.get("WRITE")}
    readers = {b for b, p in prof.items() if p.calls.get("READ")}
    assert len(writers) >= 2 and len(readers) >= 2, f"WRITE reached {writers}, READ reached {readers}"
    # cache off: no write-behind, no page cache, so each byte reaches a brick exactly once each way
    assert sum(p.bytes_written for p in prof.values()) == BYTES
    assert sum(p.bytes_read for p in prof.values()) == BYTES


def test_start_is_idempotent_and_cache_switches(pfs):
    root, mnt, stack, bdir = pfs
    pid = parallel_fs._load(root).glusterd_pid
    assert parallel_fs.start(root, bricks=4, layout="shard", cache=False) == mnt
    assert parallel_fs._load(root).glusterd_pid == pid
    parallel_fs.set_cache(root, True)
    args = " ".join(Path(f"/proc/{p}/cmdline").read_text().replace("\0", " ")
                    for p in os.listdir("/proc") if p.isdigit() and Path(f"/proc/{p}/cmdline").exists()
                    and str(mnt) in Path(f"/proc/{p}/cmdline").read_text())
    assert "--direct-io-mode=disable" in args
    opts = parallel_fs.gluster(root, "volume", "get", parallel_fs.VOLUME, "performance.write-behind")
    assert opts.split()[-1] == "on"
    parallel_fs.set_cache(root, False)
    opts = parallel_fs.gluster(root, "volume", "get", parallel_fs.VOLUME, "performance.write-behind")
    assert opts.split()[-1] == "off"


def test_stop_leaves_nothing(pfs):
    root, mnt, stack, bdir = pfs
    st = parallel_fs._load(root)
    in_ns = subprocess.run(["ip", "netns", "pids", st.netns], capture_output=True, text=True).stdout.split()
    assert len(in_ns) >= 5, f"glusterd and 4 bricks expected in {st.netns}, found pids {in_ns}"
    parallel_fs.stop(root)
    assert str(mnt) not in Path("/proc/mounts").read_text()
    assert not root.exists()
    assert st.netns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(parallel_fs._alive(int(p)) for p in in_ns), "a glusterd or brick process outlived stop()"
    parallel_fs.stop(root)  # stopping a stopped volume is fine
