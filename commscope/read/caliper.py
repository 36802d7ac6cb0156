"""A run's Caliper records, from any file layout, added per call path and rank as they are read (accumulate: an
Accumulator, for profiles.read_run to make one Profile of):

- the .cali text streamed as caliper-reader records: split_record (caliper-reader's splitter with a fast path), a
  stream reader that names damage (Damaged: the file and line are added by stream_cali);
- Caliper's JSON layouts as records of the same shape (json_records): json-split (hatchet-region-profile's
  output.format=json-split, cali-query's json-split) and cali-query's json and json(object), from the document
  read/files.py read within its limits of size and depth (load_run);
- the limits a record's call path is held to as it is read (check_path_size);
- each record added as it comes (Accumulator.record): per-rank times in PerRank (one float per call path and rank
  with data), spot's aggregates across ranks, message traces, comm.stats (COMM_STATS), repeated records counted."""
from __future__ import annotations

import io
import math
import re
from pathlib import Path

import numpy as np
from caliperreader import caliperstreamreader
from caliperreader.metadatadb import Attribute

from commscope.read.files import RANK_FILE, BadProfile, open_regular
from commscope.read.workload_output import NUMBER

TIME_ATTRS = ("sum#sum#time.duration", "sum#time.duration", "time")
CALL_PATH_BYTES = 2560  # a call path, its region names '/'-joined (nodes.path, alone in its unique index; records)
REGION_NAME_BYTES = 1024   # one region's name (storable.NAME_BYTES)

# split_record's stand-ins for escaped separators and backslashes (Unicode private use; a line that already
# holds one goes the upstream way)
_ESCAPED = {",": "\ue001", "=": "\ue002", "\\": "\ue003", "n": "\n"}
_ESCAPE = re.compile(r"\\(.)", re.S)
_RESTORE = str.maketrans({"\ue001": ",", "\ue002": "=", "\ue003": "\\"})


def split_record(line: str) -> dict:
    """caliper-reader's record splitter, with a fast path: it walks every
    character to honour backslash escapes, the largest cost of reading a
    profile (bench/results/ingest_throughput.md).
    Lines split on ',' and '=' with the same result (the tests compare both on
    every fixture line); escaped characters stand in as private-use ones while
    the line is split. A trailing empty value goes the upstream way."""
    line = original = line.strip()
    escaped = "\\" in line
    if escaped:
        if any(c in line for c in "\ue001\ue002\ue003"):
            return caliperstreamreader._read_cali_record(original)
        line = _ESCAPE.sub(lambda m: _ESCAPED.get(m.group(1), m.group(1)), line)
    if line.endswith(("=", ",")) or escaped and "\\" in line:   # or a lone backslash at the end
        return caliperstreamreader._read_cali_record(original)
    out = {}
    for entry in line.split(","):
        key, *values = entry.split("=")
        out[key.translate(_RESTORE) if escaped else key] = [v.translate(_RESTORE) for v in values] if escaped else values
    return out


class Damaged(ValueError):
    """A .cali line that cannot be what Caliper writes; the reader adds the file and the line number."""


