#!/usr/bin/env python3
"""Ingest throughput end to end into PostgreSQL, against Thicket reading the
same files in the same run; and peak memory of a streamed ingest.

The corpus is real fixture profiles copied with one metadata value (Adiak's
user, or --vary) varied, so each copy is a distinct run. The store is a private
embedded PostgreSQL under a temporary COMMSCOPE_HOME, removed afterwards.

    .venv/bin/python bench/ingest_throughput.py [--n 400] [--fixture NAME] [--repeat 3]
    .venv/bin/python bench/ingest_throughput.py --stream 10000
    .venv/bin/python bench/ingest_throughput.py --fixture corpus   # every .cali fixture, round robin

Third-party profiles (issue 15): a fixture path under tests/thirdparty, with the flags a user gives:

    .venv/bin/python bench/ingest_throughput.py --n 2000 \
        --fixture tests/thirdparty/amg2023/amg2023-n4.runtime-profile.cali --param-keys Problem,Size-x,Solver
    .venv/bin/python bench/ingest_throughput.py --n 2000 \
        --fixture tests/thirdparty/kripke/kripke-n4.runtime-profile.cali --app kripke --vary DGZ

--stream runs `commscope ingest` as a separate process and samples the summed
resident memory of it and its reader processes every 20 ms.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from commscope.store import db
from commscope.workflow.ingest import Provenance, ingest
from commscope.read.records import ReadOptions

TESTS = Path(__file__).resolve().parents[1] / "tests"
DATA = TESTS / "data"
sys.path.insert(0, str(TESTS))
from corpus import varied_copies  # noqa: E402  (the same corpus the kill -9 test uses)


def tree_rss_mib(pid: int) -> float:
    """Resident memory of pid and its descendants."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                parent[int(d)] = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                pass
    tree, frontier = {pid}, [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        tree.update(kids)
        frontier += kids
    total = 0
    for p in tree:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def fixture(args) -> Path:
    """--fixture: a name in tests/data, or a path (tests/thirdparty/...)."""
    p = Path(args.fixture)
    return p if p.exists() else DATA / args.fixture


def corpus_copies(args, outdir: Path, n: int) -> list[Path]:
    """N distinct runs: with --fixture corpus, copies of every single-file .cali fixture in tests/data
    that records the varied value (runtime-profile, comm.stats, spot, no-MPI, Caliper 2.12, ROMIO...),
    taken in turn; else copies of the one fixture."""
    if args.fixture != "corpus":
        return varied_copies(fixture(args), n, outdir, args.vary)
    srcs = [f for f in sorted(DATA.glob("*.cali")) if f"data={args.vary},".encode() in f.read_bytes()]
    per = [varied_copies(src, n // len(srcs) + 1, outdir / src.stem, args.vary) for src in srcs]
    files = [per[i % len(srcs)][i // len(srcs)] for i in range(n)]
    for spare in {f for copies in per for f in copies} - set(files):
        spare.unlink()  # only N runs go in
    return files


def read_options(args) -> ReadOptions:
    keys = tuple(k for k in (args.param_keys or "").split(",") if k)
    return ReadOptions(app=args.app, param_keys=keys)


def ingest_flags(args) -> list[str]:
    return (["--app", args.app] if args.app else []) + (["--param-keys", args.param_keys] if args.param_keys else [])


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of this process and its waited-for children, or of process PID."""
    if pid is None:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(args, tmp: Path, url: str) -> None:
    files = corpus_copies(args, tmp / "corpus", args.n)
    import thicket as th
    from commscope.read import hatchet_io
    base = [str(f) for f in files[: args.thicket_n]]
    t0, c0 = time.perf_counter(), cpu_seconds()
    try:
        th.Thicket.from_caliperreader(base, disable_tqdm=True)
    except th.utils.DuplicateIndexError:
        # upstream's duplicate-root bug on files with mpi.rank: same reader, filler rows dropped
        t0, c0 = time.perf_counter(), cpu_seconds()
        th.Thicket.reader_dispatch(hatchet_io.read_cali, False, True, True, base)
    thicket_rate = args.thicket_n / (time.perf_counter() - t0)
    thicket_cpu = (cpu_seconds() - c0) / args.thicket_n
    size = sum(f.stat().st_size for f in files) / len(files) / 1024
    kinds = len({f.parent for f in files})
    print(f"corpus: {args.n} copies of {kinds if kinds > 1 else files[0].parent.name + '/' + args.fixture} "
          f"fixture{'s' if kinds > 1 else ''} ({size:.0f} KB on average), {os.cpu_count()} cores")
    print(f"load average before: {os.getloadavg()[0]:.2f} (the rates are wall-clock; the CPU time per profile,"
          f" of every process involved, does not depend on what else runs)")
    print(f"Thicket.from_caliperreader ({args.thicket_n} files): {thicket_rate:8.1f} profiles/s  1.00x   "
          f"CPU {thicket_cpu * 1000:6.2f} ms/profile  1.00x")
    for i in range(args.repeat):
        with psycopg.connect(url) as conn:
            conn.execute("TRUNCATE campaigns, runs CASCADE")
            conn.commit()
            backend = conn.info.backend_pid
            t0, c0, b0 = time.perf_counter(), cpu_seconds(), cpu_seconds(backend)
            res = ingest(conn, [tmp / "corpus"], Provenance(system="bench"), read=read_options(args))
            rate = len(res.inserted) / (time.perf_counter() - t0)
            # this process, its reader processes (waited for when the pool shut down) and the server backend
            cpu = (cpu_seconds() - c0 + cpu_seconds(backend) - b0) / len(res.inserted)
        assert len(res.inserted) == args.n, (len(res.inserted), args.n)
        print(f"commscope ingest into PostgreSQL, try {i + 1}:   {rate:8.1f} profiles/s  {rate / thicket_rate:.2f}x   "
              f"CPU {cpu * 1000:6.2f} ms/profile  {thicket_cpu / cpu:.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def stream(args, tmp: Path, url: str) -> None:
    corpus_copies(args, tmp / "corpus", args.stream)
    env = {**os.environ, "COMMSCOPE_DB_URL": url}
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "commscope.cli", "ingest", "-q", *ingest_flags(args),
                          str(tmp / "corpus")], env=env)
    peak = 0.0
    while p.poll() is None:
        peak = max(peak, tree_rss_mib(p.pid))
        time.sleep(0.02)
    secs = time.perf_counter() - t0
    assert p.returncode == 0
    with psycopg.connect(url) as conn:
        n = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert n == args.stream, (n, args.stream)
    print(f"streamed ingest of {args.stream} copies of {args.fixture}: {secs:.1f} s, {n / secs:.1f} profiles/s")
    print(f"peak RSS of the ingest and its reader processes: {peak:.0f} MiB  ({peak / 1024:.3f} of the 1 GiB budget)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fixture", default="stencil2d-row-naive-n2.spot.cali")
    ap.add_argument("--thicket-n", type=int, default=100, help="files Thicket reads (it is the slow baseline)")
    ap.add_argument("--stream", type=int, help="ingest this many profiles in a separate process and report peak RSS")
    ap.add_argument("--vary", default="root", help="the metadata value varied between copies (default: Adiak's user)")
    ap.add_argument("--app", help="ingest's --app (third-party profiles that name no application)")
    ap.add_argument("--param-keys", help="ingest's --param-keys")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="commscope-bench-"))
    tmp.chmod(0o711)
    emb = db.Embedded(tmp)
    try:
        url = emb.start()
        with psycopg.connect(url) as conn:
            db.migrate(conn)
        (stream if args.stream else throughput)(args, tmp, url)
    finally:
        emb.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
