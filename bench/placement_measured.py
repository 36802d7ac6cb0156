#!/usr/bin/env python3
"""The placement advice, measured: commgraph on emulated nodes (ci/emulated_nodes.py)
under block placement (the launchers' default), under the advisor's rank map,
and under random rank maps, in alternating rounds.

The advice comes from a real message-tracing profile of commgraph (default: the
16-rank random-sparse fixture), exactly as `commscope advise placement` computes
it. The runs use the same graph (pattern, degree, seed and sizes are read from
the profile's commgraph.out); --large-bytes scales every random-sparse message
alike, so the advice does not change.

Per placement it prints commgraph's own FOMs (total_time: the timed loop on the
slowest rank; internode_bytes_per_iter: the graph's bytes between host names),
the bytes the kernel counted on the emulated cables, and the time ratio against
block placement in the same round (median over rounds). --store adds the advice
to the store with the measured figures next to the prediction (advice.summary
-> 'measured').

    sudo .venv/bin/python bench/placement_measured.py [--repeats 5] [--rate-mbit 200] [--store]

Needs root, iproute2 and tc (network namespaces), and Debian Open MPI 4.1.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "ci"))
sys.path.insert(0, str(ROOT))
import emulated_nodes  # noqa: E402
from commscope.workflow import stacks as mpi_stacks
import suite  # noqa: E402
from commscope.advise import placement
from commscope.read import files, profiles  # noqa: E402
from commscope.read.workload_output import parse_output  # noqa: E402

DEFAULT_PROFILE = ROOT / "tests" / "data" / "commgraph-random-sparse-n16.msgtrace"
STACK = "debian-openmpi4"
# 16 ranks share 2 cores: a waiting rank must give its core to one with work,
# or the busy-polling of the waiting ranks decides the time, not the network.
# Binding is off because every emulated node sees the same 2 cores.
SHARE_CORES = ["--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"]


def read_rank_map(text: str) -> list[int]:
    return [int(x) for line in text.splitlines() if not line.startswith("#") for x in line.split()]


def rank_map_file(rank_map: list[int], path: Path) -> Path:
    path.write_text("# commgraph --rank-map: entry w is the application rank world rank w plays\n"
                    + " ".join(map(str, rank_map)) + "\n")
    return path


def node_of_map(rank_map: list[int] | None, rpn: int) -> list[int]:
    """Application rank -> node under block launch and this rank map."""
    n = len(rank_map)
    node_of = [0] * n
    for w, app in enumerate(rank_map):
        node_of[app] = w // rpn
    return node_of


def rankfile(advice: placement.Placement, topo: placement.Topology, hosts: list[str], path: Path) -> Path:
    """The advisor's Open MPI rankfile on the emulated hosts. Its slot=N binds
    to core N, and every emulated node has only this machine's 2 cores, so
    each rank gets slot=0-1 (both cores) instead."""
    text = placement.launcher_files(advice, topo)["rankfile"]
    lines = []
    for line in text.splitlines():
        if line.startswith("rank "):
            head, _, _slot = line.partition(" slot=")
            rank, _, host = head.partition("=")
            line = f"{rank}={hosts[topo.hosts.index(host)]} slot=0-1"
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return path


def graph_args(profile_dir: Path) -> list[str]:
    """commgraph's graph options from the traced run's own output."""
    out_file = profile_dir / "commgraph.out"
    if not out_file.exists():
        raise SystemExit(f"{profile_dir}: no commgraph.out beside the profile, so the traced graph is unknown")
    out = parse_output(out_file.read_text())
    if out.workload != "commgraph":
        raise SystemExit(f"{out_file}: not a commgraph output")
    return [x for k in ("pattern", "degree", "seed", "small-bytes") for x in (f"--{k}", out.params[k])]


def advise(profile_dir: Path, nodes: int, rpn: int):
    """The advice `commscope advise placement PROFILE --topology (flat nodes x rpn)` gives."""
    groups = files.discover([profile_dir])
    if len(groups) != 1:
        raise SystemExit(f"{profile_dir}: expected one run's message-tracing profile, found {len(groups)} runs")
    prof = profiles.read_files(groups[0])
    matrix = {k: v[1] for k, v in prof.matrix.items()}
    topo = placement.Topology.from_dict({"nodes": nodes, "ranks_per_node": rpn, "network": {"type": "flat"}})
    p = placement.optimize(matrix, prof.ranks, topo)
    launcher = placement.launcher_files(p, topo)
    if "commgraph.rank-map" not in launcher:
        raise SystemExit("the advice fills nodes unevenly; commgraph --rank-map needs every slot used")
    return prof.ranks, matrix, topo, p, read_rank_map(launcher["commgraph.rank-map"])


def measure(profile_dir: Path = DEFAULT_PROFILE, nodes: int = 4, rpn: int = 4, rate_mbit: float = 200,
            iters: int = 10, large_bytes: int = 1048576, repeats: int = 5, n_random: int = 3, seed: int = 1,
            log=print) -> dict:
    why = emulated_nodes.unavailable_reason()
    if why:
        raise SystemExit(why)
    stack = mpi_stacks.by_name(STACK)
    if not stack.present():
        raise SystemExit(f"MPI stack {STACK} is not installed ({stack.mpicc}); run bash ci/setup.sh")
    bdir = suite.build(stack)
    ranks, matrix, topo, advice, advised_map = advise(profile_dir, nodes, rpn)
    w = placement.symmetric(matrix, ranks)
    rnd = random.Random(seed)
    maps: dict[str, list[int] | None] = {"default": list(range(ranks)), "advised": advised_map}
    for k in range(n_random):
        perm = list(range(ranks))
        rnd.shuffle(perm)
        maps[f"random-{k + 1}"] = perm
    args = ["--iters", str(iters), "--large-bytes", str(large_bytes), *graph_args(profile_dir)]
    node_of = {name: node_of_map(m, rpn) for name, m in maps.items()}
    # The advisor's Open MPI rankfile too, the launcher applying the same placement.
    node_of["advised-rankfile"] = advice.node_of
    total = sum(w[i][j] for i in range(ranks) for j in range(i + 1, ranks))
    results = {name: {"rank_map": maps.get(name), "predicted_internode_share": placement.cost(w, n, topo)[0] / total,
                      "total_time": [], "comm_time_max": [], "wall": [], "wire_bytes": [], "busiest_cable_bytes": [],
                      "ratio": []}
               for name, n in node_of.items()}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="commscope-placement-") as tmp, \
            emulated_nodes.EmulatedNodes(nodes, rate_mbit) as emu:
        tmp = Path(tmp)
        agent, hostfile = emu.write_rsh_agent(tmp), emu.write_hostfile(tmp / "hostfile", rpn)
        # per placement: (launcher options, commgraph options)
        how = {name: (SHARE_CORES, ["--rank-map", str(rank_map_file(m, tmp / f"{name}.rank-map"))])
               for name, m in maps.items()}
        how["advised-rankfile"] = (["--rankfile", str(rankfile(advice, topo, emu.hosts, tmp / "rankfile")),
                                    "--mca", "mpi_yield_when_idle", "1"], [])
        names = list(how)
        for rep in range(repeats):
            order = names[rep % len(names):] + names[:rep % len(names)]  # rotate, so no placement always runs first
            times = {}
            for name in order:
                launch_opts, app_opts = how[name]
                argv = [str(bdir / "commgraph"), *args, *app_opts]
                cmd = emu.openmpi_launch(stack.mpirun, agent, hostfile, ranks, argv, launch_opts)
                before = emu.tx_bytes()
                t0 = time.monotonic()
                p = subprocess.run(cmd, env=stack.environ(), capture_output=True, text=True, timeout=600)
                wall = time.monotonic() - t0
                per_node = [a - b for a, b in zip(emu.tx_bytes(), before)]
                wire = sum(per_node)
                out = parse_output(p.stdout)
                bad = [f"{k} {s}" for k, (s, _) in out.verify.items() if s != "PASS"]
                if p.returncode or not out.verify or bad:
                    raise SystemExit(f"{name}: commgraph failed (exit {p.returncode}, {bad}):\n{p.stderr[-2000:]}")
                hosts = {line["host"] for line in out.rank_lines}
                if len(hosts) != nodes:
                    raise SystemExit(f"{name}: ranks ran on {sorted(hosts)}, not on {nodes} emulated nodes")
                r = results[name]
                r["total_time"].append(out.foms["total_time"][0])
                r["comm_time_max"].append(out.foms["comm_time_max"][0])
                r["wall"].append(wall)
                r["wire_bytes"].append(wire)
                r["busiest_cable_bytes"].append(max(per_node))  # the link that sets the pace
                r["internode_bytes_per_iter"] = out.foms["internode_bytes_per_iter"][0]
                r["intranode_bytes_per_iter"] = out.foms["intranode_bytes_per_iter"][0]
                times[name] = out.foms["total_time"][0]
                log(f"round {rep + 1}/{repeats} {name:16} total_time {times[name]:7.3f} s  wall {wall:6.2f} s  "
                    f"wire {wire / 1e6:8.1f} MB  load {os.getloadavg()[0]:.2f}")
            for name in names:
                results[name]["ratio"].append(times[name] / times["default"])
        shaper = emu.shaper_stats()
        mpi_library = out.mpi_library
    load_after = os.getloadavg()
    for r in results.values():
        r["median_total_time"] = statistics.median(r["total_time"])
        r["median_ratio"] = statistics.median(r["ratio"])
        r["median_wire_bytes_per_iter"] = statistics.median(r["wire_bytes"]) / iters
        r["median_busiest_cable_bytes_per_iter"] = statistics.median(r["busiest_cable_bytes"]) / iters
    return {
        "setup": {"nodes": nodes, "ranks_per_node": rpn, "ranks": ranks, "cores": os.cpu_count(),
                  "link": f"tbf {rate_mbit:g} Mbit/s each way per node, no added delay (no netem in this kernel)",
                  "rate_mbit": rate_mbit, "stack": STACK, "mpi_library": mpi_library,
                  "launch": "mpirun in node 0, orted per node through an ip-netns rsh agent; "
                            "btl self,vader (within a node), tcp over eth0 (between nodes); " + " ".join(SHARE_CORES),
                  "commgraph_args": args, "profile": str(profile_dir), "repeats": repeats,
                  "load_average_before": load_before, "load_average_after": load_after,
                  "shaper_overlimits": [s["overlimits"] for s in shaper], "shaper_drops": [s["drops"] for s in shaper],
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "prediction": {"method": advice.method, "default": advice.default, "optimized": advice.optimized,
                       "random_mean": advice.random_mean, "node_of": advice.node_of},
        "rank_map": advised_map,
        "placements": results,
    }


def report(m: dict) -> str:
    s = m["setup"]
    lines = [f"commgraph {' '.join(s['commgraph_args'])}",
             f"{s['ranks']} ranks on {s['nodes']} emulated nodes x {s['ranks_per_node']}, {s['link']}, "
             f"{s['cores']} cores",
             f"{s['mpi_library'][:40]}; {s['repeats']} alternating rounds; load average "
             f"{s['load_average_before'][0]:.2f} before, {s['load_average_after'][0]:.2f} after",
             "inter share: the part of the graph's bytes that crosses nodes, predicted from the profile and as "
             "commgraph counted it by host name; wire: bytes the kernel counted on the emulated cables (all, and "
             "the busiest node's)",
             f"{'placement':17}{'inter share':>12}{'inter share':>12}{'inter B/iter':>14}{'wire B/iter':>14}"
             f"{'busiest':>12}{'total_time':>11}{'range':>15}{'ratio':>7}",
             f"{'':17}{'predicted':>12}{'commgraph':>12}{'commgraph':>14}{'kernel':>14}{'kernel':>12}"
             f"{'median s':>11}{'min-max s':>15}{'median':>7}"]
    for name, r in m["placements"].items():
        share = r["internode_bytes_per_iter"] / (r["internode_bytes_per_iter"] + r["intranode_bytes_per_iter"])
        lines.append(f"{name:17}{r['predicted_internode_share']:>12.3f}{share:>12.3f}"
                     f"{r['internode_bytes_per_iter']:>14,.0f}{r['median_wire_bytes_per_iter']:>14,.0f}"
                     f"{r['median_busiest_cable_bytes_per_iter']:>12,.0f}"
                     f"{r['median_total_time']:>11.3f}{min(r['total_time']):>8.3f}-{max(r['total_time']):<6.3f}"
                     f"{r['median_ratio']:>7.2f}")
    return "\n".join(lines)


def store(m: dict, source: str) -> int:
    """The advice row `commscope advise placement` writes, plus the measured figures."""
    from commscope.store import db
    pred, s = m["prediction"], m["setup"]
    hosts = [f"node{n}" for n in range(s["nodes"])]
    summary = {"ranks": s["ranks"], "nodes": s["nodes"], "ranks_per_node": s["ranks_per_node"], "network": "flat",
               **pred, "measured": {k: v for k, v in m.items() if k != "prediction"}}
    adv, rnd = m["placements"]["advised"], [r for k, r in m["placements"].items() if k.startswith("random")]
    text = placement.advice_text([hosts[n] for n in pred["node_of"]], pred["default"], pred["optimized"],
                                 pred["random_mean"][1])
    text += (f" Measured on {s['nodes']} emulated nodes ({s['rate_mbit']} Mbit/s "
            f"links, {s['repeats']} alternating rounds): commgraph's time is {adv['median_ratio']:.2f}x block "
            f"placement's" + (f", random placements {min(r['median_ratio'] for r in rnd):.2f}x to "
                              f"{max(r['median_ratio'] for r in rnd):.2f}x" if rnd else "") + ".")
    with db.connect() as conn:
        advice_id = db.insert_advice(conn, "placement", None, source, summary, text)
        conn.commit()
    return advice_id


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", type=Path, default=DEFAULT_PROFILE,
                    help="commgraph message-tracing profile (a directory of rank-N.cali and commgraph.out)")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--ranks-per-node", type=int, default=4)
    ap.add_argument("--rate-mbit", type=float, default=200, help="link rate of each emulated node, each way")
    ap.add_argument("--iters", type=int, default=10, help="commgraph rounds per run")
    ap.add_argument("--large-bytes", type=int, default=1048576)
    ap.add_argument("--repeats", type=int, default=5, help="alternating rounds over all placements")
    ap.add_argument("--random", type=int, default=3, help="random rank maps measured besides default and advised")
    ap.add_argument("--json", type=Path, help="write the measured figures here")
    ap.add_argument("--store", action="store_true", help="record the advice with the measured figures in the store")
    a = ap.parse_args(argv)
    m = measure(a.profile, a.nodes, a.ranks_per_node, a.rate_mbit, a.iters, a.large_bytes, a.repeats, a.random)
    print(report(m))
    if a.json:
        a.json.write_text(json.dumps(m, indent=1) + "\n")
    if a.store:
        print(f"stored as advice {store(m, str(a.profile))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
