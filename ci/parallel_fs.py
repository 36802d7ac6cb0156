#!/usr/bin/env python3
"""A real parallel file system on one machine: a GlusterFS volume of several bricks, FUSE-mounted.

The I/O study (workload pio) compares independent, collective and two-phase MPI-IO of one shared file. On a
local disk behind the page cache small non-contiguous requests cost little, so the groundwater paper's effect
(two-phase 25x faster reads, 3x faster writes on Lustre) cannot show. This script gives pio a distributed file
system whose client turns every request into network round trips to separate brick servers.

Layout:
- One glusterd and its N bricks (`glusterfsd` processes, one TCP port each) run in their own network namespace,
  reached from the host over a veth pair, so every request crosses a real TCP connection to another network
  stack. glusterd's state, sockets and logs stay under ROOT (bind mounts in the server's own mount namespace),
  so nothing touches the host's /var/lib/glusterd. One server namespace rather than one per brick: the bricks share
  this machine's cores and disk either way, and without netem (below) separate namespaces would add no cost of their
  own; the bricks are still separate servers to the client (own process, port and connection).
- `layout="shard"` (default): a distribute volume over the bricks with sharding on (4 MB shards, Gluster's
  minimum), so one shared file is spread over the bricks as Lustre stripes a file over OSTs.
  `layout="disperse"`: one erasure-coded set over all bricks (redundancy 1), so every request reaches every brick
  and partial stripes are read-modify-written.
- The client is the FUSE mount `mount -t glusterfs` at ROOT/mnt in the host's namespaces, where MPI ranks run.
- `cache=False` turns the client cache off: the mount uses `direct-io-mode=enable` (no kernel page cache), and the
  client-side performance translators (write-behind, read-ahead, io-cache, quick-read, stat-prefetch,
  open-behind, readdir-ahead) are switched off, so each MPI-IO request becomes a FUSE request and a brick FOP.
  `cache=True` restores Gluster's defaults and lets the kernel page cache serve the mount.

The kernel here has no `sch_netem`, so no network delay is added: the cost measured is the FUSE + TCP + brick path
itself.

API (stable; other studies call it):
    start(root, bricks=4, layout="shard", cache=True, install_missing=False) -> Path  # the mount; idempotent
    stop(root)                                                  # unmount, stop daemons, remove ROOT
    set_cache(root, on)                                         # switch the client cache of a running volume
    profile_clear(root); profile(root) -> {brick: BrickProfile}  # `gluster volume profile` per brick
    gluster(root, *args) -> str                                 # the gluster CLI against this volume's glusterd
    missing() -> [str]                                          # why GlusterFS cannot run here (empty: it can)

CLI:
    python3 ci/parallel_fs.py [--root DIR] start [--bricks 4] [--layout shard|disperse] [--no-cache] [--install]
    python3 ci/parallel_fs.py [--root DIR] cache on|off | status | profile [--clear] | stop
(ROOT defaults to $COMMSCOPE_PFS_ROOT or /tmp/commscope-pfs; `start` prints the mount point.)

Root only. The Debian packages are glusterfs-server and glusterfs-client (`install()`, about 10 s with apt).
Stdlib only.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_ROOT = Path(os.environ.get("COMMSCOPE_PFS_ROOT", "/tmp/commscope-pfs"))
VOLUME = "csvol"
PACKAGES = ["glusterfs-server", "glusterfs-client"]
LAYOUTS = ("shard", "disperse")
# Client-side translators that cache, aggregate or prefetch; all off when the cache is off.
CACHE_TRANSLATORS = ["performance.write-behind", "performance.read-ahead", "performance.io-cache",
                     "performance.quick-read", "performance.stat-prefetch", "performance.open-behind",
                     "performance.readdir-ahead"]
TIMEOUT = 120


class PfsError(RuntimeError):
    """The file system could not be started, changed or stopped; the message says which step and why."""


@dataclass
class State:
    root: str
    netns: str
    host_if: str
    server_if: str
    host_ip: str
    server_ip: str
    glusterd_pid: int
    bricks: int
    layout: str
    cache: bool
    mount: str


@dataclass
class BrickProfile:
    """One brick's `gluster volume profile` counters since the last clear."""
    calls: dict = field(default_factory=dict)          # FOP -> number of calls
    writes_by_size: dict = field(default_factory=dict)  # block-size bucket (bytes, lower bound) -> writes
    reads_by_size: dict = field(default_factory=dict)
    bytes_written: int = 0
    bytes_read: int = 0


