"""The procurement comparison on a real smoke workspace ranks the stacks as the
workloads' own timers do. The workspace (tests/data/ramble/smoke-mixed-caliper)
ran halo3d and cgsolve on Debian Open MPI 4.1 with Caliper and on Intel MPI
without: the old panel compared Caliper's whole-run time with the unprofiled
runs' loop time and showed Intel MPI 4-7x faster, where its loops were slower."""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import psycopg

from commscope import panels as P
from commscope.ingest import Provenance, ingest

WS = Path(__file__).parent / "data" / "ramble" / "smoke-mixed-caliper"
REF = "debian-openmpi4"


def own_timers() -> dict[tuple, dict[str, float]]:
    """(app, experiment without its stack) -> stack -> total_time, from each experiment's stdout."""
    out: dict = {}
    for f in WS.glob("experiments/*/*/*/*.out"):
        m = re.search(r"^FOM total_time (\S+) s$", f.read_text(), re.M)
        exp = f.parent.name
        stack = next(s for s in (REF, "pypi-impi2021") if s in exp)
        out.setdefault((f.parts[-4], exp.replace(stack, "STACK")), {})[stack] = float(m.group(1))
    return out


def panel(title: str):
    board = next(b for b in P.DASHBOARDS if b.uid == "commscope-procurement")
    return next(p for p in board.panels if p.title == title)


def test_the_procurement_panel_ranks_stacks_as_the_workloads_timers_do(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WS], Provenance())
        values = P.all_values(conn)
        system = conn.execute("SELECT DISTINCT environment->>'system' FROM v_run_metrics").fetchone()[0]
        values.update(reference_system=system, reference_stack=REF)
        t0, t1 = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
        cur = conn.execute(P.expand(panel("Normalized time per experiment").sql, t0, t1, values))
        cols = [d.name for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        geo = {r[0]: r[1] for r in conn.execute(P.expand(panel("Geometric mean of normalized time").sql, t0, t1,
                                                          values))}
    timers = own_timers()
    assert len(timers) == 3 and all(len(v) == 2 for v in timers.values())
    others = [r for r in rows if r["stack"] != REF]
    assert len(others) == len(timers)   # every experiment found its reference run, on the same window
    faster_by_timer = sorted(v["pypi-impi2021"] < v[REF] for v in timers.values())
    faster_by_panel = sorted(r["normalized"] < 1 for r in others)
    assert faster_by_panel == faster_by_timer
    assert all(r["window"] == "focus" for r in rows)
    # over all experiments, the order of the two stacks is the timers' order
    timer_geo = 1.0
    for v in timers.values():
        timer_geo *= v["pypi-impi2021"] / v[REF]
    timer_geo **= 1 / len(timers)
    assert (geo[f"{system} pypi-impi2021"] > 1) == (timer_geo > 1)
    assert abs(geo[f"{system} {REF}"] - 1) < 1e-12


def test_the_stack_comparison_view_holds_the_experiment_and_ranks_as_the_timers_do(dsn):
    """v_stack_comparison, for outside tools: each experiment's stacks side by side on the same window, ordered as
    the workloads' own total_time orders them; the old view averaged wall_time, Caliper's whole run for the
    profiled stack against the loop for the other."""
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WS], Provenance())
        rows = conn.execute("SELECT app, parameters, \"window\", stack, time_s, stacks_compared "
                            "FROM v_stack_comparison").fetchall()
    timers = own_timers()
    groups: dict = {}
    for app, params, window, stack, t, n in rows:
        assert window == "focus" and n == 2, (app, params, stack)
        groups.setdefault((app, str(params)), {})[stack] = t
    assert len(groups) == len(timers)
    by_view = sorted(next(t for s, t in g.items() if s != REF_STACK_NAME(g)) < g[REF_STACK_NAME(g)]
                     for g in groups.values())
    by_timer = sorted(v["pypi-impi2021"] < v[REF] for v in timers.values())
    assert by_view == by_timer


def REF_STACK_NAME(group: dict) -> str:   # noqa: N802
    """The Open MPI stack's name as the store has it (the MPI library's own name)."""
    return next(s for s in group if "Open MPI" in s or s == REF)
