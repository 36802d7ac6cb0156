"""The last stage of reading, what the store can hold: check_labels (a run's labels and parameters) and
check_storable (every value of a records.Record), each refusing the first value beyond in one line naming the
file, the field and the limit (BadProfile); nothing is cut or replaced. finished hands on the records as the store
takes them: with the scaling kinds (declare_scaling) and the labels given at ingest (Provenance), checked."""
from __future__ import annotations

import datetime as dt
import json
import numbers
import re
from dataclasses import dataclass, replace
from typing import Iterable, Iterator

from commscope.read import measures
from commscope.read.caliper import CALL_PATH_BYTES as PATH_BYTES, REGION_NAME_BYTES
from commscope.read.files import BadProfile
from commscope.read.records import (GLOBAL, PER_RANK, RESERVED_PARAMETERS, SCALING_PREFIX, ReadOptions, Record,
                                    clean)


# What the store can hold. PostgreSQL refuses a NUL character and a lone surrogate in text and JSON; its integer and
# bigint hold -N to N - 1; a B-tree index entry holds at most INDEX_ENTRY_BYTES, and the schema's indexes carry a
# run's names (commscope/store/migrations: nodes' unique path, stacks' unique name and library, the rollups' indexes
# of 0029 and 0030). The byte limits below, in UTF-8 before compression, keep every such entry within it.
INT4, INT8 = 2**31, 2**63
INDEX_ENTRY_BYTES = 2704   # PostgreSQL's largest B-tree index entry (8 kB pages)
NAME_BYTES = REGION_NAME_BYTES   # one name: a region, MPI function, FOM name, unit or context, focus region
CALL_PATH_BYTES = PATH_BYTES   # a call path, its region names '/'-joined (nodes.path's unique index)
LABELS_BYTES = 768         # LABELS together (shown_metrics_daily's index entry carries four of them twice)
PARAMETERS_BYTES = 1664    # a run's parameters as JSON (comparison_daily's index entry carries them beside LABELS)
MPI_LIBRARY_BYTES = 1536   # the MPI library's version string (stacks' unique name and library)
LARGEST_NUMBER = 1e300     # a figure's magnitude: the rollups add figures over runs, a sum past 1.8e308 overflows
LABELS = ("app", "workload", "variant", "system", "stack", "interconnect", "global_size")
# The rows whose numbers are checked alike, as the messages name them (FOMs and windows by name).
ROW_TABLES = {"node_rows": "a call-tree figure", "mpi_rows": "an MPI figure", "rank_rows": "a per-rank time",
              "matrix_rows": "a message count or byte count", "comm_rows": "a comm.stats counter",
              "spread_rows": "a distribution over ranks"}


def _shown(s: str) -> str:
    return repr(s if len(s) <= 40 else s[:40] + "...")


def _check_text(source: str, what: str, s, limit: int | None = None, holds: str = "names") -> int:
    """The UTF-8 size of S, a text the store keeps as WHAT; a NUL, a lone surrogate or more than LIMIT bytes is
    refused, naming SOURCE, WHAT and the limit."""
    if not isinstance(s, str):
        return 0
    if "\x00" in s:
        raise BadProfile(f"{source}: {what} {_shown(s)} holds a NUL character, which the store cannot hold; the file "
                         f"is damaged")
    try:
        size = len(s.encode())
    except UnicodeEncodeError:
        if what == "source":   # the file's name: bytes that are not UTF-8 read as lone surrogates
            raise BadProfile(f"{source}: the file's name is not UTF-8, which the store cannot hold; rename the "
                             f"file") from None
        raise BadProfile(f"{source}: {what} {_shown(s)} is not valid Unicode (a lone surrogate), which the store "
                         f"cannot hold; the file is damaged") from None
    if limit is not None and size > limit:
        raise BadProfile(f"{source}: {what} {_shown(s)} is {size:,} bytes; the store holds {holds} of at most "
                         f"{limit:,} bytes: shorten it")
    return size


