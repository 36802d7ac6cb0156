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

    .venv/bin/python bench/facility_night.py measure [--rounds 120] [--ranks 2] [--loops 1] [--out FILE]
    .venv/bin/python bench/facility_night.py [--series 1000] [--platform 300] [--check-args "--fdr 0.05"] [--keep DIR]
        [--samples FILE]
    .venv/bin/python bench/facility_night.py --url URL --campaign 16 [--replicate 10000] [--check-args ...]

--replicate N (check's time at facility scale, without hours of ingest: 10,000 series through `commscope ingest`
take about 2 hours here): before checking, the store's series are copied at the SQL level until it holds N series.
Copy k of a series is the same rows under a new identity: a new system (the original's name + "-rK", every other
column the same), a new series (its environment's system that name, its key recomputed by the store's
series_key), and its runs (every run of the series, ok or not, in the same campaigns, new ids in the same order,
content_hash + ":rK") with their run_windows, FOMs and call-tree rows (node_metrics, mpi_metrics, rank_spread,
comm_stats where the store has them), its change points and their state (so check finds them up to date, as after an
ingest) and its accepted levels. The store's own triggers keep the rollups. These are REPLICATED ROWS, not
measured ones: every copy's values equal its original's, so its verdict is its original's, while whether it
alerts can differ (the campaign's budget is over N findings, and a platform-wide group is per system); they are
fit for timing check on N series, not for its accuracy. It writes into the store at --url, which must not hold
replicas already: copy the kept store's home first (server stopped: `cp -a /tmp/fac1300 /tmp/fac10k`) and start
the copy.
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


def measure(rounds: int, out: Path, ranks: int = 2, loops: int = 1) -> None:
    """ROUNDS runs of MEASURED on RANKS ranks at each level (quiet: no busy loop beside them; loaded: LOOPS), by
    the accuracy bench's own measuring loop (bench/regression_accuracy.py measure), written to OUT."""
    sys.path.insert(0, str(ROOT / "bench"))
    import regression_accuracy
    regression_accuracy.measure(rounds, out, {MEASURED[0]: (MEASURED[1], "total_time")},
                                {"quiet": 0, "loaded": loops},
                                f"bench/facility_night.py measure --rounds {rounds} --ranks {ranks} --loops {loops}",
                                ranks=ranks)


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


def draw(series: list[dict], seed: int, independent: bool = False,
         samples: Path = SAMPLES) -> dict[int, list[list[tuple]]]:
    """Per series, NIGHTS nights of RUNS consecutive measured runs from random places in its cell's sequence
    (INDEPENDENT: RUNS runs drawn one by one, so nights are exchangeable)."""
    rnd, pools = random.Random(seed), cells(samples)
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
           independent: bool = False, samples: Path = SAMPLES) -> tuple[list[int], float, float]:
    """Every night written and ingested; (campaign ids, seconds writing files, seconds in `commscope ingest`)."""
    template = TEMPLATE.read_text()
    old = float(re.search(r"^FOM total_time (\S+) s$", template, re.M)[1])
    drawn = draw(series, seed, independent, samples)
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
    if r.returncode not in (0, 1) or not r.stdout.lstrip().startswith("{"):
        raise SystemExit(f"check failed ({r.returncode}; is the store at --url started?): {r.stderr[-2000:]}")
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


# Per-run tables copied with each replicated run (those the store has), besides runs itself.
REPLICATED_RUN_TABLES = ("run_windows", "foms", "node_metrics", "mpi_metrics", "rank_spread", "comm_stats")


def _copied_columns(conn, table: str, mapped: tuple[str, ...]) -> list[str]:
    """TABLE's columns that a copy takes as they are: not MAPPED (given by the copy), not generated."""
    return [r[0] for r in conn.execute(
        "SELECT a.attname FROM pg_attribute a WHERE a.attrelid = %s::regclass AND a.attnum > 0 "
        "AND NOT a.attisdropped AND a.attidentity = '' AND a.attgenerated = '' ORDER BY a.attnum", (table,))
        if r[0] not in mapped]


