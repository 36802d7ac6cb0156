"""Slurm across several nodes, for real: ci/slurm_cluster.py starts slurmctld on the host and one
slurmd per emulated node (a network namespace with its own host name and address, on a bridge).
Jobs go through `sbatch` (Cluster.sbatch_wait polls slurmctld until they end); where each rank ran is
read from the job's own output (`srun hostname`, the workloads' RANK lines), and the bytes between
nodes from the kernel's counters of the nodes' cables. With RAMBLE_ROOT, `commscope run` takes studies
through the `slurm-emulated` site. Needs root, network namespaces and Slurm; the module skips with the
reason otherwise. The cluster stops after the module, on failure too; about 45 s in all."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import yaml

import slurm_cluster
import slurm_local
import suite
from conftest import CALIPER_PREFIX, ROOT, _builds, stack_or_skip

STACK = "debian-openmpi4"
# A real message-tracing profile of commgraph's `pairs` graph at 4 ranks (tests/data/README.md).
PAIRS_TRACE = ROOT / "tests" / "data" / "commgraph-pairs-n4.msgtrace"
COMMSCOPE = [sys.executable, "-m", "commscope.cli"]
RAMBLE_ROOT = os.environ.get("RAMBLE_ROOT")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = slurm_cluster.unavailable()
    if reason:
        pytest.skip(reason)
    t0 = time.monotonic()
    with slurm_cluster.running(tmp_path_factory.mktemp("slurm-cluster"), nodes=4) as c:
        print(f"[slurm-cluster] {len(c.hosts)} nodes idle after {time.monotonic() - t0:.1f} s")
        yield c
    left = slurm_cluster._processes_under(c.root) + c._stepds()
    assert not left, f"processes of the cluster outlived stop(): {left}"
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert c.net.tag not in spaces and f"{c.net.head_if}@" not in links, "the nodes' network outlived stop()"
    assert not c.sockets.exists(), f"{c.sockets} outlived stop()"


def build():
    stack = stack_or_skip(STACK)
    if stack.name not in _builds:
        _builds[stack.name] = suite.build(stack)
    return stack, _builds[stack.name]


def script(lines: list[str], nodes: int, ntasks: int, extra: str = "") -> str:
    return (f"#!/bin/bash\n#SBATCH --nodes={nodes}\n#SBATCH --ntasks={ntasks}\n#SBATCH --time=00:05:00\n{extra}"
            "set -e\n" + "\n".join(lines) + "\n")


def rank_hosts(output: str) -> dict[int, str]:
    """world rank -> host name, from the RANK lines commgraph prints (workloads/README.md)."""
    return {int(m.group(2)): m.group(3) for m in re.finditer(r"^RANK (\d+) world=(\d+) host=(\S+) ", output, re.M)}


def fom(output: str, name: str) -> float:
    return float(re.search(rf"^FOM {name} (\S+) ", output, re.M).group(1))


def test_a_four_rank_job_runs_one_rank_on_each_node(cluster, tmp_path):
    """4 ranks, 4 nodes: each rank on its own emulated node, in block order, and the bytes commgraph
    sends between its ranks cross the nodes' cables, where the kernel counts them."""
    stack, bdir = build()
    iters = 5
    commgraph = [str(bdir / "commgraph"), "--pattern", "random-sparse", "--iters", str(iters)]
    job = script(["srun --ntasks-per-node=1 hostname",
                  shlex.join(slurm_local.srun(stack, 4, commgraph))], 4, 4, "#SBATCH --ntasks-per-node=1\n")
    before = cluster.traffic()
    t0 = time.monotonic()
    rc, out = cluster.sbatch_wait(job, cwd=tmp_path, env=stack.env, name="four-nodes")
    moved = slurm_cluster.internode_bytes(before, cluster.traffic())
    print(f"[slurm-cluster] 4-rank job: {time.monotonic() - t0:.1f} s; {moved}")
    assert rc == 0, out
    # srun hostname: one line per task, each node once.
    srun_hosts = [ln for ln in out.splitlines() if ln in cluster.hosts]
    assert sorted(srun_hosts) == sorted(cluster.hosts), out
    # The workload's own report: a world of 4, rank r on node r.
    assert re.findall(r"^RANKS (\d+)$", out, re.M) == ["4"], out
    assert rank_hosts(out) == dict(enumerate(cluster.hosts)), out
    assert re.search(r"^VERIFY traffic PASS ", out, re.M), out
    # Every byte between ranks is between nodes; the cables carry it plus TCP/IP and MPI headers.
    app_bytes = fom(out, "internode_bytes_per_iter") * iters
    assert fom(out, "intranode_bytes_per_iter") == 0 and app_bytes > 1e6, out
    assert app_bytes <= moved["between_nodes"] < 1.5 * app_bytes, (app_bytes, moved)
    assert all(b > 0 for b in moved["sent_by_node"].values()), moved


