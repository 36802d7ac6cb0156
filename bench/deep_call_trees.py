#!/usr/bin/env python3
"""Reading cost against the depth and the width of a call tree (issue 46, item 8).

A real 2-rank runtime-profile (tests/data/halo3d-overlap-n2.runtime-profile.cali) gets, before its globals, a
chain of DEPTH nested regions under `main` (deep) or WIDTH sibling regions under `main` (wide): each a Caliper
node record and one context record per rank, written as Caliper writes them, so the file grows linearly in
the nodes added. Each file is read in a process of its own through the entry point ingest uses
(read/pipeline.read_group: the reader, the per-rank statistics, the records and the store's limits), once with
this checkout and once with the baseline commit's commscope (`git archive` of it on PYTHONPATH); a read that
outlasts --timeout is stopped and shown as such.

The deep chain's regions are named by one letter, the shortest names there are: the store holds a call path of
at most 2,560 bytes '/'-joined (read/records.CALL_PATH_BYTES), so `main` and 1,278 regions below it is the
deepest call tree that can be stored at all. Deeper chains are refused in one line naming the file, as soon as
the first path too long to store is read. A call path of depth d is d names, so the text of a chain's paths
grows with the square of its depth: for deep trees the figure to look at is the time per path element (the
regions named by all paths together, what the store's node rows hold), which is flat when reading is linear
in the call tree's size.

    .venv/bin/python bench/deep_call_trees.py [--baseline b4530a3] [--timeout 120] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import string
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SEED = ROOT / "tests" / "data" / "halo3d-overlap-n2.runtime-profile.cali"
MAIN = 41          # the seed's node id of region `main`
REGION_ATTR = 40   # the seed's attribute id of `region`
CTX_ATTRS = "22=35=51=38"   # mpi.rank, sum#sum#time.duration, sum#rc.count, min#aggregate.slot
DEEPEST_STORABLE = 1278   # regions below `main` whose one-letter names '/'-joined with it fit 2,560 bytes

CHILD = """
import json, resource, sys, time
from pathlib import Path
from commscope.read.pipeline import read_group
from commscope.read.profiles import BadProfile
from commscope.read.records import ReadOptions, Record
from commscope.store.ingest import prepared
path = Path(sys.argv[1])
seen = {}
def kept(rec):   # what ingest's readers do (prepared: the COPY text), counting the node rows first
    seen["nodes"] = len(rec.node_rows)
    return prepared(rec)
t0 = time.perf_counter()
out = read_group([path], ReadOptions(), kept)
seconds = time.perf_counter() - t0
if isinstance(out, Record):
    what = {"outcome": "run", "nodes": seen["nodes"]}
else:
    what = {"outcome": "refused", "line": str(out).replace(str(path), "FILE")}
print(json.dumps({"seconds": seconds, "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  **what}))
"""


def write_profile(out: Path, depth: int = 0, width: int = 0) -> None:
    """The seed profile with a chain of DEPTH one-letter regions under `main`, or WIDTH siblings under it."""
    lines = SEED.read_text().splitlines()
    g = next(i for i, ln in enumerate(lines) if ln.startswith("__rec=globals"))
    extra, nid, parent = [], 1_000_000, MAIN
    for i in range(depth + width):
        name = string.ascii_lowercase[i % 26] if depth else f"w{i}"
        extra.append(f"__rec=node,id={nid},attr={REGION_ATTR},data={name},parent={parent}")
        extra += [f"__rec=ctx,ref={nid},attr={CTX_ATTRS},data={rank}=1e-06=1=0" for rank in (0, 1)]
        parent = nid if depth else MAIN
        nid += 1
    out.write_text("\n".join(lines[:g] + extra + lines[g:]) + "\n")


def read_once(path: Path, pythonpath: str, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env,
                           timeout=timeout, cwd=pythonpath)
    except subprocess.TimeoutExpired:
        return {"outcome": "stopped", "seconds": time.perf_counter() - t0}
    if r.returncode:
        return {"outcome": "crashed", "line": (r.stderr.strip().splitlines() or ["?"])[-1], "seconds": 0.0}
    return json.loads(r.stdout)


def baseline_tree(commit: str, where: Path) -> Path:
    """The commscope package of COMMIT, extracted under WHERE."""
    tar = where / "old.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(tar), commit, "commscope"], check=True)
    with tarfile.open(tar) as t:
        t.extractall(where / "old", filter="data")
    return where / "old"


def shown(r: dict, timeout: float) -> str:
    if r["outcome"] == "stopped":
        return f"> {timeout:.0f} (stopped)"
    if r["outcome"] == "crashed":
        return f"crashed: {r['line'][:60]}"
    return f"{r['seconds']:.2f}"


def outcome(r: dict) -> str:
    if r["outcome"] == "run":
        return f"run, {r['nodes']:,} nodes"
    if r["outcome"] == "refused":
        return "refused: " + r["line"].split(";")[0].replace("|", "/")[:90]
    return r["outcome"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="b4530a3", help="the commit whose reader is the baseline ('' for none)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds one read may take before it is stopped")
    ap.add_argument("--sizes", default="1000,2000,4000,8000", help="depths and widths, comma-separated")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "deep_call_trees.md")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    cases = [("deep", d) for d in [160, 320, 640, DEEPEST_STORABLE] + sizes] + [("wide", w) for w in sizes]
    head = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                          text=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        old = str(baseline_tree(args.baseline, tmp)) if args.baseline else None
        for shape, n in cases:
            f = tmp / f"{shape}-{n}.cali"
            write_profile(f, depth=n if shape == "deep" else 0, width=n if shape == "wide" else 0)
            new = read_once(f, str(ROOT), args.timeout)
            base = read_once(f, old, args.timeout) if old else None
            elements = n * (n + 1) // 2 + n if shape == "deep" else 2 * n   # regions named by the added paths
            ok = new["outcome"] == "run"
            per = f"{new['seconds'] / n * 1e3:.2f} | {new['seconds'] / elements * 1e6:.2f}" if ok else " | "
            row = (f"| {shape} | {n:,} | {f.stat().st_size / 2**20:.2f} | {elements:,} | {shown(new, args.timeout)} "
                   f"| {per} | {new.get('maxrss_mib', 0):.0f} | "
                   f"{shown(base, args.timeout) if base else '-'} | {outcome(new)} |")
            print(row, flush=True)
            rows.append(row)
    text = [
        "# Reading deep and wide call trees (bench/deep_call_trees.py)", "",
        f"Produced by `.venv/bin/python bench/deep_call_trees.py --baseline {args.baseline} --timeout "
        f"{args.timeout:.0f}` on {time.strftime('%Y-%m-%d')}, checkout {head}, {os.cpu_count()} cores. Each read is "
        "read/pipeline.read_group (reader, per-rank statistics, records, the store's limits) in a fresh process. "
        "*path elements*: the region names that the added call paths hold together (d(d+1)/2 + d for a chain of "
        "depth d, 2w for w siblings under `main`), the size of the call tree as the store's node rows hold it.", "",
        "| shape | regions added | file (MiB) | path elements | read (s) | ms per region | µs per path element "
        f"| peak RSS (MiB) | baseline {args.baseline} read (s) | outcome |",
        "|---|---|---|---|---|---|---|---|---|---|", *rows, ""]
    args.out.write_text("\n".join(text))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
