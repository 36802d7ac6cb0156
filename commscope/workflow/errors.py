"""The errors `commscope setup` and `run` report to the user, each carrying its exit code."""
from __future__ import annotations





class WorkflowError(RuntimeError):
    """A problem with a message meant for the user; the command exits with exit_code."""
    exit_code = 1


class Unprofiled(WorkflowError):
    """Experiments that asked for a Caliper profile and wrote none (`commscope run` without --allow-unprofiled)."""
    exit_code = 3


class UnknownChoice(WorkflowError):
    """A study, site, stack, interconnect or mode the user named that does not exist: a usage error."""
    exit_code = 2



def choose(kind: str, asked: list[str], valid: list[str]) -> list[str]:
    """The names asked for, when every one is valid; else UnknownChoice naming the bad ones and the valid ones."""
    bad = [a for a in asked if a not in valid]
    if bad:
        raise UnknownChoice(f"unknown {kind} {', '.join(map(repr, bad))}; valid: {', '.join(valid) or '(none)'}")
    return asked