class _StreamReader(caliperstreamreader.CaliperStreamReader):
    """caliper-reader's stream reader with split_record (0.4.1's _process), blank lines skipped, and damage
    named: a node whose parent is not defined before it, or a record that refers to an undefined node or
    attribute, is refused instead of read into a wrong call path. LINE is the line being read."""

    line = 0

    def read(self, stream, process_record_fn=None):
        """The records of STREAM, a .cali file open as UTF-8 text (the caller opens it: open_regular)."""
        for self.line, text in enumerate(stream, 1):
            if text.strip():
                self._process(text, process_record_fn)

    def _process(self, line, process_record_fn=None):
        record = split_record(line)
        if "__rec" not in record or not record["__rec"]:
            raise Damaged("not a Caliper record (no __rec=)")
        kind = record["__rec"][0]
        if kind == "node":
            self._process_node_record(record)
        elif kind == "ctx" and process_record_fn is not None:
            process_record_fn(self._expand_record(record))
        elif kind == "globals":
            self.globals = self._expand_record(record)

    def _process_node_record(self, record):
        for key in ("id", "attr"):
            if not record.get(key):
                raise Damaged(f"a node record without its {key}")
        if "parent" in record and _int(record["parent"][0], "parent") not in self.db.nodes:
            raise Damaged(f"node {record['id'][0]}'s parent {record['parent'][0]} is not defined before it")
        attr = _int(record["attr"][0], "attribute")
        if attr not in self.db.attributes_by_id:
            raise Damaged(f"node {record['id'][0]}'s attribute {attr} is not defined before it")
        if "data" in record and not record["data"]:
            raise Damaged(f"node {record['id'][0]} without its data")
        if attr == Attribute.attr_attribute_id and "parent" not in record:
            raise Damaged(f"attribute node {record['id'][0]} without its type (no parent)")
        super()._process_node_record(record)

    def _expand_record(self, record):
        for node_id in record.get("ref", []):
            if _int(node_id, "node") not in self.db.nodes:
                raise Damaged(f"a record refers to node {node_id}, which is not defined before it")
        if len(record.get("attr", [])) != len(record.get("data", [])):
            raise Damaged(f"a record with {len(record.get('attr', []))} attributes but {len(record.get('data', []))} "
                           f"values")
        for attr_id in record.get("attr", []):
            if _int(attr_id, "attribute") not in self.db.attributes_by_id:
                raise Damaged(f"a record refers to attribute {attr_id}, which is not defined before it")
        return super()._expand_record(record)


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise Damaged(f"{what} id {text!r} is not a number") from None


def read_caliper_contents(path: str) -> tuple[list, dict]:
    records: list = []
    reader = _StreamReader()
    with open_regular(path, "r", encoding="utf-8") as f:
        reader.read(f, records.append)
    return records, reader.globals


def stream_cali(path: Path, f, on_record) -> dict:
    """Hands each record of the .cali file PATH, open in binary as F (files.load_run opens it), to ON_RECORD as it is
    read (none is kept); returns the globals. Damage anywhere is one BadProfile naming the file, the line and what
    is wrong."""
    reader = _StreamReader()
    try:
        if path.stat().st_size == 0:
            raise BadProfile(f"{path}: empty file")
        # read once: its first bytes say what it is, then its records are read
        if not f.read(64).startswith(b"__rec="):
            raise BadProfile(f"{path}: not a Caliper .cali file (it does not start with a __rec= record)")
        f.seek(0)
        reader.read(io.TextIOWrapper(f, encoding="utf-8"), on_record)
        globals_ = reader.globals
    except BadProfile:
        raise
    except OSError as e:
        raise BadProfile(f"{path}: cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise BadProfile(f"{path}: damaged Caliper file: byte {e.start} is not UTF-8 text; copy or record the "
                         f"profile again") from None
    except Exception as e:  # caliper-reader and the record handlers raise bare exceptions on damage
        raise BadProfile(f"{path}: damaged Caliper file, line {reader.line}: {damage(e)}; copy or record the "
                         f"profile again") from None
    if not globals_:
        raise BadProfile(f"{path}: no global metadata; the file is truncated or not a profile")
    return globals_


def damage(e: Exception) -> str:
    """What a reading error says about the file, in a few words."""
    if isinstance(e, Damaged):
        return str(e)
    if isinstance(e, ValueError) and ("literal" in str(e) or "convert string" in str(e)):
        return f"a malformed number ({str(e).rsplit(': ', 1)[-1]})"
    if isinstance(e, KeyError):
        return f"a record without the field {e.args[0]!r} it needs"
    if isinstance(e, IndexError):
        return "a record shorter than its columns or fields"
    if isinstance(e, (TypeError, AttributeError)):
        return "a value of the wrong kind (a list, number or null where another is due)"
    return f"{type(e).__name__}: {e}"