def advised_and_block(nodes: list[str], tmp_path: Path) -> tuple[list[str], list[str]]:
    """`commscope advise placement` of the 4-rank commgraph `pairs` trace on NODES (2 nodes of 2 ranks): the Slurm
    host file it writes under TMP_PATH/advice, as a list of nodes, and block placement on the same nodes. The advice
    moves ranks off block placement."""
    topo = tmp_path / "topology.yaml"
    topo.write_text(yaml.safe_dump({"nodes": nodes, "ranks_per_node": 2, "network": {"type": "flat"}}))
    p = subprocess.run([*COMMSCOPE, "advise", "placement", str(PAIRS_TRACE), "--topology", str(topo), "-o",
                        str(tmp_path / "advice"), "--no-store"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    advised = (tmp_path / "advice" / "slurm.hostfile").read_text().split()
    block = [nodes[0], nodes[0], nodes[1], nodes[1]]
    assert sorted(advised) == sorted(block) and advised != block, advised
    return advised, block


def test_ranks_land_on_the_nodes_the_placement_advice_names(cluster, tmp_path):
    """`commscope advise placement` on the 4-rank commgraph `pairs` trace for 2 nodes of 2 (the cluster's
    middle two) writes a Slurm host file; with it in SLURM_HOSTFILE, `srun --distribution=arbitrary` runs
    each rank on the node the advice names, and the kernel counts a small fraction of the bytes between
    the nodes that block placement of the same graph on the same nodes puts there, as commgraph's own
    count of bytes between host names says."""
    stack, bdir = build()
    nodes = cluster.hosts[1:3]
    advised, block = advised_and_block(nodes, tmp_path)
    # The traced graph (pattern, degree, seed, sizes) from its own output beside the profile.
    params = dict(re.findall(r"^PARAM (\S+) (\S+)$", (PAIRS_TRACE / "commgraph.out").read_text(), re.M))
    graph = [x for k in ("pattern", "degree", "seed", "small-bytes", "large-bytes") for x in (f"--{k}", params[k])]
    iters = 20
    argv = [str(bdir / "commgraph"), *graph, "--iters", str(iters)]
    moved, said = {}, {}
    for name, hosts in (("block", block), ("advised", advised)):
        hostfile = tmp_path / f"{name}.hosts"
        hostfile.write_text("\n".join(hosts) + "\n")
        line = f"SLURM_HOSTFILE={hostfile} " + shlex.join(
            ["srun", "--mpi=pmix", "--distribution=arbitrary", "-n", "4", *argv])
        before = cluster.traffic()
        # The job holds one core per node; --overcommit lets a step put 2 ranks on a node of it.
        rc, out = cluster.sbatch_wait(script([line], 4, 4, "#SBATCH --overcommit\n"), cwd=tmp_path, env=stack.env,
                                      name=f"place-{name}")
        sent = slurm_cluster.internode_bytes(before, cluster.traffic())
        assert rc == 0, out
        assert rank_hosts(out) == dict(enumerate(hosts)), f"{name}: ranks ran elsewhere than asked\n{out}"
        assert re.search(r"^VERIFY traffic PASS ", out, re.M), out
        moved[name] = sent["between_nodes"]
        said[name] = fom(out, "internode_bytes_per_iter") * iters
        # Only the two nodes of the host file sent anything beyond Slurm's own messages (kilobytes).
        assert all(b < 50_000 for h, b in sent["sent_by_node"].items() if h not in nodes), sent
    print(f"[slurm-cluster] placement pairs n4 by srun: kernel-counted bytes between nodes {moved}; "
          f"commgraph's count {said}")
    assert said["advised"] < said["block"] / 4, said
    assert said["block"] <= moved["block"] < 1.5 * said["block"] + 200_000, (said, moved)
    assert moved["advised"] < moved["block"] / 4, moved


def _runs(dsn: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT experiment, status, ranks, nodes, metadata->>'hostlist', "
                            "metadata->>'numhosts' FROM runs ORDER BY experiment").fetchall()


def test_a_profiled_four_node_run_is_stored_with_its_nodes(cluster, tmp_path, caliper_build, server, dsn):
    """Caliper and Adiak in the workload: Adiak gathers every rank's host name (hostlist, numhosts),
    and `commscope ingest` of the profile stores nodes=4 and the hosts, no Ramble involved."""
    stack, bdir = caliper_build
    run = tmp_path / "run"
    run.mkdir()
    line = (f"CALI_CONFIG=runtime-profile,profile.mpi,output={run}/commgraph.cali "
            + shlex.join(slurm_local.srun(stack, 4, [str(bdir / "commgraph"), "--iters", "3"]))
            + f" > {run}/commgraph.out")
    rc, out = cluster.sbatch_wait(script([line], 4, 4, "#SBATCH --ntasks-per-node=1\n"), cwd=tmp_path,
                                  env=stack.env, name="profiled")
    assert rc == 0, out
    text = (run / "commgraph.out").read_text()
    assert sorted(rank_hosts(text).values()) == sorted(cluster.hosts), text
    p = subprocess.run([*COMMSCOPE, "ingest", str(run), "--stack", STACK, "-q"], capture_output=True, text=True,
                       env={**os.environ, "COMMSCOPE_DB_URL": dsn}, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    ((_, status, ranks, nodes, hostlist, numhosts),) = _runs(dsn)
    assert (status, ranks, nodes, numhosts) == ("ok", 4, 4, "4")
    assert sorted(hostlist.strip("[]").split(",")) == sorted(cluster.hosts), hostlist


SCRIPT = [sys.executable, str(ROOT / "ci" / "slurm_cluster.py")]


def _netns() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_the_command_line_runs_a_second_cluster_beside_the_first(cluster, tmp_path):
    """`start` / `status` / `measure` / `stop` of ci/slurm_cluster.py on a 2-node cluster of its own while
    the fixture's cluster runs: other host names and subnet, srun reaches both its nodes, `measure`
    passes the command's exit status on, and `stop` leaves no daemon, namespace or host link; the first
    cluster is untouched."""
    d = tmp_path / "second"
    p = subprocess.run([*SCRIPT, "start", "--dir", str(d), "--nodes", "2"], capture_output=True, text=True, timeout=120)
    try:
        assert p.returncode == 0 and p.stdout.strip() == f"export SLURM_CONF={d / 'etc' / 'slurm.conf'}", p.stderr
        second = slurm_cluster.Cluster(d)
        assert len(second.hosts) == 2 and not set(second.hosts) & set(cluster.hosts)
        assert second.subnet != cluster.subnet
        st = subprocess.run([*SCRIPT, "status", "--dir", str(d)], capture_output=True, text=True, timeout=60)
        assert st.returncode == 0 and [ln.split() for ln in st.stdout.splitlines()] == [
            [h, ip, "idle"] for h, ip in zip(second.hosts, second.net.ips)], st.stdout
        m = subprocess.run([*SCRIPT, "measure", "--dir", str(d), "--", "srun", "-N", "2", "-n", "2", "/bin/sh", "-c",
                            "hostname; exit 3"], capture_output=True, text=True, timeout=60)
        assert m.returncode == 3 and sorted(m.stdout.split()) == second.hosts, m.stdout + m.stderr
        assert json.loads(m.stderr[m.stderr.index("{"):])["exit_status"] == 3, m.stderr
    finally:
        s = subprocess.run([*SCRIPT, "stop", "--dir", str(d)], capture_output=True, text=True, timeout=120)
    assert s.returncode == 0, s.stderr
    assert second.net.tag not in _netns() and not slurm_cluster._processes_under(d)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"{second.net.head_if}@" not in links
    st = subprocess.run([*SCRIPT, "status", "--dir", str(d)], capture_output=True, text=True, timeout=60)
    assert st.returncode == 1, st.stdout
    assert cluster.running() and set(cluster.node_states().values()) == {"idle"}, cluster.node_states()


def test_cleanup_stops_a_cluster_whose_owner_is_gone(cluster, tmp_path):
    """A cluster started for a process that is gone (a SIGKILLed test) is stopped by `cleanup`; the
    fixture's cluster, whose owner lives, is not."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    orphan = slurm_cluster.Cluster(tmp_path / "orphan", nodes=2).start(owner_pid=gone.pid)
    try:
        assert orphan.running() and orphan.net.tag in _netns()
        p = subprocess.run([*SCRIPT, "cleanup"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and orphan.net.tag in p.stdout and cluster.net.tag not in p.stdout, p.stdout
        assert orphan.net.tag not in _netns() and not slurm_cluster._processes_under(orphan.root)
        assert not orphan.state_file.exists()
    finally:
        orphan.stop()
    assert cluster.running() and cluster.net.tag in _netns()


needs_ramble = pytest.mark.skipif(
    not RAMBLE_ROOT or not Path(RAMBLE_ROOT, "bin", "ramble").exists(),
    reason="Ramble is in no package registry: set RAMBLE_ROOT to a checkout of GoogleCloudPlatform/ramble at the "
           "commit in versions.yaml to run studies on the emulated site")


@pytest.fixture(scope="module")
def site_env(cluster, tmp_path_factory):
    """`commscope setup` for Debian Open MPI (with Caliper when COMMSCOPE_CALIPER_PREFIX names it), and the
    environment `commscope run --site slurm-emulated` needs: its home and the cluster's SLURM_CONF."""
    stack_or_skip(STACK)
    home = tmp_path_factory.mktemp("home")
    home.chmod(0o711)
    env = {**os.environ, "COMMSCOPE_HOME": str(home), "SPACK_ROOT": "",
           **{k: v for k, v in cluster.env().items() if k in ("PATH", "SLURM_CONF")}}
    for k in ("SLURM_HOSTFILE", "SBATCH_DISTRIBUTION"):
        env.pop(k, None)
    setup = [*COMMSCOPE, "setup", "--stacks", STACK]
    if CALIPER_PREFIX:
        setup += ["--caliper-prefix", f"{STACK}={CALIPER_PREFIX.replace(';', ':')}"]
    p = subprocess.run(setup, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert (home / "sites" / "local-generated" / "variables.yaml").exists(), p.stdout + p.stderr
    return env


def commscope_run(env: dict, dsn: str, study: str, where: str, label: str, extra_env: dict | None = None) -> Path:
    """`commscope run STUDY --site slurm-emulated`, ingested into DSN; returns the workspace."""
    t0 = time.monotonic()
    p = subprocess.run([*COMMSCOPE, "run", study, "--site", "slurm-emulated", "--stacks", STACK, "--where", where],
                       capture_output=True, text=True, env={**env, "COMMSCOPE_DB_URL": dsn, **(extra_env or {})},
                       cwd=ROOT, timeout=600)
    print(f"[slurm-cluster] {label}: {time.monotonic() - t0:.1f} s\n{p.stdout}")
    assert p.returncode == 0, p.stdout + p.stderr
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    exps = json.loads((ws / "results.latest.json").read_text())["experiments"]
    assert exps and all(e["RAMBLE_STATUS"] == "SUCCESS" for e in exps), [(e["name"], e["RAMBLE_STATUS"]) for e in exps]
    return ws


def experiment_dirs(ws: Path) -> list[Path]:
    return sorted(p.parent for p in ws.glob("experiments/*/*/*/slurm-job-id"))


def node_counters(d: Path) -> dict[str, int]:
    """Bytes each node of the experiment's job put on its cable meanwhile (eth0 tx_bytes, read by the
    batch script inside each node before and after)."""
    tx = {w: {ln.split()[0]: int(ln.split()[1]) for ln in (d / f"node-counters.{w}").read_text().splitlines()}
          for w in ("before", "after")}
    assert sorted(tx["before"]) == sorted(tx["after"]), tx
    return {h: tx["after"][h] - tx["before"][h] for h in tx["after"]}


@needs_ramble
def test_nightly_through_sbatch_on_the_emulated_site(cluster, site_env, dsn):
    """`commscope run nightly --site slurm-emulated` (filtered to commgraph at 4 ranks): every experiment
    is an sbatch job on 2 nodes of 2 ranks (ranks 0-1 on one, 2-3 on the other, as the workload's RANK
    lines say), the kernel counted at least the bytes the workload says crossed between its nodes, and
    the stored runs say 4 ranks on 2 nodes (with Caliper: Adiak's host list of those 2 nodes)."""
    ws = commscope_run(site_env, dsn, "nightly", '{n_ranks} == 4 and "{application_name}" == "commgraph"',
                       "nightly (commgraph, 4 ranks)")
    dirs = experiment_dirs(ws)
    assert len(dirs) == 2, dirs
    for d in dirs:
        assert "#SBATCH --nodes=2\n" in (d / "slurm_experiment").read_text()
        text = (d / f"{d.name}.out").read_text()
        hosts = rank_hosts(text)
        sent = node_counters(d)
        assert len(sent) == 2 and set(sent) <= set(cluster.hosts), sent
        a, b = sorted(sent)
        assert [hosts[r] for r in range(4)] in ([a, a, b, b], [b, b, a, a]), (hosts, sent)
        app = fom(text, "internode_bytes_per_iter") * int(re.search(r"^PARAM iters (\d+)$", text, re.M).group(1))
        assert app > 1e6 and app <= sum(sent.values()) < 1.5 * app, (app, sent)
    runs = _runs(dsn)
    assert len(runs) == 2 and all(r[1:4] == ("ok", 4, 2) for r in runs), runs
    if CALIPER_PREFIX:
        for r in runs:
            listed = set(r[4].strip("[]").split(","))
            assert r[5] == "2" and len(listed) == 2 and listed <= set(cluster.hosts), runs


@needs_ramble
def test_commscope_run_places_ranks_where_the_advice_says(cluster, site_env, dsn, tmp_path):
    """The placement advice for the 4-rank commgraph `pairs` trace on 2 nodes of 2 (the last two nodes of
    the cluster, which Slurm would not pick by itself) is a Slurm host file; with it in SLURM_HOSTFILE and
    SBATCH_DISTRIBUTION=arbitrary, `commscope run placement --site slurm-emulated` gets those nodes from
    sbatch and every rank runs on the node the advice names (the RANK lines), and the kernel counts far
    fewer bytes between the nodes than under block placement on the same nodes, as commgraph's own
    count of bytes between host names does."""
    nodes = cluster.hosts[2:]
    advised, block = advised_and_block(nodes, tmp_path)
    (tmp_path / "block.hosts").write_text("\n".join(block) + "\n")
    where = '"{pattern}" == "pairs" and "{placement}" == "identity"'
    moved, said = {}, {}
    for name, hostfile in (("advised", tmp_path / "advice" / "slurm.hostfile"), ("block", tmp_path / "block.hosts")):
        ws = commscope_run(site_env, dsn, "placement", where, f"placement pairs, {name}",
                           {"SLURM_HOSTFILE": str(hostfile), "SBATCH_DISTRIBUTION": "arbitrary"})
        (d,) = experiment_dirs(ws)
        text = (d / f"{d.name}.out").read_text()
        hosts = [h for _, h in sorted(rank_hosts(text).items())]
        assert hosts == (advised if name == "advised" else block), f"{name}: ranks ran on {hosts}\n{text}"
        assert (d / "slurm.hostfile").read_text().split() == hosts
        sent = node_counters(d)
        assert sorted(sent) == sorted(nodes), sent
        moved[name] = sum(sent.values())
        said[name] = fom(text, "internode_bytes_per_iter") * int(re.search(r"^PARAM iters (\d+)$", text, re.M).group(1))
    print(f"[slurm-cluster] placement pairs n4: kernel-counted bytes between nodes {moved}; commgraph's count {said}")
    assert said["advised"] < said["block"] / 4, said
    assert said["block"] <= moved["block"] and said["advised"] <= moved["advised"], (said, moved)
    assert moved["advised"] < moved["block"] / 2, moved
    runs = _runs(dsn)
    assert len(runs) == 2 and all(r[1:4] == ("ok", 4, 2) for r in runs), runs
    if CALIPER_PREFIX:      # Adiak's host list: the advised nodes, which Slurm would not have picked
        assert all(set(r[4].strip("[]").split(",")) == set(nodes) and r[5] == "2" for r in runs), runs
