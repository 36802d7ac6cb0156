#!/usr/bin/env python3
"""A real single-node Slurm cluster in a temporary directory: munged,
slurmctld and slurmd from Debian's `munge` and `slurm-wlm`, started by hand
because there is no systemd. The tests and the Ramble `slurm-local` site use it.

    with slurm_local.running(tmpdir) as cluster:      # from Python; stops always
        rc, out = cluster.sbatch_wait(script_text)

    python3 ci/slurm_local.py start --dir D     # leaves the daemons running,
    export SLURM_CONF=D/etc/slurm.conf          #   prints this line
    python3 ci/slurm_local.py stop --dir D

Everything (key, sockets, state, spool, logs) lives under the directory, and
the ports are free ones picked at start, so a second cluster on the same
machine does not collide. Stdlib only.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "sinfo", "scontrol", "squeue", "scancel")
PARTITION = "local"



def srun(stack, ranks: int, argv: list[str]) -> list[str]:
    """The srun line that starts `argv` on `ranks` ranks of a commscope.workflow.stacks.Stack."""
    return stack.srun(ranks, argv)


def unavailable() -> str | None:
    """Why this machine cannot run the cluster, or None if it can."""
    missing = [p for p in (*DAEMONS, *CLIENTS, "mungekey") if not shutil.which(p, path=_path())]
    if missing:
        return f"Slurm is not installed (no {', '.join(missing)}); ci/setup.sh installs slurm-wlm and munge"
    if os.geteuid() != 0:
        return "the single-node Slurm cluster runs its daemons as root (SlurmUser=root); not root here"
    return None


def _path() -> str:
    # munged, slurmctld and slurmd live in /usr/sbin, often not on a user's PATH.
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.conf = self.root / "etc" / "slurm.conf"
        self.munge_socket = self.root / "munge" / "run" / "munge.socket.2"
        self.node = socket.gethostname().split(".")[0]

    # ---- environment -----------------------------------------------------------
    def env(self, extra: dict | None = None) -> dict:
        """The environment client commands (sbatch, srun, sinfo) need."""
        return {**os.environ, "PATH": _path(), "SLURM_CONF": str(self.conf), **(extra or {})}

    def _pidfile(self, daemon: str) -> Path:
        return self.root / "run" / f"{daemon}.pid"

    def log(self, daemon: str) -> Path:
        return self.root / "log" / f"{daemon}.log"

    # ---- configuration -----------------------------------------------------------
    def _write_munge(self) -> None:
        m = self.root / "munge"
        # munged refuses a key directory others can read and a socket
        # directory others cannot enter.
        for sub, mode in (("etc", 0o700), ("run", 0o755), ("lib", 0o700), ("log", 0o700)):
            (m / sub).mkdir(parents=True, exist_ok=True)
            os.chmod(m / sub, mode)
        key = m / "etc" / "munge.key"
        if not key.exists():
            subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, env=self.env(),
                           capture_output=True)
        os.chmod(key, 0o400)

    def _node_line(self) -> str:
        # slurmd -C prints this host's real topology and memory; a node that
        # claims more than it has is drained ("Low RealMemory").
        p = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, env=self.env(), check=True)
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith("NodeName="))
        # NodeAddr: CI containers often cannot resolve their own hostname.
        return line + " NodeAddr=127.0.0.1 State=UNKNOWN"

    def _write_conf(self) -> None:
        for sub in ("etc", "state", "spool", "run", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        r = self.root
        self.conf.write_text(f"""\
