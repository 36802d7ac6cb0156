"""The pinned sources of versions.yaml, put in place under $COMMSCOPE_HOME/cache.

From a source mirror (`--source-mirror DIR`: a folder holding each tool's `archive`), the archive is checked
against versions.yaml's `sha256` before anything is extracted; otherwise the pinned tag or commit is cloned.
A source in place carries a stamp naming what it came from, so a second setup reuses it. The Python tools' trees
(PYTHON_TOOLS) are byte-compiled once for the interpreter commscope runs on, which Ramble and Spack run on too, so
no later ramble or spack command compiles their modules again."""
from __future__ import annotations

import compileall
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from commscope.store import db
from commscope.workflow.errors import WorkflowError
from commscope.workflow.paths import versions

STAMP = ".commscope-source"
COMPILED = ".commscope-compiled"   # names the interpreter (sys.implementation.cache_tag) the tree was compiled for
PYTHON_TOOLS = ("ramble", "spack")   # not spack-packages: its recipes load no faster compiled


def pinned(tool: str) -> str:
    """The tool's pin in words: 'caliper 2.14.0 (tag v2.14.0)'."""
    v = versions()[tool]
    ref = v.get("tag") or v.get("branch")
    return f"{tool} {v.get('version', ref)} ({'tag' if 'tag' in v else 'branch'} {ref})"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def mirror_archive(tool: str, mirror: Path) -> Path:
    """The tool's archive in the mirror, checked against versions.yaml; WorkflowError naming the file otherwise."""
    v = versions()[tool]
    archive = Path(mirror) / v["archive"]
    if not archive.is_file():
        raise WorkflowError(f"{archive}: not found; a source mirror holds {v['archive']} for {pinned(tool)} "
                            f"(versions.yaml)")
    got = sha256(archive)
    if got != v["sha256"]:
        raise WorkflowError(f"{archive}: sha256 {got} is not the {v['sha256']} versions.yaml pins for "
                            f"{pinned(tool)}; put the pinned archive there")
    return archive


def extract(archive: Path, dest: Path) -> Path:
    """The archive's one top folder becomes DEST (atomically: a half-extracted tree is never left at DEST)."""
    tmp = dest.parent / f".{dest.name}.part-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        tops = list(tmp.iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise WorkflowError(f"{archive}: expected one top folder, found {len(tops)} entries")
        shutil.rmtree(dest, ignore_errors=True)
        tops[0].rename(dest)
    except (tarfile.TarError, OSError) as e:
        raise WorkflowError(f"{archive}: cannot extract it ({e}); replace it with the pinned archive") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def clone(tool: str, dest: Path) -> bool:
    """Clones the pinned version (with its submodules where versions.yaml says so); False when the machine
    cannot reach it."""
    v = versions()[tool]
    ref = v.get("tag") or v.get("branch")
    dest.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["git", "clone", "--quiet", "--branch", ref, *(["--recurse-submodules"] if v.get("submodules") else []),
           v["url"], str(dest)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                           env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
    except subprocess.TimeoutExpired:
        p = subprocess.CompletedProcess([], 1)
    if p.returncode:
        shutil.rmtree(dest, ignore_errors=True)
        return False
    if v.get("commit"):
        subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", v["commit"]], check=True)
    return True


def source(tool: str, mirror: Path | None, dest: Path | None = None) -> Path | None:
    """The pinned source tree of TOOL at DEST (default $COMMSCOPE_HOME/cache/src/<tool>-<version>): reused when
    its stamp matches, else extracted from MIRROR, else cloned. None when neither is possible."""
    v = versions()[tool]
    dest = dest or db.home() / "cache" / "src" / f"{tool}-{v.get('version') or v['commit'][:7]}"
    want = v.get("sha256", "") if mirror else v.get("commit") or v.get("tag", "")
    stamp = dest / STAMP
    if stamp.exists() and stamp.read_text().split()[0] in (v.get("sha256"), v.get("commit"), v.get("tag")):
        byte_compile(tool, dest)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if mirror is not None:
        extract(mirror_archive(tool, mirror), dest)
    elif not clone(tool, dest):
        return None
    byte_compile(tool, dest)
    stamp.write_text(f"{want} {'mirror ' + str(mirror) if mirror else 'clone ' + v['url']}\n")
    return dest


def byte_compile(tool: str, tree: Path) -> None:
    """TREE's Python modules compiled for this interpreter, once (the COMPILED file says for which), where TOOL is
    one of PYTHON_TOOLS. A file that is not Python 3 is left as it is: it was never imported."""
    marker = tree / COMPILED
    if tool not in PYTHON_TOOLS or (marker.exists() and marker.read_text().strip() == sys.implementation.cache_tag):
        return
    compileall.compile_dir(str(tree), quiet=2, workers=0)
    marker.write_text(sys.implementation.cache_tag + "\n")
