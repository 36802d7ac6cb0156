"""The static report (commscope/views/report.py), loaded in real headless
Chromium (Debian's `chromium`) through the DevTools protocol: no console
errors, no exceptions, every plot drawn and not blank on a screenshot, few
legend entries and no label outside its plot at 1400 px; and its findings,
checked against the sources (Caliper records, the workloads' own FOM lines).
"""
from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from PIL import Image, ImageStat

from commscope.views import panels as P
from commscope.cli import main

CHROMIUM = shutil.which("chromium")


class Chromium:
    """A headless Chromium driven over the DevTools protocol (websocket-client)."""

    def __init__(self):
        import websocket
        self.profile = tempfile.mkdtemp(prefix="commscope-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--hide-scrollbars", "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 60) -> None:
        self.ws.settimeout(timeout)
        while not any(e.get("method") == method for e in self.events):
            self.events.append(json.loads(self.ws.recv()))

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("exception", {}).get("description") or p["exceptionDetails"]["text"])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(p["entry"]["text"])
        return out

    def evaluate(self, expr: str):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"])
        return r["result"].get("value")

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def load(page: Path, width: int = 1300):
    """Open the page; return (browser, console errors, plot facts, full-page screenshot)."""
    b = Chromium()
    b.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
    b.call("Page.navigate", url=page.resolve().as_uri())
    b.wait_event("Page.loadEventFired")
    # Plotly draws after load; wait until every plot div holds its SVG.
    b.evaluate("""new Promise(done => { const t0 = Date.now(); (function check() {
        const plots = [...document.querySelectorAll('.plotly-graph-div')];
        if (plots.every(p => p.querySelector('.main-svg')) || Date.now() - t0 > 20000) done(); else setTimeout(check, 100);
    })(); })""")
    facts = b.evaluate("""[...document.querySelectorAll('.plotly-graph-div')].map(p => {
        const r = p.getBoundingClientRect();
        return {id: p.id, traces: (p._fullData || []).length,
                marks: p.querySelectorAll('.scatterlayer .point, .scatterlayer .js-line, .barlayer .point, .hm image, .heatmaplayer image').length,
                x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height}; })""")
    # The viewport made as tall as the page, at the same width, so the screenshot is the page as laid out at WIDTH:
    # captureBeyondViewport would lay it out again at its content's size in the middle of the capture, and the
    # responsive plots would redraw at that passing size. Plotly redraws a responsive plot 100 ms after a resize
    # (Plots.resize, debounced); awaiting each plot's own resize waits for that redraw, however long it takes.
    height = b.evaluate("document.documentElement.scrollHeight")
    b.call("Emulation.setDeviceMetricsOverride", width=width, height=int(height), deviceScaleFactor=1, mobile=False)
    b.evaluate("Promise.all(window.Plotly ? [...document.querySelectorAll('.plotly-graph-div')]"
               ".filter(p => p.offsetParent && p._fullLayout).map(p => Plotly.Plots.resize(p)) : []).then(() => true)")
    shot = b.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)
    img = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("L")
    return b, b.errors(), facts, img


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (bash ci/setup.sh installs it)")


def _report(dsn: str, out: Path, *args) -> "click.testing.Result":  # noqa: F821
    return CliRunner(env={"COMMSCOPE_DB_URL": dsn}).invoke(main, ["report", *args, "-o", str(out)])


