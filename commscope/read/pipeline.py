"""One run's files through the reading stages, one after the other, each handing its product to the next:

1. files: the run's bytes, read safely (load_output for a workload output read alone; load_run for a profile: its
   identity, the workload output beside it, a JSON profile's document, each .cali file opened in turn);
2. parse: workload_output, or profiles with caliper_text and caliper_json, into plain data (an Output, a Profile);
3. assemble: records, the run's Record (its windows, rank statistics and MPI family made there);
4. check: storable, what the store can hold.

read_record runs in the reader processes (inputs.read_records) and for each run directory of a Ramble workspace
(ramble.Workspace.records); it raises BadProfile naming the file."""
from __future__ import annotations

from commscope.read import files, profiles, records, workload_output
from commscope.read.records import ReadOptions, Record
from commscope.read.storable import check_storable


def read_record(group: list, opts: ReadOptions = ReadOptions()) -> Record:
    """One input group (see files.discover) to one record, checked for what the store can hold."""
    if len(group) == 1 and str(group[0]).endswith(".out"):
        path = group[0]
        content_hash, lines = files.load_output(path)
        out = workload_output.read_lines(path, lines)
        rec = records.from_output(path, out, content_hash, opts)
    else:
        run = files.load_run(group)
        prof = profiles.read_run(run, opts.allow_partial, opts.ranks)
        rec = records.from_profile(prof, opts.focus, opts)
    return check_storable(rec)
