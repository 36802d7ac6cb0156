"""The placement advisor on real message-tracing profiles of commgraph, the
launcher files it writes (the rank map applied by a real commgraph run), the
topology models, and bad input."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import suite
from commscope.advise import placement
from commscope.read import profiles
from commscope.workflow.ingest import Provenance, ingest
from conftest import built_once

DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-m", "commscope.cli"]


def matrix_of(name: str):
    prof = profiles.read_files(sorted((DATA / name).glob("rank-*.cali")))
    return {k: v[1] for k, v in prof.matrix.items()}, prof.ranks


def test_pairs_partners_end_up_on_one_node():
    """commgraph pairs: every rank's large partner is half the job away, so
    block placement splits every pair; the advice keeps each pair together."""
    matrix, ranks = matrix_of("commgraph-pairs-n4.msgtrace")
    topo = placement.Topology.from_dict({"nodes": 2, "ranks_per_node": 2})
    p = placement.optimize(matrix, ranks, topo)
    assert p.method == "metis+swaps"
    assert p.node_of[0] == p.node_of[2] and p.node_of[1] == p.node_of[3] and p.node_of[0] != p.node_of[1]
    w = placement.symmetric(matrix, ranks)
    # what still crosses nodes is exactly the small all-to-all traffic between the pairs
    assert p.optimized[0] == sum(w[i][j] for i in (0, 2) for j in (1, 3))
    assert p.optimized[0] < p.random_mean[0] < p.default[0]


@pytest.mark.parametrize("network", [{"type": "flat"}, {"type": "fat-tree", "arity": 2}, {"type": "torus", "dims": [2, 2]},
                                     {"type": "hypercube"}])
def test_optimized_is_never_worse_than_block_or_random(network):
    matrix, ranks = matrix_of("commgraph-random-sparse-n4.msgtrace")
    topo = placement.Topology.from_dict({"nodes": 4, "ranks_per_node": 1, "network": network})
    p = placement.optimize(matrix, ranks, topo)
    assert p.optimized[1] <= p.default[1] and p.optimized[1] <= p.random_mean[1]
    assert sorted(p.node_of) == [0, 1, 2, 3]


def test_swaps_alone_find_the_pairs_too():
    """The greedy fallback (no METIS) starting from block placement."""
    matrix, ranks = matrix_of("commgraph-pairs-n4.msgtrace")
    topo = placement.Topology.from_dict({"nodes": 2, "ranks_per_node": 2})
    w = placement.symmetric(matrix, ranks)
    node_of = placement._improve(placement.block(ranks, topo), w, topo)
    assert node_of[0] == node_of[2] and node_of[1] == node_of[3]


def test_hop_models():
    torus = placement.Topology.from_dict({"nodes": 9, "ranks_per_node": 1, "network": {"type": "torus", "dims": [3, 3]}})
    assert torus.hops(0, 2) == 1 and torus.hops(0, 4) == 2 and torus.hops(0, 8) == 2
    cube = placement.Topology.from_dict({"nodes": 8, "ranks_per_node": 1, "network": {"type": "hypercube"}})
    assert cube.hops(0, 7) == 3 and cube.hops(5, 4) == 1
    tree = placement.Topology.from_dict({"nodes": 4, "ranks_per_node": 1, "network": {"type": "fat-tree", "arity": 2}})
    assert (tree.hops(0, 1), tree.hops(1, 2), tree.hops(3, 3)) == (2, 4, 0)


@pytest.mark.parametrize("doc,message", [
    ({"ranks_per_node": 2}, "nodes must be a positive count"),
    ({"nodes": 2}, "ranks_per_node must be a positive integer"),
    ({"nodes": 3, "ranks_per_node": 1, "network": {"type": "hypercube"}}, "power-of-two"),
    ({"nodes": 4, "ranks_per_node": 1, "network": {"type": "torus", "dims": [3, 2]}}, "hold 6 nodes, not 4"),
    ({"nodes": 4, "ranks_per_node": 1, "network": {"type": "dragonfly"}}, "not one of flat"),
    ({"nodes": ["a", "a"], "ranks_per_node": 1}, "lists a host twice"),
])
def test_bad_topologies_say_what_is_wrong(doc, message):
    with pytest.raises(placement.BadTopology, match=message):
        placement.Topology.from_dict(doc)


def test_cli_writes_launcher_files_and_a_real_commgraph_run_applies_the_rank_map(dsn, tmp_path):
    topo = tmp_path / "topology.yaml"
    topo.write_text("nodes: [hostA, hostB]\nranks_per_node: 2\nnetwork: {type: flat}\n")
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA / "commgraph-pairs-n4.msgtrace"], Provenance())
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
    env = {**os.environ, "COMMSCOPE_DB_URL": dsn}
    r = subprocess.run([*CLI, "advise", "placement", str(run_id), "--topology", str(topo), "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    rankfile = (out / "rankfile").read_text().splitlines()[1:]
    assert len(rankfile) == 4 and all(line.startswith(f"rank {i}=host") for i, line in enumerate(rankfile))
    hosts = (out / "slurm.hostfile").read_text().split()
    assert hosts[0] == hosts[2] != hosts[1] == hosts[3]
    hydra = [line.split(":")[0] for line in (out / "hydra.hosts").read_text().splitlines() if not line.startswith("#")]
    assert hydra == hosts
    with psycopg.connect(dsn) as conn:
        kind, summary, text = conn.execute("SELECT kind, summary, text FROM v_advice").fetchone()
    assert kind == "placement" and summary["optimized"][0] < summary["default"][0] and "hop-bytes" in text
    # the rank map, applied by a real commgraph run: same traffic, every payload checked
    stack, bdir = built_once("debian-openmpi4")
    run = suite.run(stack, bdir, "commgraph", ["--pattern", "pairs", "--iters", "3", "--rank-map", str(out / "commgraph.rank-map")], 4)
    assert not suite.problems(run), suite.problems(run)
    rank_map = [int(x) for x in (out / "commgraph.rank-map").read_text().split("\n", 1)[1].split()]
    worlds = {int(line["rank"]): int(line["world"]) for line in run.out.rank_lines}
    assert all(rank_map[w] == app for app, w in worlds.items())


def test_cli_bad_input_exits_2(tmp_path):
    topo = tmp_path / "t.yaml"
    topo.write_text("nodes: 1\nranks_per_node: 2\n")
    r = subprocess.run([*CLI, "advise", "placement", str(DATA / "commgraph-pairs-n4.msgtrace"), "--topology", str(topo),
                        "--no-store"], capture_output=True, text=True)
    assert r.returncode == 2 and "4 ranks do not fit on 1 nodes x 2 ranks per node" in r.stderr
    r = subprocess.run([*CLI, "advise", "placement", str(DATA / "halo3d-overlap-n2.runtime-profile.cali"),
                        "--topology", str(topo), "--no-store"], capture_output=True, text=True)
    assert r.returncode == 2 and "no communication matrix" in r.stderr
