"""`commscope accept`, `check` and `changepoints`: the regression gate's commands (the gate's sequence is
commscope/gate/check.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import psycopg

from commscope.gate.campaign import FALSE_ALARMS
from commscope.commands.common import EXIT_BAD_INPUT, EXIT_NOT_STORED, fail, not_stored, permission_denied
from commscope.store import db, files


# ---- accept -----------------------------------------------------------------------

@click.command("accept")
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
        fail(f"--reason {'is empty' if not reason.strip() else 'has over 1000 characters'}: say in 1 to 1000 "
             f"characters why the new level is intended", EXIT_BAD_INPUT)
    try:
        with db.connect() as conn:
            accepted = levels.accept(conn, campaign, reason.strip(), list(series_ids), system=system, app=app,
                                     stack=stack, interconnect=interconnect)
    except LookupError as e:
        fail(str(e), EXIT_BAD_INPUT)
    except db.DBError as e:
        fail(str(e))
    except psycopg.errors.InsufficientPrivilege as e:
        fail(permission_denied(e, "accept", ": no level was accepted"))
    click.echo(f"campaign {campaign} is the new level of {len(accepted)} series: "
               f"{', '.join(f'#{sid}' for sid in accepted)}")


# ---- check ------------------------------------------------------------------------

@click.command("check")
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
@click.option("--junit", type=click.Path(path_type=Path),
              help="also write the verdicts as JUnit XML (one test case per series; a regression fails it)")
@click.option("--markdown", type=click.Path(path_type=Path),
              help="also write a Markdown summary (for a merge request comment or a job summary)")
@click.option("--false-alarms", type=click.FloatRange(0, min_open=True), default=FALSE_ALARMS,
              show_default=True,
              help="the campaign's budget: the false alarms expected in the judged campaign over every series and "
                   "metric judged. An alert (regression, or suspect on the worse side; a group of one cause counts "
                   "once) stands where its p is at most this over the number of findings; the others are held back "
                   "and do not alarm. Up to --false-alarms / --alpha findings, every alert stands")
@click.option("--fdr", type=click.FloatRange(0, 1, max_open=True), default=0.0, show_default=True,
              help="instead of --false-alarms: Benjamini-Hochberg at this false discovery rate over the campaign's "
                   "alerts. 0: not used")
@click.option("--each-series-alone", is_flag=True,
              help="no campaign budget: every series judged alone at --alpha (a campaign of m series then expects "
                   "m x alpha false alarms)")
def check_cmd(metrics, campaign, baseline, min_effect, alpha, confirm, max_undetectable, system, app, stack,
              interconnect, no_annotate, fmt, junit, markdown, false_alarms, fdr, each_series_alone):
    """The regression gate: exit 1 if any series of the judged campaign regressed.

    Verdicts: regression, improvement (a shift held over the last --confirm campaigns), suspect (this campaign
    moved, not confirmed yet), no change (and this campaign would have shown a shift of --max-undetectable), no
    baseline (fewer than 3 earlier runs) and cannot tell (it could not have shown that, or the test cannot reach
    --alpha with these runs; it says what it could have seen and what runs or campaigns would do).
    Exit 2 on bad arguments or when it cannot tell which campaign to judge; exit 4 when the verdicts were printed
    but the role may not store their annotations or change points (a read-only role; 1 still wins on regressions)."""
    from commscope.gate import outputs
    from commscope.gate.check import check_campaign
    written = {junit: "JUnit XML", markdown: "Markdown summary"}
    written.pop(None, None)
    for path, what in written.items():   # only to a regular file, refused before anything is judged
        try:
            files.output_file(path, what)
        except db.DBError as e:
            fail(str(e), 2)
    budget = None if each_series_alone else {"fdr": fdr} if fdr else {"false_alarms": false_alarms}
    try:
        with db.connect() as conn:
            found = check_campaign(conn, metrics, campaign, baseline, min_effect, alpha, confirm, max_undetectable,
                                   (budget or {}).get("fdr"), not no_annotate, (budget or {}).get("false_alarms"),
                                   system=system, app=app, stack=stack, interconnect=interconnect)
    except (ValueError, LookupError) as e:
        fail(str(e), 2)
    except db.DBError as e:
        fail(str(e))
    except psycopg.errors.InsufficientPrivilege as e:
        fail(permission_denied(e, "check", ": nothing was judged or annotated"))
    for note in found.notes:
        click.echo(f"commscope check: {note}", err=True)
    bad = found.regressions
    try:   # each written whole beside its name, then put in its place
        if junit:
            with files.replacing(junit, written[junit]) as part:
                part.write_bytes(outputs.junit_xml(found.findings, alpha, min_effect))
        if markdown:
            with files.replacing(markdown, written[markdown]) as part:
                part.write_text(outputs.markdown(found.findings, alpha, min_effect)
                                + outputs.change_points_markdown(found.changes))
    except OSError as e:
        fail(f"cannot write {e.filename}: {e.strerror}; the verdicts were: {len(bad)} regressions", 2)
    except db.DBError as e:
        fail(f"{e}; the verdicts were: {len(bad)} regressions", 2)
    if fmt == "json":
        click.echo(outputs.check_json(found, alpha, min_effect, max_undetectable, budget))
    else:
        click.echo("\n".join(outputs.check_text(found, metrics, alpha, min_effect, budget, not no_annotate)))
    denied = found.denied
    if denied:   # exit 1 still says regressions
        not_stored("check", list(denied), next(iter(denied.values())), "the verdicts above were printed but not "
                   "stored",
                   "run check as the commscope role or one made by `commscope db grant-writer`, or pass "
                   "--no-annotate" if "annotations" in denied or "detectable effects" in denied else
                   "run `commscope changepoints` as the commscope role or one made by `commscope db grant-writer`",
                   1 if bad else EXIT_NOT_STORED)
    if bad:
        sys.exit(1)


@click.command("changepoints")
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
        fail(str(e), 2)
    except changepoints.MissingLibrary as e:
        fail(str(e), 2)
    except db.DBError as e:
        fail(str(e))
    except psycopg.errors.InsufficientPrivilege as e:
        fail(permission_denied(e, "changepoints", ": no change points were computed or stored"))
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
        not_stored("changepoints", ["change points"], denied, "the change points above were computed but not "
                   "stored", "run it as the commscope role or one made by `commscope db grant-writer`")