# ---- small helpers ----------------------------------------------------------------------------------------

def _run(cmd: list[str], check: bool = True, timeout: float = TIMEOUT, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode:
        raise PfsError(f"{' '.join(cmd)} failed (exit {p.returncode}): {(p.stdout + p.stderr).strip()[-2000:]}")
    return p


def _names(root: Path) -> dict:
    """Per-root names, so two volumes (a test's and a measurement's) can run side by side."""
    h = hashlib.sha1(str(root).encode()).hexdigest()[:6]
    third = int(h, 16) % 200 + 20
    return {"netns": f"cspfs-{h}", "host_if": f"cspfs{h}h", "server_if": f"cspfs{h}s",
            "host_ip": f"10.213.{third}.1", "server_ip": f"10.213.{third}.2"}


def _state_file(root: Path) -> Path:
    return root / "state.json"


def _load(root: Path) -> State | None:
    try:
        return State(**json.loads(_state_file(root).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:  # a zombie is not a server
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _ours(root: Path) -> bool:
    """Whether root is a folder this script made (or an empty one), so stop() may remove it."""
    return (root / "glusterd.vol").exists() or _state_file(root).exists() or not any(root.iterdir())


def _mounted(path: Path) -> bool:
    try:
        return any(line.split()[1] == str(path) for line in Path("/proc/mounts").read_text().splitlines())
    except OSError:
        return False


def missing() -> list[str]:
    """What this machine lacks to run the file system, as sentences (empty when everything is there)."""
    out = []
    if os.geteuid() != 0:
        out.append("not root (glusterd, network namespaces and FUSE mounts need root)")
    if not Path("/dev/fuse").exists():
        out.append("no /dev/fuse")
    for prog in ("glusterd", "gluster", "mount.glusterfs"):
        if shutil.which(prog) is None and not Path(f"/sbin/{prog}").exists():
            out.append(f"{prog} not found (apt-get install {' '.join(PACKAGES)}, or start(..., install=True))")
    for prog in ("ip", "nsenter"):
        if shutil.which(prog) is None:
            out.append(f"{prog} not found (iproute2, util-linux)")
    return out


def install() -> None:
    """Installs the Debian GlusterFS packages with apt-get (about 10 s on this machine)."""
    if os.geteuid() != 0:
        raise PfsError("installing GlusterFS needs root (apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    p = _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES], check=False, timeout=600,
             env=env)
    if p.returncode:  # an old package list: update once, then try again
        _run(["apt-get", "update", "-qq"], timeout=600, env=env)
        _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES], timeout=600, env=env)


def gluster(root: Path, *args: str, check: bool = True) -> str:
    """Runs the gluster CLI in the server's namespaces (its glusterd socket is private to them)."""
    st = _load(Path(root))
    if st is None or not _alive(st.glusterd_pid):
        raise PfsError(f"no running GlusterFS under {root} (start it first: python3 ci/parallel_fs.py start "
                       f"--root {root})")
    p = _run(["nsenter", "-t", str(st.glusterd_pid), "-m", "-n", "gluster", "--mode=script", *args], check=check)
    return p.stdout


# ---- start / stop -----------------------------------------------------------------------------------------

def _network(n: dict) -> None:
    """The server's network namespace and the veth pair that joins it to the host."""
    _run(["ip", "netns", "add", n["netns"]])
    _run(["ip", "link", "add", n["host_if"], "type", "veth", "peer", "name", n["server_if"]])
    _run(["ip", "link", "set", n["server_if"], "netns", n["netns"]])
    _run(["ip", "addr", "add", f"{n['host_ip']}/24", "dev", n["host_if"]])
    _run(["ip", "link", "set", n["host_if"], "up"])
    inside = ["ip", "netns", "exec", n["netns"]]
    _run([*inside, "ip", "addr", "add", f"{n['server_ip']}/24", "dev", n["server_if"]])
    _run([*inside, "ip", "link", "set", n["server_if"], "up"])
    _run([*inside, "ip", "link", "set", "lo", "up"])


def _start_glusterd(root: Path, n: dict) -> int:
    """glusterd in the server namespace, with /run and /var/log/glusterfs bound to folders under root."""
    (root / "run" / "gluster").mkdir(parents=True, exist_ok=True)
    (root / "log").mkdir(exist_ok=True)
    (root / "lib").mkdir(exist_ok=True)
    vol = root / "glusterd.vol"
    vol.write_text("volume management\n    type mgmt/glusterd\n"
                   f"    option working-directory {root / 'lib'}\n"
                   "    option transport-type socket\n    option transport.socket.listen-port 24007\n"
                   "    option ping-timeout 0\n    option event-threads 1\n    option max-port 60999\n"
                   "end-volume\n")
    pidfile = root / "glusterd.pid"
    script = (f"mkdir -p /var/log/glusterfs && mount --bind {root / 'run'} /run && "
              f"mount --bind {root / 'log'} /var/log/glusterfs && "
              f"exec glusterd -f {vol} -p {pidfile} -l {root / 'log' / 'glusterd.log'}")
    _run(["ip", "netns", "exec", n["netns"], "sh", "-c", script])
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            pid = int(pidfile.read_text())
            # ready when the CLI answers
            p = subprocess.run(["nsenter", "-t", str(pid), "-m", "-n", "gluster", "--mode=script", "pool", "list"],
                               capture_output=True, text=True, timeout=30)
            if p.returncode == 0:
                return pid
        time.sleep(0.1)
    raise PfsError(f"glusterd did not come up; see {root / 'log' / 'glusterd.log'}")


def _mount(st: State) -> None:
    mnt = Path(st.mount)
    mnt.mkdir(parents=True, exist_ok=True)
    opts = [f"log-file={Path(st.root) / 'log' / 'client.log'}",
            f"direct-io-mode={'disable' if st.cache else 'enable'}"]
    _run(["mount", "-t", "glusterfs", "-o", ",".join(opts), f"{st.server_ip}:/{VOLUME}", str(mnt)])
    for _ in range(50):  # mount.glusterfs returns before the FUSE client has connected to every brick
        if _mounted(mnt):
            try:
                os.statvfs(mnt)
                return
            except OSError:
                pass
        time.sleep(0.1)
    raise PfsError(f"mount -t glusterfs {st.server_ip}:/{VOLUME} {mnt} did not come up; see "
                   f"{Path(st.root) / 'log' / 'client.log'}")


def _umount(mnt: Path) -> None:
    if _mounted(mnt):
        if _run(["umount", str(mnt)], check=False).returncode:
            _run(["umount", "-l", str(mnt)], check=False)


def _translators(root: Path, cache: bool) -> None:
    for opt in CACHE_TRANSLATORS:
        if cache:
            gluster(root, "volume", "reset", VOLUME, opt)
        else:
            gluster(root, "volume", "set", VOLUME, opt, "off")


def healthy(root: Path) -> bool:
    """Whether the volume under root is up: glusterd alive and the mount answering."""
    st = _load(Path(root))
    if st is None or not _alive(st.glusterd_pid) or not _mounted(Path(st.mount)):
        return False
    try:
        os.statvfs(st.mount)
    except OSError:
        return False
    return True


def start(root: Path | str = DEFAULT_ROOT, bricks: int = 4, layout: str = "shard", cache: bool = True,
          install_missing: bool = False) -> Path:
    """Starts (or finds running) a GlusterFS volume of `bricks` bricks under root, FUSE-mounted at root/mnt,
    and returns the mount point. Idempotent: a healthy volume with the same bricks and layout is kept (its
    cache setting switched if it differs); anything else left under root is stopped and started afresh.

    root: a folder for the bricks, glusterd's state, logs and the mount point; removed by stop(root).
    layout: "shard" (distribute + 4 MB shards, a file spread over bricks) or "disperse" (erasure-coded, every
    request to every brick). cache: False mounts with direct-io-mode=enable and the client performance
    translators off. install_missing: install the Debian packages with apt-get when glusterd is missing."""
    root = Path(root).absolute()
    if layout not in LAYOUTS:
        raise PfsError(f"layout {layout!r}: not one of {', '.join(LAYOUTS)}")
    if bricks < (3 if layout == "disperse" else 2):
        raise PfsError(f"bricks={bricks}: a {layout} volume needs at least {3 if layout == 'disperse' else 2}")
    if install_missing and any("glusterfs-server" in m for m in missing()):
        install()
    lack = missing()
    if lack:
        raise PfsError("cannot run GlusterFS here: " + "; ".join(lack))
    st = _load(root)
    if st and healthy(root) and st.bricks == bricks and st.layout == layout:
        if st.cache != cache:
            set_cache(root, cache)
        return Path(st.mount)
    n = _names(root)
    if root.exists() or Path(f"/run/netns/{n['netns']}").exists():
        stop(root)
    if f" {n['host_ip']}/" in _run(["ip", "-4", "-o", "addr"]).stdout:
        raise PfsError(f"address {n['host_ip']} is already on an interface here (another volume's root whose name "
                       f"hashes alike?); choose another --root")
    root.mkdir(parents=True)
    try:
        _network(n)
        pid = _start_glusterd(root, n)
        st = State(root=str(root), glusterd_pid=pid, bricks=bricks, layout=layout, cache=cache,
                   mount=str(root / "mnt"), **n)
        _state_file(root).write_text(json.dumps(asdict(st), indent=1))
        paths = []
        for b in range(1, bricks + 1):
            (root / "bricks" / f"b{b}").mkdir(parents=True)
            paths.append(f"{n['server_ip']}:{root / 'bricks' / f'b{b}'}")
        kind = ["disperse", str(bricks), "redundancy", "1"] if layout == "disperse" else []
        # force: the bricks are folders on the root file system, which Gluster refuses without it
        gluster(root, "volume", "create", VOLUME, *kind, "transport", "tcp", *paths, "force")
        if layout == "shard":
            gluster(root, "volume", "set", VOLUME, "features.shard", "on")
            gluster(root, "volume", "set", VOLUME, "features.shard-block-size", "4MB")
        if not cache:
            _translators(root, cache=False)
        gluster(root, "volume", "start", VOLUME)
        _mount(st)
    except BaseException:
        stop(root)
        raise
    return Path(st.mount)


def set_cache(root: Path | str, on: bool) -> None:
    """Switches the client cache of a running volume: the performance translators, then a remount with the
    matching direct-io-mode."""
    root = Path(root).absolute()
    st = _load(root)
    if st is None or not healthy(root):
        raise PfsError(f"no running GlusterFS under {root}")
    _translators(root, on)
    _umount(Path(st.mount))
    st.cache = on
    _state_file(root).write_text(json.dumps(asdict(st), indent=1))
    _mount(st)


def stop(root: Path | str = DEFAULT_ROOT) -> None:
    """Unmounts, stops the volume, glusterd and every process left in the server namespace, removes the
    namespace and root. Safe on a half-started or already stopped volume."""
    root = Path(root).absolute()
    if root.exists() and not _ours(root):
        raise PfsError(f"{root} holds files this script did not make (no glusterd.vol or state.json); "
                       f"not touching it: choose an empty or new --root")
    n = _names(root)
    st = _load(root)
    _umount(root / "mnt")
    if st and _alive(st.glusterd_pid):
        subprocess.run(["nsenter", "-t", str(st.glusterd_pid), "-m", "-n", "gluster", "--mode=script", "volume",
                        "stop", VOLUME, "force"], capture_output=True, timeout=TIMEOUT)
    # glusterd, the bricks and any helper they forked: exactly the processes in this volume's namespace
    if Path(f"/run/netns/{n['netns']}").exists():
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = [int(p) for p in _run(["ip", "netns", "pids", n["netns"]], check=False).stdout.split()]
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            for _ in range(50):
                if not any(_alive(p) for p in pids):
                    break
                time.sleep(0.1)
        _run(["ip", "netns", "del", n["netns"]], check=False)
    _run(["ip", "link", "del", n["host_if"]], check=False)  # normally gone with the namespace
    if _mounted(root / "mnt"):
        raise PfsError(f"{root / 'mnt'} is still mounted; not removing {root}")
    if root.exists():
        shutil.rmtree(root)


# ---- profile ----------------------------------------------------------------------------------------------

_SIZE = {"b": 1, "kb": 1024, "mb": 1 << 20}


def profile_clear(root: Path | str) -> None:
    """Starts profiling (if it is not on) and zeroes the counters."""
    gluster(root, "volume", "profile", VOLUME, "start", check=False)
    gluster(root, "volume", "profile", VOLUME, "info", "clear")


def profile(root: Path | str) -> dict[str, BrickProfile]:
    """Per brick, the FOP call counts, the block-size histograms of reads and writes and the bytes moved
    since profile_clear, from `gluster volume profile V info cumulative`."""
    text = gluster(root, "volume", "profile", VOLUME, "info", "cumulative")
    out: dict[str, BrickProfile] = {}
    cur = None
    sizes: list[int] = []
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"Brick: (\S+)", s)
        if m:
            cur = out.setdefault(m.group(1), BrickProfile())
            continue
        if cur is None:
            continue
        if s.startswith("Block Size:"):
            sizes = [int(v) * _SIZE[u.lower()] for v, u in re.findall(r"(\d+)(b|kb|mb)\+", s, re.I)]
        elif s.startswith(("No. of Reads:", "No. of Writes:")):
            hist = cur.reads_by_size if "Reads" in s else cur.writes_by_size
            for size, count in zip(sizes, (int(v) for v in s.split(":", 1)[1].split())):
                if count:
                    hist[size] = hist.get(size, 0) + count
        elif s.startswith("Data Read:"):
            cur.bytes_read = int(s.split(":")[1].split()[0])
        elif s.startswith("Data Written:"):
            cur.bytes_written = int(s.split(":")[1].split()[0])
        else:
            m = re.match(r"[\d.]+\s+[\d.]+ us\s+[\d.]+ us\s+[\d.]+ us\s+(\d+)\s+(\w+)$", s) or \
                re.match(r"[\d.]+\s+[\d.]+ ns\s+[\d.]+ ns\s+[\d.]+ ns\s+(\d+)\s+(\w+)$", s)
            if m:
                cur.calls[m.group(2)] = cur.calls.get(m.group(2), 0) + int(m.group(1))
    return out


