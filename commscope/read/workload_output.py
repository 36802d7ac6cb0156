"""The workload output contract (workloads/README.md): header, PARAM, FOM,
VERIFY and RANK lines printed by rank 0, parsed from a run's own output file (read_lines) or from the output kept
beside a profile (beside), which read/files.py read (load_run); run_output is either, for one run. Stdlib only: ci/suite.py uses it before
anything is installed."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from commscope.read.files import BadProfile


@dataclass
class Output:
    """One run's output, parsed by the contract in workloads/README.md."""
    workload: str = ""
    mpi_library: str = ""
    ranks: int = 0
    params: dict = field(default_factory=dict)
    foms: dict = field(default_factory=dict)      # name -> (value, unit)
    fom_lines: dict = field(default_factory=dict)  # name -> the line number it was printed on
    verify: dict = field(default_factory=dict)    # name -> (status, value)
    rank_lines: list = field(default_factory=list)


LINE = re.compile(r"^(COMMSCOPE|MPI_LIBRARY|MPI_VERSION|RANKS|PARAM|FOM|VERIFY|RANK) (.*)$")
# A FOM's value as printf's %.9g writes a finite number: never nan, inf, hex or digits grouped with '_'.
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


class BadOutput(ValueError):
    """A contract line that does not parse; the message names the line."""


def parse_output(text) -> Output:
    """The contract's lines of TEXT (a string, or its lines one at a time); a malformed one raises BadOutput naming
    its line number."""
    out = Output()
    for n, raw in enumerate(text.splitlines() if isinstance(text, str) else text, 1):
        m = LINE.match(raw)
        if not m:
            continue
        shown = raw if len(raw) <= 60 else raw[:57] + "..."
        if m.group(1) == "FOM":
            _parse_fom(out, m.group(2), n, shown)
            continue
        try:
            _parse_line(out, *m.groups())
        except (ValueError, IndexError):
            raise BadOutput(f"line {n}: a malformed {m.group(1)} line ({shown!r})") from None
    return out


def _parse_fom(out: Output, rest: str, n: int, shown: str) -> None:
    """One FOM line (line N): a name, a finite number (a time in seconds not below 0) and a unit. Each FOM
    is printed once: a second line of the same name is refused, naming both."""
    parts = rest.split()
    if len(parts) != 3:
        raise BadOutput(f"line {n}: a malformed FOM line ({shown!r}); expected FOM <name> <value> <unit>")
    name, value, unit = parts
    if not NUMBER.fullmatch(value) or not math.isfinite(float(value)):
        raise BadOutput(f"line {n}: FOM {name}'s value {value!r} is not a finite number ({shown!r}); the "
                        f"workload's output is damaged, run it again")
    if unit == "s" and float(value) < 0:
        raise BadOutput(f"line {n}: FOM {name} is a time of {value} s, below zero ({shown!r}); the workload's "
                        f"output is damaged, run it again")
    if name in out.foms:
        raise BadOutput(f"line {n}: FOM {name} printed again (first on line {out.fom_lines[name]}), so which "
                        f"value holds is unknown; each FOM is printed once: keep one run's output per file")
    out.foms[name] = (float(value), unit)
    out.fom_lines[name] = n


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
    elif kind == "VERIFY":
        name, status, value = rest.split()
        out.verify[name] = (status, value)
    elif kind == "RANK":
        rank, *kvs = rest.split()
        out.rank_lines.append(dict([("rank", rank)] + [kv.split("=", 1) for kv in kvs]))


def beside(loaded: tuple[Path, str] | None) -> Output | None:
    """The workload's stdout kept beside a profile (LOADED: its path and text, files.output_beside), or None where
    there is none or it is another application's, which has no contract lines."""
    if loaded is None:
        return None
    path, text = loaded
    try:
        out = parse_output(text)
    except BadOutput as e:
        raise BadProfile(f"{path}: damaged workload output beside the profile, {e}") from None
    return out if out.workload else None


def _utf8_lines(path: Path, lines):
    """LINES as text, one at a time; a line that is not UTF-8 is a BadProfile naming it."""
    for n, raw in enumerate(lines, 1):
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as e:
            raise BadProfile(f"{path}: damaged workload output: byte {e.start} of line {n} is not UTF-8 text") from None


def read_lines(path: Path, lines) -> Output:
    """The workload output in PATH, a run's own file, from its LINES (bytes, one at a time: files.load_run); a
    damaged one is a BadProfile naming it."""
    try:
        return parse_output(_utf8_lines(path, lines))
    except BadOutput as e:
        raise BadProfile(f"{path}: damaged workload output, {e}") from None


def run_output(run) -> Output | None:
    """The workload output of RUN (files.RunFiles): a run's own output from its lines (read_lines), else the output
    kept beside its profile (beside)."""
    if run.lines is not None:
        return read_lines(run.paths[0], run.lines)
    return beside(run.output)
