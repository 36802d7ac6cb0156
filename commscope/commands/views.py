"""`commscope dashboards` (the Grafana dashboards: build, lint, deploy) and `commscope report` (the static HTML
report), over commscope/views/grafana.py and commscope/views/report.py."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import click

from commscope.store import db
from commscope.views import grafana, report


class Refused(click.ClickException):
    """A request the store or Grafana cannot serve as asked: one line, exit 2."""
    exit_code = 2


def refused_in_one_line(command):
    """COMMAND with views.grafana's refusals as click's one-line errors: exit 2 for a bad --url, else 1."""
    @functools.wraps(command)
    def wrapped(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except grafana.BadURL as e:
            raise click.BadParameter(str(e), param_hint="--url") from None
        except grafana.DashboardError as e:
            raise click.ClickException(str(e)) from None
    return wrapped


@click.group("dashboards")
def dashboards_group():
    """Grafana dashboards: generate the JSON, check it, upload it."""


@dashboards_group.command("build")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("dashboards/json"),
              show_default=True, help="where the dashboard JSON goes")
@refused_in_one_line
def build_cmd(out):
    """Generate the dashboard JSON from the panel catalog."""
    grafana.sdk()
    for f in grafana.write_all(out):
        click.echo(f)


@dashboards_group.command("lint")
@click.option("--dir", "json_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=Path("dashboards/json"), show_default=True)
@click.option("--provisioning", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=Path("dashboards/provisioning"), show_default=True)
@refused_in_one_line
def lint_cmd(json_dir, provisioning):
    """Unique uids, every datasource the provisioned one (or another panel's results), panel types matching query
    formats."""
    problems = grafana.lint(grafana.read_dir(json_dir), grafana.provisioned_uid(provisioning))
    for p in problems:
        click.echo(p, err=True)
    if problems:
        sys.exit(1)
    click.echo(f"{json_dir}: ok")


@dashboards_group.command("deploy")
@click.option("--url", envvar="GRAFANA_URL", required=True, help="Grafana's base URL (or GRAFANA_URL)")
@click.option("--dir", "json_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=Path("dashboards/json"), show_default=True)
@click.option("--folder-uid", help="Grafana folder to put the dashboards in")
@refused_in_one_line
def deploy_cmd(url, json_dir, folder_uid):
    """Upload the dashboards through Grafana's HTTP API, for sites without file provisioning.
    Credentials come from the environment only: GRAFANA_TOKEN, or GRAFANA_USER and GRAFANA_PASSWORD."""
    done = grafana.deploy(grafana.read_dir(json_dir), url, os.environ.get("GRAFANA_TOKEN"),
                          os.environ.get("GRAFANA_USER"), os.environ.get("GRAFANA_PASSWORD"), folder_uid)
    for uid in done:
        click.echo(f"deployed {uid}")


@click.command("report")
@click.option("--campaign", "campaigns", type=int, multiple=True,
              help="only this campaign's series and time span (repeatable)")
@click.option("--compare", "compare", multiple=True, metavar="SYSTEM",
              help="compare these systems (repeat, or give several); the first is the reference")
@click.argument("more_systems", nargs=-1, metavar="[SYSTEM]...")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="the HTML file to write (a regular file, new or existing)")
def report_cmd(campaigns, compare, more_systems, output):
    """Render the dashboards' panels into one self-contained HTML page."""
    if more_systems and not compare:
        raise click.UsageError(f"unexpected arguments {' '.join(more_systems)} (systems follow --compare)")
    try:
        size = report.write(output, tuple(campaigns), tuple(compare) + tuple(more_systems))
    except db.DBError as e:
        raise click.ClickException(str(e)) from None
    except report.ReportError as e:
        raise Refused(str(e)) from None
    click.echo(f"wrote {output} ({size // 1024} KiB)")
