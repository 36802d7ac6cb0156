"""Helpers the tests share: Caliper files read with caliper-reader, a synthetic gate history of known times, the
real gate history (tests/gate-history), and IMB's own result tables. Test files import them from here, never from
another test file; shared fixtures live in conftest.py."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import caliperreader
import psycopg
import pytest
from caliperreader import read_caliper_contents

from commscope.read import measures
from commscope.read.records import Record
from commscope.workflow import caliper
from commscope.workflow import stacks as mpi_stacks

DATA = Path(__file__).parent / "data"
HISTORY = Path(__file__).parent / "gate-history"


# ---- Caliper files read with caliper-reader ---------------------------------------------------------------

def read(path: Path):
    records, globals_ = caliperreader.read_caliper_contents(str(path))
    return records, globals_


def rank_of(rec, path: Path) -> int | None:
    """A record's rank. Per-rank files (use.mpi=false) carry none in their
    records: the rank is only in the file name, from output=rank-%mpi.rank%."""
    if "mpi.rank" in rec:
        return int(rec["mpi.rank"])
    if path.stem.startswith("rank-"):
        return int(path.stem.split("-")[1])
    return None


def regions(rec) -> list[str]:
    reg = rec.get("region")
    return reg if isinstance(reg, list) else [reg] if reg else []


def matrix(directory: Path) -> dict:
    """(src, dst) -> [messages, bytes] from a message-tracing fixture, sends only."""
    cells: dict = defaultdict(lambda: [0, 0])
    for f in directory.glob("rank-*.cali"):
        for r in read(f)[0]:
            if "mpi.msg.dst" in r:
                cell = cells[int(r["mpi.rank"]), int(r["mpi.msg.dst"])]
                cell[0] += int(r["count"])
                cell[1] += int(r["sum#mpi.msg.size"])
    return cells


CALIPERS_OWN_PATH = ("MPI_Comm_dup",)   # where Caliper's own MPI call sits in a merged profile's call tree


def calipers_own(rec, path: Path | None = None) -> bool:
    """The record of Caliper's own MPI_Comm_dup (Caliper's src/caliper/OutputCommMpi.cpp): MPI_Comm_dup outside every
    region in a profile Caliper merged across ranks (not a rank-N.cali file), called once per rank where the
    record counts calls (region.count)."""
    fn = rec.get("mpi.function")
    where = rec.get("path")
    where = where if isinstance(where, list) else [where] if where else []
    calls = rec.get("sum#rc.count") or rec.get("sum#sum#rc.count")
    return (fn == "MPI_Comm_dup" and where == ["MPI_Comm_dup"] and not (path and path.stem.startswith("rank-"))
            and (calls is None or int(float(calls)) <= 1 or "mpi.rank" not in rec))


TIME = ("sum#sum#time.duration", "sum#time.duration")
SYNC = {"MPI_Barrier", "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Win_wait", "MPI_Win_fence",
        "MPI_Win_complete", "MPI_Ibarrier"}

PER_RANK_PROFILES = sorted(
    [p.name for p in DATA.glob("*.cali") if ".spot." not in p.name] +
    [d.name for d in DATA.glob("*.per-rank")] + [p.name for p in DATA.glob("*.json-split.json")])


def reference(name: str, focus: str = "loop") -> dict:
    """Per window, per rank: [time, mpi, mpi_sync], straight from the file; the focus window the records
    in FOCUS, by default the workloads' README's timed interval, `loop` (empty when the file has none)."""
    src = DATA / name
    acc = {"run": defaultdict(lambda: [0.0, 0.0, 0.0]), "focus": defaultdict(lambda: [0.0, 0.0, 0.0])}
    if src.suffix == ".json":
        doc = json.loads(src.read_text())
        cols = doc["columns"]
        labels = [n["label"] for n in doc["nodes"]]
        parents = [n.get("parent") for n in doc["nodes"]]
        for row in doc["data"]:
            t, rank, node = row[cols.index("time")], int(row[cols.index("mpi.rank")]), row[cols.index("path")]
            if t is None:
                continue
            chain = []
            while node is not None:
                chain.append(labels[node])
                node = parents[node]
            fn = chain[0] if chain and chain[0].startswith("MPI_") else None
            if chain == ["MPI_Comm_dup"]:   # Caliper's own (calipers_own), in json-split's layout
                continue
            for w in ("run",) + (("focus",) if focus in chain else ()):
                a = acc[w][rank]
                a[0] += t
                if fn:
                    a[2 if fn in SYNC else 1] += t
        return acc
    files = sorted(src.glob("rank-*.cali")) if src.is_dir() else [src]
    for f in files:
        records, _ = read_caliper_contents(str(f))
        for r in records:
            t = next((float(r[a]) for a in TIME if a in r), None)
            if t is None or calipers_own(r, f):
                continue
            rank = int(r["mpi.rank"]) if "mpi.rank" in r else int(f.stem.split("-")[1])
            regions = r.get("region") or []
            regions = regions if isinstance(regions, list) else [regions]
            fn = r.get("mpi.function")
            fn = fn[-1] if isinstance(fn, list) else fn   # nested MPI calls: the record's own, innermost one
            for w in ("run",) + (("focus",) if focus in regions else ()):
                a = acc[w][rank]
                a[0] += t
                if fn:
                    a[2 if fn in SYNC else 1] += t
    return acc


# ---- a synthetic gate history: runs with a known run-window time -------------------------------------------

START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def synthetic(app: str, night: int, i: int, wall: float, variant: str = "v") -> Record:
    """A run of APP whose run window took WALL seconds on its slowest rank."""
    h = hashlib.sha256(f"{app}/{variant}/{night}/{i}/{wall}".encode()).hexdigest()
    rec = Record(content_hash=h, source=f"synthetic/{app}/{night}/{i}", profile_kind="none", app=app, workload=app,
                 ranks=4, started_at=START + dt.timedelta(days=night, minutes=i), variant=variant,
                 system="testbox", stack="stack-a", mpi_library="lib 1.0", interconnect="shm")
    rec.parameters = {"ranks": 4, "variant": variant}
    window = dict.fromkeys(measures.COLUMNS) | {"window": "run", "time_s": wall, "ranks_measured": 4}
    rec.window_rows = [tuple(window[c] for c in measures.COLUMNS)]
    return rec


# (app, runs per night, {nights before the last: level}; every other night 1.0). Noise: 3% gaussian. A shift of the
# last five nights persists (regressions.CONFIRM campaigns); one of the last night alone does not yet. "seen": the
# last night at 1.4 while night 7 (7 nights before the last) ran at 1.5: a level the baseline already had on one
# night.
SHIFTED = range(5)   # the last five nights
SERIES = [("steady", 3, {}), ("slower", 3, dict.fromkeys(SHIFTED, 1.25)), ("faster", 3, dict.fromkeys(SHIFTED, 0.75)),
          ("single", 1, dict.fromkeys(SHIFTED, 1.30)), ("tiny", 3, dict.fromkeys(SHIFTED, 1.02)),
          ("blip", 3, {0: 1.25}), ("seen", 3, {0: 1.4, 7: 1.5})]
NIGHTS_STORED = 15


# ---- the real gate history (tests/gate-history/README.md) ----------------------------------------------------
# Three series of halo3d blocking at 2 ranks that the gate before the measurement model took for one (same system,
# app, workload, variant, stack, interconnect, ranks): 24^3 and 48^3 with MPI wrapped, 24^3 without MPI wrapping;
# and 24^3 at 4 ranks recorded one file per rank, with a partial run. Night 5 is judged; 24^3's night 5 at 2 ranks
# ran beside two busy loops.

NIGHTS = {
    "24-mpi": {n: f"halo3d-blocking-24-n2.mpi.night{n}.cali" for n in (1, 2, 3, 4, 5)},
    "48-mpi": {n: f"halo3d-blocking-48-n2.mpi.night{n}.cali" for n in (2, 3, 4, 5)},
    "24-nompi": {n: f"halo3d-blocking-24-n2.nompi.night{n}.cali" for n in (1, 2, 3, 5)},
    "24-per-rank": {n: f"halo3d-blocking-24-n4.per-rank.night{n}" for n in (1, 2, 3, 5)},
}
# The per-rank series' loaded night 4 is stored as a partial run (rank 1's file left out), and, with rank 0's
# file left out instead, once more in night 5: neither may count.
PARTIAL = "halo3d-blocking-24-n4.per-rank.night4"


def focus_time(name: str) -> float:
    """The loop's time on its slowest rank, summed from the file's records with caliper-reader."""
    return max(t for t, _mpi, _sync in reference(f"../gate-history/{name}")["focus"].values())


def partial_copy(tmp_path: Path, drop: int) -> Path:
    d = tmp_path / f"without-rank-{drop}" / PARTIAL
    shutil.copytree(HISTORY / PARTIAL, d)
    (d / f"rank-{drop}.cali").unlink()
    return d


# ---- IMB's own result tables, and its profiles read with caliper-reader (tests/thirdparty/ramble-imb*) -------

PROFILE_TIME = "sum#sum#time.duration"   # a runtime-profile's exclusive time per record (seconds)
# What Ramble's builtin application (var/ramble/repos/builtin/applications/intel-mpi-benchmarks, Ramble 0.5)
# reports for each kind of IMB table, by the table's columns: FOM name -> (IMB column, unit), and the
# context's format. Its latency regex names its groups t_min, t_avg, t_max in that order, while IMB prints
# t_min, t_max, t_avg: Ramble's "Latency avg" is IMB's t_max column and its "Latency max" IMB's t_avg.
# commscope stores what Ramble reports, under Ramble's names.
TABLES = {
    ("#bytes", "#repetitions", "t[usec]", "Mbytes/sec"):
        ("Bytes: {} (BW)", {"Bandwidth": ("Mbytes/sec", "Mbytes/sec")}),
    ("#bytes", "#repetitions", "t_min[usec]", "t_max[usec]", "t_avg[usec]"):
        ("Bytes: {} (Latency)", {"Latency min": ("t_min[usec]", "usec"), "Latency avg": ("t_max[usec]", "usec"),
                                 "Latency max": ("t_avg[usec]", "usec")}),
    ("#bytes", "#repetitions", "t_min[usec]", "t_max[usec]", "t_avg[usec]", "Mbytes/sec"):
        ("Bytes: {} (Combo)", {"Combo": ("Mbytes/sec", "Mbytes/sec")}),
}


def imb_tables(text: str) -> list[tuple[str, tuple, list[dict]]]:
    """(benchmark, header, rows) of every result table IMB printed: the '# Benchmarking X' block, its
    column header and the rows of numbers below it, each row a dict column -> text."""
    out, bench, header = [], None, None
    for line in text.splitlines():
        words = line.split()
        if line.startswith("# Benchmarking "):
            bench, header = words[2], None
        elif bench and words and words[0] == "#bytes":
            header = tuple(words)
            out.append((bench, header, []))
        elif header and words and all(re.fullmatch(r"[0-9.]+", w) for w in words) and len(words) == len(header):
            out[-1][2].append(dict(zip(header, words)))
        elif header and not words and out[-1][2]:
            bench = header = None
    return out


def expected_foms(out_file: Path) -> dict[tuple[str, str], tuple[float, str]]:
    """(context, FOM name) -> (value, unit) that Ramble's builtin application defines for this output."""
    exp = {}
    for _bench, header, rows in imb_tables(out_file.read_text()):
        ctx_format, foms = TABLES[header]
        for row in rows:
            for name, (column, unit) in foms.items():
                exp[(ctx_format.format(row["#bytes"]), name)] = (float(row[column]), unit)
    return exp


