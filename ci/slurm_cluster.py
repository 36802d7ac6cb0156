#!/usr/bin/env python3
"""A real multi-node Slurm cluster on this one machine: slurmctld on the host
(the head node) and one slurmd per emulated node, each in its own network
namespace with its own host name and address (ci/emulated_nodes.py), the nodes
joined by a bridge whose cables are shaped by `tc tbf`. The `slurm-emulated`
Ramble site and tests/test_slurm_cluster.py use it.

    sudo python3 ci/slurm_cluster.py start [--dir D] [--nodes 4] [--rate-mbit 1000]
    export SLURM_CONF=D/etc/slurm.conf           # start prints this line
    sudo python3 ci/slurm_cluster.py status [--dir D]   # one line per node; exit 0 when all are up
    sudo python3 ci/slurm_cluster.py stop [--dir D]
    sudo python3 ci/slurm_cluster.py measure [--dir D] -- CMD...   # CMD's wall time and the bytes
                                                 #   the kernel counted between the nodes meanwhile
    sudo python3 ci/slurm_cluster.py cleanup     # stop/remove what killed runs left behind

    with slurm_cluster.running(tmpdir, nodes=4) as cluster:     # from Python; stops always
        rc, out = cluster.sbatch_wait(script_text)

The network. Node i is namespace and host name `<tag>-n<i>` at <subnet>.<i+1>
on `eth0`; the host joins the bridge through one more cable (`csl<id>` on the
host side, <subnet>.254, unshaped), so slurmctld and the client commands run
on the host as on a login node, and jobs reach slurmctld from their nodes. The
host's only change is that one interface and its /24 route; the subnet is a
free 10.78.X. Job steps start inside their node's namespaces (slurmd forks
slurmstepd), so the host name a rank reports is its node's, and bytes between
ranks on different nodes cross the emulated cables, where the kernel counts them
(`traffic()`).

What is shared, because it is one machine: the CPU cores (every node has all of
them, CPUs= as `slurmd -C` says), memory (each node claims a share), the file
system (every node sees the same paths, as on a cluster with a shared file
system) and one munged, whose socket every slurmd reaches by path. Per node:
slurmd's spool, pid and log files (`%n` in slurm.conf) and TmpFS (where Slurm's
PMIx plugin keeps each step's files). The cluster has one `machine` license
(Licenses=machine:1), which the slurm-emulated site's jobs take, so they run one
at a time. What differs on a real cluster: ramble/sites/slurm-emulated/README.md.

Jobs: `Cluster.sbatch_wait` submits and polls slurmctld twice a second; a job
that does not end in time is cancelled and its state, Slurm's reason and the
daemons' logs come back with its output.

Cleaning up: `running()` (the tests) stops the cluster on leaving the block, on an
exception and on SIGTERM; the cluster records its owner's pid, and `cleanup_stale`
(run by every start and by `cleanup`) stops clusters whose owner or directory is gone
and removes namespaces nobody uses. A cluster from `start` has no owner and runs
until `stop`.

The state (key, sockets, spool, logs) lives under the directory, the ports are
picked free at start, and the network names carry an id of their own, so two
clusters on one machine do not collide. Stdlib only.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import emulated_nodes  # noqa: E402
import slurm_local  # noqa: E402

# Not emulated_nodes.PREFIX: its cleanup_stale() removes namespaces whose creating process is
# gone, and a cluster started by `start` outlives the process that made it.
PREFIX = "commscope-slurm"
PARTITION = "emulated"
DEFAULT_DIR = Path(tempfile.gettempdir()) / "commscope-slurm-cluster"
NODES = 4
RATE_MBIT = 1000.0
# Job states after which a job runs no more (squeue(1), JOB STATE CODES).
TERMINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                   "DEADLINE", "OUT_OF_MEMORY"}


# slurmd (22.05) will not start without a cgroup file system even when no plugin uses cgroups:
# an empty tmpfs with a named, controller-free v1 hierarchy in it passes its check (Nodes.daemon).
CGROUP_MOUNTS = ("mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup && mkdir /sys/fs/cgroup/systemd && "
                 "mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd")


def unavailable() -> str | None:
    """Why this machine cannot run the emulated cluster, or None if it can."""
    if os.geteuid() != 0:
        return ("the emulated Slurm cluster needs root (network namespaces, tc, and its daemons run as "
                "SlurmUser=root); not root here")
    missing = [p for p in (*slurm_local.DAEMONS, *slurm_local.CLIENTS, "mungekey")
               if not shutil.which(p, path=slurm_local._path())]
    if missing:
        return f"Slurm is not installed (no {', '.join(missing)}); ci/setup.sh installs slurm-wlm and munge"
    why = emulated_nodes.unavailable_reason()
    if why:
        return why
    # What Nodes.daemon does for each slurmd, in a private mount namespace of its own.
    p = subprocess.run(["unshare", "--mount", "/bin/sh", "-c", CGROUP_MOUNTS], capture_output=True, text=True)
    if p.returncode:
        return f"slurmd's stand-in cgroup file system cannot be mounted here ({p.stderr.strip()})"
    return None


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    return emulated_nodes._run(argv, check)


def _free_subnet() -> str:
    """A 10.78.X with no address or route on the host yet."""
    used = _run(["ip", "-4", "-o", "addr"]).stdout + _run(["ip", "-4", "route"]).stdout
    for x in random.sample(range(256), 256):
        if f"10.78.{x}." not in used:
            return f"10.78.{x}"
    raise RuntimeError("no free 10.78.X/24 on this host")


def sockets_dir(cid: str) -> Path:
    """Where a cluster's Unix sockets live: munged's, slurmstepd's (in SlurmdSpoolDir, named
    <node>_<job>.<step>) and PMIx's (under TmpFS). A socket's path has at most 108 bytes, and
    under a test's temporary directory slurmstepd's went over it: the batch step of every job
    failed to start and the job never ran. So a short path of its own, not the cluster's directory."""
    return Path("/tmp") / f"csl-{cid}"


