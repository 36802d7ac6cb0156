"""One run's files through the reading stages, one after the other, each handing its product to the next:

1. files: the run's bytes, read safely (load_run: its identity; a workload output's lines, read alone; a profile's
   workload output beside it, a JSON profile's document, each .cali file opened in turn);
2. parse: workload_output (the run's output, or the one beside its profile), then profiles (its records read and
   added per rank by caliper), into plain data (an Output, a Profile);
3. measure: measures, the measurement model's numbers (windows, per-rank times);
4. assemble: records, the run's Record;
5. check: storable, what the store can hold.

read_record runs in the reader processes and for each run directory of a Ramble workspace (ramble.Workspace.records);
it raises BadProfile naming the file. read_records gives a campaign's runs' records in input order: from
PARALLEL_FROM runs on, reader processes work ahead of the consumer by a bounded window, so at most a few dozen records
are in memory at once; each is passed through PREPARE in its reader process (the store makes its COPY text there). A
file that cannot be read becomes a BadProfile naming it (read_group), never a traceback."""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from collections import deque
from pathlib import Path
from typing import Callable, Iterator

from commscope.read import files, measures, profiles, records, workload_output
from commscope.read.records import ReadOptions, Record
from commscope.read.files import BadProfile
from commscope.read.storable import check_storable

PARALLEL_FROM = 32    # fewer runs than this are read in-process


def read_record(group: list, opts: ReadOptions = ReadOptions()) -> Record:
    """One input group (see files.discover) to one record, checked for what the store can hold."""
    run = files.load_run(group)
    out = workload_output.run_output(run)
    # a workload's output alone (run.lines) is a run without a profile
    prof = None if run.lines is not None else profiles.read_run(run, out, opts.allow_partial, opts.ranks)
    measured = measures.measure_output(out) if prof is None else measures.measure_profile(prof, opts.focus)
    rec = (records.from_output(run.paths[0], out, run.content_hash, measured, opts) if prof is None
           else records.from_profile(prof, measured, opts))
    return check_storable(rec)


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