def _check_number(source: str, what: str, v, int_limit: int = INT8) -> None:
    """V, a number the store keeps as WHAT: an integer within ±INT_LIMIT, a float finite and within
    ±LARGEST_NUMBER; anything else is refused, naming SOURCE, WHAT and the limit."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return
    if isinstance(v, numbers.Integral):
        if not -int_limit <= v < int_limit:
            raise BadProfile(f"{source}: {what} {v} is beyond what the store holds (integers up to "
                             f"{int_limit - 1:,}); the file is damaged")
    elif not -LARGEST_NUMBER <= v <= LARGEST_NUMBER:   # also nan
        raise BadProfile(f"{source}: {what} {float(v):.6g} is beyond what the store holds (numbers up to "
                         f"{LARGEST_NUMBER:.0e}, as its rollups add them over runs); the file is damaged")


def _check_json(source: str, what: str, doc) -> None:
    """DOC, kept as JSON (WHAT: metadata, parameters): every key and string holds no NUL or lone surrogate, every
    number is one the store holds."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            _check_text(source, f"{what} key", k)
            _check_json(source, f"{what} {k}" if isinstance(k, str) else what, v)
    elif isinstance(doc, (list, tuple)):
        for v in doc:
            _check_json(source, what, v)
    elif isinstance(doc, str):
        _check_text(source, what, doc)
    else:
        _check_number(source, what, doc)


# What Grafana rewrites in a panel's SQL after it has put the dashboards' variable values in as quoted literals
# (views/grafana_macros): its backend replaces $__interval, $__interval_ms, $__unixEpochFrom() and $__unixEpochTo()
# anywhere, and its macro engine expands or refuses every $name(...) anywhere, inside quotes too. A value of a
# dashboard variable holding one would be rewritten inside its literal: every panel showing it, and the report
# (which runs Grafana's text), would fail with a SQL error until the rows were deleted by hand.
GRAFANA_VARIABLE_LABELS = ("app", "workload", "system", "stack", "interconnect")   # views/panels.VARIABLES
GRAFANA_REWRITES = re.compile(r"\$(?:__\w*|\w+\()")


def check_grafana_safe(src: str, what: str, v) -> None:
    """Refuses V, the value of a dashboard variable (WHAT), if Grafana would rewrite part of it (GRAFANA_REWRITES)."""
    m = GRAFANA_REWRITES.search(v) if isinstance(v, str) else None
    if m:
        raise BadProfile(f"{src}: {what} {_shown(v)} holds {m.group(0)!r}, which Grafana expands as a macro even "
                         f"inside a quoted value, so no dashboard or report could show it; rename it without '$'")


