"""The placement advice applied on emulated nodes (ci/emulated_nodes.py): network
namespaces on one bridge, each node's cable rate-limited by tc tbf, Open MPI
launched into them through an ip-netns rsh agent. Asserts on counters (the
kernel's bytes on the emulated cables, commgraph's own byte FOMs), never on
how long something took, except the one bound a rate limit guarantees: a
message cannot cross a shaped cable faster than its size over the rate.

Needs root, iproute2, tc and Debian Open MPI 4.1; skips saying which is missing."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import emulated_nodes
import suite
from conftest import built_once

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import placement_measured  # noqa: E402

MiB = 1 << 20


@pytest.fixture(scope="module")
def openmpi():
    why = emulated_nodes.unavailable_reason()
    if why:
        pytest.skip(why)
    return built_once("debian-openmpi4")


def pingpong(emu, stack, bdir, tmp_path, slots_on_first: int):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(f"{emu.hosts[0]} slots={slots_on_first}\n{emu.hosts[1]} slots=1\n")
    agent = emu.write_rsh_agent(tmp_path)
    argv = [str(bdir / "pingpong"), "--bytes", str(MiB), "--iters", "2", "--batches", "1", "--warmup", "1"]
    before = emu.tx_bytes()
    p = subprocess.run(emu.openmpi_launch(stack.mpirun, agent, hostfile, 2, argv), env=stack.environ(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    out = suite.parse_output(p.stdout)
    assert out.verify["payload"][0] == "PASS"
    return out, [a - b for a, b in zip(emu.tx_bytes(), before)]


def test_a_cable_between_nodes_is_rate_limited_and_a_node_keeps_its_own_traffic(openmpi, tmp_path):
    stack, bdir = openmpi
    rate_mbit = 100
    with emulated_nodes.EmulatedNodes(2, rate_mbit) as emu:
        # one rank per node: 3 round trips of 1 MiB each way cross the cable
        across, wire = pingpong(emu, stack, bdir, tmp_path, 1)
        assert all(b >= 3 * MiB for b in wire), wire
        # the shaper held packets back, and no message crossed faster than the rate allows
        assert all(s["kind"] == "tbf" and s["overlimits"] > 0 for s in emu.shaper_stats())
        floor_us = (MiB - emu.burst) / (rate_mbit * 1e6 / 8) * 1e6
        assert across.foms["latency"][0] >= floor_us, (across.foms["latency"], floor_us)
        # both ranks on node 0: the same 6 MiB go over shared memory, not the cable
        _, wire = pingpong(emu, stack, bdir, tmp_path, 2)
        assert all(b < MiB for b in wire), wire
        tag = emu.tag
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert tag not in left and not Path(f"/etc/netns/{tag}-n0").exists()


def test_the_advised_rank_map_moves_fewer_bytes_between_nodes_and_is_stored_with_the_prediction(
        openmpi, dsn, monkeypatch):
    """16 ranks of random-sparse commgraph on 4 emulated nodes x 4: block
    placement, the advisor's rank map and rankfile, a random map. Fast links
    and small messages: only the counters matter here, not the times."""
    m = placement_measured.measure(rate_mbit=1000, iters=2, large_bytes=65536, repeats=1, n_random=1,
                                   log=lambda s: None)
    runs = m["placements"]
    assert set(runs) == {"default", "advised", "random-1", "advised-rankfile"}
    for name, r in runs.items():
        inter, intra = r["internode_bytes_per_iter"], r["intranode_bytes_per_iter"]
        # commgraph, counting by the host names it ran on, sees the split the advisor predicted
        assert inter / (inter + intra) == pytest.approx(r["predicted_internode_share"], rel=1e-12), name
        # every inter-node payload byte crossed a cable; TCP/IP headers and MPI wire-up add a little
        payload = inter * 2
        assert payload <= r["wire_bytes"][0] <= 1.1 * payload + MiB / 2, (name, r["wire_bytes"], payload)
    assert runs["advised"]["wire_bytes"][0] < 0.7 * runs["default"]["wire_bytes"][0]
    assert runs["advised-rankfile"]["internode_bytes_per_iter"] == runs["advised"]["internode_bytes_per_iter"]
    assert m["prediction"]["optimized"][0] < m["prediction"]["default"][0]

    monkeypatch.setenv("COMMSCOPE_DB_URL", dsn)
    advice_id = placement_measured.store(m, "test")
    with psycopg.connect(dsn) as conn:
        kind, summary, text = conn.execute("SELECT kind, summary, text FROM v_advice WHERE id = %s",
                                           (advice_id,)).fetchone()
    assert kind == "placement" and summary["optimized"] == list(m["prediction"]["optimized"])
    stored = summary["measured"]["placements"]
    assert stored["advised"]["wire_bytes"] == runs["advised"]["wire_bytes"]
    assert "Measured on 4 emulated nodes" in text
