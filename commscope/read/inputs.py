"""What a list of inputs is, as one campaign (read_campaign): a Ramble workspace (alone: one campaign), ReFrame reports
and perflogs (on their own), or Caliper profiles and workload outputs, grouped into runs, as files.plan finds them
before anything is read (Ramble workspaces nested in a directory are left out and listed). An input that does not
exist, or that is neither (without --skip-bad), is refused. Each kind's files are read by read/files.py and handed to
its reader (ramble, reframe; a run's files to pipeline.read_records)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from commscope.read import files
from commscope.read.files import BadProfile
from commscope.read.pipeline import read_records
from commscope.read.records import ReadOptions, Record


@dataclass
class Inputs:
    """One campaign's inputs: its records (a lazy stream), its kind (campaigns.kind) and source text, how many
    records (None: not known ahead), the hardware a Ramble workspace describes, and the nested workspaces left
    out."""
    records: Iterator[Record | BadProfile]
    kind: str
    source: str
    count: int | None = None
    hardware: dict | None = None
    left_out: list[Path] = field(default_factory=list)


def read_campaign(inputs: list[Path], opts: ReadOptions, skip_bad: bool = False,
             prepare: Callable[[Record], Record] | None = None) -> Inputs:
    """The campaign INPUTS make (module docstring; files.plan says which it is); BadProfile when they cannot be
    one."""
    inputs = [Path(i) for i in inputs]
    # files first: what the inputs are, and the documents of their kind read (reports and perflogs when reached)
    found = files.plan(inputs, skip_bad)
    docs = files.load_workspace(found.workspace) if found.kind == "ramble" else None
    reports, perflogs = files.load_reports(found.reports), files.read_perflogs(found.perflogs)
    if docs is not None:
        from commscope.read import ramble
        ws = ramble.workspace(docs)   # its documents checked
        return Inputs(ws.records(opts), "ramble", str(found.workspace), hardware=ws.hardware)
    source = json.dumps([str(i) for i in inputs])
    if found.kind == "reframe":   # ReFrame run reports and perflogs: one campaign of their own, as a workspace is
        from commscope.read import reframe
        return Inputs(reframe.records(reports, perflogs, opts), "reframe", source)
    return Inputs(read_records(found.groups, opts=opts, prepare=prepare), "ingest", source,
                  count=len(found.groups), left_out=found.nested)