@needs_chromium
def test_report_loads_in_chromium_with_every_plot_drawn(filled, tmp_path):  # noqa: F811
    out = tmp_path / "report.html"
    r = _report(filled, out, "--compare", "local", "lab-a")
    assert r.exit_code == 0, r.output
    page = out.read_text()
    # Self-contained: no script, style or image fetched from anywhere.
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    regressions_panel = page.split("<h3>Regressions</h3>", 1)[1].split("<h2>", 1)[0]
    assert "plotly" in page and "No data for this selection" not in regressions_panel
    b, errors, facts, img = load(out)
    try:
        assert errors == [], errors
        n_plots = sum(1 for d in P.DASHBOARDS for p in d.panels if p.plot.get("kind") != "table")
        assert len(facts) == n_plots, f"{len(facts)} plots drawn, {n_plots} panels are plots"
        shots = tmp_path / "plots"
        shots.mkdir()
        for f in facts:
            assert f["traces"] > 0 and f["marks"] > 0, f
            crop = img.crop((int(f["x"]), int(f["y"]), int(f["x"] + f["w"]), int(f["y"] + f["h"])))
            crop.save(shots / f"{f['id']}.png")
            # A blank plot is one flat colour; a drawn one has axes, marks and labels.
            assert ImageStat.Stat(crop).stddev[0] > 10, f"{f['id']} looks blank"
        keep = os.environ.get("COMMSCOPE_KEEP_SCREENSHOT")
        if keep:
            img.save(keep)
    finally:
        b.close()