# Written by ci/slurm_local.py: a single-node cluster under {r}
ClusterName=commscope
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={self._pidfile('slurmctld')}
SlurmdPidFile={self._pidfile('slurmd')}
SlurmctldLogFile={self.log('slurmctld')}
SlurmdLogFile={self.log('slurmd')}
# No cgroups in a container: track processes through /proc, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
# Job ids start at a random value and PMIx keeps its files under this cluster, so two
# clusters on one machine never share /tmp/spmix_appdir_<uid>_<jobid>.<step>.
FirstJobId={random.randint(1000, 10_000_000)}
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
# sbatch --wait asks for the job after 2 s, then at fourfold intervals while they stay under MinJobAge / 2
# (the default 300 s gives 2, 8, 32 s: a 3 s job returns after 10 s). At 4 s it asks every 2 s, and an
# ended job's record is kept 4 s at least, two of its polls.
MinJobAge=4
{self._node_line()}
PartitionName={PARTITION} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")
        (r / "pmix").mkdir(exist_ok=True)
        (self.conf.parent / "mpi.conf").write_text(f"PMIxCliTmpDirBase={r}/pmix\n")

    # ---- lifecycle -------------------------------------------------------------
    def start(self, timeout: float = 90) -> "Cluster":
        """Starts munged, slurmctld and slurmd and waits until the node is idle.
        On any failure the daemons started so far are stopped again."""
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        try:
            self._write_munge()
            self._write_conf()
            m = self.root / "munge"
            self._spawn("munged", ["munged", "--foreground", "--force", f"--socket={self.munge_socket}",
                                   f"--key-file={m / 'etc' / 'munge.key'}", f"--pid-file={m / 'run' / 'munged.pid'}",
                                   f"--seed-file={m / 'lib' / 'munged.seed'}", f"--log-file={self.log('munged')}"])
            self._wait(lambda: self.munge_socket.exists(), 20, "munged socket", "munged")
            self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
            self._wait(lambda: self._run(["scontrol", "ping"]).stdout.find("UP") >= 0, 30,
                       "slurmctld to answer scontrol ping", "slurmctld")
            self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf)])
            self._wait(lambda: self.node_state() == "idle", timeout, f"node {self.node} to be idle", "slurmd")
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, daemon: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{daemon}.out", "ab")
        # Own session: stop() signals exactly these processes and their children.
        p = subprocess.Popen(argv, env=self.env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        log.close()
        self._pidfile(daemon).parent.mkdir(parents=True, exist_ok=True)
        (self.root / "run" / f"{daemon}.session").write_text(str(p.pid))

    def _wait(self, ready, timeout: float, what: str, daemon: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if ready():
                return
            if not self._alive(daemon):
                break
            time.sleep(0.5)
        tail = "\n".join(self._log_tail(d) for d in DAEMONS)
        raise RuntimeError(f"timed out waiting for {what} ({timeout:.0f} s, {daemon} "
                           f"{'running' if self._alive(daemon) else 'exited'}):\n{tail}")

    def _log_tail(self, daemon: str, lines: int = 15) -> str:
        text = ""
        for f in (self.log(daemon), self.root / "log" / f"{daemon}.out"):
            if f.exists():
                text += "".join(f.read_text(errors="replace").splitlines(True)[-lines:])
        return f"--- {daemon}:\n{text}" if text else ""

    def _session(self, daemon: str) -> int | None:
        f = self.root / "run" / f"{daemon}.session"
        return int(f.read_text()) if f.exists() else None

    def _alive(self, daemon: str) -> bool:
        pid = self._session(daemon)
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # A zombie (exited child not yet reaped) counts as gone.
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return False
        return True

    def _run(self, argv: list[str], timeout: float = 15) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, -1, "", "timeout")

    def node_state(self) -> str:
        p = self._run(["sinfo", "-h", "-n", self.node, "-o", "%T"])
        return p.stdout.strip().rstrip("*")

    def stop(self) -> None:
        """Cancels every job, then stops slurmd, slurmctld and munged, each
        with its whole session (job steps included). Safe to call twice."""
        if self._alive("slurmctld"):
            self._run(["scancel", "--full", "-u", "root"], timeout=10)
        for daemon in ("slurmd", "slurmctld", "munged"):
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
            with contextlib.suppress(ChildProcessError):  # reap it if it is our child
                os.waitpid(pid, os.WNOHANG)
            (self.root / "run" / f"{daemon}.session").unlink(missing_ok=True)
        # slurmstepd runs each job step in a session of its own; none may outlive the cluster.
        for pid in self._stepds():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _stepds(self) -> list[int]:
        """slurmstepd processes of this cluster (their environment names our conf)."""
        pids = []
        for proc in Path("/proc").glob("[0-9]*"):
            with contextlib.suppress(OSError):
                if proc.joinpath("comm").read_text().strip() != "slurmstepd":
                    continue
                if f"SLURM_CONF={self.conf}".encode() in proc.joinpath("environ").read_bytes():
                    pids.append(int(proc.name))
        return pids

    def running(self) -> bool:
        return all(self._alive(d) for d in DAEMONS)

    # ---- jobs --------------------------------------------------------------------
    def sbatch_wait(self, script: str, cwd: Path | None = None, timeout: float = 300,
                    env: dict | None = None, name: str = "job") -> tuple[int, str]:
        """Submits `script` with `sbatch --wait` and returns (exit status, job
        output). sbatch --wait returns the job's own exit status."""
        jobdir = Path(cwd or self.root / "jobs")
        jobdir.mkdir(parents=True, exist_ok=True)
        path = jobdir / f"{name}.sbatch"
        out = jobdir / f"{name}.out"
        path.write_text(script)
        out.unlink(missing_ok=True)
        try:
            p = subprocess.run(["sbatch", "--wait", f"--output={out}", f"--job-name={name}", str(path)],
                               env=self.env(env), capture_output=True, text=True, timeout=timeout, cwd=jobdir)
        except subprocess.TimeoutExpired:
            self._run(["scancel", "--full", "-n", name])
            return -999, (out.read_text(errors="replace") if out.exists() else "") + f"\n[slurm_local] {name}: " \
                f"no result after {timeout:.0f} s; cancelled"
        text = out.read_text(errors="replace") if out.exists() else ""
        return p.returncode, text + (p.stderr if p.returncode else "")


@contextlib.contextmanager
def running(root: Path, timeout: float = 90):
    """A started cluster for the with-block; its daemons stop afterwards, always."""
    cluster = Cluster(root)
    cluster.start(timeout)
    try:
        yield cluster
    finally:
        cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("start", "stop", "status"))
    ap.add_argument("--dir", type=Path, required=True, help="directory for the cluster's key, state and logs")
    args = ap.parse_args()
    c = Cluster(args.dir)
    if args.action == "start":
        reason = unavailable()
        if reason:
            print(f"slurm_local: {reason}", file=sys.stderr)
            return 2
        t0 = time.monotonic()
        try:
            c.start()
        except RuntimeError as e:
            print(f"slurm_local: {e}", file=sys.stderr)
            return 1
        print(f"[slurm_local] node {c.node} idle after {time.monotonic() - t0:.1f} s", file=sys.stderr)
        print(f"export SLURM_CONF={c.conf}")
        return 0
    if args.action == "stop":
        c.stop()
        return 0
    state = c.node_state() if c.running() else "stopped"
    print(f"{c.node} {state}")
    return 0 if c.running() else 1


if __name__ == "__main__":
    sys.exit(main())
