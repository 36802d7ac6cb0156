"""Caliper's JSON layouts as caliper-reader-style records (the shape caliper_text streams): json-split
(hatchet-region-profile's output.format=json-split, cali-query's json-split) and cali-query's json and
json(object), from the document read/files.py read within its limits of size and depth (load_run)."""
from __future__ import annotations

from pathlib import Path

from commscope.read.caliper_text import TIME_ATTRS, Damaged, check_path_size, damage
from commscope.read.files import BadProfile


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
