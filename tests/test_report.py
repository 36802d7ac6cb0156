"""The static report (collectors/commscope/report.py), loaded in real headless
Chromium (Debian's `chromium`) through the DevTools protocol: no console
errors, no exceptions, every plot drawn and not blank on a screenshot.
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

from commscope import panels as P
from commscope.cli import main
from test_dashboards import filled, workload_outputs  # noqa: F401  (the same real store)

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
    height = b.evaluate("document.documentElement.scrollHeight")
    b.call("Emulation.setDeviceMetricsOverride", width=width, height=int(height), deviceScaleFactor=1, mobile=False)
    shot = b.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
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
    assert "plotly" in page and "No data for this selection" not in page.split("Regressions", 1)[1].split("<h2>", 1)[0]
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
    from commscope.ingest import Provenance, ingest
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
