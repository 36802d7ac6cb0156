"""Caliper's text format (.cali) streamed as caliper-reader records: split_record (caliper-reader's splitter with a
fast path), a stream reader that names damage (Damaged: the file and line are added by stream_cali), and the limits
a record's call path is held to as it is read (check_path_size). The JSON layouts (caliper_json) give records of
the same shape; profiles.read_files accumulates either into a run."""
from __future__ import annotations

import io
import re
from pathlib import Path

from caliperreader import caliperstreamreader
from caliperreader.metadatadb import Attribute

from commscope.read.files import BadProfile, open_regular

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