@needs_chromium
def test_the_checks_catch_a_broken_page(tmp_path):
    """The Chromium checks can fail: a script error and a blank plot area are seen."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><div class='plotly-graph-div' id='p' style='width:400px;height:300px'></div>"
                    "<script>console.error('boom'); undefinedFunction();</script></body></html>")
    b, errors, facts, img = load(page)
    try:
        assert any("boom" in e for e in errors) and any("undefinedFunction" in e for e in errors), errors
        (f,) = facts
        assert f["traces"] == 0 and f["marks"] == 0
        crop = img.crop((int(f["x"]), int(f["y"]), int(f["x"] + f["w"]), int(f["y"] + f["h"])))
        assert ImageStat.Stat(crop).stddev[0] < 1
    finally:
        b.close()


def test_report_selections(filled, tmp_path):  # noqa: F811
    with psycopg.connect(filled) as conn:
        campaign = conn.execute("SELECT campaign_id FROM v_runs WHERE app = 'collsweep' LIMIT 1").fetchone()[0]
    out = tmp_path / "c.html"
    r = _report(filled, out, "--campaign", str(campaign))
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert f"campaigns {campaign}" in page and "Latency against message size" in page
    # Only the campaign's series: the Caliper fixtures' MPI fraction panels are empty.
    first = page.split("MPI time fraction, mean over ranks", 1)[1].split("</div>", 1)[0]
    assert "No data for this selection" in first


def test_report_bad_input_names_it_and_writes_nothing(filled, tmp_path):  # noqa: F811
    out = tmp_path / "r.html"
    r = _report(filled, out, "--compare", "local", "no-such-system")
    assert r.exit_code == 2 and "no-such-system" in r.output and "no such system" in r.output
    r = _report(filled, out, "--campaign", "999999")
    assert r.exit_code == 2 and "999999" in r.output
    r = _report(filled, out, "stray")
    assert r.exit_code == 2 and "stray" in r.output
    assert not out.exists() and not list(tmp_path.glob("*.part"))


def test_the_header_says_the_runs_exact_time_span(filled, tmp_path):  # noqa: F811
    """The header's range is the selected runs' first and last start, as stored (no padding)."""
    with psycopg.connect(filled) as conn:
        campaign = conn.execute("SELECT campaign_id FROM v_runs WHERE app = 'collsweep' LIMIT 1").fetchone()[0]
        lo, hi = conn.execute("SELECT min(started_at), max(started_at) FROM v_runs WHERE campaign_id = %s",
                              (campaign,)).fetchone()
    out = tmp_path / "span.html"
    r = _report(filled, out, "--campaign", str(campaign))
    assert r.exit_code == 0, r.output
    import datetime as dt
    utc = dt.timezone.utc
    m = re.search(r"runs from (\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?) to (\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?) UTC",
                  out.read_text())
    assert m, "no time range in the header"
    said = [dt.datetime.fromisoformat(x).replace(tzinfo=utc) for x in m.groups()]
    assert said == [lo.astimezone(utc).replace(microsecond=0), hi.astimezone(utc).replace(microsecond=0)]


def test_an_empty_panel_says_why_and_what_to_run(dsn, tmp_path):
    """Issue 17: on a store whose runs recorded no MPI time (real halo3d runs profiled without MPI wrapping,
    tests/gate-history), the MPI fraction panels are empty and say that profile.mpi is what they need and how
    to get it; every empty panel of the report says something beyond 'No data'."""
    from commscope.workflow.ingest import Provenance, ingest
    history = Path(__file__).resolve().parent / "gate-history"
    files = sorted(history.glob("halo3d-blocking-24-n2.nompi.night*.cali"))
    assert files
    with psycopg.connect(dsn) as conn:
        ingest(conn, files, Provenance(system="no-mpi-box"))
        conn.commit()
        assert conn.execute("SELECT count(*) FROM v_run_metrics WHERE mpi_fraction_avg IS NOT NULL").fetchone()[0] == 0
    out = tmp_path / "empty.html"
    r = _report(dsn, out)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    mpi = page.split("MPI time fraction, mean over ranks", 1)[1].split("</div>", 1)[0]
    assert "No data for this selection" in mpi and "profile.mpi" in mpi and "--caliper mpi" in mpi, mpi
    notes = re.findall(r"<p class='note empty'>(.*?)</p>", page)
    assert notes and all(len(n) > len("No data for this selection.") + 20 for n in notes), notes



def test_the_gate_panels_say_no_check_ran_not_that_mpi_was_unprofiled(dsn, tmp_path):
    """A store whose one run has MPI time (a real halo3d Caliper profile.mpi run and its output, caliper-reader's
    reading) and no check yet: the MPI fraction panels are drawn, and the gate's empty panels (regressions, too noisy, change
    points) name the step that fills them instead of blaming profiling."""
    import caliperreader
    from commscope.views import panels as P
    from commscope.workflow.ingest import Provenance, ingest
    cali = Path(__file__).resolve().parent / "data" / "halo3d-blocking-loop-n2.mpi-profile.cali"
    r = caliperreader.CaliperReader()
    r.read(str(cali))
    assert any("mpi.function" in rec for rec in r.records)   # the file itself wrapped MPI
    with psycopg.connect(dsn) as conn:
        ingest(conn, [cali, cali.with_suffix(".out")], Provenance(system="gate-panels-box"))
        conn.commit()
        (campaign,) = {c for (c,) in conn.execute("SELECT r.campaign_id FROM runs r JOIN systems s "
                                                  "ON s.id = r.system_id WHERE s.name = 'gate-panels-box'")}
    out = tmp_path / "gate.html"
    res = _report(dsn, out, "--campaign", str(campaign))
    assert res.exit_code == 0, res.output
    page = out.read_text()
    board = P.MPI_FRACTION
    for panel in board.panels:
        block = page.split(f"<h3>{panel.title}</h3>", 1)[1].split("</div>", 1)[0]
        if panel.title in ("Regressions", "Series too noisy to gate", "Change points"):
            assert "No data for this selection" in block and "profile.mpi" not in block, (panel.title, block)
            assert "commscope check" in block or "commscope changepoints" in block, (panel.title, block)
        elif panel.title.startswith("MPI time fraction"):
            assert "No data for this selection" not in block, (panel.title, block)
    titles = {(b.uid, p.title) for b in P.DASHBOARDS for p in b.panels}
    assert set(P.WHY_EMPTY_PANEL) <= titles, set(P.WHY_EMPTY_PANEL) - titles

# ---- issue 17: findings first, legends a reader can read, labels inside their plot ----------------------------

DATA = Path(__file__).resolve().parent / "data"
LEGEND_LIMIT = 15   # visible legend entries a reader can take in


def _finding_items(page: str) -> list[tuple[str, str, str]]:
    """(subsection title, line, hover) of every finding, as a reader sees them (HTML unescaped)."""
    import html as h
    section = re.search(r"<section id='findings'>(.*?)</section>", page, re.S)
    assert section, "the report has no findings section"
    out = []
    for title, body in re.findall(r"<h3>(.*?)</h3>(.*?)(?=<h3>|$)", section.group(1), re.S):
        for hover, text in re.findall(r"<li class='finding'(?: title='([^']*)')?>(.*?)</li>", body, re.S):
            out.append((h.unescape(title), h.unescape(text), h.unescape(hover)))
    return out


def _findings(page: str) -> list[str]:
    return [text for _, text, _ in _finding_items(page)]


def test_the_report_opens_with_findings_whose_numbers_the_sources_confirm(filled, dsn, tmp_path):  # noqa: F811
    """The findings come before every dashboard; each sentence's numbers equal an independent computation:
    the MPI fraction and POP parallel efficiency from the Caliper files' own records (caliper-reader), the fastest
    stack and its margin from the workloads' own `FOM total_time` lines in the Ramble workspaces' .out files, the
    change point from the row the fixture stored, and the advice from what `commscope advise` stored."""
    from helpers import reference
    with psycopg.connect(dsn) as conn:
        campaign = conn.execute("SELECT campaign_id FROM v_runs WHERE app = 'collsweep' LIMIT 1").fetchone()[0]
    adv = CliRunner(env={"COMMSCOPE_DB_URL": dsn}).invoke(
        main, ["advise", "collectives", str(campaign), "-o", str(tmp_path / "tuning")])
    assert adv.exit_code == 0, adv.output
    out = tmp_path / "findings.html"
    r = _report(filled, out)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    lines = _findings(page)
    assert page.index("<section id='findings'>") < page.index(f"<h2>{P.DASHBOARDS[0].title}</h2>")

    # MPI fraction and POP, per series, against caliper-reader's records of the files the series' runs came from.
    # the series' id is in the line's hover (the line names it by what differs)
    mpi = [re.match(r"^.* \[(\w+)\]: (\d+\.\d)% in MPI \(\d+ runs?\); "
                    r"(?:parallel efficiency (\d\.\d\d) = load balance (\d\.\d\d) × communication "
                    r"(\d\.\d\d)|POP not measured)", x) for _, x, _ in _finding_items(page) if "% in MPI" in x]
    sids = [int(re.search(r"\(series #(\d+)\)", hover).group(1)) for _, x, hover in _finding_items(page)
            if "% in MPI" in x]
    assert len(mpi) >= 3 and all(mpi), lines
    checked = 0
    with psycopg.connect(dsn) as conn:
        for m, sid in zip(mpi, sids):
            sources = [Path(s) for (s,) in conn.execute("SELECT source FROM runs WHERE series_id = %s AND status = 'ok'",
                                                        (sid,))]
            # Per-rank profiles only: a spot profile holds aggregates across ranks, not the records to sum.
            if not all(s.parent == DATA and s.suffix in (".cali", ".per-rank") and ".spot." not in s.name
                       for s in sources):
                continue
            fractions, pes = [], []
            for s in sources:
                per_rank = reference(s.name)[m.group(1)]
                assert per_rank, f"{s.name}: no {m.group(1)} window in its records, yet {m.group(0)}"
                time = {k: v[0] for k, v in per_rank.items()}
                useful = {k: v[0] - v[1] - v[2] for k, v in per_rank.items()}
                fractions.append(sum(v[1] + v[2] for v in per_rank.values()) / sum(time.values()))
                pes.append((sum(useful.values()) / len(useful)) / max(time.values()))
            assert float(m.group(2)) == pytest.approx(100 * sum(fractions) / len(fractions), abs=0.051), m.group(0)
            if m.group(3):
                assert float(m.group(3)) == pytest.approx(sum(pes) / len(pes), abs=0.0051), m.group(0)
            checked += 1
    assert checked >= 3, mpi
    fractions = [float(m.group(2)) for m in mpi]
    assert fractions == sorted(fractions, reverse=True), "the largest MPI share first"

    # The fastest stack: the workloads' own total_time of the two Ramble workspaces' commgraph runs.
    def total_time(stack):
        (f,) = [f for ws in ("smoke-openmpi4-mpi", "smoke-mpich4-matrix") for f in
                (DATA / "ramble" / ws / "experiments").glob(f"commgraph/commgraph/commgraph-pairs-{stack}-default-n2/*.out")]
        return float(re.search(r"^FOM total_time (\S+) s$", f.read_text(), re.M).group(1))
    def library(stack):   # the MPI library line the run printed, up to its first comma, as the finding names it
        (f,) = [f for ws in ("smoke-openmpi4-mpi", "smoke-mpich4-matrix") for f in
                (DATA / "ramble" / ws / "experiments").glob(f"commgraph/commgraph/commgraph-pairs-{stack}-default-n2/*.out")]
        return " ".join(re.search(r"^MPI_LIBRARY (.*)$", f.read_text(), re.M).group(1).split(",")[0].split())
    own = {s: total_time(s) for s in ("debian-openmpi4", "debian-mpich4")}
    fast, slow = sorted(own, key=own.get)
    (stack_line,) = [x for x in lines if x.startswith("commgraph ") and "is fastest" in x]
    m = re.search(r": (\S+) \(([^)]*)\) is fastest of (\d+) stacks, (\d+\.\d)% ahead of (\S+) \(([^)]*)\) ", stack_line)
    assert m and (m.group(1), m.group(3), m.group(5)) == (fast, "2", slow), stack_line
    assert (m.group(2), m.group(6)) == (library(fast), library(slow)), stack_line   # the versions compared
    assert float(m.group(4)) == pytest.approx(100 * (own[slow] / own[fast] - 1), abs=0.051), stack_line

    # Regressions: the gate's annotation and the change point the fixture stored (+12%, p=0.003, 4 runs before).
    assert any(x.startswith("Gate, ") and "regression: mpi_fraction_avg +12%" in x for x in lines), lines
    # the fixture's change point sits on its series' first run, stored with the verdict changepoints.verdict gives
    # it there (no baseline, whatever its levels say): the report shows the stored verdict, as the dashboards do
    (cp,) = [x for x in lines if x.startswith("Change point (no baseline, worse)")]
    assert "time_s 1 → 1.12 (+12.0%), means of 4 and 1 runs, p=0.003" in cp, cp

    # The advice: the advisor's own first sentence, as it stored it.
    with psycopg.connect(dsn) as conn:
        (text,) = conn.execute("SELECT text FROM advice WHERE kind = 'collectives' ORDER BY id DESC LIMIT 1").fetchone()
    (advice,) = [x for x in lines if x.startswith("Advice (collectives")]
    assert advice.split(": ", 1)[1].rstrip(".") == text.split(". ")[0].rstrip("."), (advice, text)
    assert re.search(r"\d", advice), "an advice finding carries its numbers"


# ---- issue 37: a reader's first screen, one line per finding, series named by what differs -------------------

FINDING_LIMIT = 160


def _stored_keys(conn, sids) -> dict[int, tuple[str, list[str], dict]]:
    """Per series, read from the stored series (SQL on `series`): its application, its key's pair names in the
    order a name lists them (the parameters, "param." dropped, sorted; then the rest of the environment, sorted),
    and its key (name -> value as text)."""
    out = {}
    for sid, app, params, env in conn.execute(
            "SELECT id, app, parameters, environment FROM series WHERE id = ANY(%s)", (sorted(set(sids)),)):
        p = {k[len("param."):] if k.startswith("param.") else k: v for k, v in params.items()}
        e = {k: v for k, v in env.items() if k not in p}
        key = {k: "none" if v is None else str(v) for k, v in {**e, **p}.items()}
        out[sid] = (app, sorted(p), key)
    return out


def _check_name(name: str, sid: int, peers: list[int], keys: dict) -> tuple[int, int]:
    """NAME of series SID among PEERS (the series listed beside it): its application, then only pairs whose values
    differ among the PEERS of that application, in the order parameters then environment, each by name; the
    series' number ("#12") exactly where those pairs leave it alike another. Returns (pairs shown, pairs that
    differ)."""
    app, _, key = keys[sid]
    same = [keys[p] for p in dict.fromkeys(peers) if keys[p][0] == app]
    pnames = sorted({k for _, ps, _ in same for k in ps})
    order = pnames + sorted({k for _, _, kk in same for k in kk} - set(pnames))
    differ = [k for k in order if len({kk.get(k) for _, _, kk in same}) > 1]
    assert name.startswith(app), (name, app)
    rest = name[len(app):]
    numbered = rest.endswith(f" #{sid}")
    rest = rest.removesuffix(f" #{sid}")
    shown = []
    for k in differ:
        pair = f" {k}={key.get(k, 'none')}"
        if rest == pair or rest.startswith(pair + " "):
            shown.append(k)
            rest = rest[len(pair):]
    assert rest == "", f"{name!r}: {rest!r} is not a pair that differs among {differ}"
    alike = [kk for _, _, kk in same if kk != key and all(kk.get(k) == key.get(k) for k in shown)]
    assert numbered == bool(alike), (name, "alike" if alike else "told apart", shown)
    return len(shown), len(differ)


def test_the_first_screen_is_short_lines_naming_series_by_what_differs(filled, dsn, tmp_path):  # noqa: F811
    """Issue 37: the findings come first, in the order where time goes, what changed, what to do; every line is at
    most FINDING_LIMIT characters; a line about a series names it by its application and the parameters that
    differ among the series of that application listed in the same subsection (all of them, or the first ones
    and "+N more"), worked out here from the stored series' own parameters and environment (SQL on `series`),
    and its hover gives the full key."""
    out = tmp_path / "first.html"
    r = _report(filled, out)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    items = _finding_items(page)
    assert items
    too_long = [x for _, x, _ in items if len(x) > FINDING_LIMIT]
    assert not too_long, [f"{len(x)}: {x}" for x in too_long]
    heads = [page.index(f"<h3>{h}") for h in ("Where time goes", "What changed", "What to do")]
    assert heads == sorted(heads) and heads[-1] < page.index("<section id='reference'>") \
        < page.index(f"<h2>{P.DASHBOARDS[0].title}</h2>")

    named = differ = omitted = 0
    with psycopg.connect(dsn) as conn:   # the owner's role: `filled` is the dashboards' read-only one
        for title in dict.fromkeys(t for t, _, _ in items):
            lines = [(x, int(m.group(1))) for t, x, hover in items if t == title
                     for m in [re.search(r"\(series #(\d+)\)", hover)] if m]
            keys = _stored_keys(conn, [sid for _, sid in lines])
            for x, sid in lines:
                name = x.split(": ", 1)[1] if x.startswith(("Change point (", "Version change: ")) else x
                shown, differing = _check_name(name.split(" [", 1)[0], sid, [s for _, s in lines], keys)
                # the full key on hover: every pair of the series
                hover = next(h for t, y, h in items if t == title and y == x)
                assert all(f"{k}={v}" in hover for k, v in keys[sid][2].items()), hover
                named += 1
                differ += bool(shown)
                omitted += len(keys[sid][2]) > shown
    assert named >= 4 and differ >= 2 and omitted == named, (named, differ, omitted)


def _plot_traces(page: str) -> list[list[dict]]:
    """The traces of every plot, read from the Plotly.newPlot(id, data, layout) calls with a JSON decoder."""
    dec = json.JSONDecoder()
    return [dec.raw_decode(page, m.end())[0] for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page)]


def test_plot_legends_name_series_by_what_differs_in_the_plot(filled, dsn, tmp_path):  # noqa: F811
    """Issue 37: a plot's legend names each stored series by its application and the parameters that differ among
    that plot's series of the application (worked out from `series` by SQL, as above), its window kept; the hover
    keeps the full label (HTML-escaped, as every name reaching plotly)."""
    import html as h
    out = tmp_path / "legends.html"
    r = _report(filled, out)
    assert r.exit_code == 0, r.output
    named = differ = 0
    with psycopg.connect(dsn) as conn:
        for traces in _plot_traces(out.read_text()):
            series = [(t, re.match(r"^(.* #(\d+)( \[[^\]]+\])?): ", h.unescape(t.get("hovertext") or "")))
                      for t in traces if t.get("legendgroup") and not t["legendgroup"].startswith("metric ")]
            series = [(t, m) for t, m in series if m]
            if not series:
                continue
            sids = [int(m.group(2)) for _, m in series]
            keys = _stored_keys(conn, sids)
            for t, m in series:
                if t.get("visible") == "legendonly":
                    continue
                name = h.unescape(t["name"])
                assert name.endswith(m.group(3) or ""), (name, m.group(3))
                shown, _ = _check_name(name.removesuffix(m.group(3) or ""), int(m.group(2)), sids, keys)
                named += 1
                differ += bool(shown)
    assert named >= 10 and differ >= 5, (named, differ)


def test_plot_legends_of_other_series_name_them_by_the_columns_that_differ(filled, dsn, tmp_path):  # noqa: F811
    """Issue 37: a plot whose series are not stored series (collsweep's latency per collective and algorithm on each
    system, stack, interconnect and rank count) names each by its collective and the columns that differ among the
    plot's rows, read here from v_collectives; the hover keeps the full label."""
    import html as h
    from commscope.views import report
    out = tmp_path / "legends.html"
    r = _report(filled, out)
    assert r.exit_code == 0, r.output
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT DISTINCT collective, algorithm, system, app, stack, interconnect, 'n' || ranks "
                            "FROM v_collectives WHERE stat = 't_avg' AND collective <> 'barrier'").fetchall()
    differ = [i for i in range(1, 7) if len({row[i] for row in rows}) > 1]
    expected = {" ".join([row[0]] + [str(row[i]) for i in differ]) for row in rows}
    (plot,) = [t for t in _plot_traces(out.read_text()) if any(" collsweep " in (x.get("hovertext") or "") for x in t)]
    names = {h.unescape(t["name"]) for t in plot if t.get("visible") != "legendonly" and t.get("showlegend")}
    hovers = {h.unescape(t["hovertext"]) for t in plot}
    assert len(rows) > 1 and names <= expected and len(names) == min(len(expected), report.TOP_SERIES), (names, expected)
    assert all(" collsweep " in x for x in hovers), hovers