def check_labels(rec):
    """REC, whose labels and parameters the store can hold: LABELS (application, workload, variant, system, stack,
    interconnect, global size) of at most LABELS_BYTES together, the parameters at most PARAMETERS_BYTES as JSON,
    the MPI library at most MPI_LIBRARY_BYTES, no NUL or lone surrogate in any text or JSON; the rank, node and
    iteration counts integers. Cheap: the writer checks it again after --system, --stack, --per-rank and the like."""
    src = str(rec.source)
    _check_text(src, "source", src)
    sizes = {name: _check_text(src, name.replace("_", " "), getattr(rec, name)) for name in LABELS}
    for name in GRAFANA_VARIABLE_LABELS:
        check_grafana_safe(src, name, getattr(rec, name))
    if sum(sizes.values()) > LABELS_BYTES:
        name = max(sizes, key=sizes.get)
        raise BadProfile(f"{src}: its labels take {sum(sizes.values()):,} bytes, its {name.replace('_', ' ')} "
                         f"{_shown(getattr(rec, name))} {sizes[name]:,} of them; the store holds at most "
                         f"{LABELS_BYTES:,} bytes of a run's {', '.join(n.replace('_', ' ') for n in LABELS)} "
                         f"together: shorten it")
    _check_text(src, "MPI library", rec.mpi_library, MPI_LIBRARY_BYTES, "MPI library strings")
    for name in ("profile_kind", "status", "decomposition", "local_size", "compiler", "spack_hash", "caliper_version",
                 "kernel", "experiment", "caliper_config"):
        _check_text(src, name.replace("_", " "), getattr(rec, name))
    for what, v in (("the rank count", rec.ranks), ("the node count (numhosts)", rec.nodes),
                    ("the iteration count", rec.iterations)):
        _check_number(src, what, v, INT4)
    _check_json(src, "parameter", rec.parameters)
    size = len(json.dumps(rec.parameters, default=str, ensure_ascii=False).encode())
    if size > PARAMETERS_BYTES:
        key = max(rec.parameters, key=lambda k: len(json.dumps({k: rec.parameters[k]}, default=str,
                                                               ensure_ascii=False).encode()))
        raise BadProfile(f"{src}: its parameters take {size:,} bytes as JSON, parameter {_shown(key)} "
                         f"{_shown(str(rec.parameters[key]))} the most of them; the store holds at most "
                         f"{PARAMETERS_BYTES:,} bytes of a run's parameters: shorten it")
    return rec


def check_storable(rec):
    """REC, every value of which the store can hold, checked before any SQL: its labels (check_labels), its
    metadata (no NUL or lone surrogate, numbers the store holds), every name in its rows (a region, MPI function,
    FOM name, unit or context: at most NAME_BYTES; a call path at most CALL_PATH_BYTES; no NUL or lone surrogate)
    and every number in them (integers within bigint, floats finite and within ±LARGEST_NUMBER). The first value
    beyond is refused in one line naming the file, the field and the limit, as other bad input is (--skip-bad
    skips it); nothing is cut or replaced."""
    check_labels(rec)
    src = rec.source
    _check_json(src, "metadata", rec.metadata)
    paths: set = set()

    def path(p) -> None:
        if p is None or p in paths:
            return
        for region in p.split("/"):
            _check_text(src, "region name", region, NAME_BYTES)
        _check_text(src, "call path", p, CALL_PATH_BYTES, "call paths")
        paths.add(p)
    for row in rec.node_rows:
        path(row[0])
    for row in rec.mpi_rows:
        path(row[0])
        _check_text(src, "MPI function name", row[1], NAME_BYTES)
    for row in rec.comm_rows:
        path(row[0])
    for row in rec.spread_rows:
        path(row[1])
        _check_text(src, "window", row[0])
        _check_text(src, "spread quantity", row[2])
    for name, repeat, value, unit, *context in rec.fom_rows:
        for what, v in (("FOM name", name), ("FOM unit", unit), ("FOM context", (context or [None])[0])):
            _check_text(src, what, v, NAME_BYTES)
        _check_number(src, f"FOM {name}'s repeat", repeat, INT4)
        _check_number(src, f"FOM {name}", value)
    for row in rec.window_rows:
        _check_text(src, "focus region", row[1], NAME_BYTES)
        for col, v in zip(measures.COLUMNS[2:], row[2:]):
            _check_number(src, f"its {row[0]} window's {col}", v, INT4 if col == "ranks_measured" else INT8)
    for table, what in ROW_TABLES.items():
        for row in getattr(rec, table):
            where = f"{what} at {_shown(row[0])}" if isinstance(row[0], str) else what
            for v in row:
                for x in (v if isinstance(v, (list, tuple)) else (v,)):
                    _check_number(src, where, x)
    for name in ("wall_time", "mpi_time_avg", "mpi_time_max", "mpi_fraction_avg", "mpi_fraction_slowest"):
        _check_number(src, f"the run's {name.replace('_', ' ')}", rec.summary.get(name))
    return rec


