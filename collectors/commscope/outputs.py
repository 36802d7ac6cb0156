"""Workload stdout -> records, for runs that have no profile (ci/suite.py runs,
collsweep and pio without Caliper). The output contract (workloads/README.md,
contract.py) gives the workload, the library, the ranks, the PARAM lines and
the FOMs; the caller gives what the output cannot say (stack, system,
interconnect, the case's label). Stored through the same writer as profiles
(ingest.ingest_records), with profile_kind 'none': no call-tree metrics.
"""
from __future__ import annotations

import datetime as dt
import hashlib

from .contract import parse_output
from .profiles import BadProfile
from .records import Record, clean


def record_from_output(text: str, source: str, started_at: dt.datetime, *, stack: str | None = None,
                       variant: str | None = None, metadata: dict | None = None) -> Record:
    """One run's stdout as a record. Raises BadProfile naming `source` when the
    text is not a workload's output (no COMMSCOPE header or no RANKS line)."""
    out = parse_output(text)
    if not out.workload or not out.ranks:
        raise BadProfile(f"{source}: not a workload's output (no COMMSCOPE header or RANKS line)")
    meta = {"params": {k: clean(v) for k, v in out.params.items()}, **(metadata or {})}
    return Record(
        content_hash=hashlib.sha256(text.encode()).hexdigest(), source=clean(source), profile_kind="none",
        app=clean(out.workload), workload=clean(out.workload), ranks=out.ranks,
        started_at=started_at, status="failed" if any(s == "FAIL" for s, _ in out.verify.values()) else "ok",
        variant=clean(variant or out.params.get("variant") or out.params.get("method")),
        decomposition=clean(out.params.get("decomp")), interconnect=clean(out.params.get("interconnect")),
        global_size=clean(out.params.get("global")), iterations=_int(out.params.get("iters")),
        stack=clean(stack or out.mpi_library or "unknown"), mpi_library=clean(out.mpi_library or "unknown"),
        metadata=meta,
        fom_rows=[(clean(name, 200), 0, value, clean(unit, 50)) for name, (value, unit) in out.foms.items()],
    )


def _int(s) -> int | None:
    try:
        return int(s)
    except (TypeError, ValueError):
        return None