def record_path(rec) -> tuple:
    p = rec.get("path")
    if isinstance(p, list):
        return tuple(p)
    return (p,) if p else ()


def check_path_size(source, p) -> None:
    """Refuses, as it is read, a call path P longer than the store holds (CALL_PATH_BYTES '/'-joined): a call
    tree too deep to store is one line naming SOURCE as soon as its first such path is read, before the reader
    spends time and memory on the depths below it. Its characters are a lower bound of its UTF-8 bytes, so this
    costs one pass over P; a path of multi-byte names near the limit is refused later by storable.check_storable."""
    if len(p) > 1 and sum(map(len, p)) + len(p) - 1 > CALL_PATH_BYTES:
        long = next((r for r in p if len(r) > REGION_NAME_BYTES), None)
        if long is not None:   # as storable.check_storable names it
            raise BadProfile(f"{source}: region name {long[:40] + '...'!r} is {len(long.encode(errors='replace')):,} "
                             f"bytes; the store holds names of at most {REGION_NAME_BYTES:,} bytes: shorten it")
        joined = "/".join(p)
        raise BadProfile(f"{source}: call path {joined[:40] + '...'!r}, {len(p):,} regions deep, is "
                         f"{len(joined.encode(errors='replace')):,} bytes; the store holds call paths of at most "
                         f"{CALL_PATH_BYTES:,} bytes: shorten it")


def json_records(path: Path, doc) -> tuple[list, dict, str]:
    """A JSON profile as caliper-reader-style records and globals, so one loop reads every format:
    Caliper's json-split (hatchet-region-profile's `output.format=json-split`, or cali-query's `format
    json-split`: call paths as a node table), and cali-query's `format json(object)` (records with
    '/'-joined nested values, plus globals) or plain `format json` (a list of records, no globals). DOC is the
    document read/files.py read from PATH (load_run) within its limits of size and depth."""
    split = isinstance(doc, dict) and {"nodes", "columns", "data"} <= doc.keys()
    try:
        if not split and isinstance(doc, dict) and isinstance(doc.get("records"), list):
            return ([_json_record(r) for r in doc["records"]], _json_globals(doc.get("globals") or {}),
                    "cali-query-json")
        if isinstance(doc, list) and all(isinstance(r, dict) for r in doc):
            return [_json_record(r) for r in doc], {}, "cali-query-json"
        if split:
            return (*_json_split_records(path, doc), "json-split")
    except BadProfile:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:   # Damaged is a ValueError
        raise BadProfile(f"{path}: damaged JSON profile: {damage(e)} in its nodes, records or data rows") from None
    raise BadProfile(f"{path}: not a Caliper JSON profile: expected json-split (nodes, columns, data) or "
                     f"cali-query's json output (a list of records, or an object with 'records')")


def _json_globals(g: dict) -> dict:
    return {k: v if isinstance(v, list) else str(v) for k, v in g.items()
            if k not in ("nodes", "columns", "data", "column_metadata")}


def _json_record(r: dict) -> dict:
    """A cali-query JSON record: nested values ('path', 'region', an application's own attribute) are
    '/'-joined strings there, lists in caliper-reader."""
    out = {k: v if isinstance(v, (str, list)) else str(v) for k, v in r.items()}
    if isinstance(out.get("path"), str):
        out["path"] = out["path"].split("/")
    return out


