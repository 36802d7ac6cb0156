#!/usr/bin/env python3
"""The gate at facility scale (issue 45): SERIES halo3d series, half quiet and half loaded, NIGHTS nights of RUNS
runs each, written as workload outputs (the real tests/data halo3d output with its total_time, and the timers
scaled with it, drawn from the real samples in bench/results/facility_night_samples.json, which `measure` makes),
stored through `commscope ingest` one night a campaign in a fresh embedded PostgreSQL, then `commscope check` on
the last night.

- quiet series: halo3d (MEASURED) with nothing else started beside it, the times as measured;
- loaded series: halo3d beside one busy loop, the times as measured, each with its measured wait share;
- a night is RUNS consecutive measured samples from a random place in its cell's measured sequence;
- SHIFTED quiet series run +25 % from night NIGHTS - 2 (two nights) and SHIFTED from night NIGHTS - 5 (five nights);
- --platform N: N more quiet series on another stack, all +25 % from night NIGHTS - 2 (a platform shift).

Reported: the false alerts (regressions, and suspects on the slower side, that the budget did not hold back) among
the unshifted series, precision, recall of each shift, the platform's alerts and groups, the ingest's and check's
wall-clock times.

    .venv/bin/python bench/facility_night.py measure [--rounds 120]
    .venv/bin/python bench/facility_night.py [--series 1000] [--platform 300] [--check-args "--fdr 0.05"] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tests" / "data" / "halo3d-blocking-loop-n2.mpi-profile.out"
SAMPLES = ROOT / "bench" / "results" / "facility_night_samples.json"
MEASURED = ("halo3d", ["--n", "48,48,48", "--iters", "200", "--variant", "blocking"])   # about 0.3 s a run alone
CLI = [sys.executable, "-m", "commscope.cli"]
NIGHTS, RUNS, SHIFT, SHIFTED = 16, 3, 0.25, 30
ALERTS = ("suspect", "regression")


def measure(rounds: int, out: Path) -> None:
    """ROUNDS runs of MEASURED at each level (quiet: no busy loop beside them; loaded: one), by the accuracy
    bench's own measuring loop (bench/regression_accuracy.py measure), written to OUT."""
    sys.path.insert(0, str(ROOT / "bench"))
    import regression_accuracy
    regression_accuracy.measure(rounds, out, {MEASURED[0]: (MEASURED[1], "total_time")}, {"quiet": 0, "loaded": 1},
                                f"bench/facility_night.py measure --rounds {rounds}")


def cells(samples: Path = SAMPLES) -> dict[str, list[tuple[float, float]]]:
    """'quiet' and 'loaded': (total_time, wait share) of each measured run, in measured order."""
    doc = json.loads(samples.read_text())
    return {level: [(s["value"], s["runqueue_wait_share_max"]) for s in doc["samples"] if s["level"] == level]
            for level in ("quiet", "loaded")}


PLATFORM_LIBRARY = "MPI_LIBRARY MPICH Version: 4.0.2"   # the platform-shift series' stack (another MPI)


def plan(n_series: int, shifted: int = SHIFTED, platform: int = 0) -> list[dict]:
    """One entry per series: its cell, and the night its +25 % shift starts (None: unshifted). The first
    2 x SHIFTED quiet series are shifted. PLATFORM more quiet series run on another stack (PLATFORM_LIBRARY), all
    +25 % from night NIGHTS - 2: a platform shift."""
    out = [{"series": n_series + k, "cell": "quiet", "shift_from": NIGHTS - 2, "platform": True}
           for k in range(platform)]
    for s in range(n_series):
        cell = "quiet" if s % 2 == 0 else "loaded"
        k = s // 2
        start = (NIGHTS - 2 if k < shifted else NIGHTS - 5 if k < 2 * shifted else None) if cell == "quiet" else None
        out.append({"series": s, "cell": cell, "shift_from": start, "platform": False})
    return sorted(out, key=lambda p: p["series"])


def output(template: str, old: float, value: float, share: float, iters: int) -> str:
    """The template with its iteration count, loop time (the other timers scaled with it) and wait share replaced."""
    text = re.sub(r"^PARAM iters .*$", f"PARAM iters {iters}", template, flags=re.M)
    text = re.sub(r"^FOM runqueue_wait_share_max \S+ share$", f"FOM runqueue_wait_share_max {share:.9g} share",
                  text, flags=re.M)
    return re.sub(r"^FOM (\w+_time\w*|time_per_iter) (\S+) s$",
                  lambda m: f"FOM {m[1]} {float(m[2]) * value / old:.9g} s", text, flags=re.M)


