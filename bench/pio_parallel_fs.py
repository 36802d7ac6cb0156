#!/usr/bin/env python3
"""pio on a real parallel file system (GlusterFS, ci/parallel_fs.py) against the local disk, with and without
the client cache: independent, collective and two-phase (group sizes 1, 2, 4) MPI-IO of one shared file.

    python3 bench/pio_parallel_fs.py measure [--repeats 5] [--dims 1,2,2] [--out samples.json]
    python3 bench/pio_parallel_fs.py table samples.json

`measure` starts the volume (4 bricks, sharded), runs every configuration once per repeat, round-robin (so load
drift hits all alike), then one more run of each with `gluster volume profile` cleared before and read after, and
stops the volume. Every run must pass pio's own VERIFY lines. Each sample keeps pio's FOMs, the 1-minute load
average before the run and the run's runqueue_wait_share_max. `table` prints the Markdown tables of
bench/results/pio_parallel_fs.md: medians with min-max, and per-brick request counts and sizes.

The groundwater paper's Lustre runs saw two-phase I/O 25x faster on reads and 3x on writes than every rank
issuing its own small non-contiguous requests. --dims 1,2,2 splits the fastest (z) axis, so independent I/O is
512-byte requests at 128^3: the paper's small non-contiguous case."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "ci"))
from commscope.workflow import stacks as mpi_stacks
import parallel_fs  # noqa: E402
import suite  # noqa: E402

FOMS = ["write_time", "read_time", "write_bandwidth", "read_bandwidth", "io_calls_per_iter_max",
        "runqueue_wait_share_max"]
METHODS = [("independent", []), ("collective", [])] + [(f"two-phase g{g}", ["--group-size", str(g)]) for g in (1, 2, 4)]
# (file system, client cache): the PFS with Gluster's defaults and the kernel page cache, the PFS with both off,
# and the local disk (ext4 under /tmp, the same disk the bricks are on) through the page cache.
SETUPS = [("glusterfs", "on"), ("glusterfs", "off"), ("local", "on")]


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run_pio(stack, bdir, method: str, extra: list[str], directory: Path, args) -> dict:
    wargs = ["--n", args.n, "--dims", args.dims, "--iters", str(args.iters), "--dir", str(directory),
             "--method", method.split(" ")[0], *extra]
    load = loadavg()
    r = suite.run(stack, bdir, "pio", wargs, args.ranks)
    bad = suite.problems(r)
    if bad:
        sys.exit(f"bench: pio {' '.join(wargs)} failed: {'; '.join(bad)}")
    return {"load1": load, **{f: r.out.foms[f][0] for f in FOMS}, "file_bytes": int(r.out.params["file_bytes"])}


def measure(args) -> None:
    stack = mpi_stacks.by_name(args.stack)
    if not stack.present():
        sys.exit(f"bench: error: --stack {stack.name} is not installed; run bash ci/setup.sh")
    bdir = args.build_dir or suite.build(stack)
    local = Path(tempfile.mkdtemp(prefix="commscope-pio-local-"))
    t0 = time.time()
    mnt = parallel_fs.start(args.root, bricks=args.bricks, layout=args.layout, cache=True)
    out = {"command": " ".join(sys.argv), "stack": stack.name, "ranks": args.ranks, "n": args.n, "dims": args.dims,
           "iters": args.iters, "bricks": args.bricks, "layout": args.layout, "local_dir": str(local),
           "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "samples": [], "profiles": []}
    try:
        for rep in range(args.repeats):
            for fs, cache in SETUPS:
                if fs == "glusterfs":
                    parallel_fs.set_cache(args.root, cache == "on")
                for method, extra in METHODS:
                    s = run_pio(stack, bdir, method, extra, mnt if fs == "glusterfs" else local, args)
                    out["samples"].append({"repeat": rep, "fs": fs, "cache": cache, "method": method, **s})
                    print(f"[{rep}] {fs:9} cache {cache:3} {method:16} write {s['write_time']:.4f} s "
                          f"read {s['read_time']:.4f} s load {s['load1']:.2f}", flush=True)
        for cache in ("on", "off"):
            parallel_fs.set_cache(args.root, cache == "on")
            for method, extra in METHODS:
                parallel_fs.profile_clear(args.root)
                s = run_pio(stack, bdir, method, extra, mnt, args)
                prof = parallel_fs.profile(args.root)
                out["profiles"].append({"cache": cache, "method": method, "sample": s, "bricks": {
                    b.rsplit("/", 1)[-1]: {"WRITE": p.calls.get("WRITE", 0), "READ": p.calls.get("READ", 0),
                                            "writes_by_size": p.writes_by_size, "reads_by_size": p.reads_by_size,
                                            "bytes_written": p.bytes_written, "bytes_read": p.bytes_read,
                                            "calls": p.calls}
                    for b, p in prof.items()}})
                print(f"[profile] cache {cache:3} {method:16} " + " ".join(
                    f"{b.rsplit('/', 1)[-1]}:W{p.calls.get('WRITE', 0)}/R{p.calls.get('READ', 0)}"
                    for b, p in prof.items()), flush=True)
    finally:
        parallel_fs.stop(args.root)
    out["seconds"] = round(time.time() - t0, 1)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


def _span(v: list[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})"


def _size(b: int) -> str:
    return f"{b // (1 << 20)} MiB" if b >= 1 << 20 else f"{b // 1024} KiB" if b >= 1024 else f"{b} B"


def table(path: Path) -> None:
    d = json.loads(path.read_text())
    reps = 1 + max(s["repeat"] for s in d["samples"])
    print(f"pio --n {d['n']} --dims {d['dims']} --iters {d['iters']}, {d['ranks']} ranks, {d['stack']}, "
          f"{d['bricks']} bricks ({d['layout']}), {reps} repeats from {d['started']}, {d['seconds']} s in all\n")
    print("| fs | client cache | method | write s | read s | write MB/s | read MB/s | write vs independent | "
          "read vs independent | calls/rank | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for fs, cache in SETUPS:
        rows = {m: [s for s in d["samples"] if s["fs"] == fs and s["cache"] == cache and s["method"] == m]
                for m, _ in METHODS}
        base_w = statistics.median(s["write_time"] for s in rows["independent"])
        base_r = statistics.median(s["read_time"] for s in rows["independent"])
        for m, _ in METHODS:
            ss = rows[m]
            w = [s["write_time"] for s in ss]
            r = [s["read_time"] for s in ss]
            print(f"| {fs} | {cache} | {m} | {_span(w, '{:.3f}')} | {_span(r, '{:.3f}')} | "
                  f"{_span([s['write_bandwidth'] for s in ss], '{:.1f}')} | "
                  f"{_span([s['read_bandwidth'] for s in ss], '{:.1f}')} | "
                  f"{base_w / statistics.median(w):.1f}x | {base_r / statistics.median(r):.1f}x | "
                  f"{statistics.median(s['io_calls_per_iter_max'] for s in ss):.0f} | "
                  f"{min(s['load1'] for s in ss):.2f}–{max(s['load1'] for s in ss):.2f} |")
    print("\nPer brick, one more run of each (`gluster volume profile`, cleared before the run): WRITE and READ FOPs, "
          "and the request sizes (Gluster's power-of-two buckets, lower bound) with their counts.\n")
    print("| client cache | method | write s | read s | bricks reached | WRITE FOPs | READ FOPs | write sizes | "
          "read sizes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in d["profiles"]:
        bricks = p["bricks"]
        reached = [b for b, v in bricks.items() if v["WRITE"] or v["READ"]]
        hist = {"w": {}, "r": {}}
        for v in bricks.values():
            for k, h in (("w", v["writes_by_size"]), ("r", v["reads_by_size"])):
                for size, n in h.items():
                    hist[k][int(size)] = hist[k].get(int(size), 0) + n

        def fmt(h: dict) -> str:
            return ", ".join(f"{n}×{_size(s)}+" for s, n in sorted(h.items())) or "–"
        print(f"| {p['cache']} | {p['method']} | {p['sample']['write_time']:.3f} | {p['sample']['read_time']:.3f} | "
              f"{len(reached)} of {len(bricks)} | {' + '.join(str(v['WRITE']) for v in bricks.values())} | "
              f"{' + '.join(str(v['READ']) for v in bricks.values())} | {fmt(hist['w'])} | {fmt(hist['r'])} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--stack", default="debian-openmpi4")
    m.add_argument("--build-dir", type=Path, help="a build of workloads/ (default: ci/suite.py's, built now)")
    m.add_argument("--repeats", type=int, default=5)
    m.add_argument("--ranks", type=int, default=4)
    m.add_argument("--n", default="128,128,128")
    m.add_argument("--dims", default="1,2,2")
    m.add_argument("--iters", type=int, default=1)
    m.add_argument("--bricks", type=int, default=4)
    m.add_argument("--layout", choices=parallel_fs.LAYOUTS, default="shard")
    m.add_argument("--root", type=Path, default=Path("/tmp/commscope-pfs-bench"))
    m.add_argument("--out", type=Path, default=Path("pio_parallel_fs_samples.json"))
    t = sub.add_parser("table")
    t.add_argument("samples", type=Path)
    a = ap.parse_args()
    measure(a) if a.cmd == "measure" else table(a.samples)


if __name__ == "__main__":
    main()
