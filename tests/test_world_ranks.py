"""World ranks end to end (docs/measurement-model.md, Ranks; issue 14): a rank-mapped commgraph trace
(tests/data/commgraph-pairs-reverse-n4.msgtrace: world rank w plays application rank 3-w) is stored,
drawn by the comm-matrix heatmap and advised on in MPI_COMM_WORLD ranks.

Every expected value comes from the files alone: caliper-reader's records (sender by mpi.rank, destination
by mpi.msg.dst, a rank of the split communicator) and the `RANK a world=w` lines of commgraph.out, never
through commscope's reader. The best placement is found by trying every balanced split of the ranks."""
from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import caliperreader
import psycopg
import pytest

from commscope.views import panels as P
from commscope.advise import placement
from commscope.workflow.ingest import Provenance, ingest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TRACE = DATA / "commgraph-pairs-reverse-n4.msgtrace"
HEATMAP_JSON = ROOT / "dashboards" / "json" / "commscope-comm-matrix.json"
MAPS = ROOT / "ramble" / "studies" / "placement" / "maps"
CLI = [sys.executable, "-m", "commscope.cli"]
RANKS = 4


def world_of_app() -> dict[int, int]:
    """Application (split-communicator) rank -> world rank, from commgraph.out's RANK lines."""
    out = {}
    for line in (TRACE / "commgraph.out").read_text().splitlines():
        m = re.match(r"RANK (\d+) .*\bworld=(\d+)\b", line)
        if m:
            out[int(m.group(1))] = int(m.group(2))
    assert sorted(out) == sorted(out.values()) == list(range(RANKS)), out
    return out


def raw_records() -> list[dict]:
    recs = []
    for f in sorted(TRACE.glob("rank-*.cali")):
        recs += caliperreader.read_caliper_contents(str(f))[0]
    return recs


def file_matrices() -> dict[str, dict]:
    """(src, dst) -> [messages, bytes] as the files say it: 'sent' from the senders' records with destinations
    translated to world ranks, 'received' from the receivers' records (mpi.msg.src translated likewise),
    'untranslated' the senders' records taken as Caliper keys them, and 'application' in application ranks."""
    world = world_of_app()
    app = {w: a for a, w in world.items()}
    out: dict[str, dict] = {k: {} for k in ("sent", "received", "untranslated", "application")}

    def add(which, key, rec):
        cell = out[which].setdefault(key, [0, 0])
        cell[0] += int(rec["count"])
        cell[1] += int(float(rec["sum#mpi.msg.size"]))

    for rec in raw_records():
        me = int(rec["mpi.rank"])
        if "mpi.msg.dst" in rec and int(rec["mpi.msg.dst"]) >= 0:
            dst = int(rec["mpi.msg.dst"])
            add("sent", (me, world[dst]), rec)
            add("untranslated", (me, dst), rec)
            add("application", (app[me], dst), rec)
        if "mpi.msg.src" in rec and int(rec["mpi.msg.src"]) >= 0:
            add("received", (world[int(rec["mpi.msg.src"])], me), rec)
    return out


def pair_bytes(matrix: dict) -> list[list[int]]:
    """Bytes between each pair of ranks, both directions."""
    w = [[0] * RANKS for _ in range(RANKS)]
    for (s, d), (_msgs, b) in matrix.items():
        if s != d:
            w[s][d] += b
            w[d][s] += b
    return w


def cut(w: list[list[int]], node_of: list[int]) -> int:
    return sum(w[i][j] for i, j in itertools.combinations(range(RANKS), 2) if node_of[i] != node_of[j])


def balanced_splits():
    """Every way to put 4 ranks on 2 nodes x 2 (node of rank 0 fixed to 0)."""
    for pair in itertools.combinations(range(1, RANKS), 1):
        group = {0, *pair}
        yield [0 if r in group else 1 for r in range(RANKS)]


def test_the_files_themselves_need_the_translation():
    """The premise: taken as Caliper keys them, the rows have self-messages and a one-way matrix; translated
    with the RANK lines, what was sent is exactly what was received."""
    m = file_matrices()
    assert any(s == d for s, d in m["untranslated"])
    assert m["sent"] == m["received"]
    assert all(s != d for s, d in m["sent"])


