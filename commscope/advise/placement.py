"""The placement advisor (the weather codes' placement study): from a
rank-to-rank communication matrix and a small topology description, a
rank-to-node mapping that cuts inter-node bytes and hop-bytes, and the files
that apply it (Open MPI rankfile, Hydra host list, Slurm arbitrary-distribution
host file, commgraph --rank-map).

Ranks are partitioned into nodes by METIS (pymetis) on the symmetric byte
graph, rebalanced to the node size, the parts are placed on the topology
greedily by traffic, and pairwise swaps then lower hop-bytes until none helps.
Without pymetis the swaps start from block placement (the greedy fallback).

Ranks are MPI_COMM_WORLD ranks of the traced run, as the store keeps them
(docs/measurement-model.md, Ranks): the rankfile and host lists place the world
ranks of a run launched as the traced one was. commgraph's --rank-map names
application ranks instead, so for a traced run that was itself rank-mapped it is
composed with the application rank each world rank played (`app_ranks`).

Topology (YAML):
    nodes: 4                 # a count (hosts node0, node1, ...) or a list of host names
    ranks_per_node: 2
    network: {type: fat-tree, arity: 2}   # 2-level tree, `arity` nodes per leaf switch
    network: {type: torus, dims: [2, 2]}  # node grid, wrap-around links
    network: {type: hypercube}            # node count a power of two
    network: {type: flat}                 # every pair of nodes one hop apart (default)
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path


class BadTopology(ValueError):
    """A topology description that cannot be used; the message says why."""


@dataclass
class Topology:
    hosts: list[str]
    ranks_per_node: int
    kind: str = "flat"
    arity: int = 0
    dims: list[int] = field(default_factory=list)

    @classmethod
    def from_dict(cls, doc: dict, where: str = "topology") -> "Topology":
        if not isinstance(doc, dict):
            raise BadTopology(f"{where}: a mapping with nodes, ranks_per_node and network is expected")
        nodes = doc.get("nodes")
        if isinstance(nodes, int) and nodes > 0:
            hosts = [f"node{i}" for i in range(nodes)]
        elif isinstance(nodes, list) and nodes and all(isinstance(h, str) and h for h in nodes):
            if len(set(nodes)) != len(nodes):
                raise BadTopology(f"{where}: nodes lists a host twice")
            hosts = list(nodes)
        else:
            raise BadTopology(f"{where}: nodes must be a positive count or a list of host names, not {nodes!r}")
        rpn = doc.get("ranks_per_node")
        if not isinstance(rpn, int) or rpn < 1:
            raise BadTopology(f"{where}: ranks_per_node must be a positive integer, not {rpn!r}")
        net = doc.get("network") or {"type": "flat"}
        kind = net.get("type", "flat") if isinstance(net, dict) else None
        if kind not in ("flat", "fat-tree", "torus", "hypercube"):
            raise BadTopology(f"{where}: network type {kind!r} is not one of flat, fat-tree, torus, hypercube")
        topo = cls(hosts, rpn, kind)
        n = len(hosts)
        if kind == "fat-tree":
            topo.arity = net.get("arity")
            if not isinstance(topo.arity, int) or topo.arity < 1:
                raise BadTopology(f"{where}: a fat-tree needs arity, the nodes per leaf switch (a positive integer)")
        elif kind == "torus":
            topo.dims = net.get("dims")
            if not (isinstance(topo.dims, list) and topo.dims and all(isinstance(d, int) and d > 0 for d in topo.dims)):
                raise BadTopology(f"{where}: a torus needs dims, a list of positive integers")
            prod = 1
            for d in topo.dims:
                prod *= d
            if prod != n:
                raise BadTopology(f"{where}: torus dims {topo.dims} hold {prod} nodes, not {n}")
        elif kind == "hypercube" and n & (n - 1):
            raise BadTopology(f"{where}: a hypercube needs a power-of-two node count, not {n}")
        return topo

    @property
    def nodes(self) -> int:
        return len(self.hosts)

    def hops(self, a: int, b: int) -> int:
        """Network hops between nodes a and b (0 on the same node)."""
        if a == b:
            return 0
        if self.kind == "fat-tree":
            return 2 if a // self.arity == b // self.arity else 4
        if self.kind == "torus":
            h = 0
            for d in self.dims:
                ca, cb = a % d, b % d
                a, b = a // d, b // d
                h += min(abs(ca - cb), d - abs(ca - cb))
            return h
        if self.kind == "hypercube":
            return bin(a ^ b).count("1")
        return 1


def symmetric(matrix: dict[tuple[int, int], int], ranks: int) -> list[list[int]]:
    """Bytes between each pair of ranks, both directions added."""
    w = [[0] * ranks for _ in range(ranks)]
    for (s, d), b in matrix.items():
        if s != d and 0 <= s < ranks and 0 <= d < ranks:
            w[s][d] += b
            w[d][s] += b
    return w


def cost(w: list[list[int]], node_of: list[int], topo: Topology) -> tuple[int, int]:
    """(inter-node bytes, hop-bytes) of a placement; each byte counted once."""
    inter = hop = 0
    n = len(node_of)
    for i in range(n):
        for j in range(i + 1, n):
            if w[i][j] and node_of[i] != node_of[j]:
                inter += w[i][j]
                hop += w[i][j] * topo.hops(node_of[i], node_of[j])
    return inter, hop


def block(ranks: int, topo: Topology) -> list[int]:
    """The launchers' default: consecutive ranks fill a node."""
    return [r // topo.ranks_per_node for r in range(ranks)]


def _metis_parts(w: list[list[int]], nparts: int) -> list[int] | None:
    try:
        import pymetis
    except ImportError:
        return None
    n = len(w)
    top = max((x for row in w for x in row), default=0) or 1
    scale = max(1, top // (1 << 20))  # METIS weights are 32-bit
    xadj, adjncy, ew = [0], [], []
    for i in range(n):
        for j in range(n):
            if i != j and w[i][j]:
                adjncy.append(j)
                ew.append(max(1, w[i][j] // scale))
        xadj.append(len(adjncy))
    if not adjncy or nparts == 1:
        return [0] * n
    _, parts = pymetis.part_graph(nparts, pymetis.CSRAdjacency(xadj, adjncy), eweights=ew)
    return list(parts)


def _rebalance(parts: list[int], w: list[list[int]], nparts: int, cap: int) -> list[int]:
    """Moves ranks out of over-full parts, each to where it loses least."""
    parts = list(parts)
    size = [parts.count(p) for p in range(nparts)]
    for p in range(nparts):
        while size[p] > cap:
            best = None
            for r in (r for r in range(len(parts)) if parts[r] == p):
                for q in range(nparts):
                    if size[q] < cap:
                        gain = sum(w[r][x] for x in range(len(parts)) if parts[x] == q) - \
                               sum(w[r][x] for x in range(len(parts)) if parts[x] == p and x != r)
                        if best is None or gain > best[0]:
                            best = (gain, r, q)
            _, r, q = best
            parts[r], size[p], size[q] = q, size[p] - 1, size[q] + 1
    return parts


def _place_parts(parts: list[int], w: list[list[int]], topo: Topology) -> list[int]:
    """Part -> node: the busiest part first, then each part next to its heaviest partners."""
    nparts = max(parts) + 1
    pw = [[0] * nparts for _ in range(nparts)]
    for i, row in enumerate(w):
        for j, b in enumerate(row):
            if parts[i] != parts[j]:
                pw[parts[i]][parts[j]] += b
    order = sorted(range(nparts), key=lambda p: -sum(pw[p]))
    node_of_part: dict[int, int] = {}
    free = list(range(topo.nodes))
    for p in order:
        best = min(free, key=lambda n: (sum(pw[p][q] * topo.hops(n, m) for q, m in node_of_part.items()), n))
        node_of_part[p] = best
        free.remove(best)
    return [node_of_part[p] for p in parts]


def _improve(node_of: list[int], w: list[list[int]], topo: Topology, max_passes: int = 20) -> list[int]:
    """Pairwise swaps of ranks on different nodes (and moves into free slots)
    while hop-bytes fall, then inter-node bytes."""
    node_of = list(node_of)
    n = len(node_of)

    def delta(r: int, to: int, skip: int | None = None) -> tuple[int, int]:
        d_hop = d_int = 0
        for x in range(n):
            if x in (r, skip) or not w[r][x]:
                continue
            old, new = topo.hops(node_of[r], node_of[x]), topo.hops(to, node_of[x])
            d_hop += w[r][x] * (new - old)
            d_int += w[r][x] * ((to != node_of[x]) - (node_of[r] != node_of[x]))
        return d_hop, d_int

    for _ in range(max_passes):
        improved = False
        for a, b in itertools.combinations(range(n), 2):
            na, nb = node_of[a], node_of[b]
            if na == nb:
                continue
            ha, ia = delta(a, nb, b)
            hb, ib = delta(b, na, a)
            if (ha + hb, ia + ib) < (0, 0):
                node_of[a], node_of[b] = nb, na
                improved = True
        used = [node_of.count(k) for k in range(topo.nodes)]
        for r in range(n):
            for k in range(topo.nodes):
                if used[k] < topo.ranks_per_node and k != node_of[r]:
                    h, i = delta(r, k)
                    if (h, i) < (0, 0):
                        used[node_of[r]] -= 1
                        used[k] += 1
                        node_of[r] = k
                        improved = True
        if not improved:
            break
    return node_of


@dataclass
class Placement:
    node_of: list[int]          # world rank of the traced run -> node index
    method: str                 # metis+swaps | greedy swaps
    default: tuple[int, int]    # (inter-node bytes, hop-bytes) of block placement
    optimized: tuple[int, int]
    random_mean: tuple[float, float]

    def slots(self) -> list[int]:
        seen: dict[int, int] = {}
        out = []
        for node in self.node_of:
            out.append(seen.get(node, 0))
            seen[node] = out[-1] + 1
        return out


def optimize(matrix: dict[tuple[int, int], int], ranks: int, topo: Topology, seed: int = 1,
             random_samples: int = 200) -> Placement:
    if ranks > topo.nodes * topo.ranks_per_node:
        raise BadTopology(f"{ranks} ranks do not fit on {topo.nodes} nodes x {topo.ranks_per_node} ranks per node")
    w = symmetric(matrix, ranks)
    nparts = -(-ranks // topo.ranks_per_node)
    parts = _metis_parts(w, nparts) if nparts > 1 else [0] * ranks
    if parts is None:
        method, start = "greedy swaps (pymetis not installed)", block(ranks, topo)
    else:
        method = "metis+swaps"
        start = _place_parts(_rebalance(parts, w, nparts, topo.ranks_per_node), w, topo)
    best = _improve(start, w, topo)
    base = block(ranks, topo)
    if cost(w, base, topo)[::-1] < cost(w, best, topo)[::-1]:
        best = base  # never advise worse than the default
    rnd = random.Random(seed)
    slots = [n for n in range(topo.nodes) for _ in range(topo.ranks_per_node)]
    samples = []
    for _ in range(random_samples):
        rnd.shuffle(slots)
        samples.append(cost(w, slots[:ranks], topo))
    mean = (sum(s[0] for s in samples) / len(samples), sum(s[1] for s in samples) / len(samples))
    return Placement(best, method, cost(w, base, topo), cost(w, best, topo), mean)


def advice_text(node_names: list[str], default: tuple, optimized: tuple, random_hop_bytes: float) -> str:
    """The advice in words: the node of each rank and the predicted hop-bytes against block and
    random placement (default/optimized are (inter-node bytes, hop-bytes))."""
    cut = 1 - optimized[1] / default[1] if default[1] else 0.0
    return (f"Placing world ranks by node as {' '.join(node_names)} cuts predicted hop-bytes by {cut:.0%} against "
            f"block placement ({default[1]:,} -> {optimized[1]:,}); random placement averages {random_hop_bytes:,.0f}.")


def app_ranks(rank_lines: list[dict], ranks: int) -> list[int] | None:
    """The application rank each world rank played, from the workload's `RANK a world=w` lines (commgraph
    --rank-map); None where the lines name no world ranks, that is where every rank played its own number."""
    if not rank_lines or not all("world" in ln for ln in rank_lines):
        return None
    app = {int(ln["world"]): int(ln["rank"]) for ln in rank_lines}
    if sorted(app) != list(range(ranks)) or sorted(app.values()) != list(range(ranks)):
        raise ValueError(f"the RANK lines map {sorted(app.items())}, not each of {ranks} world ranks to one "
                         f"application rank")
    return [app[w] for w in range(ranks)]


def launcher_files(p: Placement, topo: Topology, app_rank_of: list[int] | None = None) -> dict[str, str]:
    """The files that apply a placement, by launcher. APP_RANK_OF: the application rank each world rank of
    the traced run played (`app_ranks`), None if it was not rank-mapped. The rankfile and host lists apply
    to the traced run's own command line; the commgraph rank map replaces that run's --rank-map."""
    hosts, slots = topo.hosts, p.slots()
    app = app_rank_of or list(range(len(p.node_of)))
    if len(app) != len(p.node_of):
        raise ValueError(f"{len(app)} application ranks for a placement of {len(p.node_of)} ranks")
    rankfile = "".join(f"rank {r}={hosts[n]} slot={s}\n" for r, (n, s) in enumerate(zip(p.node_of, slots)))
    per_rank_hosts = "".join(f"{hosts[n]}\n" for n in p.node_of)
    # commgraph --rank-map: under block launch, world rank w sits on node w // rpn,
    # slot w % rpn; it must play the application rank of the traced rank placed there.
    where = {(n, s): r for r, (n, s) in enumerate(zip(p.node_of, slots))}
    rpn = topo.ranks_per_node
    files = {}
    if all((w // rpn, w % rpn) in where for w in range(len(p.node_of))):
        rank_map = [app[where[w // rpn, w % rpn]] for w in range(len(p.node_of))]
        files["commgraph.rank-map"] = ("# commgraph --rank-map: entry w is the application rank world rank w plays\n"
                                       + " ".join(map(str, rank_map)) + "\n")
    return files | {
        "rankfile": "# Open MPI: mpirun --rankfile rankfile\n" + rankfile,
        "hydra.hosts": "# MPICH Hydra: mpiexec -f hydra.hosts (one line per rank, in rank order)\n"
                       + "".join(f"{hosts[n]}:1\n" for n in p.node_of),
        "slurm.hostfile": per_rank_hosts,  # SLURM_HOSTFILE=slurm.hostfile srun --distribution=arbitrary
    }


# ---- what a placement is computed from: a stored run or a message-tracing profile ----------------------------

@dataclass
class Traced:
    """A traced run's communication matrix, its rank count, its stored id (None for a profile), the application
    rank each world rank played (None when not rank-mapped) and, when that mapping is lost, why no commgraph rank
    map can be written."""
    matrix: dict[tuple[int, int], int]
    ranks: int
    run_id: int | None
    app_rank_of: list[int] | None
    no_rank_map: str | None = None


def traced(source: str) -> Traced:
    """SOURCE, a stored run id or a message-tracing profile, as a Traced. The store keeps no RANK lines: for a
    stored run they are read again from its source files when these are still there and unchanged (same content
    hash). Raises profiles.BadProfile or LookupError naming what is wrong."""
    from commscope.read import files, profiles
    from commscope.store import db

    def played(out, ranks: int, where: str) -> list[int] | None:
        try:
            return app_ranks(out.rank_lines if out else [], ranks)
        except ValueError as e:
            raise profiles.BadProfile(f"{where}: {e}") from None

    if not source.isdigit():
        groups = files.discover([Path(source)])
        if len(groups) != 1:
            raise profiles.BadProfile(f"{source}: expected one run's message-tracing profile, found {len(groups)} runs")
        prof = profiles.read_files(groups[0])
        out = Traced({k: v[1] for k, v in prof.matrix.items()}, prof.ranks, None, played(prof.output, prof.ranks, source))
    else:
        run_id = int(source)
        with db.connect() as conn:
            ranks, run_source, content_hash, decomposition, matrix = db.run_matrix(conn, run_id)
        out = Traced(matrix, ranks, run_id, None)
        found = False
        if matrix and Path(run_source).exists():
            for group in files.discover([Path(run_source)]):
                if files.file_hash(group) == content_hash:
                    out.app_rank_of = played(profiles.read_files(group, allow_partial=True).output, ranks, run_source)
                    found = True
        if matrix and not found and decomposition == "rank-map":
            out.no_rank_map = (f"run {run_id} was traced under a rank map, and its output, which says which "
                               f"application rank each world rank played, is no longer at {run_source}: no "
                               f"commgraph.rank-map written (give the run directory as SOURCE for one)")
    if not out.matrix:
        raise LookupError(f"{source}: no communication matrix (profile it with the Caliper modifier's matrix mode)")
    return out
