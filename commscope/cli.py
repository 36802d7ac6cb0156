"""The commscope command."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import psycopg

from commscope.store import db


def printable(text) -> str:
    """TEXT with control characters (newlines, escape codes, bidirectional overrides) written as escapes, so a
    name from a file or the command line cannot forge or colour lines of output."""
    return "".join(c if c.isprintable() or c == " " else
                   {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c) or
                   (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else
                    f"\\U{ord(c):08x}") for c in str(text))


def _fail(msg: str, code: int = 1):
    click.echo(f"commscope: error: {printable(msg)}", err=True)
    sys.exit(code)


def _denied(e: psycopg.errors.InsufficientPrivilege, command: str, done: str = "") -> str:
    """One line for a role that lacks a privilege: which role, what it may not do, what was done anyway (DONE),
    and which role can run COMMAND."""
    return (f"role {_role()} may not do this ({e.diag.message_primary or e}){done}; run `commscope {command}` as the "
            f"commscope role or one made by `commscope db grant-writer` (a read-only role reads the views only)")


# `commscope ingest`'s exit codes (commscope/README.md)
EXIT_BAD_INPUT = 2      # bad input or arguments: nothing was stored
EXIT_SKIPPED_BAD = 3    # --skip-bad skipped inputs: the good ones were stored
EXIT_NOT_STORED = 4     # check, changepoints, advise: printed, but the role may not store it (a read-only role)


def _role() -> str:
    try:
        return psycopg.conninfo.conninfo_to_dict(db.url()).get("user") or "in use"
    except (db.DBError, psycopg.Error):
        return "in use"


def _not_stored(command: str, what: list[str], e: psycopg.errors.InsufficientPrivilege, done: str, how: str,
                code: int = EXIT_NOT_STORED) -> None:
    """One line, after what was printed, for a role that may not store WHAT; exits CODE."""
    click.echo(f"commscope {command}: role {_role()} may not store {', '.join(what)} "
               f"({printable(e.diag.message_primary or str(e))}): {done}; {how}", err=True)
    sys.exit(code)
APP_LIMIT, PARAM_KEY_LIMIT, PARAM_VALUE_LIMIT = 200, 200, 4096   # characters


@click.group()
@click.version_option(package_name="commscope")
def main():
    """Where MPI applications lose time to communication."""


# ---- db -----------------------------------------------------------------------

@main.group("db")
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
        _fail(str(e))
    for name in applied:
        click.echo(f"applied {name}")
    click.echo(url)


@db_group.command("stop")
def db_stop():
    """Stop the embedded server."""
    try:
        stopped = db.Embedded().stop()
    except db.DBError as e:
        _fail(str(e))
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
        _fail(str(e))


@db_group.command("migrate")
def db_migrate():
    """Apply pending schema migrations to the store in use."""
    try:
        with db.connect() as conn:
            applied = db.migrate(conn)
    except db.DBError as e:
        _fail(str(e))
    click.echo("\n".join(f"applied {a}" for a in applied) or "up to date")


@db_group.command("dump")
@click.argument("file", type=click.Path(path_type=Path))
def db_dump(file):
    """Write the whole store to FILE (pg_dump's custom format, no owners or grants)."""
    try:
        db.dump(db.url(), file)
    except db.DBError as e:
        _fail(str(e))
    click.echo(f"dumped to {file}")


@db_group.command("restore")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def db_restore(file):
    """Restore FILE (from `db dump`) into the store in use, which must hold no runs, then migrate it.
    Moves an embedded store to a site server: dump there, set COMMSCOPE_DB_URL, restore."""
    try:
        applied = db.restore(db.url(), file)
    except db.DBError as e:
        _fail(str(e))
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
        _fail(f"cannot grant {role}: {db.masked(str(e))}")
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
        _fail(str(e), 2)
    try:
        with db.connect() as conn:
            parts = retention.retain(conn, months, dry_run=dry_run)
    except (db.DBError, psycopg.Error) as e:
        _fail(f"db retain: {db.masked(str(e))}")
    verb = "would drop" if dry_run else "dropped"
    for p in parts:
        click.echo(f"{verb} {p.partition}: {p.month:%Y-%m}, {p.rows} rows of {p.runs} runs, "
                   f"{p.bytes / 2**20:.1f} MiB")
    click.echo(f"{verb} {len(parts)} partitions, {sum(p.rows for p in parts)} rows, "
               f"{sum(p.bytes for p in parts) / 2**20:.1f} MiB: per-rank rows of months older than {age}"
               if parts else f"no per-rank rows older than {age}")


# ---- ingest ---------------------------------------------------------------------

@main.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--system", help="system name (default: Adiak's cluster)")
@click.option("--stack", help="MPI stack name, e.g. debian-openmpi4 (default: the MPI library's family, e.g. "
                                "Open MPI)")
@click.option("--interconnect", help="interconnect configuration the runs used")
@click.option("--git-commit", help="project commit the runs were built from")
@click.option("--ci-pipeline", help="CI pipeline id")
@click.option("--compiler", help="compiler and version the application was built with (a version of the run: "
                                 "the series goes on across it)")
@click.option("--spack-hash", help="Spack spec hash of the application's build (a version of the run)")
@click.option("--hardware", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="the system's hardware description (a site's hardware.yaml)")
@click.option("--skip-bad", is_flag=True, help="continue past bad files and list them at the end")
@click.option("--allow-partial", is_flag=True,
              help="store a run with ranks missing as status 'partial' (kept out of series statistics) "
                   "instead of refusing it")
@click.option("--focus", metavar="REGION",
              help="the Caliper region the study is about: the focus window (default: the workloads' timed loop)")
@click.option("--app", metavar="NAME",
              help="the application's name (default: Adiak's workload, Ramble's application, the executable's name)")
@click.option("--ranks", type=click.IntRange(1, 2**31 - 1), metavar="N",
              help="the job's rank count (default: Adiak's jobsize, mpi.world.size, the largest rank + 1)")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
              help="an experiment parameter of every run ingested (repeatable)")
@click.option("--param-keys", metavar="KEY,...",
              help="the metadata keys (Adiak values, Caliper globals) that define the application's experiment, "
                   "e.g. its problem size (default: its command line's arguments)")
@click.option("--per-rank", "per_rank", metavar="KEY,...",
              help="the parameters held per rank, e.g. LULESH's s: runs at other rank counts with these equal are "
                   "weak scaling (v_scaling, the Scaling dashboard)")
@click.option("--global", "global_params", metavar="KEY,...",
              help="the parameters of the whole job's problem: runs at other rank counts with these equal are "
                   "strong scaling (undeclared: the scaling kind is unknown)")
@click.option("--rank-rows", default="1024", show_default=True, metavar="N|all",
              help="keep one row per rank for runs of up to N ranks ('all': every run); larger runs keep the "
                   "distributions over ranks only (v_rank_spread)")
@click.option("--started-at", metavar="TIME",
              help="ISO 8601 time with a UTC offset (2026-11-25T02:17:00Z): the start of every run whose files "
                   "carry no time (a workload's output without a profile); default: the file's modification time")
@click.option("--relabel", is_flag=True,
              help="a file stored before with other --app/--param labels is stored again with the new ones "
                   "(default: refused, naming the labels that differ)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: one object with the campaign id, the counts and the skipped inputs")
@click.option("--quiet", "-q", is_flag=True, help="no progress bar; only the campaign id (and errors)")
def ingest_cmd(paths, system, stack, interconnect, git_commit, ci_pipeline, compiler, spack_hash, hardware, skip_bad,
               allow_partial, focus, app, ranks, params, param_keys, per_rank, global_params, rank_rows, relabel, started_at, fmt, quiet):
    """Store Caliper profiles of any application (files, directories), or one Ramble workspace, from PATHS
    as one campaign. The last line printed is the campaign's id alone (for `commscope check --campaign`): the
    new campaign, or, when every run was stored before, the campaign that holds them."""
    import datetime as dt
    import json
    from tqdm import tqdm

    from commscope.store.ingest import Provenance
    from commscope.read.profiles import BadProfile
    from commscope.workflow.ingest import ingest_and_report
    from commscope.read.ramble import read_hardware
    from commscope.read.records import PARAMETERS_BYTES, ReadOptions

    if app is not None and not 1 <= len(app.strip()) <= APP_LIMIT:
        _fail(f"--app {'is empty' if not app.strip() else f'has {len(app)} characters'}: give a name of 1 to "
              f"{APP_LIMIT} characters", EXIT_BAD_INPUT)
    pairs = []
    for p in params:
        key, eq, value = p.partition("=")
        if not eq or not key.strip():
            _fail(f"--param {p!r}: expected KEY=VALUE, e.g. --param problem_size=64", 2)
        if len(key.strip()) > PARAM_KEY_LIMIT or not value.strip() or len(value) > PARAM_VALUE_LIMIT:
            _fail(f"--param {key.strip()[:40]!r}: {'its value is empty' if not value.strip() else 'too long'}; give "
                  f"a key of 1 to {PARAM_KEY_LIMIT} characters and a value of 1 to {PARAM_VALUE_LIMIT}", EXIT_BAD_INPUT)
        pairs.append((key.strip(), value))
    sizes = {k: len(json.dumps({k: v}, ensure_ascii=False).encode()) for k, v in pairs}
    if sum(sizes.values()) > PARAMETERS_BYTES:   # within the limits above, but not a parameter the store can hold
        key = max(sizes, key=sizes.get)
        _fail(f"--param {key[:40]!r}: {'its value takes' if len(pairs) == 1 else 'the --param values take'} "
              f"{sum(sizes.values()):,} bytes as JSON; the store holds at most {PARAMETERS_BYTES:,} bytes of a run's "
              f"parameters: shorten it", EXIT_BAD_INPUT)
    keys = tuple(k.strip() for k in (param_keys or "").split(",") if k.strip())
    if param_keys is not None and not keys:
        _fail("--param-keys is empty: name the metadata keys, e.g. --param-keys Problem,Size-x", 2)
    if rank_rows != "all" and not (rank_rows.isdigit()):
        _fail(f"--rank-rows {rank_rows!r}: expected a number of ranks or 'all'", 2)
    start = None
    if started_at is not None:
        try:
            start = dt.datetime.fromisoformat(started_at)
        except ValueError:
            _fail(f"--started-at {started_at!r}: not an ISO 8601 time; give e.g. 2026-11-25T02:17:00Z", 2)
        if start.tzinfo is None:
            _fail(f"--started-at {started_at!r} has no UTC offset; give one, e.g. {started_at}Z or "
                  f"{started_at}+01:00", 2)
    kinds = {flag: tuple(k.strip() for k in (v or "").split(",") if k.strip())
             for flag, v in (("--per-rank", per_rank), ("--global", global_params))}
    for flag, v in (("--per-rank", per_rank), ("--global", global_params)):
        if v is not None and not kinds[flag]:
            _fail(f"{flag} is empty: name the parameters, e.g. {flag} s", 2)
    read = ReadOptions(allow_partial, focus, app, ranks, tuple(pairs), keys,
                       None if rank_rows == "all" else int(rank_rows), kinds["--per-rank"], kinds["--global"])
    bar = None if quiet or not sys.stderr.isatty() else tqdm(desc="ingest", unit="run", file=sys.stderr)

    def warn(message: str) -> None:   # the change points' note, after the bar
        if bar:
            bar.close()
        click.echo(f"commscope ingest: {message}", err=True)
    try:
        prov = Provenance(system=system, stack=stack, interconnect=interconnect, git_commit=git_commit,
                          ci_pipeline=ci_pipeline, compiler=compiler, spack_hash=spack_hash,
                          hardware=read_hardware(hardware) if hardware else None,
                          started_at=start)
        res, _ = ingest_and_report(list(paths), prov, warn, skip_bad=skip_bad, progress=bar, read=read,
                                   relabel=relabel)
    except BadProfile as e:
        _fail(f"{e}; nothing was stored", 2)
    except db.DBError as e:
        _fail(str(e))
    except psycopg.Error as e:
        # the server went away (killed, stopped, disk full) mid-campaign: its transaction is gone with it
        detail = db.masked(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        why = db.Embedded().last_failure() if db.external_dsn() is None else None
        if why:
            detail += f" (the server's log: {why})"
        hint = (" Free space on the store's disk, then 'commscope db start' and ingest again."
                if "space left on device" in str(e) + (why or "")
                else " Check the server ('commscope db status'), then ingest again.")
        _fail(f"the store failed during ingest: {detail}. Nothing of this campaign was stored.{hint}")
    finally:
        if bar:
            bar.close()
    if fmt == "json":
        click.echo(json.dumps({"campaign_id": res.campaign_id, "stored": len(res.inserted),
                               "already_stored": len(res.skipped), "already_stored_in": res.already_in,
                               "bad": res.bad, "left_out": res.left_out, "warnings": res.warnings}))
    elif not quiet:
        click.echo(f"stored {len(res.inserted)} runs, {len(res.skipped)} already stored"
                   + (f" (in campaign {', '.join(map(str, res.already_in))})" if res.already_in else ""))
    for w in res.warnings:
        click.echo(f"commscope ingest: warning: {printable(w)}", err=True)
    if res.left_out:
        click.echo("left out Ramble workspaces (each is a campaign of its own; ingest them one by one):", err=True)
        for w in res.left_out:
            click.echo(f"  {printable(w)}", err=True)
    if res.bad:
        click.echo(f"skipped {len(res.bad)} bad inputs (exit {EXIT_SKIPPED_BAD}):", err=True)
        for b in res.bad:
            click.echo(f"  {printable(b)}", err=True)
    if fmt == "text":
        if res.campaign_id is None:
            click.echo("no campaign: " + ("nothing was stored" if not res.already_in else
                       f"the runs were stored before, in campaigns {', '.join(map(str, res.already_in))}"), err=True)
        else:
            click.echo(res.campaign_id)
    if res.bad:
        sys.exit(EXIT_SKIPPED_BAD)


# ---- setup and run (the main job through Ramble) ------------------------------------

from commscope.workflow.commands import run_cmd, setup_cmd  # noqa: E402

main.add_command(setup_cmd)
main.add_command(run_cmd)

# ---- dashboards (views/grafana.py) and the report (views/report.py) -----------------

from commscope.views.grafana import dashboards_group  # noqa: E402
from commscope.views.report import report_cmd  # noqa: E402

main.add_command(dashboards_group)
main.add_command(report_cmd)


# ---- accept -----------------------------------------------------------------------

@main.command("accept")
@click.option("--campaign", type=click.IntRange(1), required=True,
              help="the campaign whose runs are the new level (the id `commscope ingest` printed)")
@click.option("--reason", required=True, help="why the new level is intended (shown in the annotation)")
@click.option("--series", "series_ids", type=click.IntRange(1), multiple=True,
              help="only this series (repeatable); default: every series the campaign ran, in the selection")
@click.option("--system")
@click.option("--app")
@click.option("--stack")
@click.option("--interconnect")
def accept_cmd(campaign, reason, series_ids, system, app, stack, interconnect):
    """Accept a campaign as its series' new level after an intended change (an MPI upgrade, a new compiler): from
    that campaign on, `commscope check` judges those series against it, not the history before. It is recorded
    (v_accepted_levels) and shown as an annotation. Without it, a shift stays a regression once confirmed."""
    from commscope.gate import levels
    if not reason.strip() or len(reason) > 1000:
        _fail(f"--reason {'is empty' if not reason.strip() else 'has over 1000 characters'}: say in 1 to 1000 "
              f"characters why the new level is intended", EXIT_BAD_INPUT)
    try:
        with db.connect() as conn:
            accepted = levels.accept(conn, campaign, reason.strip(), list(series_ids), system=system, app=app,
                                     stack=stack, interconnect=interconnect)
    except LookupError as e:
        _fail(str(e), EXIT_BAD_INPUT)
    except db.DBError as e:
        _fail(str(e))
    except psycopg.errors.InsufficientPrivilege as e:
        _fail(_denied(e, "accept", ": no level was accepted"))
    click.echo(f"campaign {campaign} is the new level of {len(accepted)} series: "
               f"{', '.join(f'#{sid}' for sid in accepted)}")


# ---- check ------------------------------------------------------------------------

@main.command("check")
@click.option("--metric", "metrics", multiple=True, default=["time_s"], show_default=True,
              help="a v_run_metrics column (time_s, mpi_fraction_avg, mpi_fraction_slowest, mpi_time_avg_s, "
                   "load_balance, ...) on each series' focus window, else its run window; wall_time means time_s; "
                   "or fom:NAME (repeatable: each metric is judged)")
@click.option("--campaign", type=click.IntRange(1),
              help="the campaign to judge: the id `commscope ingest` printed. Without it the newest campaign is "
                   "judged only if every campaign in the selection has one origin (kind and systems); otherwise "
                   "check refuses, as the newest may be another pipeline's")
@click.option("--baseline", type=click.IntRange(1), default=10, show_default=True,
              help="earlier campaigns of each series to compare against")
@click.option("--min-effect", type=click.FloatRange(0), default=0.05, show_default=True,
              help="smallest relative change that counts")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.01, show_default=True,
              help="significance level of the test")
@click.option("--confirm", type=click.IntRange(1), default=5, show_default=True,
              help="campaigns a shift must hold, the judged one included, before it is a regression: their medians, "
                   "and their best runs, are ranked against the --baseline campaigns before them, each at --alpha / 2 "
                   "(before that it is suspect)")
@click.option("--max-undetectable", type=click.FloatRange(0, min_open=True), default=0.20, show_default=True,
              help="say 'no change' only where this campaign would have flagged a shift this large (the detectable "
                   "effect, by resampling the baseline); else 'cannot tell'")
@click.option("--system")
@click.option("--app")
@click.option("--stack")
@click.option("--interconnect")
@click.option("--no-annotate", is_flag=True,
              help="do not write dashboard annotations or the series' detectable effects (v_noisy_series)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: one object with the campaign and every series' verdict, key and parameters")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path),
              help="also write the verdicts as JUnit XML (one test case per series; a regression fails it)")
