"""Every renderer under a fuzzer (issue 46, item 2). Hypothesis draws hostile names (newlines, control characters,
backticks, <script>, `](javascript:`, Grafana macros such as $__timeFilter(x), $__interval and ${var}, %, quotes,
bidirectional overrides, names up to the store's limits) and each must show as text, never as markup, SQL or an
extra line, checked by oracles independent of commscope's own escaping:

- the Grafana macro expansion (views/grafana_macros, which the report runs and Grafana does) of every panel and
  annotation query of every dashboard: with the hostile names as the variables' values, the SQL must be the SQL
  with neutral tokens, each token's quoted literal replaced by the name's own SQL literal (' doubled) — the name
  is one literal and nothing else. A name Grafana would rewrite inside its literal is refused when read, in one
  line (records.check_grafana_safe); every other name passes;
- one store holding series under hostile names (ingested together, then rendered once per example):
  `commscope check`'s text (one line per series, counted), its Markdown (one table row per series, nothing outside
  code spans), its JUnit (parsed by xml.etree: one test case per series, its name the series' name as text), the
  report's HTML (parsed by html.parser: no element, attribute or script a name brought; the names in its text or
  its Plotly strings, escaped) and the dashboards' queries run as expanded (no SQL error). The annotation texts
  through Grafana's own sanitizer are checked with a fixed list of names by
  tests/test_hostile_input.py::test_names_show_as_text_in_grafanas_annotations_and_nowhere_else_as_html.

The budget is fixed for CI (derandomize=True, database=None, few examples, one store per test)."""
from __future__ import annotations

import datetime as dt
import html.parser
import itertools
import json
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import psycopg
from hypothesis import HealthCheck, given, settings, strategies as st

from commscope.read.profiles import BadProfile
from commscope.read.storable import check_labels
from commscope.views import panels as P
from helpers import START, outside_code_spans, plotly_strings, synthetic

DASHBOARDS = Path(__file__).parents[1] / "dashboards" / "json"
FRAGMENTS = ["\n", "\r\n", "\x1b[31m", "\x07", "\t", "`", "``", "<script>alert(1)</script>", "](javascript:alert(1))",
             "[x](https://evil.example/x)", "![i](https://evil.example/i.png)", "$__timeFilter(x)", "$__interval",
             "$__timeFrom()", "${var}", "$app", "[[app]]", "%s", "%", "'", "''", '"', "\\", "\u202e", "\u2066",
             "<a href=x>", "&amp;", "|", "*", "_", "--", "; DROP TABLE runs; --", "{{x}}", "é", "\U0001F600"]


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None, print_blob=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


