"""The commscope command: the command groups of commscope/commands/, joined."""
from __future__ import annotations

import sys

import click

from commscope.commands.advise import advise_group
from commscope.commands.db import db_group
from commscope.commands.gate import accept_cmd, changepoints_cmd, check_cmd
from commscope.commands.ingest import ingest_cmd
from commscope.commands.views import dashboards_group, report_cmd
from commscope.commands.workflow import run_cmd, setup_cmd


class OneLineUsageErrors(click.Group):
    """A click group whose usage errors (a bad option value, a missing argument, an unknown command or option) are
    one line on stderr, naming the command, what is wrong and where to read its options, with click's exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx else (prog_name or "commscope")
            message = " ".join(e.format_message().split())
            click.echo(f"{where}: {message.rstrip('.')}; see '{where} --help'", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=OneLineUsageErrors)
@click.version_option(package_name="commscope")
def main():
    """Where MPI applications lose time to communication."""


for command in (db_group, ingest_cmd, setup_cmd, run_cmd, dashboards_group, report_cmd, accept_cmd, check_cmd,
                changepoints_cmd, advise_group):
    main.add_command(command)


if __name__ == "__main__":
    main()
