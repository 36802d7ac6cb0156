"""Reading joined to the store, for `commscope ingest` and `commscope run` alike, in-process.

- ingest: the paths given are read as one campaign (read.inputs.read_campaign, its reader processes also making
  each record's COPY text, store.ingest.prepared), finished with the labels and provenance the caller gives
  (read.storable.finished: declared scaling kinds, Provenance, the store's limits checked) and written by
  store.ingest.ingest_records. Reading never calls the store, the store never calls reading, and it never sees a
  path.
- ingest_and_report: that, then the change points of the series the campaign's runs belong to
  (gate.changepoints.refresh_after_ingest: a failure there is a note, the runs stay stored), then, when asked, the
  campaign's report (views.report.write)."""
from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import psycopg

from commscope.read.inputs import read_campaign
from commscope.read.records import ReadOptions
from commscope.read.storable import Provenance, finished
from commscope.store import db
from commscope.store.ingest import Result, ingest_records, prepared


def ingest(conn: psycopg.Connection, inputs: list[Path], prov: Provenance, skip_bad: bool = False,
           progress=None, allow_partial: bool = False, focus: str | None = None,
           read: ReadOptions | None = None, relabel: bool = False) -> Result:
    """Stores the campaign INPUTS make (read.inputs.read_campaign: Caliper profiles and workload outputs in files
    and directories, a Ramble workspace, or ReFrame results). ALLOW_PARTIAL
    and FOCUS, or READ with every reading option (--app, --ranks, --param, --param-keys): see
    records.ReadOptions. RELABEL: a file stored before with other labels is stored again with the new ones
    (Writer)."""
    opts = read or ReadOptions(allow_partial, focus)
    found = read_campaign(inputs, opts, skip_bad, prepare=prepared)
    if found.hardware and not prov.hardware:   # a Ramble workspace's hardware description
        prov = replace(prov, hardware=found.hardware,
                       system=prov.system or found.hardware.get("system") or found.hardware.get("site"))
    if progress is not None and found.count is not None:
        progress.total = found.count
    records = finished(found.records, opts, prov)   # labelled as given and checked: the store only writes
    res = ingest_records(conn, records, prov, found.source, found.kind, skip_bad, progress, relabel, opts)
    res.left_out = [str(n) for n in found.left_out]
    return res


def ingest_and_report(inputs: list[Path], prov: Provenance, warn, report_to: Path | None = None, stored=None,
                      **options) -> tuple[Result, str | None]:
    """Store INPUTS (OPTIONS: ingest's; STORED, if given, is called with its Result at once), refresh their
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
