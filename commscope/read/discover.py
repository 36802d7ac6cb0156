"""Which inputs are runs: a list of paths (files, directories) grouped into one list of files per run (per-rank
files of one directory, a profile, a workload output without its profile), Ramble workspaces below a directory set
aside, and why a path that does not exist cannot be read. In a Ramble workspace, a file to read whose symbolic link
leads outside the workspace is refused. Nothing is parsed here (profiles.read_files does)."""
from __future__ import annotations

import errno
import os
from collections import defaultdict
from pathlib import Path

from commscope.read.caliper_text import RANK_FILE
from commscope.read.files import BadProfile, open_regular


READ = (".cali", ".json", ".out")   # what a run's files can be read as


def looks_caliper_json(path: Path) -> bool:
    """In a directory, a .json is a profile only if it opens like json-split or cali-query's JSON
    (Ramble's results and other JSON files stay out)."""
    with open_regular(path) as f:
        head = f.read(4096).lstrip()
    if head.startswith(b"{"):
        return b'"data"' in head[:64] or (b'"records"' in head and b'"path"' in head)
    return head.startswith(b"[") and (b'"path"' in head or b'"mpi.rank"' in head)


def is_ramble_workspace(path: Path) -> bool:
    try:
        return path.is_dir() and ((path / "results.latest.json").exists()
                                  or (path / "configs" / "ramble.yaml").exists())
    except PermissionError:   # a folder that cannot be searched: listing it says so (discover)
        return False


def is_workload_output(path: Path) -> bool:
    """A workload's stdout (workloads/README.md): it opens with the COMMSCOPE header."""
    try:
        with open_regular(path) as f:
            return f.read(20).startswith(b"COMMSCOPE workload=")
    except OSError:
        return False


def _unreadable_folder(e: OSError):
    """A folder below an input that cannot be listed is said, never skipped in silence (os.walk's default)."""
    raise BadProfile(f"{e.filename}: a folder that cannot be read ({e.strerror}); make it readable, or name the "
                     f"inputs without it")


def not_found(path: Path) -> BadProfile:
    """Why PATH, which does not exist, cannot be read: a symbolic link loop, a dangling link, or no file."""
    if path.is_symlink():
        try:
            path.stat()
        except OSError as e:
            if e.errno == errno.ELOOP:
                return BadProfile(f"{path}: a symbolic link loop; point it at the profile")
        return BadProfile(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist")
    return BadProfile(f"{path}: no such file or directory")


def outside(path: Path, within: Path) -> BadProfile | None:
    """Why PATH, a file found in the directory WITHIN (resolved), may not be read: it leads outside WITHIN (a
    link that leads nowhere, a loop, is not_found's)."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    if real.is_relative_to(within):
        return None
    return BadProfile(f"{path}: a symbolic link to {real}, outside the workspace {within}; copy the file into the "
                      f"workspace, or ingest it on its own")


def discover(inputs: list[Path], nested_workspaces: list | None = None,
             within: Path | None = None) -> list[list[Path]]:
    """Groups input files into runs: per-rank files of one directory form one
    run; every other .cali or json-split .json file is a run of its own, and so
    is a workload's stdout (.out) with no profile beside it (a run without
    Caliper), or named without that profile. A .out named together with its
    profile (x.cali x.out, as a shell's x.* gives) is the profile's sidecar, not
    a second run. Ramble workspaces below a given directory are left out (each is
    one campaign of its own) and listed in nested_workspaces. WITHIN (a resolved directory, a Ramble workspace's):
    a profile or output whose symbolic link leads outside it is refused, not read."""
    groups: list[list[Path]] = []
    named = {p.resolve() for p in inputs if p.is_file()}
    for inp in inputs:
        if not inp.exists():
            raise not_found(inp)
        if inp.is_dir():
            files = []
            for d, subdirs, names in os.walk(inp, onerror=_unreadable_folder):
                d = Path(d)
                keep = []
                for sd in sorted(subdirs):
                    if is_ramble_workspace(d / sd):
                        if nested_workspaces is not None:
                            nested_workspaces.append(d / sd)
                    else:
                        keep.append(sd)
                subdirs[:] = keep
                files += [d / n for n in names]
            files.sort()
        else:
            files = [inp]
        per_dir: dict = defaultdict(list)
        outs = []
        for f in files:
            if within is not None and (f.suffix in READ or RANK_FILE.search(f.name)) and (why := outside(f, within)):
                raise why
            if not f.is_file():
                if f.suffix in READ and f.is_symlink() and not f.exists():
                    raise not_found(f)   # a profile's name that leads nowhere is not dropped in silence
                continue
            if RANK_FILE.search(f.name):
                per_dir[f.parent].append(f)
            elif f.suffix == ".out":
                outs.append(f)
            elif f.suffix == ".cali" or inp.is_file() or (f.suffix == ".json" and looks_caliper_json(f)):
                groups.append([f])
        for f in outs:
            beside = f.with_suffix(".cali").exists() or f.with_suffix(".json").exists() or f.parent in per_dir
            its_profile_named = any(f.with_suffix(x).resolve() in named for x in (".cali", ".json"))
            if (inp.is_file() and not its_profile_named) or (not beside and is_workload_output(f)):
                groups.append([f])
        groups.extend(per_dir[d] for d in sorted(per_dir))
    return groups