def replicate(url: str, target: int) -> dict:
    """Copy the store's series at the SQL level until it holds TARGET series (see the module's --replicate): copy
    k = 1, 2, ... of every series in id order, the last copy only as many as are missing. Returns what it made."""
    import psycopg
    from psycopg import sql
    t0 = time.perf_counter()
    with psycopg.connect(url) as conn:
        ids = [r[0] for r in conn.execute("SELECT DISTINCT series_id FROM runs WHERE series_id IS NOT NULL "
                                          "ORDER BY 1")]
        if not ids:
            raise SystemExit("--replicate: the store has no series")
        tables = [t for t in REPLICATED_RUN_TABLES
                  if conn.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0] is not None]
        made, k = {"series": 0, "runs": 0}, 0
        if len(ids) < target and conn.execute("SELECT 1 FROM systems WHERE name ~ '-r[0-9]+$' LIMIT 1").fetchone():
            raise SystemExit("--replicate: this store holds replicas already; replicate a copy of the ingested store")
        while len(ids) + made["series"] < target:
            k += 1
            chosen = ids[:target - len(ids) - made["series"]]
            suffix = f"-r{k}"
            with conn.transaction():
                conn.execute("DROP TABLE IF EXISTS system_map, series_map, run_map")
                other = _copied_columns(conn, "systems", ("id", "name"))
                cols = sql.SQL(", ").join(map(sql.Identifier, other))
                conn.execute(sql.SQL(
                    "INSERT INTO systems (name, {cols}) SELECT name || %(suffix)s, {cols} FROM systems "
                    "WHERE id IN (SELECT DISTINCT system_id FROM runs WHERE series_id = ANY(%(ids)s)) "
                    "ON CONFLICT (name) DO NOTHING").format(cols=cols), {"suffix": suffix, "ids": chosen})
                conn.execute("CREATE TEMP TABLE system_map AS SELECT o.id AS old, n.id AS new FROM systems o "
                             "JOIN systems n ON n.name = o.name || %s", (suffix,))
                conn.execute("CREATE TEMP TABLE series_map AS SELECT id AS old, (SELECT max(id) FROM series) "
                             "+ row_number() OVER (ORDER BY id) AS new FROM series WHERE id = ANY(%s)", (chosen,))
                other = _copied_columns(conn, "series", ("id", "key", "environment"))
                cols = sql.SQL(", ").join(map(sql.Identifier, other))
                scols = sql.SQL(", ").join(sql.SQL("s.{}").format(sql.Identifier(c)) for c in other)
                conn.execute(sql.SQL(
                    "INSERT INTO series (id, key, environment, {cols}) OVERRIDING SYSTEM VALUE "
                    "SELECT m.new, series_key(s.app, s.parameters, e.env), e.env, {scols} "
                    "FROM series s JOIN series_map m ON m.old = s.id CROSS JOIN LATERAL (SELECT CASE "
                    "WHEN s.environment ? 'system' THEN jsonb_set(s.environment, '{{system}}', "
                    "to_jsonb(coalesce(s.environment->>'system', 'unknown') || %(suffix)s)) "
                    "ELSE s.environment || jsonb_build_object('replica', %(k)s::int) END AS env) e"
                ).format(cols=cols, scols=scols), {"suffix": suffix, "k": k})
                conn.execute("SELECT setval(pg_get_serial_sequence('series', 'id'), (SELECT max(id) FROM series))")
                conn.execute("CREATE TEMP TABLE run_map AS SELECT id AS old, (SELECT max(id) FROM runs) "
                             "+ row_number() OVER (ORDER BY id) AS new FROM runs WHERE series_id = ANY(%s)",
                             (chosen,))
                conn.execute("CREATE INDEX ON run_map (old)")
                other = _copied_columns(conn, "runs", ("id", "content_hash", "series_id", "system_id"))
                cols = sql.SQL(", ").join(map(sql.Identifier, other))
                rcols = sql.SQL(", ").join(sql.SQL("r.{}").format(sql.Identifier(c)) for c in other)
                n = conn.execute(sql.SQL(
                    "INSERT INTO runs (id, content_hash, series_id, system_id, {cols}) "
                    "SELECT m.new, r.content_hash || %(tag)s, sm.new, sy.new, {rcols} FROM runs r "
                    "JOIN run_map m ON m.old = r.id JOIN series_map sm ON sm.old = r.series_id "
                    "LEFT JOIN system_map sy ON sy.old = r.system_id ORDER BY m.new"
                ).format(cols=cols, rcols=rcols), {"tag": f":r{k}"}).rowcount
                conn.execute("SELECT setval(pg_get_serial_sequence('runs', 'id'), (SELECT max(id) FROM runs))")
                for table in tables:
                    other = _copied_columns(conn, table, ("run_id",))
                    cols = sql.SQL(", ").join(map(sql.Identifier, other))
                    tcols = sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in other)
                    conn.execute(sql.SQL("INSERT INTO {table} (run_id, {cols}) SELECT m.new, {tcols} FROM {table} t "
                                         "JOIN run_map m ON m.old = t.run_id").format(
                        table=sql.Identifier(table), cols=cols, tcols=tcols))
                for table, by_run in (("change_point_state", "max_run_id"), ("change_points", "run_id")):
                    other = _copied_columns(conn, table, ("series_id", by_run))
                    cols = sql.SQL(", ").join(map(sql.Identifier, other))
                    tcols = sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in other)
                    conn.execute(sql.SQL("INSERT INTO {table} (series_id, {by_run}, {cols}) "
                                         "SELECT sm.new, m.new, {tcols} FROM {table} t "
                                         "JOIN series_map sm ON sm.old = t.series_id "
                                         "JOIN run_map m ON m.old = t.{by_run}").format(
                        table=sql.Identifier(table), by_run=sql.Identifier(by_run), cols=cols, tcols=tcols))
                other = _copied_columns(conn, "accepted_levels", ("series_id",))
                cols = sql.SQL(", ").join(map(sql.Identifier, other))
                tcols = sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in other)
                conn.execute(sql.SQL("INSERT INTO accepted_levels (series_id, {cols}) SELECT sm.new, {tcols} "
                                     "FROM accepted_levels t JOIN series_map sm ON sm.old = t.series_id").format(
                    cols=cols, tcols=tcols))
                conn.execute("DROP TABLE system_map, series_map, run_map")
            made["series"] += len(chosen)
            made["runs"] += n
            print(f"  replica {k}: {len(chosen)} series, {n} runs ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    made.update(copies=k, series_now=len(ids) + made["series"], seconds=time.perf_counter() - t0)
    return made


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["measure"]:
        mp = argparse.ArgumentParser(prog="facility_night.py measure", description=measure.__doc__)
        mp.add_argument("--rounds", type=int, default=120)
        mp.add_argument("--out", type=Path, default=SAMPLES)
        mp.add_argument("--ranks", type=int, default=2)
        mp.add_argument("--loops", type=int, default=1, help="busy loops beside the loaded level's runs")
        a = mp.parse_args(argv[1:])
        measure(a.rounds, a.out, a.ranks, a.loops)
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
    ap.add_argument("--replicate", type=int, metavar="N",
                    help="before checking, copy the store's series at the SQL level until it holds N (replicated "
                         "rows, for check's time only: see above); writes into the store")
    ap.add_argument("--independent", action="store_true",
                    help="draw a night's runs one by one (exchangeable nights) instead of consecutive measured runs")
    ap.add_argument("--samples", type=Path, default=SAMPLES, help="the measured runs (`measure --out`)")
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
                campaigns, writing, ingesting = ingest(url, Path(work), series, args.seed, args.independent,
                                                       args.samples)
            print(f"store: {url} last campaign {campaigns[-1]}", file=sys.stderr)
        print(f"{args.series} series, {NIGHTS} nights x {RUNS} runs; files written in {writing:.1f} s, "
              f"`commscope ingest` {ingesting:.1f} s in all ({ingesting / NIGHTS:.1f} s a night)")
        if args.replicate:
            made = replicate(url, args.replicate)
            print(f"replicated: {made['copies']} copies, {made['series']} series and {made['runs']} runs added "
                  f"in {made['seconds']:.0f} s: {made['series_now']} series", flush=True)
        for extra in args.check_args or [""]:
            doc, took, _ = check(url, campaigns[-1], shlex.split(extra))
            found = [f for f in doc["series"] if not re.search(r"-r\d+$", f.get("system") or "")]   # the originals
            s = score(found, series)
            if args.replicate:
                s["all_series"] = {"judged": len(doc["series"]), "alerts": doc["alerts"],
                                   "series_alerting": doc["series_alerting"], "held_back": doc["held_back"],
                                   "groups": len(doc["groups"])}
            print(f"check {extra or '(defaults)'}: {took:.1f} s; {json.dumps(s)}", flush=True)
    finally:
        stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