def test_stored_matrix_is_in_world_ranks_symmetric_and_without_self_messages(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [TRACE], Provenance())
        (run_id, ranks, decomposition), = conn.execute("SELECT run_id, ranks, decomposition FROM v_runs").fetchall()
        stored = {(s, d): [m, b] for s, d, m, b in conn.execute(
            "SELECT src, dst, messages, bytes FROM v_comm_matrix WHERE run_id = %s", (run_id,))}
    assert (ranks, decomposition) == (RANKS, "rank-map")
    expected = file_matrices()["sent"]
    assert stored == expected
    assert not [k for k in stored if k[0] == k[1]], "no rank sends to itself in commgraph pairs"
    # pairs is symmetric: every rank sends its partner what it receives from it
    assert all(stored[d, s] == cell for (s, d), cell in stored.items())
    # and the heavy partners are world ranks 0-2 and 1-3 (application ranks 3-1 and 2-0)
    heavy = {frozenset(k) for k, (_m, b) in stored.items() if b == max(c[1] for c in stored.values())}
    assert heavy == {frozenset({0, 2}), frozenset({1, 3})}


def test_heatmap_panel_shows_world_rank_cells(dsn):
    """The committed dashboard's SQL, expanded as Grafana expands it, over the stored run."""
    with psycopg.connect(dsn) as conn:
        ingest(conn, [TRACE], Provenance())
        lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM v_runs").fetchone()
        values = P.all_values(conn)
        panels = {p["title"]: p["targets"][0]["rawSql"] for p in json.loads(HEATMAP_JSON.read_text())["panels"]}
        run = lambda title: conn.execute(P.expand(panels[title], lo - dt.timedelta(days=1),  # noqa: E731
                                                  hi + dt.timedelta(days=1), values)).fetchall()
        cells, per_rank = run("Bytes from rank to rank"), run("Bytes per rank")
    expected = file_matrices()["sent"]
    # every pair of the run's ranks, in rank order (so Grafana's heatmap buckets are ordered), 0 where none was sent
    assert [(s, d, b) for s, d, b in cells] == [(s, d, expected.get((s, d), (0, 0))[1])
                                                for s in range(RANKS) for d in range(RANKS)]
    assert all(b == 0 for s, d, b in cells if s == d)
    sent = {r: sum(b for (s, _d), (_m, b) in expected.items() if s == r) for r in range(RANKS)}
    received = {r: sum(b for (_s, d), (_m, b) in expected.items() if d == r) for r in range(RANKS)}
    assert [tuple(map(int, row)) for row in per_rank] == [(r, sent[r], received[r]) for r in range(RANKS)]
    assert sent == received  # a symmetric pattern: each world rank receives what it sends


