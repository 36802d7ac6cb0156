"""Setup pip-installs Ramble's and Spack's Python packages only where a pin is not installed at its version: what
installed_pins says of each pin agrees with `pip freeze` of this Python (pip's own reading of the environment)."""
from __future__ import annotations

import subprocess
import sys

from commscope.workflow.checkouts import RAMBLE_PIP, SPACK_PIP, installed_pins


def test_installed_pins_agrees_with_pip_freeze():
    frozen = {line.strip().lower() for line in subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True).stdout.splitlines()}
    for pin in [*RAMBLE_PIP, *SPACK_PIP, "tqdm==0.0.1", "no-such-package-here==1.0"]:
        assert installed_pins([pin]) == (pin.lower() in frozen), pin
    assert installed_pins([]) is True
