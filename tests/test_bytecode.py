"""Python processes start from compiled modules: the installed packages (ci/install.sh) and the Ramble that setup
extracts from the source mirror (commscope.workflow.sources) are byte-compiled once, so a process that starts later
with PYTHONDONTWRITEBYTECODE set compiles none of them again. Which modules came from source and which from bytecode
is read from the interpreter's own import trace (`python -v`), not from commscope."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

MIRROR = os.environ.get("COMMSCOPE_SOURCE_MIRROR", "")


def compiled_from_source(argv: list[str], under: Path, cwd: Path | None = None) -> tuple[list[str], int]:
    """(modules under UNDER the process compiled from their source, how many it loaded from bytecode), as
    `python -v` traces them, with PYTHONDONTWRITEBYTECODE=1."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run([sys.executable, "-v", *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    source = re.findall(r"^# code object from (/\S+\.py)$", p.stderr, re.M)
    cached = re.findall(r"^# code object from '(/\S+\.pyc)'$", p.stderr, re.M)
    root = str(under.resolve())
    return ([s for s in source if s.startswith(root)], sum(c.startswith(root) for c in cached))


def test_the_installed_packages_load_from_bytecode():
    """numpy, scipy, pandas, psycopg and the rest that `commscope check` imports come from bytecode."""
    from_source, cached = compiled_from_source(
        ["-c", "import numpy, scipy.stats, pandas, psycopg, click, yaml, commscope.cli, commscope.gate.stats"],
        Path(sys.prefix))
    assert not from_source, f"{len(from_source)} modules compiled at import, e.g. {from_source[:5]}"
    assert cached > 200, cached


@pytest.mark.skipif(not MIRROR or not Path(MIRROR).is_dir(),
                    reason="needs COMMSCOPE_SOURCE_MIRROR, a folder with versions.yaml's source archives (Ramble's "
                           "among them: it is in no package registry)")
def test_ramble_extracted_from_the_mirror_runs_from_bytecode(tmp_path):
    """Ramble as setup puts it in place (extracted from the mirror) lists workspaces without compiling a module
    of its own tree."""
    from commscope.workflow import sources
    tree = sources.source("ramble", Path(MIRROR), tmp_path / "ramble")
    home = tmp_path / "ramble-home"
    home.mkdir()
    from_source, cached = compiled_from_source([str(tree / "bin" / "ramble"), "workspace", "list"], tree, cwd=home)
    assert not from_source, f"{len(from_source)} of Ramble's modules compiled at start, e.g. {from_source[:5]}"
    assert cached > 100, cached
