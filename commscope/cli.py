"""The commscope command: the command groups of commscope/commands/, joined."""
from __future__ import annotations

import click

from commscope.commands.advise import advise_group
from commscope.commands.db import db_group
from commscope.commands.gate import accept_cmd, changepoints_cmd, check_cmd
from commscope.commands.ingest import ingest_cmd
from commscope.commands.views import dashboards_group, report_cmd
from commscope.commands.workflow import run_cmd, setup_cmd


@click.group()
@click.version_option(package_name="commscope")
def main():
    """Where MPI applications lose time to communication."""


for command in (db_group, ingest_cmd, setup_cmd, run_cmd, dashboards_group, report_cmd, accept_cmd, check_cmd,
                changepoints_cmd, advise_group):
    main.add_command(command)


if __name__ == "__main__":
    main()
