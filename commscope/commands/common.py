"""What every command shares: its one-line errors, the exit codes (commscope/README.md) and the lines for a role
that lacks a privilege."""
from __future__ import annotations

import sys

import click
import psycopg

from commscope.gate.outputs import printable
from commscope.store import db

EXIT_BAD_INPUT = 2      # bad input or arguments: nothing was stored
EXIT_SKIPPED_BAD = 3    # --skip-bad skipped inputs: the good ones were stored
EXIT_NOT_STORED = 4     # check, changepoints, advise: printed, but the role may not store it (a read-only role)


def fail(msg: str, code: int = 1):
    click.echo(f"commscope: error: {printable(msg)}", err=True)
    sys.exit(code)


def role() -> str:
    try:
        return psycopg.conninfo.conninfo_to_dict(db.url()).get("user") or "in use"
    except (db.DBError, psycopg.Error):
        return "in use"


def permission_denied(e: psycopg.errors.InsufficientPrivilege, command: str, done: str = "") -> str:
    """One line for a role that lacks a privilege: which role, what it may not do, what was done anyway (DONE),
    and which role can run COMMAND."""
    return (f"role {role()} may not do this ({e.diag.message_primary or e}){done}; run `commscope {command}` as the "
            f"commscope role or one made by `commscope db grant-writer` (a read-only role reads the views only)")


def not_stored(command: str, what: list[str], e: psycopg.errors.InsufficientPrivilege, done: str, how: str,
               code: int = EXIT_NOT_STORED) -> None:
    """One line, after what was printed, for a role that may not store WHAT; exits CODE."""
    click.echo(f"commscope {command}: role {role()} may not store {', '.join(what)} "
               f"({printable(e.diag.message_primary or str(e))}): {done}; {how}", err=True)
    sys.exit(code)
