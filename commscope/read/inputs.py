"""What a list of inputs is, as one campaign, and its records streamed by a pool of reader processes.

- read_campaign: a Ramble workspace (alone: one campaign), ReFrame reports and perflogs (on their own), or Caliper
  profiles and workload outputs, grouped into runs, as files.plan finds them before anything is read (Ramble
  workspaces nested in a directory are left out and listed). An input that does not exist, or that is neither
  (without --skip-bad), is refused.
- read_records: the groups' records in input order. From PARALLEL_FROM groups on, reader processes work ahead of
  the consumer by a bounded window, so at most a few dozen records are in memory at once; each is passed through
  PREPARE in its reader process (the store makes its COPY text there). A file that cannot be read becomes a
  BadProfile naming it, never a traceback."""
from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from commscope.read import files
from commscope.read.files import BadProfile
from commscope.read.pipeline import read_record
from commscope.read.records import ReadOptions, Record

PARALLEL_FROM = 32    # fewer input groups than this are read in-process


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
    found = files.plan(inputs, skip_bad)
    if found.kind == "ramble":
        from commscope.read import ramble
        docs = files.load_workspace(found.workspace)   # read within limits, then checked
        ws = ramble.workspace(docs)
        return Inputs(ws.records(opts), "ramble", str(found.workspace), hardware=ws.hardware)
    source = json.dumps([str(i) for i in inputs])
    if found.kind == "reframe":   # ReFrame run reports and perflogs: one campaign of their own, as a workspace is
        from commscope.read import reframe
        reports, perflogs = files.load_reports(found.reports), files.read_perflogs(found.perflogs)
        return Inputs(reframe.records(reports, perflogs, opts), "reframe", source)
    return Inputs(read_records(found.groups, opts=opts, prepare=prepare), "ingest", source,
                  count=len(found.groups), left_out=found.nested)


def read_group(group: list[Path], opts: ReadOptions = ReadOptions(),
               prepare: Callable[[Record], Record] | None = None) -> Record | BadProfile:
    """One group's record, passed through PREPARE (in the reader process), or the BadProfile naming its input."""
    try:
        rec = read_record(group, opts)
    except BadProfile as e:
        return e
    except OSError as e:
        return BadProfile(f"{getattr(e, 'filename', None) or group[0]}: cannot be read ({e.strerror or e})")
    except MemoryError:
        return BadProfile(f"{group[0]}: too large to read in the memory this process may use")
    except Exception as e:   # a reader's bug must not end an ingest in a traceback: one line naming the input
        return BadProfile(f"{group[0]}: cannot be read: {type(e).__name__}: {e} (a bug in commscope's reader; "
                          f"report it with the file)")
    return prepare(rec) if prepare else rec


def _die_with_parent() -> None:
    """Reader processes must not outlive a killed ingest (kill -9 sends no
    signal they could see otherwise)."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the pool's own shutdown still applies


def workers() -> int:
    return int(os.environ.get("COMMSCOPE_INGEST_WORKERS", 0)) or max(1, min(4, os.cpu_count() or 1))


def read_records(groups: list, n_workers: int | None = None, opts: ReadOptions = ReadOptions(),
                 prepare: Callable[[Record], Record] | None = None) -> Iterator[Record | BadProfile]:
    """Records in input order (module docstring). PREPARE must be a module-level function: the reader
    processes are spawned, not forked, and import it by name."""
    n = n_workers or workers()
    if n == 1 or len(groups) < PARALLEL_FROM:
        for g in groups:
            yield read_group(g, opts, prepare)
        return
    window = n * 8
    # spawn, not fork: the parent holds a database connection.
    with cf.ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"),
                                initializer=_die_with_parent) as pool:
        pending: deque = deque()
        it = iter(groups)
        for g in it:
            pending.append(pool.submit(read_group, g, opts, prepare))
            if len(pending) >= window:
                break
        while pending:
            yield pending.popleft().result()
            nxt = next(it, None)
            if nxt is not None:
                pending.append(pool.submit(read_group, nxt, opts, prepare))