def write_night(folder: Path, night: int, series: list[dict], drawn: dict, template: str, old: float) -> None:
    """The night's outputs, one file a run; a run's file is its identity in the store, so runs that drew the
    same sample differ in the 9th digit."""
    folder.mkdir(parents=True)
    for p in series:
        s = p["series"]
        factor = 1 + SHIFT if p["shift_from"] is not None and night >= p["shift_from"] else 1.0
        for i, (value, share) in enumerate(drawn[s][night]):
            value *= factor * (1 + 1e-8 * ((night * len(series) + s) * RUNS + i))
            text = output(template, old, value, share, 1000 + s)
            if p["platform"]:
                text = re.sub(r"^MPI_LIBRARY .*$", PLATFORM_LIBRARY, text, flags=re.M)
            (folder / f"halo3d-s{s}-r{i}.out").write_text(text)


def draw(series: list[dict], seed: int, independent: bool = False) -> dict[int, list[list[tuple]]]:
    """Per series, NIGHTS nights of RUNS consecutive measured runs from random places in its cell's sequence
    (INDEPENDENT: RUNS runs drawn one by one, so nights are exchangeable)."""
    rnd, pools = random.Random(seed), cells()
    out = {}
    for p in series:
        pool = pools[p["cell"]]
        if independent:
            out[p["series"]] = [[rnd.choice(pool) for _ in range(RUNS)] for _ in range(NIGHTS)]
        else:
            out[p["series"]] = [pool[k:k + RUNS] for k in (rnd.randrange(len(pool) - RUNS + 1)
                                                           for _ in range(NIGHTS))]
    return out


