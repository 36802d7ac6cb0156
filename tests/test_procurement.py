"""The procurement comparison on a real smoke workspace ranks the stacks as the
workloads' own timers do. The workspace (tests/data/ramble/smoke-mixed-caliper)
ran halo3d and cgsolve on Debian Open MPI 4.1 with Caliper and on Intel MPI
without: the old panel compared Caliper's whole-run time with the unprofiled
runs' loop time and showed Intel MPI 4-7x faster, where its loops were slower.

The reference is each experiment's stdout, read here: its application (the
COMMSCOPE header), its PARAM lines and its `FOM total_time`. Runs whose PARAM
lines are equal but for the interconnect (which names the stack's transport) are
one experiment on two stacks; per experiment, the stacks' order by total_time is
what the panel and the view must show."""
from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import psycopg
import pytest

from commscope.views import panels as P
from commscope.workflow.ingest import Provenance, ingest

WS = Path(__file__).parent / "data" / "ramble" / "smoke-mixed-caliper"
REF = "debian-openmpi4"
STACKS = (REF, "pypi-impi2021")


def own_experiments() -> list[dict]:
    """One entry per experiment of the workspace: {app, params, total: {stack: total_time}}, from the stdout
    of each Ramble experiment (its directory name says which stack ran it)."""
    groups: dict = {}
    for f in sorted(WS.glob("experiments/*/*/*/*.out")):
        text = f.read_text()
        app = re.search(r"^COMMSCOPE workload=(\S+)", text, re.M).group(1)
        params = dict(re.findall(r"^PARAM (\S+) (.*)$", text, re.M))
        params.pop("interconnect")   # openmpi4/default, impi2021/default: the stack's transport
        total = float(re.search(r"^FOM total_time (\S+) s$", text, re.M).group(1))
        stack = next(s for s in STACKS if s in f.parent.name)
        key = (app, tuple(sorted(params.items())))
        groups.setdefault(key, {"app": app, "params": params, "total": {}})["total"][stack] = total
    return list(groups.values())


def matching(experiments: list[dict], app: str, parameters: dict) -> dict:
    """The one experiment of the workspace whose PARAM lines hold every `param.*` value of a stored
    experiment's parameters."""
    ps = {k[len("param."):]: v for k, v in parameters.items() if k.startswith("param.")}
    assert ps, parameters
    found = [e for e in experiments if e["app"] == app and ps.items() <= e["params"].items()]
    assert len(found) == 1, (app, parameters, len(found))
    return found[0]


def by_timer(e: dict) -> list[str]:
    return sorted(e["total"], key=e["total"].get)


def panel(title: str):
    board = next(b for b in P.DASHBOARDS if b.uid == "commscope-procurement")
    return next(p for p in board.panels if p.title == title)


def test_the_workspace_is_a_stack_comparison():
    """The reference itself: every experiment ran on both stacks, and the experiments differ."""
    exps = own_experiments()
    assert len(exps) == 3 and all(set(e["total"]) == set(STACKS) for e in exps)


