"""Profiles as Hatchet GraphFrames, with the upstream reader's bugs handled.

Hatchet 2026.2.0 + caliper-reader 0.4.1: for a root whose path has one element
(main, MPI_Finalize, ...), the reader registers the node twice and adds an
all-zero filler row for the unused id. In files with an mpi.rank column the
filler gets one copy per rank, so (node, rank) is duplicated: tree() and
update_inclusive_columns() crash and Thicket raises DuplicateIndexError when
profiles are combined. read_cali() drops the filler rows; sums do not change.
"""
from __future__ import annotations

import numpy as np


def read_cali(path: str):
    """GraphFrame.from_caliperreader(path) without the filler rows."""
    from hatchet.readers.caliper_native_reader import CaliperNativeReader

    reader = CaliperNativeReader(str(path), False, [], True)
    gf = reader.read()
    # Private attribute of the reader: re-check on a Hatchet upgrade (the pin is in pyproject.toml).
    real = np.fromiter(reader.callpath_to_idx.values(), dtype=float)
    gf.dataframe = gf.dataframe[gf.dataframe["nid"].isin(real)].copy()
    return gf