def calling_sequence(out_file: Path) -> list[str]:
    """The command line IMB says it was called with (its '# Calling sequence was:' block)."""
    lines = out_file.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("# Calling sequence was:"))
    cmd = next(line for line in lines[i + 1:] if line.strip("# "))
    return cmd.lstrip("# ").split()


def experiments(ws: Path) -> list[dict]:
    return json.loads((ws / "results.latest.json").read_text())["experiments"]


def out_file(ws: Path, exp: dict) -> Path:
    return ws / "experiments" / exp["application_name"] / exp["workload_name"] / exp["experiment_name"] / \
        f"{exp['experiment_name']}.out"


def caliper_per_rank(path: Path, keep) -> tuple[dict, dict]:
    """Exclusive time and calls per rank (caliper-reader's reading of the .cali at PATH) of the records whose
    call path `keep` accepts."""
    records, _ = caliperreader.read_caliper_contents(str(path))
    t, calls = defaultdict(float), defaultdict(int)
    for rec in records:
        p = rec.get("path")
        p = p if isinstance(p, list) else [p] if p else []
        if p and keep(p):
            t[int(rec["mpi.rank"])] += float(rec["sum#sum#time.duration"])
            calls[int(rec["mpi.rank"])] += int(rec.get("sum#rc.count", 0))
    return t, calls