def run(cmd: list[str], url: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COMMSCOPE_DB_URL": url})
    return r, time.perf_counter() - t0


def ingest(url: str, work: Path, series: list[dict], seed: int,
           independent: bool = False) -> tuple[list[int], float, float]:
    """Every night written and ingested; (campaign ids, seconds writing files, seconds in `commscope ingest`)."""
    template = TEMPLATE.read_text()
    old = float(re.search(r"^FOM total_time (\S+) s$", template, re.M)[1])
    drawn = draw(series, seed, independent)
    campaigns, writing, ingesting = [], 0.0, 0.0
    for night in range(NIGHTS):
        t0 = time.perf_counter()
        folder = work / f"night{night:02d}"
        write_night(folder, night, series, drawn, template, old)
        writing += time.perf_counter() - t0
        r, took = run([*CLI, "ingest", "-q", "--system", "facility", "--started-at",
                       f"2026-10-{night + 1:02d}T02:00:00+00:00", str(folder)], url)
        if r.returncode != 0:
            raise SystemExit(f"ingest of night {night} failed: {r.stderr}")
        ingesting += took
        campaigns.append(int(r.stdout.split()[-1]))
        shutil.rmtree(folder)
        print(f"  night {night}: ingested in {took:.1f} s", file=sys.stderr, flush=True)
    return campaigns, writing, ingesting


def score(found: list[dict], series: list[dict]) -> dict:
    """False alerts, precision and the recall of each shift, from check's JSON series (PARAM iters names them)."""
    by = {int(f["parameters"]["param.iters"]) - 1000: f for f in found}
    alert = {s: by[s].get("alert", by[s]["verdict"] in ALERTS) for s in by}
    unshifted = [p["series"] for p in series if p["shift_from"] is None]
    two = [p["series"] for p in series if p["shift_from"] == NIGHTS - 2 and not p["platform"]]
    five = [p["series"] for p in series if p["shift_from"] == NIGHTS - 5]
    platform = [p["series"] for p in series if p["platform"]]
    leads = {s: by[s]["alert"] and (by[s]["group"] is None or by[s]["group"]["lead_series_id"] == by[s]["series_id"])
             for s in by}
    false = sum(alert[s] for s in unshifted)
    true = sum(alert[s] for s in two + five)
    verdicts = {}
    for s in unshifted:
        verdicts[by[s]["verdict"]] = verdicts.get(by[s]["verdict"], 0) + 1
    return {"judged": len(by), "unshifted": len(unshifted), "false_alerts": false,
            "false_regressions": sum(by[s]["verdict"] == "regression" for s in unshifted),
            "false_suspects": sum(by[s]["verdict"] == "suspect" and alert[s] for s in unshifted),
            "precision": true / (true + false) if true + false else None,
            "recall_2": sum(alert[s] for s in two) / len(two) if two else None,
            "recall_5": sum(alert[s] for s in five) / len(five) if five else None,
            "unshifted_verdicts": verdicts,
            "alerts": sum(leads.values()),
            "platform": {"series": len(platform), "alerting": sum(alert[s] for s in platform),
                         "alerts": sum(leads[s] for s in platform),
                         "groups": sorted({by[s]["group"]["label"] for s in platform if by[s]["group"]})}
            if platform else None,
            "detectable_median": {c: statistics.median([by[p["series"]]["detectable_effect"] for p in series
                                                        if p["cell"] == c and p["shift_from"] is None
                                                        and by[p["series"]]["detectable_effect"] is not None] or [0])
                                  for c in ("quiet", "loaded")}}


def check(url: str, campaign: int, extra: list[str]) -> tuple[dict, float, subprocess.CompletedProcess]:
    r, took = run([*CLI, "check", "--campaign", str(campaign), "--format", "json", *extra], url)
    if r.returncode not in (0, 1):
        raise SystemExit(f"check failed ({r.returncode}): {r.stderr[-2000:]}")
    return json.loads(r.stdout), took, r


def store(keep: Path | None):
    """(url, stop): a fresh migrated database in an embedded PostgreSQL (KEEP: its home, kept afterwards)."""
    sys.path.insert(0, str(ROOT))
    import psycopg
    from commscope.store import db
    home = keep or Path(tempfile.mkdtemp(prefix="commscope-facility-"))
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o711)
    emb = db.Embedded(home)
    emb.start()
    with emb.admin("postgres") as c:
        c.execute('CREATE DATABASE "facility"')
    emb.prepare_database("facility")
    url = emb.url("facility")
    with psycopg.connect(url) as conn:
        db.migrate(conn)

    def stop():
        emb.stop()
        if keep is None:
            shutil.rmtree(home, ignore_errors=True)
    return url, stop


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["measure"]:
        mp = argparse.ArgumentParser(prog="facility_night.py measure", description=measure.__doc__)
        mp.add_argument("--rounds", type=int, default=120)
        mp.add_argument("--out", type=Path, default=SAMPLES)
        a = mp.parse_args(argv[1:])
        measure(a.rounds, a.out)
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument("--platform", type=int, default=0,
                    help="this many more series on another stack, all +25 %% from night NIGHTS - 2")
    ap.add_argument("--check-args", action="append", default=[],
                    help="extra arguments of one `commscope check` run (repeatable: one check each)")
    ap.add_argument("--keep", type=Path, help="keep the store's home here (and reuse nothing)")
    ap.add_argument("--url", help="an existing store built by an earlier --keep run: check only")
    ap.add_argument("--campaign", type=int, help="with --url: the campaign to judge")
    ap.add_argument("--independent", action="store_true",
                    help="draw a night's runs one by one (exchangeable nights) instead of consecutive measured runs")
    args = ap.parse_args(argv)
    series = plan(args.series, platform=args.platform)
    stop = lambda: None  # noqa: E731
    if args.url:
        url, campaigns, writing, ingesting = args.url, [args.campaign], 0.0, 0.0
    else:
        url, stop = store(args.keep)
    try:
        if not args.url:
            with tempfile.TemporaryDirectory(prefix="facility-nights-") as work:
                campaigns, writing, ingesting = ingest(url, Path(work), series, args.seed, args.independent)
            print(f"store: {url} last campaign {campaigns[-1]}", file=sys.stderr)
        print(f"{args.series} series, {NIGHTS} nights x {RUNS} runs; files written in {writing:.1f} s, "
              f"`commscope ingest` {ingesting:.1f} s in all ({ingesting / NIGHTS:.1f} s a night)")
        for extra in args.check_args or [""]:
            doc, took, _ = check(url, campaigns[-1], shlex.split(extra))
            s = score(doc["series"], series)
            print(f"check {extra or '(defaults)'}: {took:.1f} s; {json.dumps(s)}", flush=True)
    finally:
        stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