@click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path),
              help="also write a Markdown summary (for a merge request comment or a job summary)")
@click.option("--fdr", type=click.FloatRange(0, 1, max_open=True), default=0.0, show_default=True,
              help="the campaign's budget: Benjamini-Hochberg at this false discovery rate over every alert "
                   "(regression, or suspect on the worse side) of every series and metric judged; alerts above it "
                   "are held back and do not alarm. 0: each series judged alone at --alpha")
def check_cmd(metrics, campaign, baseline, min_effect, alpha, confirm, max_undetectable, system, app, stack,
              interconnect, no_annotate, fmt, junit, markdown, fdr):
    """The regression gate: exit 1 if any series of the judged campaign regressed.

    Verdicts: regression, improvement (a shift held over the last --confirm campaigns), suspect (this campaign
    moved, not confirmed yet), no change (and this campaign would have shown a shift of --max-undetectable), no
    baseline (fewer than 3 earlier runs) and cannot tell (it could not have shown that, or the test cannot reach
    --alpha with these runs; it says what it could have seen and what runs or campaigns would do).
    Exit 2 on bad arguments or when it cannot tell which campaign to judge; exit 4 when the verdicts were printed
    but the role may not store their annotations or change points (a read-only role; 1 still wins on regressions)."""
    import json

    from commscope.gate import campaign as gate, changepoints, outputs, regressions
    from commscope.store.queries import gate as queries
    findings, unmeasured, denied = [], [], {}
    try:
        with db.connect() as conn:
            for metric in metrics:
                try:
                    findings += gate.check(conn, metric, campaign, baseline, min_effect, alpha, confirm,
                                           max_undetectable, system=system, app=app, stack=stack,
                                           interconnect=interconnect)
                except regressions.NotMeasured as e:
                    # one metric nobody measured (no MPI wrapping) leaves the others' verdicts standing
                    unmeasured.append(str(e))
            if not findings and unmeasured:
                raise LookupError("; ".join(unmeasured))
            for note in unmeasured:
                click.echo(f"commscope check: {note}", err=True)
            held = gate.hold(findings, fdr or None, alpha)
            groups = gate.one_alert_per_cause(findings)
            noted = 0
            try:
                noted = 0 if no_annotate else queries.annotate(conn, [f for f in findings if f.held is None],
                                                               outputs.diff_url)
            except psycopg.errors.InsufficientPrivilege as e:   # a read-only role: the verdicts still stand
                conn.rollback()
                denied["annotations"] = e
            try:
                if not no_annotate and "annotations" not in denied:
                    queries.record_detectable(conn, findings, alpha, min_effect)
            except psycopg.errors.InsufficientPrivilege as e:
                conn.rollback()
                denied["detectable effects"] = e
            changes = _change_points_for(conn, findings, denied)
    except (ValueError, LookupError) as e:
        _fail(str(e), 2)
    except db.DBError as e:
        _fail(str(e))
    except psycopg.errors.InsufficientPrivilege as e:
        _fail(_denied(e, "check", ": nothing was judged or annotated"))
    bad = [f for f in findings if f.verdict == "regression" and f.held is None]
    try:
        if junit:
            junit.write_bytes(outputs.junit_xml(findings, alpha, min_effect))
        if markdown:
            markdown.write_text(outputs.markdown(findings, alpha, min_effect) + changepoints.markdown(changes))
    except OSError as e:
        _fail(f"cannot write {e.filename}: {e.strerror}; the verdicts were: {len(bad)} regressions", 2)
    if fmt == "json":
        series = [outputs.as_dict(f, alpha, min_effect) for f in findings]
        for f, d in zip(findings, series):
            d["change_points"] = [changepoints.as_dict(c) for c in changes
                                  if (c["series_id"], c["metric"]) == (f.series["series_id"], f.metric)]
        click.echo(json.dumps({"campaigns": sorted({f.campaign for f in findings}), "alpha": alpha,
                               "min_effect": min_effect, "max_undetectable": max_undetectable,
                               "fdr": fdr or None, "alerts": sum(f.leads for f in findings),
                               "series_alerting": sum(f.alert for f in findings), "held_back": held,
                               "groups": [outputs.group_dict(g) for g in groups],
                               "regressions": len(bad), "annotations": noted,
                               "change_points": [changepoints.as_dict(c) for c in changes],
                               "series": series}, default=str, indent=1))
    else:
        width = max(len(printable(f.label())) for f in findings)
        for metric in metrics:
            mine = [f for f in findings if f.metric == regressions.canonical_metric(metric)]
            if not mine:
                continue
            click.echo(f"campaign {', '.join(sorted({str(f.campaign) for f in mine}))}: {mine[0].metric}")
            click.echo(f"{'series':<{width}}  {'verdict':<12} {'baseline':>12} {'new':>12} {'change':>8} {'p':>8}  "
                       f"{'n':<7} detectable")
            for f in mine:
                fmt_v = lambda v: f"{v:12.6g}" if v is not None else f"{'-':>12}"  # noqa: E731
                change = f"{f.effect:+8.1%}" if f.effect is not None else f"{'-':>8}"
                p = f"{f.p_value:8.2g}" if f.p_value is not None else f"{'-':>8}"
                click.echo(f"{printable(f.label()):<{width}}  {f.verdict:<12} {fmt_v(f.baseline_median)} "
                           f"{fmt_v(f.new_median)} "
                           f"{change} {p}  {f'{f.n_new}/{f.n_baseline}':<7} {queries.detectable(f)}")
            for line in outputs.unsure_lines(mine, alpha, min_effect):
                click.echo(line)
            from commscope.gate.attribution import lines as attributed
            for f in mine:
                if f.verdict in ("regression", "improvement", "suspect") and f.attribution:
                    click.echo(f"{printable(f.label())}: {f.verdict}")
                    for line in attributed(f):
                        click.echo(f"  {printable(line)}")
        for line in outputs.group_lines(groups):
            click.echo(line)
        for c in changes:
            click.echo(f"change point: {printable(changepoints.describe(c))}")
        unsure = sum(f.verdict == "cannot tell" for f in findings)
        suspect = sum(f.verdict == "suspect" for f in findings)
        slower = sum(f.alert and f.verdict == "suspect" for f in findings)
        click.echo(f"{len(findings)} series, {len(bad)} regressions"
                   + (f", {suspect} suspect ({slower} on the worse side)" if suspect else "")
                   + (f", {held} alerts held back by --fdr {fdr:g}" if held else "")
                   + (f"; {sum(len(g.members) for g in groups)} of the alerting series are {len(groups)} alert"
                      f"{'s' if len(groups) > 1 else ''} of one cause each" if groups else "")
                   + (f", {unsure} cannot tell" if unsure else "")
                   + ("" if no_annotate else f", {noted} annotations written"))
    if denied:   # exit 1 still says regressions
        _not_stored("check", list(denied), next(iter(denied.values())), "the verdicts above were printed but not "
                    "stored",
                    "run check as the commscope role or one made by `commscope db grant-writer`, or pass "
                    "--no-annotate" if "annotations" in denied or "detectable effects" in denied else
                    "run `commscope changepoints` as the commscope role or one made by `commscope db grant-writer`",
                    1 if bad else EXIT_NOT_STORED)
    if bad:
        sys.exit(1)


