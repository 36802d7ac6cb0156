#!/usr/bin/env python3
"""The interconnect catalog: named runtime transport selections per MPI stack,
and the runs that prove each one takes effect.

An entry such as `openmpi5/tcp` is a set of environment variables that picks a
transport on one stack of ci/mpi_stacks.py. Every selection is an environment
variable (Open MPI's `--mca pml ob1` is `OMPI_MCA_pml=ob1`), so an entry works
the same under `mpirun` and under `srun`. A site adds entries in
ramble/sites/<site>/interconnects.yaml.

Labels lie silently (the PyPI MPICH wheel ignores FI_PROVIDER), so an entry
counts only when `verify` proves it: a real 2-rank pingpong run whose
 1. selection report, printed by the stack itself, names the expected
    transport (Open MPI: `OMPI_MCA_btl_base_verbose=1` prints
    "mca: bml: Using <btl> btl for send to ..."; MPICH:
    `MPIR_CVAR_DEBUG_SUMMARY=1` prints "==== UCX netmod Capability ====" but
    nothing about UCX's transports, so `UCX_LOG_LEVEL=info` adds UCX's own
    "ep_cfg[..]: tag(<transports>)" lines; Intel MPI: `I_MPI_DEBUG=5` prints
    "libfabric provider: ..." for OFI and the tuning file it loaded), and
 2. 8-byte half round trip latency falls in the band of the entry's class
    (for TCP: at least TCP_OVER_SHM x the stack's shared memory, measured
    in the same verification).

    python3 ci/interconnects.py list [--site SITE] [--json]
    python3 ci/interconnects.py verify [--stacks S ...] [--entries N ...] [--site SITE]

Stdlib only (a site file needs PyYAML, imported when one is read).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "collectors"))
import mpi_stacks  # noqa: E402
from commscope.contract import parse_output  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SITES = ROOT / "ramble" / "sites"

# Catalog names start with a short stack name: openmpi5/tcp runs on pypi-openmpi5.
STACK_PREFIX = {
    "debian-openmpi4": "openmpi4",
    "debian-mpich4": "mpich4",
    "pypi-openmpi5": "openmpi5",
    "pypi-mpich5": "mpich5",
    "pypi-impi2021": "impi2021",
}

# Half round trip of an 8-byte message, in microseconds, [low, high).
# Shared memory has a fixed ceiling: load only ever slows a run, and shared
# memory measured 0.12-1.9 us on the 2-core machines here, idle or busy.
# TCP has no fixed floor: loopback TCP took 7-11 us on one machine and
# 3.2-7.7 us on the next (2026-11-25), so a floor in microseconds fails on a
# faster machine. A TCP entry is instead measured against the same stack's
# shared memory entry in the same verification (see TCP_OVER_SHM); None here
# means "relative". The TCP ceiling only catches a run that fell to something
# pathological: with other jobs holding both cores (load average 10) the best
# TCP batch reached 175 us. A site's fabric entry gives its own band.
LATENCY_BANDS_US = {
    "shm": (0.0, 5.0),
    "tcp": (None, 1000.0),
    "fabric": (0.0, 10.0),
}
# A TCP entry's fastest attempt must be at least this many times the same
# stack's fastest shared-memory attempt. Measured here: the narrowest gap is
# the PyPI MPICH 5 wheel, shared memory 1.40 us against TCP 3.5-7.7 us (2.5x
# and more); a selection that left traffic on shared memory (MPICH without
# MPIR_CVAR_NOLOCAL) measures the same as shared memory, 1.0x.
TCP_OVER_SHM = 2.0
CLASSES = tuple(LATENCY_BANDS_US)
# The workloads echo the name as one token (workloads/common refuses others).
NAME = re.compile(r"^[A-Za-z0-9._+:-]+/[A-Za-z0-9._+:-]+$")

# What makes each family print its own transport selection.
REPORT_ENV = {
    "openmpi": {"OMPI_MCA_btl_base_verbose": "1"},
    "mpich": {"MPIR_CVAR_DEBUG_SUMMARY": "1", "UCX_LOG_LEVEL": "info"},
    "impi": {"I_MPI_DEBUG": "5"},
}

# Pingpong sizing for verify: 20 batches of 200 round trips take 0.1 s on TCP
# loopback. Short batches fit between a busy neighbour's time slices, so the
# best one still shows the transport.
PINGPONG_ARGS = ["--bytes", "8", "--iters", "200", "--batches", "20", "--warmup", "200"]
# Runs per entry: the fastest is the signature. A shm entry stops at its first
# run in band; a TCP entry takes all, so a slowed shm run cannot pass as TCP.
ATTEMPTS = 3
# Seconds. A run takes 1-3 s, and up to 35 s with both cores busy with other
# jobs; a hang is a failure, never a wait. Debian MPICH 4.0 with UCX over TCP
# sometimes hangs in MPI_Finalize after a complete run
# (rank 0 flushing its UCX endpoint while rank 1 already waits in the PMI
# barrier); seen in 2 of 6 runs on a loaded machine. Such an attempt counts
# (its output is complete) and is tallied in `finalize_hangs`; an entry whose
# every attempt hangs fails.
RUN_TIMEOUT = 90


@dataclass(frozen=True)
class Entry:
    name: str               # "openmpi5/tcp"
    stack: str              # a stack name of ci/mpi_stacks.py (or a site's own stack)
    family: str             # openmpi | mpich | impi: which report to read
    transport: str          # shm | tcp | fabric: which latency band applies
    env: dict               # the selection itself
    proof: tuple            # regexes that must each match a line of the stack's report
    reject: tuple = ()      # regexes no line may match (another transport was used)
    report_env: dict = field(default_factory=dict)  # added to REPORT_ENV[family]
    latency_us: tuple | None = None                 # overrides LATENCY_BANDS_US[transport]
    note: str = ""
    source: str = "builtin"

    @property
    def label(self) -> str:
        """The part after the stack: "tcp" of "openmpi5/tcp"."""
        return self.name.split("/", 1)[1]

    def band(self, shm_us: float | None = None) -> tuple:
        """[low, high) in us. A TCP entry's floor is TCP_OVER_SHM x SHM_US, the same stack's
        shared-memory latency measured in the same verification (None when not measured)."""
        if self.latency_us:
            return tuple(self.latency_us)
        lo, hi = LATENCY_BANDS_US[self.transport]
        if lo is None:
            lo = None if shm_us is None else TCP_OVER_SHM * shm_us
        return (lo, hi)

    @property
    def relative(self) -> bool:
        """Whether the band's floor comes from the stack's shared memory measured in the same run."""
        return not self.latency_us and LATENCY_BANDS_US[self.transport][0] is None

    def environ(self) -> dict:
        """The variables a run needs: the selection plus the catalog name,
        which every workload echoes as `PARAM interconnect` and Adiak metadata."""
        return {**self.env, "COMMSCOPE_INTERCONNECT": self.name}


# ---- built-in entries --------------------------------------------------------

def _ompi(prefix: str, stack: str, btl: str, transport: str) -> Entry:
    # pml ob1 is forced: with pml ucx or cm no btl carries the traffic at all.
    return Entry(f"{prefix}/{transport}", stack, "openmpi", transport,
                 {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": f"self,{btl}"},
                 proof=(rf"mca: bml: Using {btl} btl for send to",),
                 reject=(rf"mca: bml: Using (?!{btl} |self )\S+ btl for send to",),
                 note=f"--mca pml ob1 --mca btl self,{btl}")


# UCX's transports for tagged messages to a peer, from its endpoint report
# lines: "ep_cfg[1]: tag(sysv/memory cma/memory) ..." (UCX 1.13) or
# "ucp_context_0 intra-node cfg#1 tag(tcp/eth0) ..." (UCX 1.20). The
# endpoint to the process itself (tag(self/...) or "self cfg#") proves nothing.
_UCX_PEER = r"UCX +INFO +(?!.*\bself cfg#)(?:ep_cfg\[\d+\]|.*cfg#\d+).*?\btag\((?![^)]*\bself/)"
_UCX_SHM = _UCX_PEER + r"[^)]*\b(sysv|posix|cma|xpmem|knem)/memory"
_UCX_TCP = _UCX_PEER + r"[^)]*\btcp/"


def _mpich_ucx(prefix: str, stack: str, transport: str) -> Entry:
    if transport == "shm":
        return Entry(f"{prefix}/default", stack, "mpich", "shm", {},
                     proof=(r"==== UCX netmod", _UCX_SHM), reject=(_UCX_TCP,),
                     note="ch4:ucx defaults; on-node traffic over shared memory")
    # NOLOCAL pushes on-node traffic through the netmod. No report names it;
    # the latency class is what shows it took effect.
    return Entry(f"{prefix}/tcp", stack, "mpich", "tcp", {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp"},
                 proof=(r"==== UCX netmod", _UCX_TCP), reject=(_UCX_SHM,),
                 note="ch4:ucx with UCX_TLS=tcp; MPIR_CVAR_NOLOCAL=1 keeps on-node traffic in the netmod")


BUILTIN = (
    _ompi("openmpi4", "debian-openmpi4", "vader", "shm"),
    _ompi("openmpi4", "debian-openmpi4", "tcp", "tcp"),
    _ompi("openmpi5", "pypi-openmpi5", "sm", "shm"),   # vader was renamed sm in Open MPI 5
    _ompi("openmpi5", "pypi-openmpi5", "tcp", "tcp"),
    _mpich_ucx("mpich4", "debian-mpich4", "shm"),
    _mpich_ucx("mpich4", "debian-mpich4", "tcp"),
    # The PyPI wheel is ch4:ucx too, not ofi: FI_PROVIDER has no effect on it.
    _mpich_ucx("mpich5", "pypi-mpich5", "shm"),
    _mpich_ucx("mpich5", "pypi-mpich5", "tcp"),
    # Intel MPI names its fabric mode in the tuning file it loads, and prints
    # the libfabric provider only when OFI is in use.
    Entry("impi2021/shm", "pypi-impi2021", "impi", "shm", {"I_MPI_FABRICS": "shm"},
          proof=(r"MPI startup\(\): Load tuning file: .*_shm\.dat",), reject=(r"libfabric provider:",)),
    Entry("impi2021/tcp", "pypi-impi2021", "impi", "tcp", {"I_MPI_FABRICS": "ofi", "FI_PROVIDER": "tcp"},
          proof=(r"MPI startup\(\): libfabric provider: tcp\b",)),
)


# ---- site entries --------------------------------------------------------------

def sites() -> list[str]:
    return sorted(p.parent.name for p in SITES.glob("*/interconnects.yaml"))


def load_site(site: str) -> list[Entry]:
    """Entries from ramble/sites/<site>/interconnects.yaml. Shape:

        interconnects:
          openmpi4/ucx-tcp:            # <stack prefix or site name>/<label>
            stack: debian-openmpi4     # a ci/mpi_stacks.py name, or a site stack with `family:`
            transport: tcp             # shm | tcp | fabric
            env: {OMPI_MCA_pml: ucx, UCX_TLS: tcp}
            report_env: {UCX_LOG_LEVEL: info}   # optional, added to the family's
            proof: ['UCX +INFO .*tag\\([^)]*tcp/']
            reject: []                 # optional
            latency_us: [5, 1000]      # optional band override
    """
    path = SITES / site / "interconnects.yaml"
    if not path.is_file():
        raise KeyError(f"site {site!r} has no {path.relative_to(ROOT)}; sites with one: {', '.join(sites()) or 'none'}")
    try:
        import yaml
    except ImportError as e:  # pragma: no cover - PyYAML is a project dependency
        raise RuntimeError(f"reading {path} needs PyYAML (pip install PyYAML)") from e
    doc = yaml.safe_load(path.read_text()) or {}
    where = path.relative_to(ROOT)
    if not isinstance(doc, dict) or not isinstance(doc.get("interconnects", {}), dict):
        raise ValueError(f"{where}: expected a mapping 'interconnects: {{name: {{...}}}}'")
    known = {s.name: s.family for s in mpi_stacks.catalog()}
    out = []
    for name, spec in (doc.get("interconnects") or {}).items():
        def bad(msg: str):
            return ValueError(f"{where}: interconnect {name!r}: {msg}")
        if not isinstance(name, str) or not NAME.match(name):
            raise bad("a name is <stack>/<label> of letters, digits and . _ - + :")
        if not isinstance(spec, dict):
            raise bad("expected a mapping")
        unknown = set(spec) - {"stack", "family", "transport", "env", "report_env", "proof", "reject",
                               "latency_us", "note"}
        if unknown:
            raise bad(f"unknown keys {sorted(unknown)}")
        stack = spec.get("stack")
        family = spec.get("family") or known.get(stack)
        if stack is None:
            raise bad("needs 'stack'")
        if family is None:
            raise bad(f"stack {stack!r} is not in ci/mpi_stacks.py ({', '.join(known)}); "
                      "a site stack needs 'family: openmpi|mpich|impi'")
        if family not in REPORT_ENV:
            raise bad(f"family {family!r} is not one of {', '.join(REPORT_ENV)}")
        if stack in known and known[stack] != family:
            raise bad(f"family {family!r} contradicts stack {stack!r} ({known[stack]})")
        if spec.get("transport") not in CLASSES:
            raise bad(f"transport {spec.get('transport')!r} is not one of {', '.join(CLASSES)}")
        proof = spec.get("proof")
        if not proof or not isinstance(proof, list):
            raise bad("needs 'proof': a list of regexes the stack's report must match")
        for rx in [*proof, *(spec.get("reject") or [])]:
            try:
                re.compile(rx)
            except re.error as e:
                raise bad(f"regex {rx!r}: {e}") from e
        band = spec.get("latency_us")
        if band is not None and not (isinstance(band, list) and len(band) == 2 and band[0] < band[1]):
            raise bad(f"latency_us {band!r} is not [low, high] with low < high")
        out.append(Entry(name, stack, family, spec["transport"],
                         {k: str(v) for k, v in (spec.get("env") or {}).items()},
                         tuple(proof), tuple(spec.get("reject") or ()),
                         {k: str(v) for k, v in (spec.get("report_env") or {}).items()},
                         tuple(band) if band else None, spec.get("note", ""), str(where)))
    return out


# ---- the catalog API -------------------------------------------------------------

def catalog(site: str | None = None) -> list[Entry]:
    """Built-in entries, plus the site's when a site is given."""
    entries = list(BUILTIN) + (load_site(site) if site else [])
    seen: set = set()
    for e in entries:
        if e.name in seen:
            raise ValueError(f"interconnect {e.name!r} is defined twice (the second in {e.source})")
        seen.add(e.name)
    return entries