def profile_reference(cali: Path) -> tuple[dict[int, float], dict[int, float], dict[str, float]]:
    """(rank -> time, rank -> MPI time, MPI function -> time summed over ranks) from the profile's records
    read with caliper-reader: every record's exclusive time counts (the one without a path is the time outside
    MPI) but Caliper's own MPI_Comm_dup (calipers_own), MPI time is the records carrying mpi.function."""
    records, _globals = read_caliper_contents(str(cali))
    total: dict = {}
    mpi: dict = {}
    per_function: dict = {}
    for r in records:
        if calipers_own(r, cali):
            continue
        rank, t = int(r["mpi.rank"]), float(r[PROFILE_TIME])
        total[rank] = total.get(rank, 0.0) + t
        if "mpi.function" in r:
            mpi[rank] = mpi.get(rank, 0.0) + t
            per_function[r["mpi.function"]] = per_function.get(r["mpi.function"], 0.0) + t
    return total, mpi, per_function


def check_profiles(dsn: str, ws: Path) -> None:
    """Each experiment's profile is attached to its run: MPI time per function and the run window's MPI time
    and fractions equal the profile's records."""
    with psycopg.connect(dsn) as conn:
        for exp in experiments(ws):
            cali = out_file(ws, exp).with_suffix(".cali")
            total, mpi, per_function = profile_reference(cali)
            run_id, source, app_source, caliper = conn.execute(
                "SELECT r.id, r.source, r.metadata->>'app_source', s.environment->>'caliper' "
                "FROM runs r JOIN series s ON s.id = r.series_id WHERE r.experiment = %s", (exp["name"],)).fetchone()
            assert Path(source).resolve() == cali.resolve() and app_source == "ramble"
            assert "profile.mpi" in caliper
            stored = dict(conn.execute("SELECT function, time_total FROM mpi_metrics WHERE run_id = %s", (run_id,)))
            assert stored.keys() == per_function.keys() and len(stored) >= 10
            for fn, t in per_function.items():
                assert stored[fn] == pytest.approx(t, rel=1e-9), fn
            # IMB's own work is MPI: PingPong's sends and receives, Allreduce's reductions
            main = {"pingpong": "MPI_Send", "collective": "MPI_Allreduce"}[exp["workload_name"]]
            assert stored[main] > 0
            cur = conn.execute("SELECT * FROM v_run_metrics WHERE run_id = %s AND \"window\" = 'run'", (run_id,))
            row = dict(zip([d.name for d in cur.description], cur.fetchone()))
            slowest = max(total, key=total.get)
            assert row["time_s"] == pytest.approx(total[slowest], rel=1e-9)
            assert row["mpi_time_avg_s"] == pytest.approx(sum(mpi.values()) / len(mpi), rel=1e-9)
            assert row["mpi_fraction_avg"] == pytest.approx(sum(mpi.values()) / sum(total.values()), rel=1e-9)
            assert row["mpi_fraction_slowest"] == pytest.approx(mpi[slowest] / total[slowest], rel=1e-9)
            assert 0 < row["mpi_fraction_avg"] < 1   # the time outside MPI is counted


