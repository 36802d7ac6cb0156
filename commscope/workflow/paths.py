"""Where the commands find what they read (studies, sites, Ramble applications, versions.yaml: the
package's share/) and where they write (builds, workspaces and the local site under $COMMSCOPE_HOME)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from commscope.store import db

# What the commands read at run time: studies, Ramble applications, modifier and sites, workload sources, stack
# and interconnect catalogs, the Spack package. In a checkout share/ links to the repository's folders; a wheel
# carries copies (pyproject.toml), so `commscope setup` and `run` work from any directory.
ROOT = Path(__file__).resolve().parents[1] / "share"
# The git checkout this package runs from, if any: its commit is the runs' git_commit.
_ABOVE_PACKAGE = Path(__file__).resolve().parents[2]
CHECKOUT = _ABOVE_PACKAGE if (_ABOVE_PACKAGE / ".git").exists() else None
# Resolved: the paths written into workspaces and Spack environments are the repository's own in a checkout.
RAMBLE_DIR = (ROOT / "ramble").resolve()
STUDIES_DIR = RAMBLE_DIR / "studies"
SITES_DIR = RAMBLE_DIR / "sites"
VERSIONS = (ROOT / "versions.yaml").resolve()


def studies() -> list[str]:
    return sorted(p.parent.name for p in STUDIES_DIR.glob("*/ramble.yaml"))


def study_dir(study: str) -> Path:
    """The folder of STUDY: one of the package's studies by name, or any folder holding a ramble.yaml (a path,
    told apart by a '/' or by being a folder here)."""
    from commscope.workflow.errors import UnknownChoice, choose
    if "/" in study or Path(study).is_dir():
        d = Path(study).resolve()
        if not (d / "ramble.yaml").is_file():
            raise UnknownChoice(f"{study}: no ramble.yaml there; a study folder holds ramble.yaml (and optionally "
                                f"commscope.yaml), or name one of: {', '.join(studies())}")
        return d
    choose("study", [study], studies())
    return STUDIES_DIR / study


def sites() -> list[str]:
    return sorted(p.parent.name for p in SITES_DIR.glob("*/site.yaml"))


def local_site_dir() -> Path:
    """The generated part of the `local` site (absolute paths, detected hardware). Its folder
    name differs from the committed sites/local: Ramble names a directory scope by its basename."""
    return db.home() / "sites" / "local-generated"


def builds_dir() -> Path:
    return db.home() / "builds"


def workspaces_dir() -> Path:
    return db.home() / "workspaces"


def versions() -> dict:
    return yaml.safe_load(VERSIONS.read_text())


def git_commit() -> str:
    """The commit of the checkout commscope runs from ("-dirty" with uncommitted changes); "unknown" when
    installed from a wheel (not the commit of whatever repository a venv happens to sit in)."""
    if CHECKOUT is None:
        return "unknown"
    p = subprocess.run(["git", "-C", str(CHECKOUT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if p.returncode:
        return "unknown"
    dirty = subprocess.run(["git", "-C", str(CHECKOUT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return p.stdout.strip() + ("-dirty" if dirty else "")