def entries(stack: str, site: str | None = None) -> list[Entry]:
    """The entries that run on one stack (a ci/mpi_stacks.py name)."""
    return [e for e in catalog(site) if e.stack == stack]


def get(name: str, site: str | None = None) -> Entry:
    for e in catalog(site):
        if e.name == name:
            return e
    raise KeyError(f"unknown interconnect {name!r}; known: {', '.join(e.name for e in catalog(site))}")


# ---- verification ------------------------------------------------------------------

@dataclass
class Result:
    name: str
    stack: str
    transport: str
    verdict: str            # proven | not proven | latency mismatch | failed | unverifiable
    proof_lines: list       # the first report line each proof regex matched
    missing: list           # proof regexes nothing matched
    rejected: list          # report lines that match a reject regex
    latency_us: float | None
    latencies_us: list      # every attempt
    band_us: tuple
    seconds: float
    detail: str = ""
    finalize_hangs: int = 0  # attempts that reported fully, then hung in MPI_Finalize
    shm_us: float | None = None  # the stack's shared-memory latency a relative band was measured against


def _strip_prefix(line: str) -> str:
    # "[vm:1234] mca: bml: ..." and "[179536.6] [vm:26894:0] ucp_worker.c:1763 UCX ..." -> the message
    return re.sub(r"^(\[[^\]]*\]\s*)+", "", line).strip()