def imb_prefix() -> Path | None:
    """The install prefix of a hand-built IMB-MPI1 (COMMSCOPE_IMB_PREFIX, else the IMB-MPI1 on PATH)."""
    if os.environ.get("COMMSCOPE_IMB_PREFIX"):
        return Path(os.environ["COMMSCOPE_IMB_PREFIX"])
    found = shutil.which("IMB-MPI1")
    return Path(found).resolve().parent.parent if found else None


# ---- bad input: a refusal in one line ----------------------------------------------------------------------

def assert_one_clear_line(r, *needles: str, code: int | None = None) -> str:
    """A refusal: a non-zero exit (CODE when given), no traceback, and one line on stderr carrying NEEDLES."""
    assert r.returncode != 0 and (code is None or r.returncode == code), (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# ---- the commscope command in this process ------------------------------------------------------------------

class CommandTimeout(Exception):
    """The in-process command ran past its timeout."""


def cli_in_process(args, env: dict, stdin: str | None = None, timeout: float = 300,
                   command=None) -> subprocess.CompletedProcess:
    """`commscope ARGS` (or the click COMMAND) run by click's runner in this process, as a CompletedProcess: the
    same command, without a Python start (0.7 s) per call. ENV replaces os.environ for the call. As in a process
    of its own, an exception the command does not handle prints its traceback on stderr and exits 1, and a run
    past TIMEOUT seconds fails (its traceback says where it was). For calls that are not about the process: a
    memory limit, a signal or the start of a real interpreter need subprocess."""
    import signal
    import traceback

    from click.testing import CliRunner

    from commscope.cli import main

    def expired(_signum, _frame):
        raise CommandTimeout(f"commscope {' '.join(map(str, args))}: still running after {timeout} s")

    overrides: dict = {k: None for k in os.environ if k not in env}
    overrides.update(env)
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        r = CliRunner(mix_stderr=False).invoke(command or main, [str(a) for a in args], input=stdin,
                                               env=overrides)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    stderr = r.stderr
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*r.exc_info))
    return subprocess.CompletedProcess(["commscope", *map(str, args)], r.exit_code, r.stdout, stderr)


