"""`commscope db`: the embedded server, migrations, dumps, roles and retention."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import psycopg

from commscope.commands.common import fail
from commscope.store import db, files


@click.group("db")
def db_group():
    """The store: the embedded server, migrations and roles."""


@db_group.command("start")
@click.option("--listen", metavar="ADDRESS",
              help="also listen on this TCP address (scram-sha-256 passwords only; default: the socket only)")
@click.option("--port", type=click.IntRange(1, 65535), default=5432, show_default=True, help="TCP port with --listen")
def db_start(listen, port):
    """Start the embedded PostgreSQL under COMMSCOPE_HOME and migrate it.

    Only the user who starts it can connect (a 0700 socket, peer authentication);
    commscope works as the role `commscope`, which owns the schema and is no superuser."""
    try:
        emb = db.Embedded()
        url = emb.start(listen=listen, port=port)
        with db.connect(url) as conn:
            applied = db.migrate(conn)
    except db.DBError as e:
        fail(str(e))
    migrated = [a for a in applied if a != db.VIEWS_FILE]
    if migrated and len(migrated) == len(db.migrations()):
        # a new store: one line, not one per migration (an existing store's upgrade lists what it applied)
        click.echo(f"new store: {len(migrated)} migrations and the views applied, up to {migrated[-1]}")
    else:
        for name in applied:
            click.echo(f"applied {name}")
    click.echo(url)


@db_group.command("stop")
def db_stop():
    """Stop the embedded server."""
    try:
        stopped = db.Embedded().stop()
    except db.DBError as e:
        fail(str(e))
    click.echo("stopped" if stopped else "not running")


@db_group.command("status")
def db_status():
    """Say whether the embedded server runs, and the schema version of the store in use."""
    emb = db.Embedded()
    click.echo(f"embedded server: {'running' if emb.running() else 'stopped'} ({emb.root})")
    try:
        with db.connect() as conn:
            v, before, older = db.schema_status(conn)
            click.echo(f"schema version: {v}")
            if before:
                click.echo(f"{before} runs were stored before the measurement model (docs/measurement-model.md) "
                           f"and have no windows or series: ingest their files again (v_runs_needing_reingest "
                           f"lists them)")
            if older:
                click.echo(f"{older} runs were measured under an older version of the measurement model "
                           f"(docs/measurement-model.md, Model versions): their legacy run columns, rank_metrics "
                           f"and MPI routines follow older definitions; ingest their files again "
                           f"(v_runs_needing_reingest lists them with the reason)")
    except Exception as e:  # status reports, it does not fail
        click.echo(f"store: not reachable ({db.masked(str(e).splitlines()[0])})")


@db_group.command("url")
def db_url():
    """Print the libpq URI of the store (last line)."""
    try:
        click.echo(db.masked(db.url()) or "(from PG* environment variables)")
    except db.DBError as e:
        fail(str(e))


@db_group.command("migrate")
def db_migrate():
    """Apply pending schema migrations to the store in use."""
    try:
        with db.connect() as conn:
            applied = db.migrate(conn)
    except db.DBError as e:
        fail(str(e))
    click.echo("\n".join(f"applied {a}" for a in applied) or "up to date")


@db_group.command("dump")
@click.argument("file", type=click.Path(path_type=Path))
def db_dump(file):
    """Write the whole store to FILE (pg_dump's custom format, no owners or grants)."""
    try:
        files.dump(db.url(), file)
    except db.DBError as e:
        fail(str(e))
    click.echo(f"dumped to {file}")


@db_group.command("restore")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def db_restore(file):
    """Restore FILE (from `db dump`) into the store in use, which must hold no runs, then migrate it.
    Moves an embedded store to a site server: dump there, set COMMSCOPE_DB_URL, restore."""
    try:
        applied = files.restore(db.url(), file)
    except db.DBError as e:
        fail(str(e))
    for name in applied:
        click.echo(f"applied {name}")
    click.echo(f"restored {file}")


def _grant(grant, role: str, password_stdin: bool, what: str) -> None:
    """Creates ROLE and grants it: on the embedded store the superuser creates
    the role and the owner may then connect as it over the socket; on a site
    server the connection in use must be allowed to create roles."""
    password = sys.stdin.readline().rstrip("\n") if password_stdin else None
    try:
        if db.external_dsn() is None:
            emb = db.Embedded()
            with db.connect() as conn, emb.admin() as admin:
                grant(conn, role, admin=admin, password=password)
            emb.allow_local(role)
        else:
            with db.connect() as conn:
                grant(conn, role, password=password)
    except (db.DBError, psycopg.errors.InsufficientPrivilege) as e:
        fail(f"cannot grant {role}: {db.masked(str(e))}")
    click.echo(f"role {role} {what}")


@db_group.command("grant-readonly")
@click.argument("role")
@click.option("--password-stdin", is_flag=True, help="read the role's password (for TCP logins) from standard input")
def db_grant_readonly(role, password_stdin):
    """Create ROLE (login) that may read the views only (for Grafana)."""
    _grant(db.grant_readonly, role, password_stdin, "may read the views")


@db_group.command("grant-writer")
@click.argument("role")
@click.option("--password-stdin", is_flag=True, help="read the role's password (for TCP logins) from standard input")
def db_grant_writer(role, password_stdin):
    """Create ROLE (login) that may ingest but not change the schema (for a site server's ingest jobs)."""
    _grant(db.grant_writer, role, password_stdin, "may ingest, not change the schema")


@db_group.command("retain")
@click.option("--per-rank-older-than", "age", required=True, metavar="AGE",
              help="drop the per-rank rows (rank_metrics, comm_matrix) of every month that ended longer ago than "
                   "AGE: months or years, e.g. 6mo, 2y")
@click.option("--dry-run", is_flag=True, help="list what would be dropped; change nothing")
def db_retain(age, dry_run):
    """Drop per-rank detail older than AGE, a month at a time; keep runs, windows, distributions over ranks,
    call-tree and MPI routine rows, FOMs and the daily rollups. Also makes the coming months' partitions:
    run it from cron, e.g. nightly after the ingest."""
    from commscope.store import retention
    try:
        months = retention.parse_age(age)
    except ValueError as e:
        fail(str(e), 2)
    try:
        with db.connect() as conn:
            parts = retention.retain(conn, months, dry_run=dry_run)
    except (db.DBError, psycopg.Error) as e:
        fail(f"db retain: {db.masked(str(e))}")
    verb = "would drop" if dry_run else "dropped"
    for p in parts:
        click.echo(f"{verb} {p.partition}: {p.month:%Y-%m}, {p.rows} rows of {p.runs} runs, "
                   f"{p.bytes / 2**20:.1f} MiB")
    click.echo(f"{verb} {len(parts)} partitions, {sum(p.rows for p in parts)} rows, "
               f"{sum(p.bytes for p in parts) / 2**20:.1f} MiB: per-rank rows of months older than {age}"
               if parts else f"no per-rank rows older than {age}")