def test_where_time_goes_reads_the_window_that_measured_mpi(dsn, tmp_path):
    """The committed smoke workspace's profiles hold their MPI records outside the focus region: their series
    are listed under where time goes on the run window (not said to be unmeasured), each share equal to
    caliper-reader's sum of MPI over time across ranks of the series' files, whose focus holds no MPI."""
    from commscope.workflow.ingest import Provenance, ingest
    from helpers import reference
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA / "ramble" / "smoke-openmpi4-mpi"], Provenance())
        conn.commit()
    out = tmp_path / "smoke.html"
    r = _report(dsn, out)
    assert r.exit_code == 0, r.output
    lines = [(x, int(re.search(r"\(series #(\d+)\)", h).group(1))) for t, x, h in _finding_items(out.read_text())
             if t.startswith("Where time goes")]
    assert lines
    on_run = 0
    with psycopg.connect(dsn) as conn:
        for x, sid in lines:
            m = re.match(r"^.* \[(\w+)\]: (\d+\.\d)% in MPI", x)
            assert m, x
            sources = [Path(s) for (s,) in conn.execute(
                "SELECT source FROM runs WHERE series_id = %s AND status = 'ok'", (sid,))]
            assert sources and all(s.suffix == ".cali" for s in sources), sources
            fractions = []
            for s in sources:
                windows = reference(str(s.relative_to(DATA)))
                if m.group(1) == "run":
                    assert not any(v[1] + v[2] for v in windows["focus"].values()), s
                per_rank = windows[m.group(1)]
                fractions.append(sum(v[1] + v[2] for v in per_rank.values()) / sum(v[0] for v in per_rank.values()))
            assert float(m.group(2)) == pytest.approx(100 * sum(fractions) / len(fractions), abs=0.051), x
            on_run += m.group(1) == "run"
    assert on_run, lines


