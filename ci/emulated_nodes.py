#!/usr/bin/env python3
"""Several emulated nodes on one machine, so a placement can be measured here.

Each node is a network namespace with its own host name (a UTS namespace per
launched process), one veth interface `eth0` at 10.77.0.(i+1)/24, and a cable
to a bridge in a switch namespace. Each cable is shaped by a token bucket
(`tc tbf`) in both directions, like a NIC's link rate: bytes between nodes
queue behind the rate, bytes within a node go over shared memory and do not.
Nothing is created in the host's own network namespace, and every name starts
with `commscope-emu<pid>`; `with EmulatedNodes(...)` always removes it all.

Open MPI launches into the nodes with `mpirun` started inside node 0 and an
rsh agent (a small script, `write_rsh_agent`) that runs each remote `orted`
under `ip netns exec` in the target node's namespace, as ssh would on a real
cluster. The kernel's per-interface counters then say how many bytes crossed
the emulated network (`tx_bytes`).

`tc netem` (delay) is not used: this machine's kernel is built without it
(CONFIG_NET_SCH_NETEM is not set); `tbf` and `htb` are there. A rate limit is
what makes inter-node bytes, the quantity placement optimises, cost time.

    sudo python3 ci/emulated_nodes.py check       # can this machine do it? (exit 0/1, says why not)
    sudo python3 ci/emulated_nodes.py cleanup     # remove what a killed run left behind

Stdlib only.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

PREFIX = "commscope-emu"
SUBNET = "10.77.0"


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True)
    if check and p.returncode:
        raise RuntimeError(f"{' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def _terminate(signum, frame):
    raise SystemExit(f"emulated nodes: signal {signum}, removing the nodes")


def unavailable_reason() -> str | None:
    """Why emulated nodes cannot be made here, or None when they can. Tries
    the real thing (a namespace with a shaped veth) and removes it."""
    if os.geteuid() != 0:
        return "emulated nodes need root (network namespaces, tc)"
    for tool in ("ip", "tc", "unshare"):
        if not shutil.which(tool):
            return f"emulated nodes need `{tool}` (iproute2, util-linux)"
    try:
        with EmulatedNodes(2, rate_mbit=100, tag=f"{PREFIX}{os.getpid()}probe"):
            pass
    except RuntimeError as e:
        return f"emulated nodes cannot be set up here: {e}"
    return None


class EmulatedNodes:
    """`nodes` namespaces on one bridge, each cable shaped to `rate_mbit`."""

    def __init__(self, nodes: int, rate_mbit: float, tag: str | None = None, burst_bytes: int = 65536):
        if not 1 <= nodes <= 200:
            raise ValueError(f"nodes: {nodes} is outside 1..200")
        self.tag = tag or f"{PREFIX}{os.getpid()}"
        self.rate_mbit, self.burst = rate_mbit, burst_bytes
        # One name per node: namespace, host name, hostfile entry.
        self.hosts = [f"{self.tag}-n{i}" for i in range(nodes)]
        self.ips = [f"{SUBNET}.{i + 1}" for i in range(nodes)]
        self.switch = f"{self.tag}-sw"

    # ---- set up and tear down ------------------------------------------------------------

    def __enter__(self) -> "EmulatedNodes":
        cleanup_stale()
        # A plain `kill` must still tear the nodes down: turn SIGTERM into an
        # exception that unwinds through __exit__ (main thread only).
        self._old_term = None
        if threading.current_thread() is threading.main_thread():
            self._old_term = signal.signal(signal.SIGTERM, _terminate)
        try:
            self._create()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.remove()
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
            self._old_term = None

    def _shape(self, ns: str, dev: str) -> None:
        # tbf: rate, a burst of one GSO packet, and a queue of up to 1 s at the rate.
        _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
              "rate", f"{self.rate_mbit}mbit", "burst", str(self.burst), "latency", "1000ms"])

    def _create(self) -> None:
        _run(["ip", "netns", "add", self.switch])
        _run(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        hosts_file = "127.0.0.1 localhost\n" + "".join(f"{ip} {h}\n" for ip, h in zip(self.ips, self.hosts))
        for i, (ns, ip) in enumerate(zip(self.hosts, self.ips)):
            _run(["ip", "netns", "add", ns])
            # `ip netns exec` bind-mounts /etc/netns/<ns>/hosts over /etc/hosts:
            # the node names resolve inside the nodes only.
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts_file)
            port = f"p{i}"
            _run(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", self.switch])
            _run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0"])
            for dev in ("lo", "eth0"):
                _run(["ip", "-n", ns, "link", "set", dev, "up"])
            _run(["ip", "-n", self.switch, "link", "set", port, "master", "br0"])
            _run(["ip", "-n", self.switch, "link", "set", port, "up"])
            self._shape(ns, "eth0")           # what the node sends
            self._shape(self.switch, port)    # what the node receives

    def remove(self) -> None:
        """Deletes the namespaces (their veths and qdiscs go with them)."""
        for ns in [*self.hosts, self.switch]:
            _run(["ip", "netns", "delete", ns], check=False)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        try:
            Path("/etc/netns").rmdir()  # only if nobody else uses it
        except OSError:
            pass

    # ---- running on a node -------------------------------------------------------------------

    def on(self, node: int, argv: list[str]) -> list[str]:
        """argv run inside node `node`: its network namespace and host name."""
        host = self.hosts[node]
        return ["ip", "netns", "exec", host, "unshare", "--uts", "/bin/sh", "-c",
                f'hostname {host} && exec "$@"', "sh", *argv]

    def write_rsh_agent(self, directory: Path) -> Path:
        """An rsh/ssh stand-in for Open MPI's plm_rsh_agent: `agent HOST CMD...`
        runs CMD through a shell inside HOST's namespace, as ssh would."""
        cases = "".join(f"  {h}|{ip}) ns={h} ;;\n" for h, ip in zip(self.hosts, self.ips))
        script = ("#!/bin/sh\n"
                  "# commscope emulated nodes: Open MPI's rsh agent (ci/emulated_nodes.py)\n"
                  'host=$1; shift\n'
                  'case $host in\n' + cases +
                  '  *) echo "commscope emulated nodes: unknown host $host" >&2; exit 1 ;;\n'
                  'esac\n'
                  'exec ip netns exec "$ns" unshare --uts /bin/sh -c "hostname $ns && $*"\n')
        path = Path(directory) / f"{self.tag}-rsh"
        path.write_text(script)
        path.chmod(0o755)
        return path

    def openmpi_launch(self, mpirun: str, agent: Path, hostfile: Path, ranks: int, argv: list[str],
                       extra: list[str] | None = None) -> list[str]:
        """mpirun inside node 0, ranks placed by the hostfile (block by default);
        shared memory within a node, TCP over eth0 between nodes, pml ob1 so
        the BTLs carry the traffic."""
        return self.on(0, [mpirun, "--hostfile", str(hostfile), "-n", str(ranks),
                           "--mca", "plm_rsh_agent", str(agent),
                           "--mca", "pml", "ob1", "--mca", "btl", "self,vader,tcp",
                           "--mca", "btl_tcp_if_include", "eth0", "--mca", "oob_tcp_if_include", "eth0",
                           *(extra or []), *argv])

    def write_hostfile(self, path: Path, slots: int) -> Path:
        Path(path).write_text("".join(f"{h} slots={slots}\n" for h in self.hosts))
        return Path(path)

    # ---- counters --------------------------------------------------------------------------------

    def tx_bytes(self) -> list[int]:
        """Bytes each node has put on its cable so far (kernel counter of eth0)."""
        out = []
        for ns in self.hosts:
            link = json.loads(_run(["ip", "-n", ns, "-s", "-j", "link", "show", "eth0"]).stdout)[0]
            out.append(int(link["stats64"]["tx"]["bytes"]))
        return out

    def shaper_stats(self) -> list[dict]:
        """Each node's egress token bucket: bytes sent and times the rate held a packet back."""
        out = []
        for ns in self.hosts:
            tc = _run(["ip", "netns", "exec", ns, "tc", "-s", "-j", "qdisc", "show", "dev", "eth0"])
            q = json.loads(tc.stdout)[0]
            out.append({"kind": q["kind"], "bytes": q["bytes"], "overlimits": q["overlimits"], "drops": q["drops"]})
        return out


def cleanup_stale() -> list[str]:
    """Removes emulated nodes whose creating process is gone (a killed run)."""
    names = [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]
    removed = []
    for ns in names:
        if not ns.startswith(PREFIX):
            continue
        pid = "".join(ch for ch in ns[len(PREFIX):].split("-")[0] if ch.isdigit())
        if pid and Path(f"/proc/{pid}").exists():
            continue
        _run(["ip", "netns", "delete", ns], check=False)
        shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        removed.append(ns)
    return removed


def main() -> int:
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "check":
        why = unavailable_reason()
        print(why or "emulated nodes work here")
        return 1 if why else 0
    if cmd == "cleanup":
        print("removed: " + (" ".join(cleanup_stale()) or "nothing"))
        return 0
    print("usage: python3 ci/emulated_nodes.py check|cleanup", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