def _json_split_records(path: Path, doc: dict) -> tuple[list, dict]:
    globals_ = _json_globals(doc)
    columns, meta = doc["columns"], doc.get("column_metadata") or [{} for _ in doc["columns"]]
    alias = [m.get("attribute.alias", c) if isinstance(m, dict) else c for c, m in zip(columns, meta)]

    def col(*names):
        return next((i for i, (c, a) in enumerate(zip(columns, alias)) if c in names or a in names), None)
    ti = col(*TIME_ATTRS, "time")
    pi, ri, ci = col("path"), col("mpi.rank"), col("sum#rc.count", "rc.count", "Calls")
    fi = col("mpi.function")
    if ti is None or pi is None:
        raise BadProfile(f"{path}: a json-split file without a time or a path column (columns: {columns}); "
                         f"write it with hatchet-region-profile,output.format=json-split")
    paths: list[list] = []

    def node(i, what: str) -> list:
        """The path of node I, which must be defined before WHAT refers to it."""
        if type(i) is not int or not 0 <= i < len(paths):
            raise Damaged(f"{what} refers to node {i!r}, which is not defined before it")
        return paths[i]
    for n in doc["nodes"]:
        parent = n.get("parent")
        paths.append((node(parent, f"node {len(paths)}") if parent is not None else []) + [str(n["label"])])
        check_path_size(path, paths[-1])
    records = []
    for row in doc["data"]:
        rec = {"sum#time.duration": row[ti]} if row[ti] is not None else {}
        if row[pi] is not None:
            rec["path"] = node(row[pi], "a data row")
        if ri is not None and row[ri] is not None:
            rec["mpi.rank"] = str(row[ri])
        if ci is not None and row[ci] is not None:
            rec["sum#rc.count"] = str(row[ci])
        if fi is not None and row[fi] is not None:
            rec["mpi.function"] = row[fi]
        records.append(rec)
    return records, globals_


SPOT_PREFIX = "inclusive#sum#time.duration"
SPOT_EXCL = "scale#sum#time.duration.ns"  # spot's exclusive time, in seconds despite the name


# Caliper's comm.stats option, per comm region and rank: (our name, attribute, how ranks combine).
COMM_STATS = (("sends", "sum#sum#total.send.count", "sum"), ("recvs", "sum#sum#total.recv.count", "sum"),
              ("bytes_sent", "sum#sum#mpi.send.size", "sum"), ("bytes_recv", "sum#sum#mpi.recv.size", "sum"),
              ("max_message", "max#max#mpi.send.size", "max"), ("dest_ranks", "max#max#total.dest.ranks", "max"),
              ("src_ranks", "max#max#total.src.ranks", "max"), ("collectives", "max#max#total.coll.count", "sum"),
              ("irecv_gap_min", "min#cs.irecv_gap.min", "min"), ("irecv_gap_avg", "avg#cs.irecv_gap.avg", "avg"),
              ("irecv_gap_max", "max#cs.irecv_gap.max", "max"))




def _time(rec) -> float | None:
    for a in TIME_ATTRS:
        if a in rec:
            return seconds(rec, a)
    return None


def seconds(rec: dict, attr: str) -> float:
    """REC's ATTR as a time: a finite number of seconds, not below zero, as Caliper writes it; anything
    else (nan, inf, a negative or a '1_000') means the record is damaged."""
    raw = rec[attr]
    text = raw.strip() if isinstance(raw, str) else None
    value = float(raw) if text is None or NUMBER.fullmatch(text) else math.nan
    if not math.isfinite(value) or value < 0:
        raise Damaged(f"{attr} is {raw!r}, not a time (a finite number of seconds, not below 0)")
    return value


_AGGREGATE = re.compile(r"^(count$|scount$|(sum|min|max|avg|inclusive|scale|ratio)#)")   # Caliper's aggregate results


