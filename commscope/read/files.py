"""The files every reader opens: BadProfile, the error that names an input which cannot be ingested; open_regular,
which refuses what is not a regular file; file_hash, a run's identity from its bytes. Stdlib only."""
from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path


class BadProfile(ValueError):
    """A profile that cannot be ingested; the message names the file."""


def open_regular(path, mode: str = "rb", **kwargs):
    """PATH opened for reading, if it is a regular file. A FIFO, a device, a socket or a directory is refused with
    an OSError ("not a regular file") at once: opened without O_NONBLOCK, a FIFO with no writer would block the
    reader for ever, and a device would be read without end. Every reader opens the files it is given here."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a folder); give the file itself",
                          str(path))
        os.set_blocking(fd, True)
        return open(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def file_hash(paths: list[Path]) -> str:
    """The run's identity: its bytes. Names count only in a per-rank set,
    where they carry the rank."""
    h = hashlib.sha256()
    for p in sorted(paths):
        if len(paths) > 1:
            h.update(p.name.encode() + b"\0")
        with open_regular(p) as f:
            h.update(f.read())
    return h.hexdigest()