# ---- walking a JSON document ------------------------------------------------------------------------------------

def positions(doc, path=()):
    """(path, value) of every value in a JSON document, the document itself first."""
    yield path, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from positions(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from positions(v, path + (i,))


# ---- what a renderer's output shows (tests/test_hostile_input.py, test_hostile_outputs.py, test_fuzz_renderers.py) --

def plotly_strings(page: str) -> list[str]:
    """Every string plotly is given to draw, from the Plotly.newPlot(id, data, layout) calls the report embeds,
    read with a JSON decoder (not the report's own code)."""
    dec = json.JSONDecoder()
    out: list[str] = []

    def walk(v, key=""):
        if isinstance(v, str):
            if key not in ("legendgroup", "type", "mode", "hoverinfo", "visible"):
                out.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
    starts = [m.end() for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page)]
    assert starts, "no plot in the report"
    for s in starts:
        data, end = dec.raw_decode(page, s)
        layout, _ = dec.raw_decode(page, page.index("{", end))
        walk(data)
        walk(layout)
    return out


def outside_code_spans(line: str) -> str:
    """LINE's text outside its Markdown code spans, as CommonMark reads them: a run of N backticks opens a span
    that the next run of exactly N backticks closes; a run with no such closer is literal text."""
    out, i = [], 0
    while i < len(line):
        if line[i] != "`":
            out.append(line[i])
            i += 1
            continue
        n = len(re.match(r"`+", line[i:])[0])
        close = next((m.start() for m in re.finditer(r"`+", line[i + n:]) if len(m[0]) == n), None)
        if close is None:
            out.append(line[i:i + n])
            i += n
        else:
            i += n + close + n
    return "".join(out)


# ---- Fortran MPI profiled by the preload route (libcommscope-mpif and a no-GOTCHA Caliper) -------------------

NOGOTCHA = os.environ.get("COMMSCOPE_CALIPER_NOGOTCHA_PREFIX", "")

# The Fortran calls fjacobi makes: its mpi_f08 (or `use mpi`) ones, and mpif.h's Gather and Gatherv (Comm_rank and
# Comm_size too, which Caliper's profile.mpi leaves out).
FORTRAN_CALLS = {"MPI_Init", "MPI_Bcast", "MPI_Barrier", "MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Allreduce",
                 "MPI_Reduce", "MPI_Gather", "MPI_Gatherv", "MPI_Finalize"}


def nogotcha(stack_name: str) -> Path:
    """The no-GOTCHA Caliper for the stack: COMMSCOPE_CALIPER_NOGOTCHA_PREFIX for Debian Open MPI (ci/toolchain.py),
    else the one `commscope setup` built under $COMMSCOPE_HOME; skips without one."""
    if stack_name == "debian-openmpi4" and NOGOTCHA:
        return Path(NOGOTCHA)
    found = caliper.installed(mpi_stacks.by_name(stack_name))
    if found is None:
        pytest.skip(f"no no-GOTCHA Caliper for {stack_name} (COMMSCOPE_CALIPER_NOGOTCHA_PREFIX, or `commscope setup "
                    f"--source-mirror DIR` builds one); Caliper is in no package registry")
    return found


def fortran_wrapper(stack: mpi_stacks.Stack) -> Path | None:
    """The stack's own Fortran wrapper, found on disk: mpif90 or mpifort beside its mpicc (mpicc.mpich ->
    mpif90.mpich)."""
    cc = Path(stack.mpicc)
    for name in ("mpif90", "mpifort"):
        f = cc.with_name(cc.name.replace("mpicc", name))
        if f.exists():
            return f
    return None


def fortran_preload(bdir: Path, prefix: Path) -> str:
    """The documented preload for a Fortran application (docs/add-your-application.md)."""
    return f"{bdir / 'libcommscope-mpif.so'}:{prefix / 'lib' / 'libcaliper.so'}"
