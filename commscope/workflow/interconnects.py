"""The interconnect catalog: named runtime transport selections per MPI stack.
ci/interconnects.py holds the runs that prove each one takes effect.

An entry such as `openmpi5/tcp` is a set of environment variables that picks a transport on one stack of
commscope.workflow.stacks. Every selection is an environment variable (Open MPI's `--mca pml ob1` is
`OMPI_MCA_pml=ob1`), so an entry works the same under `mpirun` and under `srun`. A site adds entries in
ramble/sites/<site>/interconnects.yaml.

Labels lie silently (the PyPI MPICH wheel ignores FI_PROVIDER), so an entry counts only when `verify` proves it:
a real 2-rank pingpong run whose
 1. selection report, printed by the stack itself, names the expected transport (Open MPI:
    `OMPI_MCA_btl_base_verbose=1` prints "mca: bml: Using <btl> btl for send to ..."; MPICH:
    `MPIR_CVAR_DEBUG_SUMMARY=1` says nothing about UCX's transports, so `UCX_LOG_LEVEL=info` adds UCX's own
    "ep_cfg[..]: tag(<transports>)" lines; Intel MPI: `I_MPI_DEBUG=5` prints "libfabric provider: ..." for OFI
    and the tuning file it loaded), and
 2. 8-byte half round trip latency falls in the band of the entry's class (for TCP: at least TCP_OVER_SHM x the
    stack's shared memory, measured in the same verification).

    python3 ci/interconnects.py list [--site SITE] [--json]
    python3 ci/interconnects.py verify [--stacks S ...] [--entries N ...] [--site SITE]

Stdlib only (a site file needs PyYAML, imported when one is read).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from commscope.workflow import stacks as mpi_stacks

# The sites' interconnects.yaml files: the checkout's ramble/sites, or the wheel's copy.
SITES = (Path(__file__).resolve().parents[1] / "share" / "ramble" / "sites").resolve()
ROOT = SITES.parents[1]   # messages name a site file relative to this

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
# memory stays well under it on a busy 2-core machine. TCP has no fixed floor:
# loopback TCP latency differs from machine to machine by more than the gap to
# shared memory, so a floor in microseconds fails on a faster machine. A TCP
# entry is instead measured against the same stack's shared-memory entry in the
# same verification (see TCP_OVER_SHM); None here means "relative". The TCP
# ceiling only catches a run that fell to something pathological, with room for
# a heavily loaded machine. A site's fabric entry gives its own band. The
# latencies behind these bands: bench/results/interconnect_bands.md.
LATENCY_BANDS_US = {
    "shm": (0.0, 5.0),
    "tcp": (None, 1000.0),
    "fabric": (0.0, 10.0),
}
# A TCP entry's fastest attempt must be at least this many times the same
# stack's fastest shared-memory attempt: below every stack's measured gap, and
# above the 1.0x of a selection that left the traffic on shared memory (MPICH
# without MPIR_CVAR_NOLOCAL).
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

@dataclass(frozen=True)
class Entry:
    name: str               # "openmpi5/tcp"
    stack: str              # a stack name of commscope.workflow.stacks (or a site's own stack)
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
            stack: debian-openmpi4     # a commscope.workflow.stacks name, or a site stack with `family:`
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
            raise bad(f"stack {stack!r} is not in commscope.workflow.stacks ({', '.join(known)}); "
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
    """The entries that run on one stack (a commscope.workflow.stacks name)."""
    return [e for e in catalog(site) if e.stack == stack]


def get(name: str, site: str | None = None) -> Entry:
    for e in catalog(site):
        if e.name == name:
            return e
    raise KeyError(f"unknown interconnect {name!r}; known: {', '.join(e.name for e in catalog(site))}")