# ---- CLI --------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="folder of the volume (default %(default)s, "
                    "or $COMMSCOPE_PFS_ROOT)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="start (or keep) the volume and print its mount point")
    s.add_argument("--bricks", type=int, default=4)
    s.add_argument("--layout", choices=LAYOUTS, default="shard")
    s.add_argument("--no-cache", action="store_true", help="direct-io-mode=enable, client performance translators off")
    s.add_argument("--install", action="store_true", help="apt-get install the GlusterFS packages if missing")
    c = sub.add_parser("cache", help="switch the client cache of the running volume")
    c.add_argument("state", choices=("on", "off"))
    sub.add_parser("status", help="say whether the volume is up, and how")
    p = sub.add_parser("profile", help="per-brick FOP counts and request sizes since the last --clear")
    p.add_argument("--clear", action="store_true")
    sub.add_parser("stop", help="unmount, stop everything, remove the root folder")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "start":
            print(start(a.root, a.bricks, a.layout, cache=not a.no_cache, install_missing=a.install))
        elif a.cmd == "cache":
            set_cache(a.root, a.state == "on")
        elif a.cmd == "status":
            st = _load(a.root.absolute())
            if not healthy(a.root.absolute()):
                print(f"not running under {a.root}")
                return 1
            print(json.dumps(asdict(st), indent=1))
        elif a.cmd == "profile":
            if a.clear:
                profile_clear(a.root)
            else:
                print(json.dumps({b: asdict(p) for b, p in profile(a.root).items()}, indent=1))
        elif a.cmd == "stop":
            stop(a.root)
    except (PfsError, subprocess.TimeoutExpired) as e:
        print(f"parallel_fs: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
