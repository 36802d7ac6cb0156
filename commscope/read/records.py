"""Profiles -> records. A Record is one run in the shape the store keeps:
its identity, its provenance, and rows for each metrics table with call paths
as '/'-joined strings, assembled from what the parsers read and what measures
made of it. It is plain data, so reader processes build records and
send them to the one process that writes (commscope.store.ingest).

An experiment's identity, apart from what it ran on (docs/measurement-model.md): a series is one experiment on one
system: its application, parameters, system, the MPI stack as the site names it, the interconnect selection and the
profiling configuration (IDENTITY). The versions it ran on (VERSIONS: the MPI library's version string, compiler,
Spack spec hash, Caliper version, hardware description, kernel release) are attributes of its runs and may change
along it, so an upgrade is judged against the history before it. The node count is a parameter; an unknown one
(NULL) is a value of its own, for the gate and the scaling view alike. Where only a library string names the stack
(a direct ingest), the stack is the library's family: `mpi_family`, which migration 0038's SQL function of the same
name repeats for stores made before."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

from commscope.read import caliper, measures
from commscope.read.files import BadProfile
from commscope.read.measures import Measured
from commscope.read.profiles import Profile


IDENTITY = ("system", "stack", "interconnect", "caliper")
VERSIONS = ("mpi_library", "compiler", "spack_hash", "caliper_version", "hardware", "kernel")

# (a lower-case part of a library string, its family), first match wins: MVAPICH, Intel MPI and Cray MPICH say
# "MPICH" too.
FAMILIES = (("open mpi", "Open MPI"), ("mvapich", "MVAPICH"), ("intel(r) mpi", "Intel MPI"),
            ("intel mpi", "Intel MPI"), ("cray mpich", "Cray MPICH"), ("mpich", "MPICH"))
_VERSIONED = re.compile(r"[^\s]*[0-9][^\s]*")
_SPACES = re.compile(r"[ \t\n\r\f\v]+")


def mpi_family(library: str) -> str:
    """The MPI library's family from its version string: a known family by name (FAMILIES), else the string
    without its words that hold a digit ("Foo MPI 3.2" -> "Foo MPI"), else the string as given."""
    low = library.lower()
    for part, family in FAMILIES:
        if part in low:
            return family
    bare = _SPACES.sub(" ", _VERSIONED.sub("", library)).strip(" ,:;")
    return bare or library


def clean(s, limit: int | None = None) -> str | None:
    """A value as text, cut to LIMIT characters only where commscope makes a label of its own from it (a
    parameter's label); what the store cannot hold (a NUL character, a name past the store's limits) is refused
    by check_storable, never cut or replaced here."""
    if s is None:
        return None
    return str(s)[:limit]


def as_int(s) -> int | None:
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


@dataclass
class Record:
    content_hash: str
    source: str
    profile_kind: str               # runtime-profile, per-rank, spot, json-split, msgtrace, none (Ramble, no profile)
    app: str
    workload: str
    ranks: int
    started_at: dt.datetime
    status: str = "ok"              # ok | failed
    variant: str | None = None
    decomposition: str | None = None
    interconnect: str | None = None
    nodes: int | None = None
    global_size: str | None = None
    local_size: str | None = None
    iterations: int | None = None
    compiler: str | None = None
    spack_hash: str | None = None
    caliper_version: str | None = None
    kernel: str | None = None       # the node's kernel release (`uname -r`) where a source recorded it
    experiment: str | None = None   # Ramble experiment name
    system: str = "unknown"
    stack: str = "unknown"          # a catalog name (debian-openmpi4) or vendor and version
    mpi_library: str = "unknown"
    summary: dict = field(default_factory=lambda: dict.fromkeys(
        ("wall_time", "mpi_time_avg", "mpi_time_max", "mpi_fraction_avg", "mpi_fraction_slowest")))
    metadata: dict = field(default_factory=dict)
    # (path, excl_min, excl_avg, excl_max, incl_min, incl_avg, incl_max, calls, imbalance, incl_max_rank,
    #  excl_slowest, incl_slowest, slowest_rank)
    node_rows: list = field(default_factory=list)
    # (region path, function, time_total, time_max, calls, bytes)
    mpi_rows: list = field(default_factory=list)
    # (rank, total, user, mpi, mpi_sync)
    rank_rows: list = field(default_factory=list)
    # (src, dst, messages, bytes)
    matrix_rows: list = field(default_factory=list)
    # (name, repeat, value, unit)
    fom_rows: list = field(default_factory=list)
    # (comm region path, *caliper.COMM_STATS values combined over ranks)
    comm_rows: list = field(default_factory=list)
    # measures.COLUMNS, one tuple per window (run, focus)
    window_rows: list = field(default_factory=list)
    # (window, node path, quantity, *SPREAD_COLUMNS): distributions over ranks (migration 0019)
    spread_rows: list = field(default_factory=list)
    # the rows above as the store's COPY text (ingest.copy_text), when a reader process formatted them
    copy_text: dict | None = None
    # every input that defines the experiment, and the environment it ran in (docs/measurement-model.md)
    parameters: dict = field(default_factory=dict)
    caliper_config: str = "none"    # the Caliper channel and options the profile was recorded with

    @property
    def environment(self) -> dict:
        """The experiment's identity beyond its application and parameters (IDENTITY): system, MPI stack
        as the site names it, interconnect selection and Caliper configuration. Versions are not in it."""
        return {"system": self.system, "stack": self.stack, "interconnect": self.interconnect or "default",
                "caliper": self.caliper_config}

    @property
    def series_key(self) -> str:
        """Runs with equal application, parameters and environment are one series (the store keys it with the
        SQL function series_key, migration 0038; this is the reader's own name for it)."""
        doc = json.dumps([self.app, self.parameters, self.environment], sort_keys=True, default=str)
        return hashlib.sha256(doc.encode()).hexdigest()


def _started_at(prof: Profile) -> dt.datetime:
    for key in ("launchdate", "starttime.sec"):
        if key in prof.meta:
            try:
                return dt.datetime.fromtimestamp(int(prof.meta[key]), dt.timezone.utc)
            except ValueError:
                pass
    return dt.datetime.fromtimestamp(prof.files[0].stat().st_mtime, dt.timezone.utc)


# The region of MPI calls made outside every annotated region (MPI_Init, MPI_Finalize, and every call of
# a binary without annotations): a node of its own, so per-function MPI time has a region to hang on.
OUTSIDE_REGIONS = "(outside regions)"


def _join(p: tuple) -> str:
    return "/".join(p)


def app_name(prof: Profile, given: str | None = None) -> tuple[str, str]:
    """The application and where its name came from, first found: --app; the name commscope's
    workloads record (Adiak `workload`); Ramble's application name; the executable's base name
    (Adiak `executable`, else `executablepath` or the first word of `cmdline`)."""
    g = prof.meta
    if given:
        return clean(given, 200), "--app"
    for key in ("workload", "ramble_application", "executable"):
        if g.get(key):
            return clean(Path(str(g[key])).name, 200), key
    for key in ("executablepath", "cmdline"):
        v = g.get(key)
        v = v[0] if isinstance(v, list) and v else v
        if v and str(v).strip("[]"):
            return clean(Path(str(v).strip("[]").split(",")[0].split()[0]).name, 200), key
    raise BadProfile(f"{prof.source}: no application name in its metadata (no Adiak workload or executable); "
                     f"give it with --app NAME")


# The stack of a profile that records no MPI library (a binary profiled by preloading Caliper, without Adiak):
# said in its label instead of "unknown"; --stack names it.
MPI_NOT_RECORDED = "mpi-not-recorded"


def system_name(g: dict) -> tuple[str, str]:
    """(system, where it came from): Adiak's cluster, else its hostname, else the name of the host that
    ingests the profile (a profile that names no host, such as a preloaded Caliper's, is taken to have run
    where it is ingested; --system names another)."""
    for key in ("cluster", "hostname"):
        if g.get(key):
            return str(g[key]), key
    return socket.gethostname() or "unknown", "ingesting host"


# Where an MPI library's identity can be read from a profile's metadata, in order.
LIBMPI = re.compile(r"(?:^|/)(lib(?:p?mpi|mpi_\w+|mpich|mpifort)[\w.-]*\.so[\w.]*)")


def mpi_library(prof: Profile) -> tuple[str, str]:
    """(MPI library, where it came from): the library version string the workload printed
    (MPI_Get_library_version); Adiak's mpi_library_vendor/version; the libmpi among Adiak's `libraries`;
    an application's own `mpi` value; else 'unknown'."""
    g, out = prof.meta, prof.output
    if out and out.mpi_library:
        return clean(out.mpi_library), "output"
    if g.get("mpi_library_vendor"):
        return clean(f"{g['mpi_library_vendor']} {g.get('mpi_library_version', '')}".strip()), "adiak"
    libs = g.get("libraries")
    for lib in (libs if isinstance(libs, list) else str(libs or "").strip("[]").split(",")):
        m = LIBMPI.search(str(lib).strip())
        if m:
            return clean(str(lib).strip()), "libraries"
    if g.get("mpi"):
        return clean(g["mpi"]), "mpi"
    return "unknown", "none"


def _meta_value(v):
    """A metadata value as stored: lists (cmdline, libraries) stay lists, the rest strings."""
    return [clean(x) for x in v] if isinstance(v, list) else clean(v)


def library_list(v) -> list:
    """Adiak's `libraries` (a set of paths, which Caliper writes as one '[a,b,...]' string) as a list of paths:
    kept whole however many libraries a program loads (one string would be cut at clean()'s limit), and a run
    is found by one library it loaded: `metadata @> '{"libraries": ["/lib/x86_64-linux-gnu/libmpi.so.40"]}'`."""
    if isinstance(v, list):
        return v
    s = str(v).strip()
    return [p.strip() for p in (s[1:-1] if s.startswith("[") and s.endswith("]") else s).split(",") if p.strip()]


# Metadata Caliper and Adiak write for every program, not the application's own values.
CALIPER_AND_ADIAK_KEYS = {"cali.caliper.version", "cali.channel", "mpi.world.size", "starttime.sec", "starttime.nsec",
                          "adiakversion", "user", "uid", "launchdate", "launchday", "executable", "executablepath",
                          "working_directory", "libraries", "cmdline", "hostname", "cluster", "jobsize", "numhosts",
                          "hostlist", "mpi_version", "mpi_library_vendor", "mpi_library_version", "compiler",
                          "compiler version", "walltime", "systime", "cputime", "spot.metrics", "spot.timeseries.metrics",
                          "spot.format.version", "spot.options", "spot.channels"}


def application_values(g: dict) -> dict:
    """The values an application recorded itself (Adiak or Caliper globals), without Caliper's and
    Adiak's own."""
    return {k: v for k, v in g.items() if k not in CALIPER_AND_ADIAK_KEYS and not k.startswith(("opts:", "cali."))}


def third_party_parameters(prof: Profile, opts: "ReadOptions") -> dict:
    """The experiment parameters of an application that is not one of commscope's workloads
    (docs/add-your-application.md): the metadata keys --param-keys names; without it, the command line's
    arguments (Adiak cmdline, less the executable) where Adiak recorded it, else every value the
    application recorded itself. --param K=V adds or overrides."""
    g = prof.meta
    if opts.param_keys:
        missing = [k for k in opts.param_keys if k not in g]
        if missing:
            raise BadProfile(f"{prof.source}: --param-keys names {', '.join(map(repr, missing))}, which its metadata "
                             f"does not have (it has: {', '.join(sorted(application_values(g))) or 'no application values'}); "
                             f"give the value with --param KEY=VALUE or leave the key out")
        return {k: _meta_value(g[k]) for k in opts.param_keys}
    cmd = g.get("cmdline")
    if cmd:
        return command_line_parameters(cmd if isinstance(cmd, list) else str(cmd).strip("[]").split(","))
    return {k: _meta_value(v) for k, v in sorted(application_values(g).items())}


# Parameter names the store gives meanings of its own: an argument of that name is kept as arg.<name>.
RESERVED_PARAMETERS = {"ranks", "nodes"}


def command_line_parameters(argv: list) -> dict:
    """A recorded command line (Adiak's cmdline, the executable first) as parameters, one per argument:
    `-s 8` and `--size=8` give s=8 and size=8, an option with several values (`-n 32 32 32`) keeps them
    comma-joined, an option without a value is 'true', and arguments before any option are arg1, arg2, ...
    So runs of another problem size are another series."""
    out: dict = {}
    key, valued, positional = None, False, 0   # the option the next values belong to; whether it has one yet
    for a in (str(x).strip() for x in argv[1:]):
        if not a:
            continue
        if a.startswith("-") and not re.fullmatch(r"-[0-9.][0-9.eE+-]*", a):
            name, eq, value = a.lstrip("-").partition("=")
            key = ("arg." + name if name in RESERVED_PARAMETERS else name) or None
            if key:
                out[key] = clean(value, 200) if eq else "true"
            key, valued = (None, True) if eq else (key, False)
        elif key is not None:
            out[key] = clean(f"{out[key]},{a}", 200) if valued else clean(a, 200)
            valued = True
        else:
            positional += 1
            out[f"arg{positional}"] = clean(a, 200)
    return out


def parameters_label(params: dict, limit: int = 120) -> str | None:
    """The parameters that name an experiment in a label (a series' variant when the application has
    none): key=value, in key order, without the rank and node counts or the scaling declarations."""
    text = " ".join(f"{k}={v}" for k, v in sorted(params.items())
                    if k not in RESERVED_PARAMETERS and not k.startswith(SCALING_PREFIX) and v not in (None, ""))
    return clean(text, limit) or None


# The parameters' scaling kinds as ingest (--per-rank, --global) or a study declares them, stored among the
# series' parameters: scaling.per_rank lists the parameters held per rank (weak scaling), scaling.global those
# held for the whole job (strong scaling). v_scaling (migration 0034) pairs runs by them.
SCALING_PREFIX = "scaling."
PER_RANK, GLOBAL = SCALING_PREFIX + "per_rank", SCALING_PREFIX + "global"


def from_profile(prof: Profile, measured: Measured, opts: "ReadOptions | None" = None) -> Record:
    """Every metric the store keeps for one profiled run, of any application, with what measures made of it
    (MEASURED: measures.measure_profile)."""
    opts = opts or ReadOptions()
    g = prof.meta
    out = prof.output
    app, app_source = app_name(prof, opts.app)
    library, library_source = mpi_library(prof)
    system, system_source = system_name(g)
    stats = prof.stats
    window_rows, focus_source, groups = measured.windows, measured.focus_source, measured.ranks
    stack = g.get("stack") or (mpi_family(str(g["mpi_library_vendor"])) if g.get("mpi_library_vendor") else
                               mpi_family(library) if library_source != "none" else MPI_NOT_RECORDED)
    run_window = next((w for w in window_rows if w["window"] == "run"), {})
    rec = Record(
        content_hash=prof.content_hash, source=clean(prof.source), profile_kind=prof.kind,
        app=app, workload=clean(g.get("ramble_workload") or g.get("workload") or app),
        ranks=prof.ranks, started_at=_started_at(prof),
        status="failed" if out and any(s == "FAIL" for s, _ in out.verify.values())
        else "partial" if prof.missing_ranks or prof.lost_records else "ok",
        variant=clean(g.get("variant")), decomposition=clean(g.get("decomposition")),
        interconnect=clean(g.get("interconnect")), nodes=as_int(g.get("numhosts")),
        global_size=clean(g.get("global_size")), local_size=clean(g.get("local_size")),
        iterations=as_int(g.get("iterations")), compiler=clean(g.get("compiler")),
        spack_hash=clean(g.get("spack_hash")), caliper_version=clean(g.get("cali.caliper.version")),
        experiment=clean(g.get("experiment")),
        system=clean(system),
        stack=clean(stack),
        mpi_library=library,
        # runs' legacy columns are the run window's numbers (docs/measurement-model.md)
        summary={"wall_time": run_window.get("time_s"), "mpi_time_avg": run_window.get("mpi_time_avg_s"),
                 "mpi_time_max": run_window.get("mpi_time_max_s"),
                 "mpi_fraction_avg": run_window.get("mpi_fraction_avg"),
                 "mpi_fraction_slowest": run_window.get("mpi_fraction_slowest")},
        metadata={k: _meta_value(library_list(v) if k == "libraries" else v) for k, v in g.items()}
        | {"ranks_source": prof.ranks_source, "app_source": app_source, "mpi_library_source": library_source,
           "system_source": system_source}
        | ({"missing_ranks": prof.missing_ranks} if prof.missing_ranks else {})
        | ({"lost_records": prof.lost_records} if prof.lost_records else {})
        | ({"calipers_own_mpi_s": {"/".join(p): t for p, t in prof.calipers_own.items()}}
           if prof.calipers_own else {}),
    )
    for p, s in stats.items():
        imb = s.excl_max / s.excl_avg if s.excl_max is not None and s.excl_avg else None
        rec.node_rows.append((_join(p), s.excl_min, s.excl_avg, s.excl_max, s.incl_min, s.incl_avg, s.incl_max,
                              s.calls, imb, s.incl_max_rank, s.excl_slowest, s.incl_slowest, s.slowest_rank))
    rec.mpi_rows = _mpi_rows(prof, stats)
    if opts.rank_rows is None or len(groups["rank"]) <= opts.rank_rows:
        cols = [groups[k].tolist() if groups[k] is not None else [None] * len(groups["rank"])
                for k in ("rank", "total", "user", "mpi", "sync")]
        rec.rank_rows = list(zip(*cols))
    else:
        rec.metadata["rank_rows"] = (f"not kept: {len(groups['rank'])} ranks, more than --rank-rows {opts.rank_rows}; "
                                     f"the distributions over ranks are in v_rank_spread")
    rec.spread_rows = [(w["window"], None, q, *(d[c] for c in SPREAD_COLUMNS))
                       for w in window_rows for q, d in (w.get("spread") or {}).items()]
    rec.spread_rows += [(None, _join(p), "incl_time", *(s.incl_spread[c] for c in SPREAD_COLUMNS))
                        for p, s in stats.items() if s.incl_spread]
    rec.matrix_rows = [(src, dst, msgs, b) for (src, dst), (msgs, b) in sorted(prof.matrix.items())]
    if out:
        rec.fom_rows = [(clean(name), 0, value, clean(unit)) for name, (value, unit) in out.foms.items()]
    rec.comm_rows = _comm_rows(prof)
    rec.window_rows = [tuple(w[c] for c in measures.COLUMNS) for w in window_rows]
    if focus_source:
        rec.metadata["focus_source"] = focus_source
    _parameters(rec, prof, opts)
    rec.caliper_config = caliper_config(g)
    return rec


def _mpi_rows(prof: Profile, stats: dict) -> list[tuple]:
    """from_profile's MPI rows: (region path, function, time summed over ranks, slowest rank's, calls, bytes)."""
    rows = []
    # MPI calls summed over ranks (spot: its across-rank sum), by the region they were made in; calls
    # outside every region (all of an unannotated binary's) under OUTSIDE_REGIONS.
    mpi_total: dict = {p: float(arr.sum()) for p, arr in prof.excl.items() if measures.is_mpi(p)}
    for p, sp in prof.spot.items():
        if measures.is_mpi(p):
            mpi_total[p] = sp.get("excl_sum", sp["sum"])
    bytes_by_path = prof.bytes_sent
    for p, total in mpi_total.items():
        rows.append((_join(p[:-1]) or OUTSIDE_REGIONS, p[-1], total, stats[p].excl_max, stats[p].calls,
                     bytes_by_path.get(p)))
    for p, b in bytes_by_path.items():
        if p not in mpi_total and measures.is_mpi(p):
            rows.append((_join(p[:-1]) or OUTSIDE_REGIONS, p[-1], 0.0, None, None, b))
    return rows


def _parameters(rec: Record, prof: Profile, opts: ReadOptions) -> None:
    """from_profile's parameters of REC: the workload output's, Adiak's workload values, or a third-party
    application's (--param-keys, its command line), with --param's over them."""
    g = prof.meta
    out = prof.output
    if out:
        params = output_parameters(out)
    elif "workload" in g:
        params = {k: clean(g[k]) for k in WORKLOAD_ADIAK_PARAMETERS if k in g}
    else:
        params = third_party_parameters(prof, opts)
    if out or "workload" in g:
        missing = [k for k in opts.param_keys if k not in g]
        if missing:
            raise BadProfile(f"{prof.source}: --param-keys names {', '.join(map(repr, missing))}, which its "
                             f"metadata does not have; give the value with --param KEY=VALUE or leave the key out")
        params.update({k: _meta_value(g[k]) for k in opts.param_keys})
    rec.parameters = {"ranks": prof.ranks, "nodes": rec.nodes, **params, **dict(opts.params)}
    if not out and "workload" not in g:
        # An application that is not one of commscope's: its label names its parameters (it has no variant
        # of commscope's kind), and a run with none says so, for ingest to warn about it.
        rec.variant = rec.variant or parameters_label(rec.parameters)
        if not params and not opts.params:
            rec.metadata["parameters_missing"] = True


# A distribution over ranks as rank_spread stores it (measures.distributions).
SPREAD_COLUMNS = ("n", "min", "mean", "max", "p50", "p90", "p99", "hist_lo", "hist_hi", "hist_counts", "top_ranks",
                  "top_values")


# PARAM lines that describe the environment, say a thing twice, or say where the run put its files (pio's dir and
# file: every run folder would start a series), not the experiment. An input file (commgraph's rank map) stays.
NOT_PARAMETERS = {"interconnect", "allreduce_scheme", "dir", "file"}


def output_parameters(out) -> dict:
    """The experiment's parameters as the workload printed them (PARAM lines), the same whether or not
    Caliper profiled the run, so profiled and unprofiled runs of one experiment differ only in environment."""
    return {f"param.{k}": clean(v) for k, v in out.params.items() if k not in NOT_PARAMETERS}


# The Adiak values commscope's workloads record that define an experiment (workloads/README.md), for a profile
# whose output is not beside it.
WORKLOAD_ADIAK_PARAMETERS = ("workload", "variant", "decomposition", "global_size", "iterations", "pml_width",
                             "pml_faces", "fused", "small_bytes", "large_bytes", "message_bytes", "sizes", "datatype",
                             "alloc", "debug_barriers", "tolerance", "group_size", "ramble_workload")


def caliper_config(g: dict) -> str:
    """The Caliper configuration a profile was recorded with: its channel and options, sorted."""
    opts = sorted(k[5:] + ("" if v == "true" else f"={v}") for k, v in g.items()
                  if k.startswith("opts:") and k != "opts:output")
    if not opts and g.get("spot.options"):
        opts = sorted(g["spot.options"].split(","))
    return ",".join([g.get("cali.channel", "profile")] + opts)




def _comm_rows(prof: Profile) -> list[tuple]:
    """comm.stats per comm region, as the reader combined them over ranks."""
    return [(_join(p), *(values.get(name) for name, _attr, _how in caliper.COMM_STATS))
            for p, values in sorted(prof.comm.items())]


# The option that names a workload's variant, per workload (workloads/README.md).
VARIANT_PARAMS = {"stencil2d": ("decomp", "send"), "commgraph": ("pattern",), "pio": ("method",),
                  "cgsolve": ("allreduce",), "collsweep": ("coll",)}


def from_output(path: Path, out, content_hash: str, measured: Measured, opts: "ReadOptions | None" = None) -> Record:
    """A run without Caliper: the workload's stdout alone (PATH, parsed as OUT; CONTENT_HASH its identity; MEASURED
    its timers' window, measures.measure_output). It gives FOMs, the VERIFY status and the wall time (FOM
    total_time), but no call tree and no MPI fraction: those need a profile. The labels given (OPTS: --app,
    --param) hold for it too."""
    if not out.workload or not out.ranks:
        raise BadProfile(f"{path}: not a commscope workload output (no COMMSCOPE header or RANKS line)")
    stack = mpi_family(out.mpi_library) if out.mpi_library else "unknown"
    p = out.params
    names = VARIANT_PARAMS.get(out.workload, ("variant",))
    variant = "-".join(p[n] for n in names if n in p) or p.get("variant")
    total = out.foms.get("total_time")
    rec = Record(
        content_hash=content_hash, source=clean(str(path)), profile_kind="none",
        app=clean(out.workload), workload=clean(out.workload), ranks=out.ranks,
        started_at=dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc),
        status="failed" if not out.verify or any(st == "FAIL" for st, _ in out.verify.values()) else "ok",
        variant=clean(variant), interconnect=clean(p.get("interconnect")), global_size=clean(p.get("global") or p.get("n")),
        iterations=as_int(p.get("iters")), stack=clean(stack),
        mpi_library=clean(out.mpi_library or "unknown"),
        metadata={"params": {k: clean(v) for k, v in p.items()},
                  "verify": {k: list(v) for k, v in out.verify.items()}},
    )
    if total and total[1] == "s":
        rec.summary["wall_time"] = total[0]
    rec.fom_rows = [(clean(name), 0, value, clean(unit)) for name, (value, unit) in out.foms.items()]
    rec.window_rows = [tuple(w[c] for c in measures.COLUMNS) for w in measured.windows]
    if measured.focus_source:
        rec.metadata["focus_source"] = measured.focus_source
    rec.parameters = {"ranks": out.ranks, "nodes": None, **output_parameters(out)}
    if opts and opts.app:
        rec.app = clean(opts.app, 200)
        rec.metadata["app_source"] = "--app"
    rec.parameters.update(dict(opts.params) if opts else {})
    return rec


@dataclass(frozen=True)
class ReadOptions:
    """What the user says at ingest about how to read the inputs."""
    allow_partial: bool = False    # store a run with ranks missing as 'partial' instead of refusing it
    focus: str | None = None       # the focus window's region (else the workloads' timed loop: measures.focus_windows)
    app: str | None = None         # --app: the application's name, over what the profile says
    ranks: int | None = None       # --ranks: the job's rank count, over what the profile says
    params: tuple = ()             # --param K=V: (key, value) pairs added to every run's parameters
    param_keys: tuple = ()         # --param-keys: the metadata keys that define the experiment
    rank_rows: int | None = 1024   # --rank-rows: per-rank rows kept up to this many ranks (None: always)
    per_rank: tuple = ()           # --per-rank: parameters held per rank (weak scaling when equal across ranks)
    global_params: tuple = ()      # --global: parameters of the whole job (strong scaling when equal)