def test_placement_advice_for_the_reverse_mapped_run_splits_no_pair(dsn, tmp_path):
    """Block placement on 2 nodes x 2 puts world ranks 0,1 and 2,3 together: it cuts every heavy pair. The
    advice must find the best split (tried exhaustively here), not call block placement optimal."""
    w = pair_bytes(file_matrices()["sent"])
    block_cut = cut(w, [0, 0, 1, 1])
    best = min(balanced_splits(), key=lambda n: cut(w, n))
    assert best == [0, 1, 0, 1] and cut(w, best) < block_cut / 10   # the premise: block placement is bad

    with psycopg.connect(dsn) as conn:
        ingest(conn, [TRACE], Provenance())
        run_id = conn.execute("SELECT run_id FROM v_runs").fetchone()[0]
    topo = tmp_path / "topology.yaml"
    topo.write_text("nodes: [hostA, hostB]\nranks_per_node: 2\nnetwork: {type: flat}\n")
    r = subprocess.run([*CLI, "advise", "placement", str(run_id), "--topology", str(topo), "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, env={**os.environ, "COMMSCOPE_DB_URL": dsn})
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        summary, text = conn.execute("SELECT summary, text FROM v_advice WHERE run_id = %s", (run_id,)).fetchone()
    assert summary["default"][0] == block_cut
    assert summary["optimized"][0] == cut(w, best)
    node_of = summary["node_of"]
    assert node_of[0] == node_of[2] != node_of[1] == node_of[3]
    assert f"by {1 - cut(w, best) / block_cut:.0%}" in text and "by 0%" not in text
    # the rankfile places world ranks 0 and 2 on one host, 1 and 3 on the other
    hosts = [line.split("=")[1].split()[0] for line in (tmp_path / "out" / "rankfile").read_text().splitlines()[1:]]
    assert hosts[0] == hosts[2] != hosts[1] == hosts[3]
    # the commgraph rank map, applied to the application graph under block launch, keeps every pair on a node
    rank_map = [int(x) for x in (tmp_path / "out" / "commgraph.rank-map").read_text().split("\n", 1)[1].split()]
    assert sorted(rank_map) == list(range(RANKS))
    a = pair_bytes(file_matrices()["application"])
    node_of_app = [rank_map.index(app) // 2 for app in range(RANKS)]
    assert cut(a, node_of_app) == cut(w, best)


def test_pymetis_agrees_on_the_world_rank_graph():
    """METIS on the files' graph (an independent partitioner) splits it as the exhaustive search does."""
    pymetis = pytest.importorskip("pymetis")
    w = pair_bytes(file_matrices()["sent"])
    adj = [[j for j in range(RANKS) if j != i and w[i][j]] for i in range(RANKS)]
    xadj = [0]
    for row in adj:
        xadj.append(xadj[-1] + len(row))
    _, parts = pymetis.part_graph(2, pymetis.CSRAdjacency(xadj, [j for row in adj for j in row]),
                                  eweights=[w[i][j] for i in range(RANKS) for j in adj[i]])
    assert parts[0] == parts[2] != parts[1] == parts[3]


@pytest.mark.parametrize("map_name", ["reverse-4", "interleave-4"])
def test_commgraph_rank_map_is_composed_with_the_traced_runs_own(map_name):
    """The application graph of the trace, as a run under each of the placement study's rank maps records it
    in world ranks. The advice's commgraph rank map replaces that run's --rank-map, so it must name the
    application rank each placed world rank played; then it keeps every heavy pair on one node. (Under
    interleave-4 the pairs already share nodes in world ranks; a map of world ranks taken as application
    ranks would split them.)"""
    played = [int(x) for line in (MAPS / f"{map_name}.map").read_text().splitlines()
              if not line.startswith("#") for x in line.split()]
    application = file_matrices()["application"]
    world_of = {a: w for w, a in enumerate(played)}
    world_matrix = {(world_of[s], world_of[d]): b for (s, d), (_m, b) in application.items()}
    app_graph = pair_bytes(application)
    topo = placement.Topology.from_dict({"nodes": 2, "ranks_per_node": 2})
    p = placement.optimize(world_matrix, RANKS, topo)
    lines = [{"rank": str(a), "world": str(w)} for w, a in enumerate(played)]
    assert placement.app_ranks(lines, RANKS) == played
    text = placement.launcher_files(p, topo, placement.app_ranks(lines, RANKS))["commgraph.rank-map"]
    rank_map = [int(x) for x in text.split("\n", 1)[1].split()]
    node_of_app = [rank_map.index(app) // 2 for app in range(RANKS)]
    best = min(cut(app_graph, n) for n in balanced_splits())
    assert cut(app_graph, node_of_app) == best == p.optimized[0]


# ---- commscope advise placement on a run traced under a rank map ---------------------------------------------
# tests/world-ranks/commgraph-pairs-interleave-n4.msgtrace (README there): commgraph pairs traced under the placement
# study's interleave-4 map, world rank w playing application rank [0, 2, 1, 3][w]. In world ranks its heavy pairs
# already share a node under block placement; a commgraph rank map that took those world ranks for application ranks
# would split them.

INTERLEAVE = ROOT / "tests" / "world-ranks" / "commgraph-pairs-interleave-n4.msgtrace"


def played_by_world(trace: Path) -> list[int]:
    """The application rank each world rank played, from the trace's RANK lines."""
    app_of = {}
    for line in (trace / "commgraph.out").read_text().splitlines():
        m = re.match(r"RANK (\d+) .*\bworld=(\d+)\b", line)
        if m:
            app_of[int(m.group(2))] = int(m.group(1))
    return [app_of[w] for w in range(RANKS)]


def application_graph(trace: Path) -> list[list[int]]:
    """Bytes between application ranks, from caliper-reader's records: the sender's world rank (mpi.rank) taken
    to the application rank it played, the destination (mpi.msg.dst) already one."""
    app_of = played_by_world(trace)
    w = [[0] * RANKS for _ in range(RANKS)]
    for f in sorted(trace.glob("rank-*.cali")):
        for rec in caliperreader.read_caliper_contents(str(f))[0]:
            if "mpi.msg.dst" in rec and int(rec["mpi.msg.dst"]) >= 0:
                s, d = app_of[int(rec["mpi.rank"])], int(rec["mpi.msg.dst"])
                if s != d:
                    nbytes = int(float(rec["sum#mpi.msg.size"]))
                    w[s][d] += nbytes
                    w[d][s] += nbytes
    return w


def advise(source: str, dsn: str, out: Path) -> subprocess.CompletedProcess:
    topo = out.parent / "topology.yaml"
    topo.write_text("nodes: [hostA, hostB]\nranks_per_node: 2\nnetwork: {type: flat}\n")
    return subprocess.run([*CLI, "advise", "placement", source, "--topology", str(topo), "-o", str(out)],
                          capture_output=True, text=True, env={**os.environ, "COMMSCOPE_DB_URL": dsn})


@pytest.mark.parametrize("given", ["run directory", "stored run"])
def test_cli_rank_map_for_a_run_traced_under_a_rank_map_keeps_every_pair_on_a_node(dsn, tmp_path, given):
    """The advice's commgraph.rank-map, launched by block (world rank w on node w // 2), puts the application ranks
    that talk most on one node: the best balanced split of the application graph, tried exhaustively."""
    app_graph = application_graph(INTERLEAVE)
    best = min(cut(app_graph, n) for n in balanced_splits())
    assert cut(app_graph, [0, 0, 1, 1]) > 10 * best   # the premise: identity launch splits the heavy pairs
    source = str(INTERLEAVE)
    if given == "stored run":
        with psycopg.connect(dsn) as conn:
            ingest(conn, [INTERLEAVE], Provenance())
            (source,) = (str(r) for (r,) in conn.execute("SELECT run_id FROM v_runs"))
    r = advise(source, dsn, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    rank_map = [int(x) for x in (tmp_path / "out" / "commgraph.rank-map").read_text().split("\n", 1)[1].split()]
    assert sorted(rank_map) == list(range(RANKS))
    node_of_app = [rank_map.index(a) // 2 for a in range(RANKS)]
    assert cut(app_graph, node_of_app) == best
    assert ("application rank each traced world rank played: "
            + " ".join(map(str, played_by_world(INTERLEAVE)))) in r.stdout
    with psycopg.connect(dsn) as conn:
        (summary,) = conn.execute("SELECT summary FROM v_advice").fetchone()
    assert summary["app_rank_of"] == played_by_world(INTERLEAVE)


def test_cli_writes_no_rank_map_for_a_stored_rank_mapped_run_whose_output_is_gone(dsn, tmp_path):
    """The store keeps no RANK lines. When the traced run's files are gone, the mapping is unknown: the advice says
    so and writes the rankfile and host lists (world ranks), but no commgraph rank map, rather than a wrong one."""
    copy = tmp_path / "trace" / INTERLEAVE.name
    shutil.copytree(INTERLEAVE, copy)
    with psycopg.connect(dsn) as conn:
        ingest(conn, [copy], Provenance())
        (run_id,) = conn.execute("SELECT run_id FROM v_runs").fetchone()
    shutil.rmtree(copy)
    r = advise(str(run_id), dsn, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert f"no longer at {copy}" in r.stdout and "no commgraph.rank-map written" in r.stdout
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["hydra.hosts", "rankfile", "slurm.hostfile"]
