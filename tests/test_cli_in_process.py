"""cli_in_process (tests/helpers.py) runs a command in the test's process yet fails as a process of its own would:
an unhandled exception is a traceback on stderr and exit 1, sys.exit's code is the exit code, a hang past the
timeout is a failure, and the environment given replaces os.environ for the call only."""
from __future__ import annotations

import os
import sys
import time

import click
import pytest
from helpers import assert_one_clear_line, cli_in_process


@click.command()
@click.argument("what")
def probe(what):
    if what == "raise":
        raise ValueError("an unhandled defect")
    if what == "exit":
        click.echo("commscope: error: refused", err=True)
        sys.exit(3)
    if what == "hang":
        time.sleep(30)
    if what == "env":
        click.echo(f"{os.environ.get('CLI_PROBE_SET')} {os.environ.get('CLI_PROBE_GONE')}")
    if what == "stdin":
        click.echo(click.get_text_stream("stdin").read().upper())


def test_an_unhandled_exception_is_a_traceback_and_exit_1():
    r = cli_in_process(["raise"], dict(os.environ), command=probe)
    assert r.returncode == 1 and "Traceback" in r.stderr and "ValueError: an unhandled defect" in r.stderr
    with pytest.raises(AssertionError):
        assert_one_clear_line(r)


def test_the_exit_code_and_stderr_are_the_command_s():
    r = cli_in_process(["exit"], dict(os.environ), command=probe)
    assert assert_one_clear_line(r, "refused", code=3)


def test_a_hang_fails_at_the_timeout():
    t0 = time.monotonic()
    r = cli_in_process(["hang"], dict(os.environ), timeout=0.5, command=probe)
    assert r.returncode == 1 and "still running after 0.5 s" in r.stderr
    assert time.monotonic() - t0 < 10


def test_the_environment_given_replaces_os_environ_for_the_call(monkeypatch):
    monkeypatch.setenv("CLI_PROBE_GONE", "here")
    env = {k: v for k, v in os.environ.items() if k != "CLI_PROBE_GONE"} | {"CLI_PROBE_SET": "set"}
    assert cli_in_process(["env"], env, command=probe).stdout == "set None\n"
    assert os.environ["CLI_PROBE_GONE"] == "here" and "CLI_PROBE_SET" not in os.environ
    assert cli_in_process(["stdin"], env, stdin="text", command=probe).stdout == "TEXT\n"