class Nodes(emulated_nodes.EmulatedNodes):
    """The emulated nodes of one cluster: emulated_nodes' namespaces and shaped
    cables on the cluster's own subnet, plus an unshaped cable from the host."""

    def __init__(self, nodes: int, rate_mbit: float, cid: str, subnet: str):
        super().__init__(nodes, rate_mbit, tag=f"{PREFIX}-{cid}")
        self.ips = [f"{subnet}.{i + 1}" for i in range(nodes)]
        self.head_ip = f"{subnet}.254"
        self.head_if = f"csl{cid}"        # interface names have at most 15 characters

    def create(self) -> None:
        if any(ns in _run(["ip", "netns", "list"]).stdout for ns in self.hosts):
            raise RuntimeError(f"namespaces of {self.tag} exist already")
        try:
            self._create()
            # The host's cable: `head` is its port on the bridge.
            _run(["ip", "link", "add", self.head_if, "type", "veth", "peer", "name", "head", "netns", self.switch])
            _run(["ip", "addr", "add", f"{self.head_ip}/24", "dev", self.head_if])
            _run(["ip", "link", "set", self.head_if, "up"])
            _run(["ip", "-n", self.switch, "link", "set", "head", "master", "br0"])
            _run(["ip", "-n", self.switch, "link", "set", "head", "up"])
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        super().remove()     # deleting the switch namespace deletes the host's cable with its peer
        _run(["ip", "link", "delete", self.head_if], check=False)

    def daemon(self, node: int, argv: list[str]) -> list[str]:
        """argv run inside node `node` as a daemon of that node: its network namespace, host
        name and mount namespace (`ip netns exec` mounts a fresh /sys there). slurmd refuses
        to start without a cgroup file system at /sys/fs/cgroup even when no plugin uses
        cgroups (proctrack/linuxproc, task/none): a tmpfs with the (named, controller-free)
        systemd hierarchy mounted in it satisfies its cgroup v1 detection. Mounts made
        here stay in the node's mount namespace."""
        host = self.hosts[node]
        return ["ip", "netns", "exec", host, "unshare", "--uts", "--ipc", "/bin/sh", "-c",
                f'hostname {host} && {CGROUP_MOUNTS} && exec "$@"', "sh", *argv]

    def exists(self) -> bool:
        return self.switch in _run(["ip", "netns", "list"]).stdout.split()

    def _link_bytes(self, ns: str, dev: str) -> dict:
        link = json.loads(_run(["ip", "-n", ns, "-s", "-j", "link", "show", dev]).stdout)[0]
        return {"tx": int(link["stats64"]["tx"]["bytes"]), "rx": int(link["stats64"]["rx"]["bytes"])}

    def traffic(self) -> dict:
        """The kernel's byte counters: each node's eth0, and the bridge port to the host
        (its tx: what the nodes sent to the head node, i.e. Slurm's control traffic)."""
        return {"nodes": {h: self._link_bytes(h, "eth0") for h in self.hosts},
                "head": self._link_bytes(self.switch, "head")}