class Accumulator:
    """One run's records added as they stream in, whatever the file layout: per-rank times (EXCL, OUTSIDE: the time
    outside every region), and what profiles.Profile keeps as it is (SPOT, SPOT_OUTSIDE, CALLS, MATRIX, BYTES_SENT:
    see there); GLOBALS, the run's metadata, and JSON_KIND, the JSON layout read (None for .cali files). SOURCE
    names the run in a refusal; COMM, once every record is in, the comm.stats combined over ranks."""

    def __init__(self, source: str):
        self.source = source
        self.globals: dict | None = None
        self.json_kind: str | None = None
        self.spot: dict = {}
        self.spot_outside: dict | None = None
        self.calls: dict = {}
        self.matrix: dict = {}
        self.bytes_sent: dict = {}
        self.comm: dict = {}
        self.columns: dict[int, int] = {}   # rank -> column of the per-rank arrays (PerRank)
        self.excl = PerRank(self.columns)
        self.outside = PerRank(self.columns)
        self.ranked: set[int] = set()   # ranks named by mpi.rank or a rank file
        self.unranked = False           # records that name no rank: a one-process profile, else refused
        self.is_spot = False
        self.any_msg = False
        self.comm_acc: dict = {}        # path -> {name: [sum, count, min, max]}
        self.spot_unsummed = False      # spot format 1 (Caliper 2.3-2.4): no across-rank sum, refused
        self.repeats = 0                # records read again (profiles._check_repeats)
        self.first_repeat: tuple | None = None
        self.untimed_keys: set[int] = set()   # hashes of untimed records' keys (message trace, comm.stats)

    def record(self, rec: dict, file_rank: int | None) -> None:
        if "mpi.rank" in rec:
            rank = int(rec["mpi.rank"])
            self.ranked.add(rank)
        elif file_rank is not None:
            rank = file_rank
        else:
            rank, self.unranked = 0, True
        p = record_path(rec)
        check_path_size(self.source, p)
        if f"max#{SPOT_PREFIX}" in rec or "spot.channel" in rec:
            self.is_spot = True
            if f"max#{SPOT_PREFIX}" in rec and f"sum#{SPOT_PREFIX}" not in rec:
                self.spot_unsummed = True
                return
            if rec.get("spot.channel", "regionprofile") != "regionprofile":
                return   # spot's timeseries channel: not stored (docs/add-your-application.md)
            if not p and f"max#{SPOT_PREFIX}" in rec and "mpi.msg.dst" not in rec:
                self.spot_outside = {k: seconds(rec, f"{k}#{SPOT_PREFIX}") for k in ("min", "max", "avg", "sum")}
            if p and f"max#{SPOT_PREFIX}" in rec:
                self.spot[p] = {k: seconds(rec, f"{k}#{SPOT_PREFIX}") for k in ("min", "max", "avg", "sum")}
                if f"avg#{SPOT_EXCL}" in rec:
                    self.spot[p].update({f"excl_{k}": seconds(rec, f"{k}#{SPOT_EXCL}")
                                         for k in ("min", "max", "avg", "sum")})
                if "sum#sum#rc.count" in rec:
                    self.calls[p] = int(rec["sum#sum#rc.count"])
            return
        t = _time(rec)
        if t is None or "mpi.msg.dst" in rec or "mpi.msg.src" in rec:
            # Caliper aggregates into one record per key (every attribute that is not an aggregate): an untimed
            # record whose key was read already is a repeat, whose counts and bytes would be summed twice
            key = hash((rank, tuple(sorted((k, str(v)) for k, v in rec.items() if not _AGGREGATE.match(k)))))
            if key in self.untimed_keys:
                self.repeats += 1
                self.first_repeat = self.first_repeat or (p, rank)
                return
            self.untimed_keys.add(key)
        if "mpi.msg.dst" in rec or "mpi.msg.src" in rec:
            self.any_msg = True
        if "mpi.msg.dst" in rec:
            dst = int(rec["mpi.msg.dst"])
            if dst >= 0:  # MPI_PROC_NULL (-2) moves nothing
                nbytes = int(float(rec.get("sum#mpi.msg.size", 0)))
                cell = self.matrix.setdefault((rank, dst), [0, 0])
                cell[0] += int(rec.get("count", 0))
                cell[1] += nbytes
                if p:
                    self.bytes_sent[p] = self.bytes_sent.get(p, 0) + nbytes
            return
        if t is not None and (self.excl if p else self.outside).has(p, rank):
            # Caliper's aggregation writes one record per call path and rank: a second is a repeat, not more time
            self.repeats += 1
            self.first_repeat = self.first_repeat or (p, rank)
            return
        if p and "sum#sum#total.send.count" in rec:
            acc = self.comm_acc.setdefault(p, {})
            for name, attr, _how in COMM_STATS:
                if attr in rec:
                    v = float(rec[attr])
                    a = acc.get(name)
                    if a is None:
                        acc[name] = [v, 1, v, v]
                    else:
                        a[0] += v
                        a[1] += 1
                        a[2] = min(a[2], v)
                        a[3] = max(a[3], v)
        if t is None:
            return  # a record without timing
        if not p:   # time outside every region
            self.outside.add((), rank, t)
            return
        self.excl.add(p, rank, t)
        if "sum#rc.count" in rec:
            self.calls[p] = self.calls.get(p, 0) + int(float(rec["sum#rc.count"]))

    def combined_comm(self) -> dict:
        """comm.stats per comm region, combined over ranks (sums of counts and bytes, largest message
        and peer counts, the Irecv gap's min/mean/max)."""
        out = {}
        for p, acc in self.comm_acc.items():
            row = {}
            for name, _attr, how in COMM_STATS:
                if name in acc:
                    total, n, lo, hi = acc[name]
                    row[name] = {"sum": total, "max": hi, "min": lo, "avg": total / n}[how]
            out[p] = row
        return out