def check_report(entry: Entry, text: str) -> tuple[list, list, list]:
    """(proof lines found, proof regexes missing, lines a reject regex matched)."""
    lines = text.splitlines()
    found, missing = [], []
    for rx in entry.proof:
        hit = next((ln for ln in lines if re.search(rx, ln)), None)
        if hit is None:
            missing.append(rx)
        else:
            found.append(_strip_prefix(hit))
    rejected = [_strip_prefix(ln) for ln in lines for rx in entry.reject if re.search(rx, ln)]
    return found, missing, rejected


def shm_entry(stack: str, site: str | None = None) -> Entry | None:
    """The stack's shared-memory entry: what a TCP entry's latency is measured against."""
    return next((e for e in catalog(site) if e.stack == stack and e.transport == "shm"), None)


def verify_entry(entry: Entry, bdir: Path, shm_us: float | None = None, site: str | None = None) -> Result:
    """Runs bdir/pingpong under the entry up to ATTEMPTS times: the report
    must prove the selection every time, and the fastest attempt must fall in
    the band (a busy machine only ever makes a run slower, never faster).
    A TCP entry's band starts at TCP_OVER_SHM x the stack's shared-memory
    latency: SHM_US when the caller measured it in this run, else measured
    here first from the stack's shm entry."""
    if entry.relative and shm_us is None:
        base = shm_entry(entry.stack, site)
        if base is None:
            return Result(entry.name, entry.stack, entry.transport, "unverifiable", [], [], [], None, [],
                          entry.band(), 0.0, f"stack {entry.stack} has no shared-memory entry to measure "
                          f"the {entry.transport} floor against; give the entry latency_us: [low, high]")
        ref = verify_entry(base, bdir, site=site)
        if ref.verdict != "proven":
            return Result(entry.name, entry.stack, entry.transport, "failed", [], [], [], None, [], entry.band(),
                          ref.seconds, f"the shared-memory reference {base.name} was not proven: "
                          f"{ref.verdict}: {ref.detail}")
        shm_us = ref.latency_us
    import suite  # its run() kills the launcher's whole session on a hang
    stack = mpi_stacks.by_name(entry.stack)
    band = entry.band(shm_us)
    lats: list = []
    t0 = time.monotonic()
    res = Result(entry.name, entry.stack, entry.transport, "failed", [], [], [], None, lats, band, 0.0,
                 shm_us=shm_us if entry.relative else None)
    env = {**REPORT_ENV[entry.family], **entry.report_env, **entry.environ()}
    for _ in range(ATTEMPTS):
        r = suite.run(stack, bdir, "pingpong", PINGPONG_ARGS, 2, case=entry.name, env=env, timeout=RUN_TIMEOUT)
        out = r.out
        hung_after_report = (r.returncode == -999 and "latency" in out.foms
                             and out.verify.get("payload", ("",))[0] == "PASS")
        if hung_after_report:
            # Its report and latency are complete: use them, and count the hang.
            res.finalize_hangs += 1
            r.returncode = 0
        problems = suite.problems(r)
        if out.params.get("interconnect") != entry.name:
            problems.append(f"PARAM interconnect is {out.params.get('interconnect')!r}, not {entry.name!r}")
        if "latency" not in out.foms:
            problems.append("no FOM latency")
        if problems:
            res.verdict, res.detail = "failed", "; ".join(problems)
            break
        res.proof_lines, res.missing, res.rejected = check_report(entry, r.stdout + "\n" + r.stderr)
        lats.append(out.foms["latency"][0])
        res.latency_us = min(lats)
        if res.missing or res.rejected:
            res.verdict = "not proven"
            res.detail = ("report lacks " + ", ".join(map(repr, res.missing)) if res.missing
                          else "report shows another transport: " + res.rejected[0])
            break
        # The signature is the fastest attempt: load only slows a run. A band
        # with a floor (tcp) takes every attempt, because a slowed shared
        # memory run can look like TCP once, but rarely three times.
        in_band = band[0] <= res.latency_us < band[1]
        res.verdict = "proven" if in_band else "latency mismatch"
        res.detail = "" if in_band else (
            f"{entry.transport} band is [{band[0]:g}, {band[1]:g}) us"
            + (f" ({TCP_OVER_SHM:g}x {shm_us:g} us of shared memory on this stack)" if entry.relative else "")
            + f"; measured {lats} us")
        if in_band and band[0] == 0:
            break
    if res.finalize_hangs and res.finalize_hangs == len(lats):
        res.verdict, res.detail = "failed", f"every attempt ({len(lats)}) hung in MPI_Finalize after a complete run"
    res.seconds = round(time.monotonic() - t0, 2)
    return res


