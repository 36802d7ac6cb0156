"""The interconnect catalog (ci/interconnects.py): it parses, names only known
stacks, and every entry on every installed stack is proven by a real 2-rank
run, through the stack's own selection report and an 8-byte latency in the
band of its class. Labels that lie are caught either way."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import interconnects
from commscope.workflow import interconnects as catalog
from commscope.workflow import stacks as mpi_stacks
import suite
from conftest import ROOT, STACK_NAMES, built_once, stack_or_skip

LOCAL = interconnects.catalog("local")   # built-in entries plus ramble/sites/local


def build_of(stack_name: str):
    """The per-stack build the other tests share (conftest's cache)."""
    return built_once(stack_name)[1]


def test_catalog_names_only_known_stacks_and_has_shm_and_tcp_for_each():
    for e in LOCAL:
        assert e.stack in STACK_NAMES, f"{e.name}: unknown stack {e.stack}"
        assert e.family == mpi_stacks.by_name(e.stack).family, e.name
        assert e.name.split("/")[0] == interconnects.STACK_PREFIX[e.stack], e.name
        assert interconnects.NAME.match(e.name), e.name
        assert e.transport in interconnects.CLASSES and e.proof, e.name
        for rx in (*e.proof, *e.reject):
            re.compile(rx)
    for stack in STACK_NAMES:
        classes = {e.transport for e in interconnects.entries(stack)}
        assert {"shm", "tcp"} <= classes, f"{stack} lacks a shm or tcp entry: {classes}"
    assert interconnects.get("openmpi5/tcp").env == {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp"}
    assert interconnects.get("openmpi5/tcp").environ()["COMMSCOPE_INTERCONNECT"] == "openmpi5/tcp"


def test_every_site_file_parses():
    sites = interconnects.sites()
    assert "local" in sites
    for site in sites:
        for e in interconnects.load_site(site):
            assert e.family in interconnects.REPORT_ENV, f"{site}: {e.name}"
            if e.stack in STACK_NAMES:
                assert e.family == mpi_stacks.by_name(e.stack).family


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(KeyError, match="unknown interconnect 'openmpi5/ib'.*openmpi5/tcp"):
        interconnects.get("openmpi5/ib")
    p = subprocess.run([sys.executable, str(ROOT / "ci" / "interconnects.py"), "verify", "--entries", "nope/x"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "unknown interconnect 'nope/x'" in p.stderr and "mpich4/default" in p.stderr


@pytest.mark.parametrize("text,needle", [
    ("interconnects:\n  x/y: {stack: cray-mpich, transport: tcp, proof: [a]}\n", "needs 'family"),
    ("interconnects:\n  x/y: {stack: debian-mpich4, transport: infiniband, proof: [a]}\n", "transport 'infiniband'"),
    ("interconnects:\n  x/y: {stack: debian-mpich4, transport: tcp, proof: ['(']}\n", "regex '('"),
    ("interconnects:\n  x/y: {stack: debian-mpich4, transport: tcp}\n", "needs 'proof'"),
    ("interconnects:\n  'two words/y': {stack: debian-mpich4, transport: tcp, proof: [a]}\n", "<stack>/<label>"),
    ("interconnects:\n  x/y: {stack: debian-mpich4, family: openmpi, transport: tcp, proof: [a]}\n", "contradicts"),
    ("interconnects:\n  mpich4/tcp: {stack: debian-mpich4, transport: tcp, proof: [a]}\n", "defined twice"),
])
def test_bad_site_file_is_refused_naming_the_problem(tmp_path, monkeypatch, text, needle):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "interconnects.yaml").write_text(text)
    monkeypatch.setattr(catalog, "SITES", tmp_path)
    monkeypatch.setattr(catalog, "ROOT", tmp_path)
    with pytest.raises(ValueError, match=re.escape(needle)):
        catalog.catalog("bad")


@pytest.mark.parametrize("entry", LOCAL, ids=[e.name for e in LOCAL])
def test_entry_takes_effect(entry):
    bdir = build_of(entry.stack)
    r = interconnects.verify_entry(entry, bdir)
    assert r.verdict == "proven", f"{entry.name}: {r.verdict}: {r.detail}\nproof lines: {r.proof_lines}"
    assert len(r.proof_lines) == len(entry.proof)
    lo, hi = entry.band(r.shm_us)
    assert lo <= r.latency_us < hi
    if entry.transport == "tcp" and entry.relative:
        # measured against this stack's own shared memory in the same run
        assert r.shm_us is not None and 0 < r.shm_us < r.latency_us, (r.shm_us, r.latencies_us)


def test_a_label_the_stack_ignores_is_not_proven():
    # The PyPI MPICH wheel is ch4:ucx: FI_PROVIDER does nothing, and its report
    # never names a libfabric provider.
    lie = interconnects.Entry("mpich5/ofi-tcp", "pypi-mpich5", "mpich", "tcp", {"FI_PROVIDER": "tcp"},
                              proof=(r"libfabric provider: tcp",))
    r = interconnects.verify_entry(lie, build_of("pypi-mpich5"))
    assert r.verdict == "not proven" and r.missing == [r"libfabric provider: tcp"], r.detail


def test_a_report_without_the_effect_fails_on_latency():
    # UCX_TLS=tcp alone: UCX reports tcp endpoints, but MPICH 5 keeps on-node
    # traffic in its own shared memory unless MPIR_CVAR_NOLOCAL=1, so the
    # latency stays in the shm band and the entry must not count.
    tcp = interconnects.get("mpich5/tcp")
    half = interconnects.Entry("mpich5/tcp-without-nolocal", tcp.stack, tcp.family, "tcp", {"UCX_TLS": "tcp"},
                               tcp.proof, tcp.reject)
    r = interconnects.verify_entry(half, build_of("pypi-mpich5"))
    assert r.verdict == "latency mismatch", f"{r.verdict}: {r.detail}"
    # every attempt ran, and none left the shared-memory class of this stack measured in the same run
    assert len(r.latencies_us) == interconnects.ATTEMPTS, r.latencies_us
    assert r.shm_us is not None and r.latency_us < interconnects.TCP_OVER_SHM * r.shm_us, (r.shm_us, r.latencies_us)


def test_a_report_naming_another_transport_is_rejected():
    # Claims shared memory, selects TCP: the btl report names tcp.
    shm = interconnects.get("openmpi4/shm")
    lie = interconnects.Entry("openmpi4/shm-lie", shm.stack, shm.family, "shm",
                              {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp"}, shm.proof, shm.reject)
    r = interconnects.verify_entry(lie, build_of("debian-openmpi4"))
    assert r.verdict == "not proven" and r.missing, r.detail


def test_verify_command_writes_json(tmp_path):
    build_of("debian-openmpi4")
    out = tmp_path / "verify.json"
    p = subprocess.run([sys.executable, str(ROOT / "ci" / "interconnects.py"), "verify",
                        "--entries", "openmpi4/shm", "--out", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    (row,) = json.loads(out.read_text())
    assert row["name"] == "openmpi4/shm" and row["verdict"] == "proven" and row["latency_us"] > 0
    assert "Using vader btl" in row["proof_lines"][0]
    assert re.search(r"openmpi4/shm\s+shm .* proven", p.stdout)


def test_workloads_refuse_a_catalog_name_that_is_not_one_token():
    stack, bdir = stack_or_skip("debian-openmpi4"), build_of("debian-openmpi4")
    r = suite.run(stack, bdir, "halo3d", ["--iters", "1"], 2, env={"COMMSCOPE_INTERCONNECT": "tcp please"},
                  timeout=60)
    assert r.returncode == 2 and "COMMSCOPE_INTERCONNECT: 'tcp please'" in r.stderr, r.stderr
    assert not r.out.foms


@pytest.mark.parametrize("ranks,args,needle", [
    (1, [], "needs at least 2 ranks"),
    (2, ["--bytes", "x"], "--bytes"),
    (2, ["--batches", "0"], "--batches"),
    (2, ["--batches", "5000"], "--batches"),
])
def test_pingpong_bad_input_exits_2(ranks, args, needle):
    stack, bdir = stack_or_skip("debian-openmpi4"), build_of("debian-openmpi4")
    r = suite.run(stack, bdir, "pingpong", args, ranks, timeout=60)
    assert r.returncode == 2 and "pingpong: error:" in r.stderr and needle in r.stderr, r.stderr
    assert not r.out.foms