hostile_name = st.one_of(
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(min_size=1, max_size=8)), min_size=1, max_size=6)
    .map("".join),
    st.sampled_from(FRAGMENTS).map(lambda f: f * (90 // len(f) + 1)),   # long (app and workload: within 768 bytes)
).filter(lambda s: s.strip() and "\x00" not in s and not any(0xD800 <= ord(c) <= 0xDFFF for c in s))


def accepted(name: str) -> bool:
    """Whether the store takes NAME as an application's name (records.check_labels); a refusal is one line."""
    rec = synthetic(name, 0, 0, 1.0)
    try:
        check_labels(rec)
    except BadProfile as e:
        assert str(e).startswith(rec.source), str(e)   # a macro, or beyond a limit (the source holds NAME)
        return False
    return True


# ---- the macro expansion, Grafana's and the report's ---------------------------------------------------------------

def _queries() -> list[str]:
    out = []
    for f in sorted(DASHBOARDS.glob("*.json")):
        doc = json.loads(f.read_text())
        for p in doc.get("panels", []):
            out += [t["rawSql"] for t in p.get("targets", []) if "rawSql" in t]
        out += [a["target"]["rawSql"] for a in doc.get("annotations", {}).get("list", []) if "rawSql" in a.get(
            "target", {})]
    return out


QUERIES = _queries()
_EXAMPLES = itertools.count()
T0, T1 = START - dt.timedelta(days=1), START + dt.timedelta(days=20)


def literal(v: str) -> str:
    """V as a standard SQL string literal."""
    return "'" + v.replace("'", "''") + "'"


@fuzz(40)
@given(names=st.lists(hostile_name, min_size=1, max_size=3))
def test_a_name_is_one_sql_literal_in_every_expanded_query(names):
    names = [n for n in names if accepted(n)]
    tokens = [f"zqtoken{i}zq" for i in range(len(names))]
    neutral = {name: tokens or ["zqnonezq"] for name, _, _ in P.VARIABLES} | P.CALL_TREE_FIRST
    hostile = {name: names or ["zqnonezq"] for name, _, _ in P.VARIABLES} | P.CALL_TREE_FIRST
    for q in QUERIES:
        expected = P.expand(q, T0, T1, neutral)
        for t, n in zip(tokens, names):
            expected = expected.replace(literal(t), literal(n))
        assert P.expand(q, T0, T1, hostile) == expected, (names, q[:200])


def test_a_name_grafana_would_rewrite_is_refused_in_one_line():
    for name in ("a$__timeFilter(x)", "$__interval", "x$__timeFrom()y", "$f(1)"):
        assert not accepted(name), name
    for name in ("${var}", "cost $5", "%", "$app", "[[app]]"):
        assert accepted(name), name


# ---- one store, every output ---------------------------------------------------------------------------------------

class _Tags(html.parser.HTMLParser):
    """Start tags, attributes and text of an HTML page, as a browser's tokenizer reads them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def _cli(dsn: str, *args):
    from click.testing import CliRunner
    from commscope.cli import main
    r = CliRunner(mix_stderr=False).invoke(main, list(map(str, args)), env={"COMMSCOPE_DB_URL": dsn})
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exc_info
    return r


def _store(dsn: str, names: list[str], seed: int) -> None:
    """Fifteen nights of three runs per name, the last five 30% slower for every other name (a regression)."""
    from commscope.store.ingest import Provenance, ingest_records
    rnd = random.Random(seed)
    n = next(_EXAMPLES)   # Hypothesis may run an example again: its runs are new ones, after the last example's
    later = dt.timedelta(days=20 * n)
    with psycopg.connect(dsn) as conn:
        for night in range(15):
            recs = [synthetic(app, night, i, 10.0 * (1.3 if night >= 10 and k % 2 else 1.0) * (1 + rnd.gauss(0, .02)),
                              variant=f"f{n}")
                    for k, app in enumerate(names) for i in range(3)]
            for rec in recs:
                rec.started_at += later
            ingest_records(conn, iter(recs), Provenance(), f"fuzz {seed} night {night}")


@fuzz(2)
@given(names=st.lists(hostile_name, min_size=3, max_size=5, unique=True))
def test_hostile_names_show_as_text_in_every_output(dsn, tmp_path, names):
    names = [n for n in names if accepted(n)]
    if not names:
        return
    seed = abs(hash(tuple(names))) % 10**6
    _store(dsn, names, seed)
    md, junit, page = tmp_path / "check.md", tmp_path / "check.xml", tmp_path / "report.html"
    r = _cli(dsn, "check", "--no-annotate", "--format", "json", "--markdown", md, "--junit", junit)
    assert r.exit_code in (0, 1), r.stderr
    series = json.loads(r.stdout)["series"]
    apps = {s["app"] for s in series}
    assert set(names) <= apps, (names, apps)
    # JUnit: well-formed, one case per series, the names as text (XML 1.0 cannot hold control characters: they
    # must be escaped or replaced, never break the document)
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert len(cases) == len(series)
    for c in cases:
        assert c.get("name").isprintable(), c.get("name")
    # Markdown: one row per series, each with its nine cells; nothing a name holds outside a code span
    text = md.read_text().split("\nChange points this campaign completes")[0]
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert len(rows) == 2 + len(series), rows
    for row in rows[2:]:
        assert len(re.findall(r"(?<!\\)\|", row)) == 10, row
    for line in text.splitlines():
        outside = outside_code_spans(line)
        assert "evil.example" not in outside and "javascript:" not in outside and "<script" not in outside, line
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]", md.read_text())
    # check's text: one line per series at most, and no control character a terminal would act on
    r = _cli(dsn, "check", "--no-annotate")
    assert r.exit_code in (0, 1), r.stderr
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", r.stdout), r.stdout
    # every line is one check writes (a series' lines start with its system, testbox): none a name forged
    for line in r.stdout.splitlines():
        assert re.match(r"(campaign |series |testbox |  |change point: |one alert: |\d+ series, |Suspect|$)",
                        line), line
    # the report: written, and no element, attribute or script from a name
    r = _cli(dsn, "report", "-o", page)
    assert r.exit_code == 0, r.stderr
    parsed = _Tags()
    parsed.feed(page.read_text())
    for tag, attrs in parsed.tags:
        assert tag not in ("a", "img", "iframe", "object", "embed") or not any(
            "evil" in (v or "") or "javascript:" in (v or "") for _, v in attrs), (tag, attrs)
        assert not [k for k, _ in attrs if k.startswith("on")], (tag, attrs)
    assert not any("alert(1)" in s and "<script" in s for s in parsed.scripts if "Plotly" not in s)
    strings = plotly_strings(page.read_text())
    for s in strings:
        assert "<script" not in s and "<a " not in s and "<img" not in s, s
    # the dashboards' queries, expanded with every option selected, run as Grafana's role would run them
    with psycopg.connect(dsn) as conn:
        values = P.all_values(conn)
        for q in QUERIES:
            conn.execute(P.expand(q, T0, T1, values))