def verify(selected: list[Entry], site: str | None = None) -> list[Result]:
    import suite  # the same per-stack builds (build/<stack>) the tests and ci/suite.py use
    results, builds, shm = [], {}, {}
    names = {s.name for s in mpi_stacks.catalog()}
    for e in selected:
        if e.stack not in names or not mpi_stacks.by_name(e.stack).present():
            why = (f"stack {e.stack} is not installed here" if e.stack in names else
                   f"{e.stack} is a site stack, not one of ci/mpi_stacks.py; prove it on the site")
            results.append(Result(e.name, e.stack, e.transport, "unverifiable", [], [], [], None, [], e.band(),
                                  0.0, why))
            continue
        if e.stack not in builds:
            builds[e.stack] = suite.build(mpi_stacks.by_name(e.stack))
        # A shared-memory entry proven earlier in this run is the TCP entries' reference.
        results.append(verify_entry(e, builds[e.stack], shm_us=shm.get(e.stack) if e.relative else None, site=site))
        r = results[-1]
        if e.transport == "shm" and r.verdict == "proven" and shm_entry(e.stack, site) == e:
            shm[e.stack] = r.latency_us
        print(f"  {r.name:22} {r.verdict:17} {fmt_lat(r.latency_us)}", flush=True)
    return results