def _change_points_for(conn, findings, denied: dict) -> list[dict]:
    """The change points that each checked series' judged campaign completes, after recomputing the series that
    got new runs (changepoints.py); none, with a note on stderr, without Apache Otava. FOMs have none. A role that
    may not store them computes them in private copies (db.private_copies), and DENIED says so."""
    from commscope.gate import changepoints
    out = []
    by_metric: dict[tuple, set] = {}
    for f in findings:
        if not f.metric.startswith("fom:"):
            by_metric.setdefault((f.metric, f.campaign), set()).add(f.series["series_id"])
    try:
        for (metric, campaign), ids in by_metric.items():
            try:
                changepoints.update(conn, [metric], sorted(ids))
            except psycopg.errors.InsufficientPrivilege as e:   # a read-only role: computed in private copies
                conn.rollback()
                denied["change points"] = e
                db.private_copies(conn)
                changepoints.update(conn, [metric], sorted(ids))
            out += changepoints.completed_by(conn, campaign, metric, sorted(ids))
    except changepoints.MissingLibrary as e:
        click.echo(f"commscope check: no change points: {e}", err=True)
    return out


@main.command("changepoints")
@click.option("--metric", "metrics", multiple=True, default=["time_s"], show_default=True,
              help="a v_run_metrics column (repeatable)")
