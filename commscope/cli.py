"""The commscope command: the command groups of commscope/commands/, joined."""
from __future__ import annotations

import importlib
import sys

import click

# Each command and the commscope.commands module and object that define it, imported when the command is asked for:
# a process runs one command, and importing every command's modules (the readers' numpy, the workflow's, the
# advisors') cost each call about 0.3 s more than its own.
COMMANDS = {"db": ("db", "db_group"), "ingest": ("ingest", "ingest_cmd"), "setup": ("workflow", "setup_cmd"),
            "run": ("workflow", "run_cmd"), "dashboards": ("views", "dashboards_group"),
            "report": ("views", "report_cmd"), "accept": ("gate", "accept_cmd"), "check": ("gate", "check_cmd"),
            "changepoints": ("gate", "changepoints_cmd"), "advise": ("advise", "advise_group")}


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

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx, name):
        if name not in self.commands and name in COMMANDS:
            module, attr = COMMANDS[name]
            command = getattr(importlib.import_module(f"commscope.commands.{module}"), attr)
            assert command.name == name, (name, command.name)
            self.add_command(command)
        return super().get_command(ctx, name)


@click.group(cls=OneLineUsageErrors)
@click.version_option(package_name="commscope")
def main():
    """Where MPI applications lose time to communication."""


if __name__ == "__main__":
    main()
