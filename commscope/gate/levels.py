"""Accepted levels: after an intended change (an MPI upgrade, a new compiler, a rebuild), a campaign is marked as
its series' new level, with a reason. From that campaign on the gate's baseline for those series starts there
(store/queries/gate.py measured_rows); without it, a shift stays a regression once confirmed."""
from __future__ import annotations

import psycopg

from commscope.store.queries import gate as queries


def accept(conn: psycopg.Connection, campaign: int, reason: str, series_ids: list[int], **where) -> list[int]:
    """Records CAMPAIGN as the new level of its series (SERIES_IDS, or every series of its ok runs in the WHERE
    selection) and annotates each; returns their ids. LookupError when it selects none."""
    unknown = set(where) - set(queries.FILTERS)
    if unknown:
        raise ValueError(f"cannot select series by {', '.join(sorted(unknown))}")
    rows = queries.level_series(conn, campaign, series_ids or None, where)
    missing = sorted(set(series_ids) - {r[0] for r in rows})
    if not rows or missing:
        which = f"of series {', '.join(map(str, missing or series_ids))} " if series_ids else ""
        raise LookupError(f"campaign {campaign} has no successful runs {which}in this selection: nothing was "
                          f"accepted; name the campaign that ran them")
    queries.record_levels(conn, campaign, reason, rows,
                          [f"new level accepted from campaign {campaign} for series #{r[0]}: {reason}" for r in rows])
    return [r[0] for r in rows]