def fmt_lat(v) -> str:
    return f"{v:8.2f} us" if v is not None else "       - "


def table(results: list[Result]) -> str:
    rows = [f"{'entry':22} {'class':6} {'band us':12} {'latency':11} {'verdict':17} proof"]
    for r in results:
        band = "[" + ("?" if r.band_us[0] is None else f"{r.band_us[0]:.3g}") + f",{r.band_us[1]:g})"
        proof = " | ".join(r.proof_lines) if r.proof_lines else (r.detail.splitlines() or [""])[0]
        verdict = r.verdict + (f" ({r.finalize_hangs} hung)" if r.finalize_hangs else "")
        rows.append(f"{r.name:22} {r.transport:6} {band:12} {fmt_lat(r.latency_us):11} {verdict:17} {proof}")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("list", help="print the catalog")
    vp = sub.add_parser("verify", help="prove every entry with a real 2-rank run")
    for p in (lp, vp):
        p.add_argument("--site", help=f"add ramble/sites/SITE/interconnects.yaml (have: {', '.join(sites()) or 'none'})")
        p.add_argument("--stacks", nargs="+", metavar="STACK", help="only these stacks")
        p.add_argument("--entries", nargs="+", metavar="NAME", help="only these entries")
    lp.add_argument("--json", action="store_true")
    vp.add_argument("--out", type=Path, help="results JSON (default: <build dir>/interconnects/verify.json)")
    args = ap.parse_args()

    try:
        chosen = catalog(args.site)
        if args.stacks:
            known = [s.name for s in mpi_stacks.catalog()]
            for s in args.stacks:
                if s not in known:
                    raise KeyError(f"unknown MPI stack {s!r}; known: {', '.join(known)}")
            chosen = [e for e in chosen if e.stack in args.stacks]
        if args.entries:
            chosen = [get(n, args.site) for n in args.entries]
    except (KeyError, ValueError, RuntimeError) as e:
        print(f"interconnects: error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 2

    if args.cmd == "list":
        if args.json:
            print(json.dumps([asdict(e) for e in chosen], indent=2))
        else:
            for e in chosen:
                env = " ".join(f"{k}={v}" for k, v in e.env.items()) or "(stack defaults)"
                print(f"{e.name:22} {e.stack:16} {e.transport:6} {env}")
        return 0

    import suite
    out = args.out or suite.BUILD / "interconnects" / "verify.json"
    print(f"[interconnects] verifying {len(chosen)} entries with 2-rank pingpong", flush=True)
    results = verify(chosen, args.site)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(r) for r in results], indent=2))
    tmp.replace(out)
    print(table(results))
    bad = [r for r in results if r.verdict not in ("proven", "unverifiable")]
    print(f"[interconnects] {len(results) - len(bad)} of {len(results)} proven or unverifiable here; "
          f"{len(bad)} problems; results in {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
