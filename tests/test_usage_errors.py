"""A usage error of the command line (a bad option value, a missing argument, an unknown command or option) is one
line on stderr naming the command, the input and where to read the options, exit 2; nothing on stdout. Run as a
user runs it, in a process of its own."""
from __future__ import annotations

import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "commscope.cli"]


@pytest.mark.parametrize("args, named", [
    (["check", "--alpha", "2"], "'--alpha': 2.0"),
    (["check", "--bogus"], "--bogus"),
    (["ingest"], "PATHS"),
    (["nosuch"], "nosuch"),
    (["check", "--false-alarms", "0"], "'--false-alarms'"),
])
def test_a_usage_error_is_one_line_naming_the_input(args, named):
    r = subprocess.run([*CLI, *args], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert named in lines[0] and "--help'" in lines[0] and "Traceback" not in r.stderr
    assert lines[0].startswith(" ".join(["python -m commscope.cli", *args[:1]]) if args[0] != "nosuch"
                               else "python -m commscope.cli:")


def test_help_and_version_still_exit_0():
    for args in (["--version"], ["check", "--help"]):
        r = subprocess.run([*CLI, *args], capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout and r.stderr == "", r
