"""`commscope ingest`: profiles, workload outputs, Ramble workspaces and ReFrame reports into the store."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import psycopg

from commscope.commands.common import fail, EXIT_BAD_INPUT, EXIT_SKIPPED_BAD, printable
from commscope.store import db

APP_LIMIT, PARAM_KEY_LIMIT, PARAM_VALUE_LIMIT = 200, 200, 4096   # characters


@click.command("ingest")
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
@click.option("--kernel", help="kernel release the runs ran on, as `uname -r` prints it (a version of the run; a "
                               "release the run recorded itself wins)")
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
def ingest_cmd(paths, system, stack, interconnect, git_commit, ci_pipeline, compiler, spack_hash, kernel, hardware,
               skip_bad, allow_partial, focus, app, ranks, params, param_keys, per_rank, global_params, rank_rows,
               relabel, started_at, fmt, quiet):
    """Store Caliper profiles of any application (files, directories), or one Ramble workspace, from PATHS
    as one campaign. The last line printed is the campaign's id alone (for `commscope check --campaign`): the
    new campaign, or, when every run was stored before, the campaign that holds them."""
    from tqdm import tqdm

    from commscope.read.storable import Provenance
    from commscope.read.files import BadProfile
    from commscope.workflow.ingest import ingest_and_report
    from commscope.read.ramble import read_hardware

    read, start = reading_options(app, params, param_keys, rank_rows, started_at, per_rank, global_params,
                                  allow_partial, focus, ranks)
    bar = None if quiet or not sys.stderr.isatty() else tqdm(desc="ingest", unit="run", file=sys.stderr)

    def warn(message: str) -> None:   # the change points' note, after the bar
        if bar:
            bar.close()
        click.echo(f"commscope ingest: {message}", err=True)
    try:
        prov = Provenance(system=system, stack=stack, interconnect=interconnect, git_commit=git_commit,
                          ci_pipeline=ci_pipeline, compiler=compiler, spack_hash=spack_hash,
                          kernel=kernel, hardware=read_hardware(hardware) if hardware else None,
                          started_at=start)
        res, _ = ingest_and_report(list(paths), prov, warn, skip_bad=skip_bad, progress=bar, read=read,
                                   relabel=relabel)
    except BadProfile as e:
        fail(f"{e}; nothing was stored", 2)
    except db.DBError as e:
        fail(str(e))
    except psycopg.Error as e:
        # the server went away (killed, stopped, disk full) mid-campaign: its transaction is gone with it
        detail = db.masked(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        why = db.Embedded().last_failure() if db.external_dsn() is None else None
        if why:
            detail += f" (the server's log: {why})"
        hint = (" Free space on the store's disk, then 'commscope db start' and ingest again."
                if "space left on device" in str(e) + (why or "")
                else " Check the server ('commscope db status'), then ingest again.")
        fail(f"the store failed during ingest: {detail}. Nothing of this campaign was stored.{hint}")
    finally:
        if bar:
            bar.close()
    print_result(res, fmt, quiet)
    if res.bad:
        sys.exit(EXIT_SKIPPED_BAD)


def reading_options(app, params, param_keys, rank_rows, started_at, per_rank, global_params, allow_partial, focus,
                    ranks):
    """The reading options ingest's flags give (records.ReadOptions) and --started-at as a time; a flag that is
    wrong ends the command in one line naming it."""
    import datetime as dt
    import json

    from commscope.read.records import ReadOptions
    from commscope.read.storable import PARAMETERS_BYTES

    if app is not None and not 1 <= len(app.strip()) <= APP_LIMIT:
        fail(f"--app {'is empty' if not app.strip() else f'has {len(app)} characters'}: give a name of 1 to "
             f"{APP_LIMIT} characters", EXIT_BAD_INPUT)
    pairs = []
    for p in params:
        key, eq, value = p.partition("=")
        if not eq or not key.strip():
            fail(f"--param {p!r}: expected KEY=VALUE, e.g. --param problem_size=64", 2)
        if len(key.strip()) > PARAM_KEY_LIMIT or not value.strip() or len(value) > PARAM_VALUE_LIMIT:
            fail(f"--param {key.strip()[:40]!r}: {'its value is empty' if not value.strip() else 'too long'}; give "
                 f"a key of 1 to {PARAM_KEY_LIMIT} characters and a value of 1 to {PARAM_VALUE_LIMIT}", EXIT_BAD_INPUT)
        pairs.append((key.strip(), value))
    sizes = {k: len(json.dumps({k: v}, ensure_ascii=False).encode()) for k, v in pairs}
    if sum(sizes.values()) > PARAMETERS_BYTES:   # within the limits above, but not a parameter the store can hold
        key = max(sizes, key=sizes.get)
        fail(f"--param {key[:40]!r}: {'its value takes' if len(pairs) == 1 else 'the --param values take'} "
             f"{sum(sizes.values()):,} bytes as JSON; the store holds at most {PARAMETERS_BYTES:,} bytes of a run's "
             f"parameters: shorten it", EXIT_BAD_INPUT)
    keys = tuple(k.strip() for k in (param_keys or "").split(",") if k.strip())
    if param_keys is not None and not keys:
        fail("--param-keys is empty: name the metadata keys, e.g. --param-keys Problem,Size-x", 2)
    if rank_rows != "all" and not (rank_rows.isdigit()):
        fail(f"--rank-rows {rank_rows!r}: expected a number of ranks or 'all'", 2)
    start = None
    if started_at is not None:
        try:
            start = dt.datetime.fromisoformat(started_at)
        except ValueError:
            fail(f"--started-at {started_at!r}: not an ISO 8601 time; give e.g. 2026-11-25T02:17:00Z", 2)
        if start.tzinfo is None:
            fail(f"--started-at {started_at!r} has no UTC offset; give one, e.g. {started_at}Z or "
                 f"{started_at}+01:00", 2)
    kinds = {flag: tuple(k.strip() for k in (v or "").split(",") if k.strip())
             for flag, v in (("--per-rank", per_rank), ("--global", global_params))}
    for flag, v in (("--per-rank", per_rank), ("--global", global_params)):
        if v is not None and not kinds[flag]:
            fail(f"{flag} is empty: name the parameters, e.g. {flag} s", 2)
    read = ReadOptions(allow_partial, focus, app, ranks, tuple(pairs), keys,
                       None if rank_rows == "all" else int(rank_rows), kinds["--per-rank"], kinds["--global"])
    return read, start


def print_result(res, fmt: str, quiet: bool) -> None:
    """What ingest says of its Result: the counts (or one JSON object), warnings, workspaces left out and bad
    inputs on stderr, and the campaign's id last."""
    import json

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
