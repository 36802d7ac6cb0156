"""The Ramble and Spack checkouts (RAMBLE_ROOT, SPACK_ROOT, or clones of versions.yaml's commits), the Python
packages they need, and the environment Ramble runs in."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


from commscope.store import db
from commscope.workflow.errors import WorkflowError
from commscope.workflow.paths import ROOT, versions


def checkout(tool: str, env_var: str) -> Path | None:
    """$ENV_VAR if set, else the clone setup made under $COMMSCOPE_HOME/cache; None unless
    it holds bin/<tool>."""
    if env_var in os.environ:
        root = Path(os.environ[env_var]).resolve() if os.environ[env_var] else None
    else:
        root = db.home() / "cache" / tool
    return root if root and (root / "bin" / tool).exists() else None


def ramble_root() -> Path | None:
    return checkout("ramble", "RAMBLE_ROOT")


def spack_root() -> Path | None:
    return checkout("spack", "SPACK_ROOT")


def missing_message(tool: str, env_var: str) -> str:
    v = versions()[tool]
    ref = v.get("tag") or v.get("branch")
    return (f"{tool} is missing: set {env_var} to a checkout of {v['url']} at {ref} "
            f"(commit {v['commit']}, see versions.yaml). An offline site copies that checkout in "
            f"and points {env_var} at it; on a connected machine `commscope setup` clones it into "
            f"{db.home() / 'cache' / tool}.")


def ramble_cmd() -> list[str]:
    root = ramble_root()
    if root is None:
        raise WorkflowError(missing_message("ramble", "RAMBLE_ROOT"))
    # This venv's Python: it has tqdm and deprecation (setup installs them).
    return [sys.executable, str(root / "bin" / "ramble")]


def clone(tool: str, dest: Path) -> bool:
    """Clones the pinned version; False when the machine cannot reach it."""
    v = versions()[tool]
    ref = v.get("tag") or v.get("branch")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        p = subprocess.run(["git", "clone", "--quiet", "--branch", ref, v["url"], str(dest)],
                           capture_output=True, text=True, timeout=1800, env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
    except subprocess.TimeoutExpired:
        p = subprocess.CompletedProcess([], 1)
    if p.returncode:
        shutil.rmtree(dest, ignore_errors=True)
        return False
    subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", v["commit"]], check=True)
    return True


def installed_pins(pkgs: list[str]) -> bool:
    """Whether every NAME==VERSION of PKGS is installed at that version in this Python (importlib.metadata)."""
    from importlib import metadata
    for pin in pkgs:
        name, _, version = pin.partition("==")
        try:
            if not version or metadata.version(name) != version:
                return False
        except metadata.PackageNotFoundError:
            return False
    return True


def pip_install(pkgs: list[str], log=print) -> None:
    """pip-installs the pinned PKGS into this Python, saying so, unless each is installed at its pin already."""
    if installed_pins(pkgs):
        return
    log(f"[setup] pip install {' '.join(pkgs)} into {sys.prefix}")
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *pkgs],
                       capture_output=True, text=True)
    if p.returncode:
        raise WorkflowError(f"pip install {' '.join(pkgs)} into {sys.prefix} failed:\n{p.stderr[-2000:]}")


# What Ramble (and Spack) need in the Python that runs them, pinned.
RAMBLE_PIP = ["tqdm==4.67.1", "deprecation==2.1.0"]
SPACK_PIP = ["clingo==5.8.3"]  # the version Spack v1.1.0 was run with here



def ramble_env() -> dict:
    """Ramble's environment: the repository root for the studies, COMMSCOPE_HOME for the local
    site's Spack scope (include.yaml names it), and Spack's bin on PATH for its package manager."""
    env = dict(os.environ, COMMSCOPE_ROOT=str(ROOT), COMMSCOPE_HOME=str(db.home()))
    root = spack_root()
    if root is not None:
        env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env