def declare_scaling(rec: Record, opts: ReadOptions) -> Record:
    """REC with the scaling kinds OPTS declares among its parameters (PER_RANK, GLOBAL: sorted lists). A
    declared name that is not one of the run's parameters is refused, naming the parameters it has."""
    declared = {PER_RANK: opts.per_rank, GLOBAL: opts.global_params}
    if not any(declared.values()):
        return rec
    both = set(opts.per_rank) & set(opts.global_params)
    if both:
        raise BadProfile(f"{sorted(both)[0]!r} is declared both --per-rank and --global; a parameter is one or the "
                         f"other")
    rec.parameters = dict(rec.parameters)
    for (key, names), flag in zip(declared.items(), ("--per-rank", "--global")):
        for name in names:
            if name not in rec.parameters or name in RESERVED_PARAMETERS:
                has = ", ".join(k for k in sorted(rec.parameters) if k not in RESERVED_PARAMETERS
                                and not k.startswith(SCALING_PREFIX)) or "none"
                raise BadProfile(f"{rec.source}: {flag} names {name!r}, which is not one of this run's parameters "
                                 f"(it has: {has}); name one of them, or give it with --param {name}=VALUE")
        if names:
            rec.parameters[key] = sorted(set(names))
    return rec


def given_label(value) -> str | None:
    """A label given to ingest (a Provenance value, a hardware description's names), as stored: a NUL, which no command line
    can carry and the store cannot hold, as U+FFFD. What a file holds is checked instead (storable.check_storable)."""
    return None if value is None else clean(value).replace("\x00", "\ufffd")


@dataclass
class Provenance:
    """What the profile itself cannot say, given on the command line. Set
    values override what the profile's metadata says."""
    system: str | None = None
    stack: str | None = None
    interconnect: str | None = None
    git_commit: str | None = None
    ci_pipeline: str | None = None
    spack_hash: str | None = None
    compiler: str | None = None
    kernel: str | None = None      # --kernel: the kernel release the runs ran on, where no file recorded it
    hardware: dict | None = None   # the site's hardware description (CPU model, cores/node, interconnect, ...)
    started_at: dt.datetime | None = None   # --started-at: the start of runs whose files carry no time

    def __post_init__(self):   # its labels as stored (given_label), so the store takes them as they are
        for name in ("system", "stack", "interconnect", "git_commit", "ci_pipeline", "spack_hash", "compiler",
                     "kernel"):
            setattr(self, name, given_label(getattr(self, name)))

    def apply(self, rec: Record) -> Record:
        over = {k: v for k, v in (("system", self.system), ("stack", self.stack), ("interconnect", self.interconnect),
                                  ("spack_hash", self.spack_hash), ("compiler", self.compiler)) if v}
        if self.kernel and not rec.kernel:
            over["kernel"] = self.kernel
        if self.started_at and rec.profile_kind == "none":
            # No profile: a workload's output (or a Ramble experiment's log) prints no time, so the reader took the
            # file's modification time, which a copy (a CI artifact) resets; a profile keeps Adiak's launchdate.
            over["started_at"] = self.started_at
        return replace(rec, **over) if over else rec


def finished(records: Iterable[Record | BadProfile], given: ReadOptions, prov: Provenance
             ) -> Iterator[Record | BadProfile]:
    """RECORDS as the store takes them, in order: each with the scaling kinds GIVEN declares (declare_scaling) and
    the labels PROV gives (Provenance.apply), checked for what the store can hold (check_storable where no reader
    process checked it, check_labels after the labels given). A record refused is passed on as its BadProfile."""
    for rec in records:
        if not isinstance(rec, BadProfile):
            try:   # a value the store cannot hold is bad input, refused here before any of its SQL
                if rec.copy_text is None:   # not checked by a reader process (pipeline.read_record)
                    check_storable(rec)
                rec = check_labels(prov.apply(declare_scaling(rec, given)))   # with the labels given
            except BadProfile as e:
                rec = e
        yield rec