@click.option("--series", "series_ids", type=click.IntRange(1), multiple=True,
              help="only this series (its id, as check and the dashboards show it; repeatable)")
@click.option("--full", is_flag=True, help="recompute every series, not only those that got new runs")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def changepoints_cmd(metrics, series_ids, full, fmt):
    """Change points over each series' whole history (Apache Otava's E-divisive): recompute the series that got
    new runs since they were last computed, store them (v_change_points, drawn on the dashboards) and list them."""
    import json

    from commscope.gate import changepoints
    ids = sorted(series_ids) if series_ids else None
    denied = None
    try:
        with db.connect() as conn:
            try:
                done = changepoints.update(conn, metrics, ids, full=full)
            except psycopg.errors.InsufficientPrivilege as e:   # a read-only role: computed in private copies
                conn.rollback()
                denied = e
                db.private_copies(conn)
                done = changepoints.update(conn, metrics, ids, full=full)
            found = [c for u in done for c in changepoints.stored(conn, u.metric, ids)]
    except ValueError as e:
        _fail(str(e), 2)
    except changepoints.MissingLibrary as e:
        _fail(str(e), 2)
    except db.DBError as e:
        _fail(str(e))
    except psycopg.errors.InsufficientPrivilege as e:
        _fail(_denied(e, "changepoints", ": no change points were computed or stored"))
    if fmt == "json":
        click.echo(json.dumps({"recomputed": [{"metric": u.metric, "series": u.series, "change_points": u.change_points,
                                               "seconds": round(u.seconds, 3)} for u in done],
                               "change_points": [changepoints.as_dict(c) for c in found]}, indent=1))
    else:
        for u in done:
            click.echo(f"{u.metric}: recomputed {u.series} series ({u.change_points} change points) in "
                       f"{u.seconds:.2f} s")
        for c in found:
            click.echo(changepoints.describe(c))
        click.echo(f"{len(found)} change points stored")
    if denied:
        _not_stored("changepoints", ["change points"], denied, "the change points above were computed but not "
                    "stored", "run it as the commscope role or one made by `commscope db grant-writer`")