class PerRank:
    """Per call path, one float per rank that has a record, in the order ranks first appear (COLUMNS,
    shared by a run's accumulators), so memory follows the data, not the rank numbers a file claims
    (profiles.read_run puts the columns in rank order once the ranks claimed are checked)."""

    def __init__(self, columns: dict[int, int]):
        self.columns = columns          # rank -> column, shared
        self.values: dict[tuple, np.ndarray] = {}
        self.present: dict[tuple, np.ndarray] = {}

    def has(self, path: tuple, rank: int) -> bool:
        """Whether a record of PATH on RANK was added already."""
        col, pres = self.columns.get(rank), self.present.get(path)
        return col is not None and pres is not None and col < len(pres) and bool(pres[col])

    def add(self, path: tuple, rank: int, t: float) -> None:
        col = self.columns.setdefault(rank, len(self.columns))
        arr = self.values.get(path)
        if arr is None or col >= len(arr):
            arr = self._grow(path, col)
        arr[col] += t
        self.present[path][col] = True

    def _grow(self, path: tuple, col: int) -> np.ndarray:
        old, had = self.values.get(path), self.present.get(path)
        size = max(8, col + 1, 2 * (len(old) if old is not None else 0))
        arr, pres = np.zeros(size), np.zeros(size, dtype=bool)
        if old is not None:
            arr[:len(old)], pres[:len(had)] = old, had
        self.values[path], self.present[path] = arr, pres
        return arr


def accumulate(run, source: str) -> Accumulator:
    """The records of RUN (files.RunFiles: a JSON profile's document, or its .cali files opened in turn, each
    file's rank in its name where it is a per-rank file), each added as it is read, then the comm.stats combined
    (COMM); SOURCE names the run in a refusal. A damaged file is one BadProfile naming it."""
    paths = run.paths
    acc = Accumulator(source)
    if paths[0].suffix == ".json":
        records, globals_, kind = json_records(paths[0], run.document)
        acc.globals, acc.json_kind = globals_, kind
        try:
            for rec in records:
                acc.record(rec, None)
        except BadProfile:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise BadProfile(f"{paths[0]}: damaged JSON profile: {damage(e)} in a record") from None
    else:
        for path, f in run.cali:
            m = RANK_FILE.search(path.name)
            file_rank = int(m.group(1)) if m else None
            globals_ = stream_cali(path, f, lambda rec, fr=file_rank: acc.record(rec, fr))
            acc.globals = acc.globals if acc.globals is not None else dict(globals_)
    acc.comm = acc.combined_comm()
    return acc
