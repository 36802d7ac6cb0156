"""The workload output contract (workloads/README.md): header, PARAM, FOM,
VERIFY and RANK lines printed by rank 0. Stdlib only: ci/suite.py uses it
before anything is installed."""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Output:
    """One run's output, parsed by the contract in workloads/README.md."""
    workload: str = ""
    mpi_library: str = ""
    ranks: int = 0
    params: dict = field(default_factory=dict)
    foms: dict = field(default_factory=dict)      # name -> (value, unit)
    verify: dict = field(default_factory=dict)    # name -> (status, value)
    rank_lines: list = field(default_factory=list)


LINE = re.compile(r"^(COMMSCOPE|MPI_LIBRARY|MPI_VERSION|RANKS|PARAM|FOM|VERIFY|RANK) (.*)$")


class BadOutput(ValueError):
    """A contract line that does not parse; the message names the line."""


def parse_output(text: str) -> Output:
    """The contract's lines of TEXT; a malformed one raises BadOutput naming its line number."""
    out = Output()
    for n, raw in enumerate(text.splitlines(), 1):
        m = LINE.match(raw)
        if not m:
            continue
        try:
            _parse_line(out, *m.groups())
        except (ValueError, IndexError):
            shown = raw if len(raw) <= 60 else raw[:57] + "..."
            raise BadOutput(f"line {n}: a malformed {m.group(1)} line ({shown!r})") from None
    return out


def _parse_line(out: Output, kind: str, rest: str) -> None:
    if kind == "COMMSCOPE":
        out.workload = dict(kv.split("=", 1) for kv in rest.split()).get("workload", "")
    elif kind == "MPI_LIBRARY":
        out.mpi_library = rest.strip()
    elif kind == "RANKS":
        out.ranks = int(rest)
        if not 1 <= out.ranks < 2**31:
            raise ValueError(out.ranks)
    elif kind == "PARAM":
        name, _, value = rest.partition(" ")
        out.params[name] = value
    elif kind == "FOM":
        name, value, unit = rest.split()
        out.foms[name] = (float(value), unit)
    elif kind == "VERIFY":
        name, status, value = rest.split()
        out.verify[name] = (status, value)
    elif kind == "RANK":
        rank, *kvs = rest.split()
        out.rank_lines.append(dict([("rank", rank)] + [kv.split("=", 1) for kv in kvs]))