def test_a_report_of_no_reference_study_has_no_reference_table_and_one_line(dsn, tmp_path):
    """Issue 37: real halo3d runs of one variant (tests/gate-history) contrast nothing a reference study contrasts:
    the report has no reference table and says "not run" once, in one line that names the five studies."""
    from commscope.workflow.ingest import Provenance, ingest
    from commscope.views import reference
    history = Path(__file__).resolve().parent / "gate-history"
    files = sorted(history.glob("halo3d-blocking-24-n2.nompi.night*.cali"))
    with psycopg.connect(dsn) as conn:
        ingest(conn, files, Provenance(system="no-study-box"))
        conn.commit()
        # by another route: only halo3d, only the blocking variant, so no study's two sides
        assert conn.execute("SELECT DISTINCT app, parameters->>'param.variant' FROM series").fetchall() == \
            [("halo3d", "blocking")]
    out = tmp_path / "nostudy.html"
    r = _report(dsn, out)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    section = re.search(r"<section id='reference'>(.*?)</section>", page, re.S).group(1)
    assert "<table" not in section and "Verdict rule" not in section
    assert page.lower().count("not run") == 1, page.lower().count("not run")
    (line,) = re.findall(r"<p class='note not-run'>(.*?)</p>", section, re.S)
    assert all(study in line for study in reference.STUDIES) and "commscope run reference" in line


