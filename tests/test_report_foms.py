"""The report's Figures of merit table stays small when an application prints thousands of per-step FOMs: each
family (names that differ only in their step number) is one row with its count, min, median, max and last value,
checked against the numbers read from the application's output file directly."""
from __future__ import annotations

import html
import random
import re
import statistics

import psycopg

from commscope.workflow.ingest import Provenance, ingest
from commscope.views import report

STEPS = 1950   # two per-step families: 3,900 FOMs


def application_output(path, steps: int = STEPS) -> None:
    """A run's stdout as an application following the output contract (workloads/README.md) prints it: the
    header, then a residual and a time step per step, then its totals."""
    rnd = random.Random(44)
    lines = ["COMMSCOPE workload=stepper version=1.0", "MPI_LIBRARY Open MPI v4.1.4", "RANKS 2",
             "PARAM steps " + str(steps)]
    residual = 1.0
    for s in range(1, steps + 1):
        residual *= rnd.uniform(0.990, 1.004)
        lines.append(f"FOM residual_step_{s} {residual:.9g} 1")
        lines.append(f"FOM dt_step_{s} {rnd.uniform(1e-4, 3e-4):.9g} s")
    lines += ["FOM total_time 1.25 s", "FOM comm_time_avg 0.5 s"]
    path.write_text("\n".join(lines) + "\n")


def fom_table(page: str) -> tuple[str, list[dict]]:
    """The report's Figures of merit section and its table's rows, each a dict column -> text."""
    section = re.search(r"<h2>Figures of merit</h2>.*?(?=<h2>|</body>)", page, re.S).group(0)
    table = re.search(r"<table>(.*?)</table>", section, re.S).group(1)
    cols = [html.unescape(c) for c in re.findall(r"<th>(.*?)</th>", table)]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("</thead>", 1)[1], re.S)
    return section, [dict(zip(cols, (html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)))) for r in rows]


def test_thousands_of_per_step_foms_are_summarised_per_family(dsn, tmp_path):
    out = tmp_path / "stepper.out"
    application_output(out)
    read = {}
    for name, value in re.findall(r"^FOM (\w+) (\S+) \S+$", out.read_text(), re.M):
        family = re.sub(r"_\d+$", "_#", name)
        read.setdefault(family, []).append((int(name.rsplit("_", 1)[1]) if family != name else 0, float(value)))
    assert len(read["residual_step_#"]) + len(read["dt_step_#"]) == 2 * STEPS
    with psycopg.connect(dsn) as conn:
        ingest(conn, [out], Provenance(system="testsys", stack="debian-openmpi4"))
        assert conn.execute("SELECT count(*) FROM v_foms").fetchone()[0] == 2 * STEPS + 2   # all stored
        page = report.render(conn)
    section, rows = fom_table(page)
    import plotly.offline
    assert len(section) < 10_000, len(section)
    assert len(page) - len(plotly.offline.get_plotlyjs()) < 200_000, len(page)
    shown = {r["name"]: r for r in rows}
    assert sorted(shown) == ["comm_time_avg", "dt_step_#", "residual_step_#", "total_time"]
    for family in ("residual_step_#", "dt_step_#"):
        values = [v for _, v in read[family]]
        last = max(read[family])[1]
        row = shown[family]
        assert row["count"] == str(len(values)) == str(STEPS)
        for col, expected in (("min", min(values)), ("median", statistics.median(values)),
                              ("max", max(values)), ("value", last)):
            assert row[col] == f"{expected:.4g}", (family, col, row[col], expected)
    assert shown["total_time"]["value"] == "1.25" and shown["total_time"]["count"] == "1"