def test_the_procurement_panel_ranks_stacks_as_the_workloads_timers_do(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WS], Provenance())
        values = P.all_values(conn)
        system = conn.execute("SELECT DISTINCT environment->>'system' FROM v_run_metrics").fetchone()[0]
        values.update(P.reference_values(conn, system, REF))
        t0, t1 = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
        cur = conn.execute(P.expand(panel("Normalized time per experiment").sql, t0, t1, values))
        cols = [d.name for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        geo = {r[0]: r[1] for r in conn.execute(P.expand(panel("Geometric mean of normalized time").sql, t0, t1,
                                                          values))}
    exps = own_experiments()
    assert all(r["window"] == "focus" for r in rows)
    # the panel's rows, in the order it shows them, per experiment
    shown: dict = {}
    for r in rows:
        shown.setdefault((r["app"], r["experiment"]), []).append(r)
    assert len(shown) == len(exps)   # every experiment found its reference run, on the same window
    paired = set()
    for (app, experiment), group in shown.items():
        e = matching(exps, app, json.loads(experiment))
        paired.add(id(e))
        stacks = [r["stack"] for r in group]
        assert sorted(stacks) == sorted(STACKS), (app, experiment, stacks)
        # the panel's order of the stacks (its rows, ordered by normalized time) is the timers' order
        assert stacks == by_timer(e), (app, e["params"], stacks, e["total"])
        norm = {r["stack"]: r["normalized"] for r in group}
        assert norm[REF] == pytest.approx(1.0)
        assert (norm["pypi-impi2021"] > 1) == (e["total"]["pypi-impi2021"] > e["total"][REF]), (app, e["params"])
        assert [r["stack"] for r in sorted(group, key=lambda r: r["time_s"])] == by_timer(e)
    assert len(paired) == len(exps)   # one panel experiment per workspace experiment, none twice
    # over all experiments, the order of the two stacks is the timers' order
    timer_geo = 1.0
    for e in exps:
        timer_geo *= e["total"]["pypi-impi2021"] / e["total"][REF]
    timer_geo **= 1 / len(exps)
    # one bar per system, stack (its versions compared) and interconnect: each stack ran over its own default
    # transport
    bars = {}
    for label, v in geo.items():
        sy, st, _versions, _interconnect = re.fullmatch(r"(\S+) (\S+)(?: \((.*)\))? (\S+)", label).groups()
        assert (sy, st) not in bars, geo
        bars[(sy, st)] = v
    assert (bars[(system, "pypi-impi2021")] > 1) == (timer_geo > 1)
    assert abs(bars[(system, REF)] - 1) < 1e-12


def test_the_stack_comparison_view_holds_the_experiment_and_ranks_as_the_timers_do(dsn):
    """v_stack_comparison, for outside tools: each experiment's stacks side by side on the same window, ordered as
    the workloads' own total_time orders them; the old view averaged wall_time, Caliper's whole run for the
    profiled stack against the loop for the other."""
    with psycopg.connect(dsn) as conn:
        ingest(conn, [WS], Provenance())
        rows = conn.execute("SELECT app, parameters, \"window\", stack, time_s, stacks_compared "
                            "FROM v_stack_comparison").fetchall()
    exps = own_experiments()
    groups: dict = {}
    for app, params, window, stack, t, n in rows:
        assert window == "focus" and n == 2, (app, params, stack)
        groups.setdefault((app, json.dumps(params, sort_keys=True)), {})[stack] = t
    assert len(groups) == len(exps)
    paired = set()
    for (app, params), times in groups.items():
        e = matching(exps, app, json.loads(params))
        paired.add(id(e))
        assert set(times) == set(STACKS), (app, params, times)
        assert sorted(times, key=times.get) == by_timer(e), (app, e["params"], times, e["total"])
    assert len(paired) == len(exps)


def test_each_interconnect_is_its_own_row_against_one_reference_interconnect(dsn, tmp_path):
    """Real commgraph runs (small messages between pairs: communication-bound) of one experiment: the reference
    system over shared memory, and a second system once over shared memory and once over TCP loopback (the
    interconnect catalog's selections, each proved by the PARAM line the run prints), stored under their
    interconnects. Each (system, stack, interconnect) is its own row, its time that run's own FOM total_time
    over the reference's; the second system's two interconnects are never averaged into one row, and the
    reference is its shared-memory run alone."""
    import conftest
    import interconnects
    import suite
    stack, bdir = conftest.built_once(REF)
    args = ["--pattern", "pairs", "--iters", "200", "--small-bytes", "8", "--large-bytes", "8"]
    total = {}
    with psycopg.connect(dsn) as conn:
        for system, ic, entry in (("ref-box", "shm", "openmpi4/shm"), ("box-b", "shm", "openmpi4/shm"),
                                  ("box-b", "tcp", "openmpi4/tcp")):
            r = suite.run(stack, bdir, "commgraph", args, 2,
                          env=interconnects.get(entry).environ())
            assert r.returncode == 0 and f"PARAM interconnect {entry}" in r.stdout, r.stderr[-800:]
            total[(system, ic)] = float(re.search(r"^FOM total_time (\S+) s$", r.stdout, re.M).group(1))
            version = re.search(r"^MPI_LIBRARY Open MPI v(\S+?),", r.stdout, re.M).group(1)
            out = tmp_path / f"{system}-{ic}" / "commgraph.out"
            out.parent.mkdir()
            out.write_text(r.stdout)
            assert len(ingest(conn, [out], Provenance(system=system, stack=REF, interconnect=ic)).inserted) == 1
        values = P.all_values(conn)
        values.update(reference_system="ref-box", reference_stack=REF, reference_interconnect="shm")
        t0, t1 = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
        table = panel("Normalized time per experiment")
        rows = [dict(zip(table.columns, r)) for r in conn.execute(P.expand(table.sql, t0, t1, values))]
        geo = {r[0]: r[1] for r in conn.execute(P.expand(panel("Geometric mean of normalized time").sql, t0, t1,
                                                          values))}
    assert total[("box-b", "tcp")] > total[("box-b", "shm")]   # the transport moved the time
    got = {(r["system"], r["interconnect"]): r for r in rows}
    assert set(got) == set(total) and len(rows) == 3, rows
    for key, t in total.items():
        assert got[key]["time_s"] == pytest.approx(t, rel=1e-9), key
        assert got[key]["ref_time"] == pytest.approx(total[("ref-box", "shm")], rel=1e-9), key
        assert got[key]["normalized"] == pytest.approx(t / total[("ref-box", "shm")], rel=1e-9), key
    assert all(r["versions"] == f"Open MPI {version}" for r in rows), rows   # as the runs printed it
    for (system, ic), t in total.items():
        assert geo[f"{system} {REF} (Open MPI {version}) {ic}"] == pytest.approx(t / total[("ref-box", "shm")],
                                                                                rel=1e-9)