# ---- advise -------------------------------------------------------------------------

@main.group("advise")
def advise_group():
    """Turn the stored data into actions, as the reference studies did."""


def _store_advice(write) -> None:
    """write(conn) in one transaction; a store that fails, or a role that may not write, says how to only
    print the advice (printed before this)."""
    try:
        with db.connect() as conn:
            write(conn)
            conn.commit()
    except db.DBError as e:
        _fail(f"{e} (use --no-store to only print the advice)")
    except psycopg.errors.InsufficientPrivilege as e:
        _not_stored("advise", ["advice"], e, "the advice above was printed but not stored",
                    "use --no-store to only print it, or run it as the commscope role or one made by "
                    "`commscope db grant-writer`")


@advise_group.command("placement")
@click.argument("source")
@click.option("--topology", "topology_file", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="YAML: nodes, ranks_per_node, network (flat, fat-tree, torus, hypercube)")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="write the rankfile, host lists and rank map into this directory")
@click.option("--no-store", is_flag=True, help="do not record the advice in the store")
def advise_placement(source, topology_file, output, no_store):
    """Rank-to-node placement from the communication matrix of SOURCE: a stored run id, or a message-tracing profile.
    A run traced under commgraph --rank-map gets a commgraph.rank-map composed with the application rank each world
    rank played (its RANK lines; for a stored run, read again from its source files)."""
    from commscope.advise import placement
    from commscope.read import limited, profiles

    try:
        topo = placement.Topology.from_dict(limited.load_yaml(topology_file, what="a topology (YAML)"),
                                            str(topology_file))
        run = placement.traced(source)
        p = placement.optimize(run.matrix, run.ranks, topo)
    except (placement.BadTopology, profiles.BadProfile, LookupError) as e:
        _fail(str(e), 2)
    except db.DBError as e:
        _fail(str(e))
    ranks, run_id, app_rank_of, unknown_map = run.ranks, run.run_id, run.app_rank_of, run.no_rank_map
    files = placement.launcher_files(p, topo, app_rank_of)
    if unknown_map:
        files.pop("commgraph.rank-map", None)
    rnd_i, rnd_h = p.random_mean
    lines = [f"placement of {ranks} ranks on {topo.nodes} nodes x {topo.ranks_per_node} ({topo.kind}), {p.method}",
             f"{'':12}{'inter-node bytes':>18}{'hop-bytes':>16}",
             f"{'default':12}{p.default[0]:>18,}{p.default[1]:>16,}",
             f"{'random':12}{rnd_i:>18,.0f}{rnd_h:>16,.0f}",
             f"{'optimized':12}{p.optimized[0]:>18,}{p.optimized[1]:>16,}",
             "node of each rank: " + " ".join(topo.hosts[n] for n in p.node_of)]
    if app_rank_of:
        lines.append("application rank each traced world rank played: " + " ".join(map(str, app_rank_of)))
    if unknown_map:
        lines.append(unknown_map)
    click.echo("\n".join(lines))
    if output:
        output.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (output / name).write_text(text)
        click.echo(f"wrote {', '.join(sorted(files))} to {output}")
    if not no_store:
        summary = {"ranks": ranks, "nodes": topo.nodes, "ranks_per_node": topo.ranks_per_node, "network": topo.kind,
                   "method": p.method, "node_of": p.node_of, "default": p.default, "optimized": p.optimized,
                   "random_mean": p.random_mean, "app_rank_of": app_rank_of}
        text = placement.advice_text([topo.hosts[n] for n in p.node_of], p.default, p.optimized, rnd_h)
        _store_advice(lambda conn: db.insert_advice(conn, "placement", run_id, source, summary, text))