def internode_bytes(before: dict, after: dict) -> dict:
    """Bytes between nodes in an interval of two traffic() readings: what the nodes put on
    their cables less what of it went to the head node. Per node: bytes sent. Broadcasts
    (ARP), which the bridge copies to every port, and the readings not being simultaneous
    make it off by some hundred bytes, so an interval with no traffic between nodes may
    show a small negative count; it is meant for the megabytes of a job."""
    sent = {h: after["nodes"][h]["tx"] - before["nodes"][h]["tx"] for h in after["nodes"]}
    to_head = after["head"]["tx"] - before["head"]["tx"]
    return {"sent_by_node": sent, "to_head": to_head, "between_nodes": sum(sent.values()) - to_head}


class Cluster(slurm_local.Cluster):
    """slurm_local's cluster with one slurmd per emulated node. Reuses its munge key,
    process handling (a session per daemon) and sbatch_wait."""

    def __init__(self, root: Path, nodes: int = NODES, rate_mbit: float = RATE_MBIT):
        super().__init__(root)
        self.state_file = self.root / "cluster.json"
        if self.state_file.exists():      # a cluster started before, maybe by another process
            s = json.loads(self.state_file.read_text())
            nodes, rate_mbit, cid, subnet = s["nodes"], s["rate_mbit"], s["id"], s["subnet"]
        else:
            cid, subnet = secrets.token_hex(3), None
        self.cid, self.subnet, self.n, self.rate_mbit = cid, subnet, nodes, rate_mbit
        self.net = Nodes(nodes, rate_mbit, cid, subnet or "0.0.0")
        self.sockets = sockets_dir(cid)
        self.munge_socket = self.sockets / "munge.socket.2"

    @property
    def hosts(self) -> list[str]:
        return self.net.hosts

    def slurmd(self, i: int) -> str:
        return f"slurmd-n{i}"

    def daemons(self) -> list[str]:
        return ["munged", "slurmctld", *(self.slurmd(i) for i in range(self.n))]

    # ---- configuration -----------------------------------------------------------
    def _node_lines(self) -> str:
        p = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, env=self.env(), check=True)
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith("NodeName="))
        hw = dict(kv.split("=", 1) for kv in line.split())
        del hw["NodeName"]
        # The nodes share this machine's memory: each claims its share (claiming more drains it).
        hw["RealMemory"] = str(int(hw["RealMemory"]) // self.n)
        spec = " ".join(f"{k}={v}" for k, v in hw.items())
        return "".join(f"NodeName={h} NodeAddr={ip} {spec} State=UNKNOWN\n"
                       for h, ip in zip(self.net.hosts, self.net.ips))

    def _write_conf(self) -> None:
        shutil.rmtree(self.root / "state", ignore_errors=True)    # a new cluster: nothing of an earlier one
        for sub in ("etc", "state", "run", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for h in self.net.hosts:
            (self.sockets / "spool" / h).mkdir(parents=True, exist_ok=True)
            (self.sockets / "tmp" / h).mkdir(parents=True, exist_ok=True)
        r, k = self.root, self.sockets
        self.conf.write_text(f"""\
# Written by ci/slurm_cluster.py: {self.n} emulated nodes under {r}
ClusterName=commscope-emulated
# slurmctld on the host, reached at its address on the nodes' bridge.
SlurmctldHost=localhost({self.net.head_ip})
SlurmUser=root
SlurmdUser=root
SlurmctldPort={slurm_local._free_port()}
SlurmdPort={slurm_local._free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={r}/state
SlurmctldPidFile={self._pidfile('slurmctld')}
SlurmctldLogFile={self.log('slurmctld')}
# Every node sees this one file system: per-node files carry the node name (%n). The
# directories that hold Unix sockets are under a short path (sockets_dir).
SlurmdSpoolDir={k}/spool/%n
SlurmdPidFile={r}/run/slurmd-%n.pid
SlurmdLogFile={r}/log/slurmd-%n.log
# Slurm's PMIx plugin keeps each step's client files under TmpFS, named by job and
# step only: one directory per node, or the nodes of a step would share (and delete) it.
TmpFS={k}/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
FirstJobId={random.randint(1000, 10_000_000)}
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
# One `machine` license: the slurm-emulated site's jobs each take it, so they run one at a
# time (every emulated node computes on this machine's same cores).
Licenses=machine:1
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
{self._node_lines()}PartitionName={PARTITION} Nodes={",".join(self.net.hosts)} Default=YES MaxTime=INFINITE State=UP
""")
        # PMIxEnv: set in every job step's environment. gds=hash: the PMIx clients get their peers'
        # data by message from slurmstepd's PMIx server instead of reading its shared-memory store
        # (gds ds21/ds12), with which oversubscribed Open MPI 4.1 jobs on several nodes crashed in
        # MPI_Init far more often (bench/results/slurm_emulated.md).
        (self.conf.parent / "mpi.conf").write_text("PMIxEnv=PMIX_MCA_gds=hash\n")

    # ---- lifecycle -------------------------------------------------------------
    def start(self, timeout: float = 90, owner_pid: int | None = None) -> "Cluster":
        """Creates the nodes' network, starts munged and slurmctld on the host and a slurmd
        in every node, and waits until every node is idle. On any failure everything
        started so far is stopped and removed again. OWNER_PID: the process whose end ends
        the cluster (cleanup_stale stops it then); None for a cluster that runs until `stop`."""
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        cleanup_stale()
        if self.state_file.exists():
            raise RuntimeError(f"{self.root} holds a cluster already ({self.net.tag}); stop it first")
        try:
            self.subnet = _free_subnet()
            self.net = Nodes(self.n, self.rate_mbit, self.cid, self.subnet)
            self.root.mkdir(parents=True, exist_ok=True)
            self.state_file.write_text(json.dumps({"id": self.cid, "subnet": self.subnet, "nodes": self.n,
                                                   "rate_mbit": self.rate_mbit, "hosts": self.hosts,
                                                   "owner_pid": owner_pid}) + "\n")
            self.net.create()
            shutil.rmtree(self.sockets, ignore_errors=True)
            self.sockets.mkdir(mode=0o755)
            self._write_munge()
            self._write_conf()
            m = self.root / "munge"
            self._spawn("munged", ["munged", "--foreground", "--force", f"--socket={self.munge_socket}",
                                   f"--key-file={m / 'etc' / 'munge.key'}", f"--pid-file={m / 'run' / 'munged.pid'}",
                                   f"--seed-file={m / 'lib' / 'munged.seed'}", f"--log-file={self.log('munged')}"])
            self._wait(lambda: self.munge_socket.exists(), 20, "munged socket", "munged")
            self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
            self._wait(lambda: "UP" in self._run(["scontrol", "ping"]).stdout, 30,
                       "slurmctld to answer scontrol ping", "slurmctld")
            for i, h in enumerate(self.hosts):
                self._spawn(self.slurmd(i), self.net.daemon(i, ["slurmd", "-D", "-N", h, "-f", str(self.conf)]))
            self._wait(lambda: set(self.node_states().values()) == {"idle"}, timeout,
                       f"nodes {', '.join(self.hosts)} to be idle", "slurmctld")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, ready, timeout: float, what: str, daemon: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if ready():
                return
            if not all(self._alive(d) for d in self.daemons() if self._session(d) is not None):
                break
            time.sleep(0.5)
        gone = [d for d in self.daemons() if self._session(d) is not None and not self._alive(d)]
        tail = "\n".join(self._log_tail(d) for d in ["munged", "slurmctld", *(f"slurmd-{h}" for h in self.hosts)])
        raise RuntimeError(f"timed out waiting for {what} ({timeout:.0f} s; exited: {', '.join(gone) or 'none'}; "
                           f"nodes {self.node_states()}):\n{tail}")

    def node_states(self) -> dict[str, str]:
        p = self._run(["sinfo", "-h", "-N", "-o", "%N %T"])
        states = dict(line.split() for line in p.stdout.splitlines() if len(line.split()) == 2)
        return {h: states.get(h, "unknown").rstrip("*~#") for h in self.hosts}

    def node_state(self) -> str:
        return ",".join(sorted(set(self.node_states().values())))

    def running(self) -> bool:
        return all(self._alive(d) for d in self.daemons())

    def stop(self) -> None:
        """Cancels every job, stops every slurmd, slurmctld and munged with their sessions
        (job steps included), and removes the nodes' network. Safe to call twice."""
        if self._alive("slurmctld"):
            self._run(["scancel", "--full", "-u", "root"], timeout=10)
        for daemon in [*(self.slurmd(i) for i in range(self.n)), "slurmctld", "munged"]:
            pid = self._session(daemon)
            if pid is None:
                continue
            for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, sig)
                end = time.monotonic() + grace
                while self._alive(daemon) and time.monotonic() < end:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(pid, os.WNOHANG)
                    time.sleep(0.2)
                if not self._alive(daemon):
                    break
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            (self.root / "run" / f"{daemon}.session").unlink(missing_ok=True)
        for pid in self._stepds():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.subnet:
            self.net.remove()
        shutil.rmtree(self.sockets, ignore_errors=True)
        self.state_file.unlink(missing_ok=True)

    # ---- jobs --------------------------------------------------------------------
    def job_info(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` of one job as a dict (JobState, Reason, ExitCode, NodeList...);
        empty once slurmctld has forgotten it (MinJobAge, 300 s by default)."""
        p = self._run(["scontrol", "show", "job", "-o", job_id])
        return dict(re.findall(r"(\w+)=(\S*)", p.stdout)) if p.returncode == 0 else {}

    def sbatch_wait(self, script: str, cwd: Path | None = None, timeout: float = 120,
                    env: dict | None = None, name: str = "job") -> tuple[int, str]:
        """Submits `script` and waits for it by polling slurmctld twice a second (`sbatch
        --wait` polls at growing intervals, up to 10 s after a 1 s job). Returns (the job's
        exit status, its output); 128 + N when a signal N ended it. After `timeout` seconds
        the job is cancelled and the output ends with its state, Slurm's reason and the
        daemons' logs, so a job that never ran says why."""
        jobdir = Path(cwd or self.root / "jobs")
        jobdir.mkdir(parents=True, exist_ok=True)
        path, out = jobdir / f"{name}.sbatch", jobdir / f"{name}.out"
        path.write_text(script)
        out.unlink(missing_ok=True)
        try:
            p = subprocess.run(["sbatch", "--parsable", f"--output={out}", f"--job-name={name}", str(path)],
                               env=self.env(env), capture_output=True, text=True, timeout=30, cwd=jobdir)
        except subprocess.TimeoutExpired:
            return -999, f"[slurm_cluster] sbatch {path}: no answer from slurmctld in 30 s"
        if p.returncode:
            return p.returncode, f"[slurm_cluster] sbatch {path} failed: {p.stdout}{p.stderr}"
        job_id = p.stdout.strip().split(";")[0]
        end, info = time.monotonic() + timeout, {}
        while time.monotonic() < end:
            info = self.job_info(job_id)
            if info.get("JobState") in TERMINAL_STATES:
                rc, sig = (int(x) for x in info.get("ExitCode", "0:0").split(":"))
                text = out.read_text(errors="replace") if out.exists() else ""
                if info["JobState"] != "COMPLETED" and not text:
                    text = f"[slurm_cluster] job {job_id}: {info['JobState']} ({info.get('Reason')}), no output\n"
                return (128 + sig if sig else rc), text
            time.sleep(0.5)
        self._run(["scancel", "--full", job_id])
        text = out.read_text(errors="replace") if out.exists() else ""
        logs = "\n".join(self._log_tail(d) for d in ["slurmctld", *(f"slurmd-{h}" for h in self.hosts)])
        return -999, (f"{text}\n[slurm_cluster] job {job_id} ({name}): no result after {timeout:.0f} s, cancelled; "
                      f"state {info.get('JobState')}, reason {info.get('Reason')}, nodes {info.get('NodeList')}; "
                      f"node states {self.node_states()}\n{logs}")

    # ---- measuring ---------------------------------------------------------------
    def traffic(self) -> dict:
        return self.net.traffic()


def _stop_on_sigterm(signum, frame):
    raise SystemExit(f"slurm_cluster: signal {signum}, stopping the cluster")


@contextlib.contextmanager
def running(root: Path, nodes: int = NODES, rate_mbit: float = RATE_MBIT, timeout: float = 90):
    """A started cluster for the with-block; its daemons stop and its nodes go afterwards, always:
    on an exception, and on SIGTERM (turned into SystemExit while the block runs, main thread
    only). A SIGKILLed owner leaves it to the cleanup_stale() of the next start."""
    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    cluster = Cluster(root, nodes, rate_mbit)
    try:
        cluster.start(timeout, owner_pid=os.getpid())
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _processes_under(root: Path) -> list[int]:
    """Processes whose command line names a file under ROOT (munged, slurmctld, slurmd of that cluster)."""
    pids, mark = [], f"{root}/".encode()
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if mark in proc.joinpath("cmdline").read_bytes():
                pids.append(int(proc.name))
    return pids


def cleanup_stale(min_age_s: float = 60) -> list[str]:
    """Removes what killed runs left behind, and nothing of a cluster still in use:
    - a cluster whose processes run but whose owner (`running()`'s process) is gone, or whose
      directory is gone: its daemons are stopped and its nodes removed;
    - namespaces of a cluster none of whose nodes runs a process, older than MIN_AGE_S (a
      younger one may be a cluster being started right now)."""
    names = [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]
    clusters: dict[str, list[str]] = {}
    for ns in names:
        m = re.match(rf"^({PREFIX}-[0-9a-f]+)-(n\d+|sw)$", ns)
        if m:
            clusters.setdefault(m.group(1), []).append(ns)
    removed = []
    for tag, spaces in clusters.items():
        pids = [int(x) for ns in spaces for x in _run(["ip", "netns", "pids", ns], check=False).stdout.split()]
        if pids:
            conf = None
            for pid in pids:
                with contextlib.suppress(OSError, ValueError, IndexError):
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
                    if "-f" in argv and argv[argv.index("-f") + 1].endswith("/etc/slurm.conf"):
                        conf = Path(argv[argv.index("-f") + 1])
                        break
            if conf is None:
                continue        # not a slurmd of ours: leave it alone
            root, state = conf.parent.parent, conf.parent.parent / "cluster.json"
            if state.exists():
                owner = json.loads(state.read_text()).get("owner_pid")
                if owner is None or _alive(owner):
                    continue
                Cluster(root).stop()
            else:               # the directory went first (a test's tmp dir): kill what names it
                for pid in [*pids, *_processes_under(root)]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        else:
            created = min(((Path("/run/netns") / ns).stat().st_mtime for ns in spaces
                           if (Path("/run/netns") / ns).exists()), default=0)
            if time.time() - created < min_age_s:
                continue
        for ns in spaces:
            _run(["ip", "netns", "delete", ns], check=False)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        _run(["ip", "link", "delete", f"csl{tag.rsplit('-', 1)[1]}"], check=False)
        shutil.rmtree(sockets_dir(tag.rsplit('-', 1)[1]), ignore_errors=True)
        removed += spaces
    return removed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("start", "stop", "status", "measure", "cleanup"))
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"the cluster's key, state and logs "
                                                                   f"(default {DEFAULT_DIR})")
    ap.add_argument("--nodes", type=int, default=NODES, help=f"emulated nodes (default {NODES})")
    ap.add_argument("--rate-mbit", type=float, default=RATE_MBIT,
                    help=f"each node's cable, each way (tc tbf; default {RATE_MBIT:g})")
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.action == "cleanup":
        print("removed: " + (" ".join(cleanup_stale()) or "nothing"))
        return 0
    c = Cluster(args.dir, args.nodes, args.rate_mbit)
    if args.action == "start":
        reason = unavailable()
        if reason:
            print(f"slurm_cluster: {reason}", file=sys.stderr)
            return 2
        t0 = time.monotonic()
        try:
            c.start()
        except RuntimeError as e:
            print(f"slurm_cluster: {e}", file=sys.stderr)
            return 1
        print(f"[slurm_cluster] nodes {', '.join(f'{h} ({ip})' for h, ip in zip(c.hosts, c.net.ips))} idle after "
              f"{time.monotonic() - t0:.1f} s; slurmctld at {c.net.head_ip}", file=sys.stderr)
        print(f"export SLURM_CONF={c.conf}")
        return 0
    if args.action == "stop":
        c.stop()
        return 0
    if not c.state_file.exists():
        print(f"no cluster in {c.root}")
        return 1
    if args.action == "measure":
        if not command:
            ap.error("measure: name the command to run after --")
        before, t0 = c.traffic(), time.monotonic()
        rc = subprocess.run(command, env=c.env()).returncode
        wall, moved = time.monotonic() - t0, internode_bytes(before, c.traffic())
        print(json.dumps({"command": command, "exit_status": rc, "wall_s": round(wall, 2), **moved}, indent=1),
              file=sys.stderr)
        return rc
    states = c.node_states() if c._alive("slurmctld") else dict.fromkeys(c.hosts, "stopped")
    for h, ip in zip(c.hosts, c.net.ips):
        print(f"{h} {ip} {states[h]}")
    return 0 if c.running() and set(states.values()) <= {"idle", "allocated", "mixed"} else 1


if __name__ == "__main__":
    sys.exit(main())
