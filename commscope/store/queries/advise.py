"""The advisors' reads of the base tables (advise/barriers.py, overlap.py, collectives.py): which runs a source
names, a run's series and window, the blocking runs of a campaign, and a campaign's collsweep figures."""
from __future__ import annotations

import psycopg


def campaign_runs(conn: psycopg.Connection, campaign_id: int) -> list[int]:
    """The ids of the campaign's runs, in order."""
    return [r[0] for r in conn.execute("SELECT id FROM runs WHERE campaign_id = %s ORDER BY id", (campaign_id,))]


def run_exists(conn: psycopg.Connection, run_id: int) -> bool:
    return conn.execute("SELECT 1 FROM runs WHERE id = %s", (run_id,)).fetchone() is not None


def run_series_and_window(conn: psycopg.Connection, run_id: int) -> tuple | None:
    """(app, ranks, campaign_id, parameters, environment, mpi_time_avg_s, time_s, focus_region, status) of the run:
    its series' parameters and environment, and its focus window, else its run window."""
    return conn.execute(
        "SELECT r.app, r.ranks, r.campaign_id, s.parameters, s.environment, w.mpi_time_avg_s, w.time_s, "
        "w.focus_region, r.status FROM runs r LEFT JOIN series s ON s.id = r.series_id "
        "LEFT JOIN LATERAL (SELECT * FROM run_windows x WHERE x.run_id = r.id "
        "                   ORDER BY x.\"window\" = 'focus' DESC LIMIT 1) w ON true WHERE r.id = %s", (run_id,)).fetchone()


def run_description(conn: psycopg.Connection, run_id: int) -> tuple | None:
    """(app, variant, stack, ranks, campaign_id, metadata, parameters, environment, status) of the run."""
    return conn.execute(
        "SELECT v.app, v.variant, v.stack, v.ranks, v.campaign_id, r.metadata, s.parameters, s.environment, "
        "r.status FROM v_runs v JOIN runs r ON r.id = v.run_id LEFT JOIN series s ON s.id = r.series_id "
        "WHERE v.run_id = %s", (run_id,)).fetchone()


def blocking_runs(conn: psycopg.Connection, campaign_id: int) -> list[int]:
    """The campaign's ok runs of the blocking variant (the run's variant or its series' parameter), in order."""
    return [r[0] for r in conn.execute(
        "SELECT r.id FROM runs r LEFT JOIN series s ON s.id = r.series_id WHERE r.campaign_id = %s AND "
        "r.status = 'ok' AND "
        "'blocking' IN (r.variant, s.parameters->>'param.variant', s.parameters->>'variant') ORDER BY r.id",
        (campaign_id,))]


def collsweep_figures(conn: psycopg.Connection, campaign_id: int) -> list[tuple]:
    """(run_id, stack, mpi_library, ranks, params, collective, bytes, value) of the campaign's t_avg figures."""
    return conn.execute(
        """SELECT r.id, v.stack, v.mpi_library, r.ranks, r.metadata -> 'params', c.collective, c.bytes, c.value
           FROM v_collectives c JOIN runs r ON r.id = c.run_id JOIN v_runs v ON v.run_id = r.id
           WHERE v.campaign_id = %s AND c.stat = 't_avg'""", (campaign_id,)).fetchall()
