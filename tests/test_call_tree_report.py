"""The report draws the call-tree dashboard's two views (views/report.py): the call tree of the latest profiled run
as an indented tree table, and the regions that got slower as a table. Checked against the profiles read with
caliper-reader (inclusive time per call path, mean over ranks) and with Hatchet (graphframe subtraction of one
night from the next, tests/gate-history)."""
from __future__ import annotations

import collections
import html
import re
from pathlib import Path

import caliperreader
import pytest
from click.testing import CliRunner

from commscope.cli import main
from helpers import CALIPERS_OWN_PATH, calipers_own

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "tests" / "data" / "halo3d-overlap-n4.runtime-profile.cali"
NIGHTS = [ROOT / "tests" / "gate-history" / f"halo3d-blocking-24-n2.mpi.night{n}.cali" for n in range(1, 6)]


def _ingest(dsn: str, *args: str) -> None:
    r = CliRunner().invoke(main, ["ingest", *args, "--system", "lab-a", "--quiet"], env={"COMMSCOPE_DB_URL": dsn})
    assert r.exit_code == 0, r.output


def _report(dsn: str, tmp_path: Path) -> str:
    out = tmp_path / "report.html"
    r = CliRunner().invoke(main, ["report", "-o", str(out)], env={"COMMSCOPE_DB_URL": dsn})
    assert r.exit_code == 0, r.output
    return out.read_text()


def _panel(page: str, title: str) -> str:
    """The HTML of the report's panel TITLE."""
    start = page.index(f"<h3>{html.escape(title)}</h3>")
    return page[start:page.index("</div>", start)]


def caliper_inclusive_mean(path: Path) -> dict[tuple, float]:
    """Call path -> inclusive seconds, mean over the ranks with a record, from caliper-reader's records."""
    records, _ = caliperreader.read_caliper_contents(str(path))
    ranks = {r["mpi.rank"] for r in records if "mpi.rank" in r}
    total: dict = collections.defaultdict(float)
    for r in records:
        t = r.get("sum#sum#time.duration", r.get("sum#time.duration"))
        if "path" in r and t is not None and "mpi.rank" in r and not calipers_own(r, path):
            p = tuple(r["path"]) if isinstance(r["path"], list) else (r["path"],)
            for i in range(1, len(p) + 1):
                total[p[:i]] += float(t)
    return {p: t / len(ranks) for p, t in total.items()}


def test_the_report_draws_the_call_tree_as_an_indented_tree_with_caliper_readers_times(dsn, tmp_path):
    _ingest(dsn, str(PROFILE))
    part = _panel(_report(dsn, tmp_path), "Call tree of the latest profiled run")
    assert "<table class='tree'>" in part
    rows = re.findall(r"<td style='padding-left: [\d.]+em' data-level='(\d+)' data-value='([^']*)'>([^<]*)</td>", part)
    shown, stack = {}, []
    for level, value, label in rows:
        stack[int(level):] = [html.unescape(label)]
        shown[tuple(stack)] = float(value)
    expected = caliper_inclusive_mean(PROFILE)
    assert shown.pop(("total",)) == pytest.approx(sum(t for p, t in expected.items() if len(p) == 1), rel=1e-9)
    shown = {p[1:]: t for p, t in shown.items()}
    assert set(shown) == set(expected), sorted(set(shown) ^ set(expected))
    for p, t in expected.items():
        assert shown[p] == pytest.approx(t, rel=1e-9, abs=1e-12), p


def _hatchet_exclusive_mean(path: Path):
    """Hatchet's GraphFrame of a profile, its duplicated (node, rank) rows of one-element paths dropped but the one
    with time (/work/shared/notes/offline-toolchain.md)."""
    import hatchet as ht
    gf = ht.GraphFrame.from_caliperreader(str(path))
    df = gf.dataframe
    df = df.assign(_t=df["time"].abs()).sort_values("_t", kind="stable").drop(columns="_t")
    gf.dataframe = df[~df.index.duplicated(keep="last")]
    return gf


def test_the_report_lists_the_regions_that_got_slower_as_hatchets_subtraction(dsn, tmp_path):
    for f in NIGHTS:
        _ingest(dsn, str(f), str(f.with_suffix(".out")))
    part = _panel(_report(dsn, tmp_path), "Regions that got slower than the run before")
    cells = [re.findall(r"<td>([^<]*)</td>", row) for row in re.findall(r"<tr>(<td>.*?)</tr>", part)]
    shown = {tuple(c[0].split("/")): float(c[3]) for c in cells}
    diff = (_hatchet_exclusive_mean(NIGHTS[4]) - _hatchet_exclusive_mean(NIGHTS[3])).dataframe.reset_index()
    ranks = diff["rank"].nunique()
    change: dict = collections.defaultdict(float)
    for node, t in zip(diff["node"], diff["time"]):
        if tuple(n.frame["name"] for n in node.path()) != CALIPERS_OWN_PATH:   # helpers.calipers_own
            change[tuple(n.frame["name"] for n in node.path())] += float(t) / ranks
    slower = {p: d for p, d in change.items() if d > 0}
    assert set(shown) == set(slower), sorted(set(shown) ^ set(slower))
    for p, d in slower.items():
        assert shown[p] == pytest.approx(d, rel=1e-3), p   # the table prints 4 digits
    assert tuple(cells[0][0].split("/")) == max(slower, key=slower.get)