# What sticks out of a plot: every label's box against the plot's SVG, legend entries against the legend's box.
_LAYOUT_FACTS = """[...document.querySelectorAll('.plotly-graph-div')].map(p => {
    const svg = p.querySelector('.main-svg').getBoundingClientRect();
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const labels = [...p.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .legend text')]
        .filter(t => t.textContent.trim()).map(t => ({text: t.textContent, box: box(t)}));
    const legend = p.querySelector('.legend .bg');
    const area = p.querySelector('.nsewdrag');
    return {id: p.id, svg: [svg.left, svg.top, svg.right, svg.bottom], labels,
            legend_entries: p.querySelectorAll('.legend .traces').length,
            legend: legend ? box(legend) : null,
            legend_texts: [...p.querySelectorAll('.legend .traces text')].map(t => ({text: t.textContent, box: box(t)})),
            area: area ? box(area) : null}; })"""


@needs_chromium
def test_at_1400px_every_plot_has_few_legend_entries_and_no_label_sticks_out(filled, tmp_path):  # noqa: F811
    """At 1400 px, as a reader's browser draws it: every plot non-empty, at most LEGEND_LIMIT legend entries, every
    legend entry inside the legend's box (none hidden behind a scroll bar), every tick label, axis title and
    legend text inside the plot's SVG, and a drawing area not squeezed by its labels."""
    out = tmp_path / "report.html"
    r = _report(filled, out, "--compare", "local", "lab-a")
    assert r.exit_code == 0, r.output
    b, errors, facts, img = load(out, width=1400)
    try:
        assert errors == [], errors
        assert facts and all(f["traces"] > 0 and f["marks"] > 0 for f in facts), facts
        # load() waited for the responsive plots' redraw after it resized the viewport for its screenshot
        layout = b.evaluate(_LAYOUT_FACTS)
    finally:
        b.close()
    problems = []
    for p in layout:
        if p["legend_entries"] > LEGEND_LIMIT:
            problems.append(f"{p['id']}: {p['legend_entries']} legend entries")
        x0, y0, x1, y1 = p["svg"]
        out_of = [t for t in p["labels"] if t["box"][0] < x0 - 1 or t["box"][1] < y0 - 1 or t["box"][2] > x1 + 1
                  or t["box"][3] > y1 + 1]
        if out_of:
            problems.append(f"{p['id']}: {len(out_of)} labels outside the plot {p['svg']}, e.g. "
                            f"{out_of[0]['text'][:40]!r} at {out_of[0]['box']}")
        if p["legend"]:
            lx0, ly0, lx1, ly1 = p["legend"]
            hidden = [t["text"] for t in p["legend_texts"] if t["box"][3] > ly1 + 1 or t["box"][1] < ly0 - 1]
            if hidden:
                problems.append(f"{p['id']}: legend entries {hidden[:3]} hidden behind the legend's scroll bar")
        if p["area"]:
            ax0, ay0, ax1, ay1 = p["area"]
            if ay1 - ay0 < 150 or ax1 - ax0 < 400:
                problems.append(f"{p['id']}: drawing area {ax1 - ax0:.0f} x {ay1 - ay0:.0f} px, squeezed by its labels")
    assert not problems, "\n".join(problems[:20])