@advise_group.command("barriers")
@click.argument("source")
@click.option("--fastest", type=click.FloatRange(0, 1, min_open=True), default=1.0, show_default=True,
              help="measure the saving on this share of the runs, the fastest of each side (on a loaded machine)")
@click.option("--no-store", is_flag=True, help="do not record the advice in the store")
def advise_barriers(source, fastest, no_store):
    """Barrier time, likely debugging barriers and the predicted saving of SOURCE: a stored run id, campaign:ID
    (runs that differ only in the debug-barrier switch are compared), or a profile file. Needs call counts
    (region.count; commscope run --caliper counts)."""
    from commscope.advise import barriers as ab
    from commscope.read import profiles
    try:
        if Path(source).exists():
            advice, skipped = [ab.from_profile_path(source)], []
        else:
            with db.connect() as conn:
                advice, skipped = ab.from_store(conn, source, fastest)
    except (LookupError, profiles.BadProfile) as e:
        _fail(str(e), 2)
    except db.DBError as e:
        _fail(str(e))
    except psycopg.errors.InsufficientPrivilege as e:
        _fail(_denied(e, "advise barriers", ": no advice"))
    for note in skipped:
        click.echo(f"skipped {note}")
    for a in advice:
        click.echo(f"{'run ' + str(a.run_id) if a.run_id else a.source}: {a.text}")
    if not no_store:
        _store_advice(lambda conn: ab.store(conn, advice))


