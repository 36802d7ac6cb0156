"""The after-run sequence that `commscope ingest` and `commscope run` share, in-process: the inputs into the store as
one campaign (store.ingest, with the provenance the caller gives), then the change points of the series that
campaign's runs belong to (gate.changepoints.refresh_after_ingest: a failure there is a note, the runs stay
stored), then, when asked, the campaign's report (views.report.write)."""
from __future__ import annotations

import shlex
from pathlib import Path

from commscope.store import db
from commscope.store.ingest import Provenance, Result, ingest


def ingest_and_report(inputs: list[Path], prov: Provenance, warn, report_to: Path | None = None, stored=None,
                      **options) -> tuple[Result, str | None]:
    """Store INPUTS (OPTIONS: store.ingest's; STORED, if given, is called with its Result at once), refresh their
    series' change points (notes through WARN), then write the report of the campaign to REPORT_TO if given. Returns the ingest's Result and what to say about the
    report: None when none was asked; else one line (written, or why not and the command that makes it). The
    ingest's own errors (BadProfile, db.DBError, psycopg.Error) reach the caller: nothing was stored."""
    from commscope.gate import changepoints
    with db.connect() as conn:
        res = ingest(conn, list(inputs), prov, **options)
    if stored:
        stored(res)
    campaign = res.campaign_id   # this ingest's campaign (or the one its runs were already stored in)
    if res.inserted and campaign is not None:
        changepoints.refresh_after_ingest(campaign, warn)
    if report_to is None:
        return res, None
    from commscope.views import report
    try:
        report.write(report_to, (campaign,) if campaign else ())
        return res, f"report: {report_to}"
    except Exception as e:  # noqa: BLE001 - the runs are stored; the report can be made again
        again = ["commscope", "report", "-o", str(report_to)] + (["--campaign", str(campaign)] if campaign else [])
        return res, (f"  no report ({(str(e).strip().splitlines() or [type(e).__name__])[0]}); make it with: "
                     f"{shlex.join(again)}")