@advise_group.command("collectives")
@click.argument("source", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), default=Path("tuning"),
              show_default=True, help="directory for each stack's tuning file and its .env")
@click.option("--stack", help="stack name for output files (files only; default: from the MPI library line)")
@click.option("--mpich-library", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="the MPICH shared library to tune (its own selection tree fills what is not tuned)")
@click.option("--no-store", is_flag=True, help="do not record the advice in the store")
def advise_collectives(source, output, stack, mpich_library, no_store):
    """Best collective algorithm per message-size band from a collsweep sweep, as each stack's tuning input.

    SOURCE is a stored campaign id, or collsweep stdout files and directories."""
    from commscope.advise import collectives as ac
    try:
        if len(source) == 1 and source[0].isdigit():
            with db.connect() as conn:
                points = ac.points_from_store(conn, int(source[0]))
        else:
            points = ac.points_from_files([Path(s) for s in source], stack)
        tunings = ac.choose(points)
        written = ac.write([ac.render(t, output, mpich_library) for t in tunings], output)
    except ac.BadInput as e:
        _fail(str(e), 2)
    except db.DBError as e:
        _fail(str(e))
    for t, w in zip(tunings, written):
        click.echo("\n".join(ac.describe(t)))
        click.echo("  enable with: " + " ".join(f"{k}='{v}'" for k, v in w["env"].items()))
    def store(conn):
        for t, w in zip(tunings, written):
            ac.store(conn, t, " ".join(source), w)
    if not no_store:
        _store_advice(store)


@advise_group.command("overlap")
@click.argument("source")
@click.option("--no-store", is_flag=True, help="do not record the advice in the store")
def advise_overlap(source, no_store):
    """Exposed communication, overlap efficiency against blocking, the Irecv gap, and per region the imbalance and
    whether waiting comes from imbalance or the network, over each run's focus window (its loop), for SOURCE: a
    stored run id or campaign:ID."""
    from commscope.advise import overlap as ao
    try:
        with db.connect() as conn:
            results, skipped = ao.from_store(conn, source)
            for note in skipped:
                click.echo(f"skipped {note}")
            click.echo(ao.table(results))
            for o in results:
                click.echo(f"run {o.run_id}: {o.text()}")
            if not no_store:
                ao.store(conn, source, results)
                conn.commit()
    except LookupError as e:
        _fail(str(e), 2)
    except db.DBError as e:
        _fail(str(e))


if __name__ == "__main__":
    main()
