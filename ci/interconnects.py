#!/usr/bin/env python3
"""The runs that prove each interconnect catalog entry (commscope/workflow/interconnects.py) takes effect.

Labels lie silently (the PyPI MPICH wheel ignores FI_PROVIDER), so an entry counts only when `verify` proves
it: a real 2-rank pingpong run whose selection report, printed by the stack itself, names the expected
transport, and whose 8-byte half round trip latency falls in the band of the entry's class (the catalog's
docstring says which report and which band).

    python3 ci/interconnects.py list [--site SITE] [--json]
    python3 ci/interconnects.py verify [--stacks S ...] [--entries N ...] [--site SITE]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the checkout's commscope package
from commscope.workflow import stacks as mpi_stacks  # noqa: E402
from commscope.workflow.interconnects import (  # noqa: E402,F401  (the catalog, as the tests and verify use it)
    CLASSES, LATENCY_BANDS_US, NAME, REPORT_ENV, STACK_PREFIX, TCP_OVER_SHM, Entry, catalog, entries, get,
    load_site, sites)

# Pingpong sizing for verify: short batches fit between a busy neighbour's time
# slices, so the best one still shows the transport, and the whole run stays
# well under a second on TCP loopback.
PINGPONG_ARGS = ["--bytes", "8", "--iters", "200", "--batches", "20", "--warmup", "200"]
# Runs per entry: the fastest is the signature. A shm entry stops at its first
# run in band; a TCP entry takes all, so a slowed shm run cannot pass as TCP.
ATTEMPTS = 3
# Seconds: room for a run on a machine whose cores are busy with other jobs; a
# hang is a failure, never a wait. Debian MPICH 4.0 with UCX over TCP can hang
# in MPI_Finalize after a complete run (rank 0 flushing its UCX endpoint while
# rank 1 already waits in the PMI barrier). Such an attempt counts (its output
# is complete) and is tallied in `finalize_hangs`; an entry whose every attempt
# hangs fails. Run times and hang counts: bench/results/interconnect_bands.md.
RUN_TIMEOUT = 90


# ---- verification ------------------------------------------------------------------

@dataclass
class Result:
    name: str
    stack: str
    transport: str
    verdict: str            # proven | not proven | latency mismatch | failed | unverifiable
    proof_lines: list       # the first report line each proof regex matched
    missing: list           # proof regexes nothing matched
    rejected: list          # report lines that match a reject regex
    latency_us: float | None
    latencies_us: list      # every attempt
    band_us: tuple
    seconds: float
    detail: str = ""
    finalize_hangs: int = 0  # attempts that reported fully, then hung in MPI_Finalize
    shm_us: float | None = None  # the stack's shared-memory latency a relative band was measured against


def _strip_prefix(line: str) -> str:
    # "[vm:1234] mca: bml: ..." and "[179536.6] [vm:26894:0] ucp_worker.c:1763 UCX ..." -> the message
    return re.sub(r"^(\[[^\]]*\]\s*)+", "", line).strip()


def check_report(entry: Entry, text: str) -> tuple[list, list, list]:
    """(proof lines found, proof regexes missing, lines a reject regex matched)."""
    lines = text.splitlines()
    found, missing = [], []
    for rx in entry.proof:
        hit = next((ln for ln in lines if re.search(rx, ln)), None)
        if hit is None:
            missing.append(rx)
        else:
            found.append(_strip_prefix(hit))
    rejected = [_strip_prefix(ln) for ln in lines for rx in entry.reject if re.search(rx, ln)]
    return found, missing, rejected


def shm_entry(stack: str, site: str | None = None) -> Entry | None:
    """The stack's shared-memory entry: what a TCP entry's latency is measured against."""
    return next((e for e in catalog(site) if e.stack == stack and e.transport == "shm"), None)


def verify_entry(entry: Entry, bdir: Path, shm_us: float | None = None, site: str | None = None) -> Result:
    """Runs bdir/pingpong under the entry up to ATTEMPTS times: the report
    must prove the selection every time, and the fastest attempt must fall in
    the band (a busy machine only ever makes a run slower, never faster).
    A TCP entry's band starts at TCP_OVER_SHM x the stack's shared-memory
    latency: SHM_US when the caller measured it in this run, else measured
    here first from the stack's shm entry."""
    if entry.relative and shm_us is None:
        base = shm_entry(entry.stack, site)
        if base is None:
            return Result(entry.name, entry.stack, entry.transport, "unverifiable", [], [], [], None, [],
                          entry.band(), 0.0, f"stack {entry.stack} has no shared-memory entry to measure "
                          f"the {entry.transport} floor against; give the entry latency_us: [low, high]")
        ref = verify_entry(base, bdir, site=site)
        if ref.verdict != "proven":
            return Result(entry.name, entry.stack, entry.transport, "failed", [], [], [], None, [], entry.band(),
                          ref.seconds, f"the shared-memory reference {base.name} was not proven: "
                          f"{ref.verdict}: {ref.detail}")
        shm_us = ref.latency_us
    import suite  # its run() kills the launcher's whole session on a hang
    stack = mpi_stacks.by_name(entry.stack)
    band = entry.band(shm_us)
    lats: list = []
    t0 = time.monotonic()
    res = Result(entry.name, entry.stack, entry.transport, "failed", [], [], [], None, lats, band, 0.0,
                 shm_us=shm_us if entry.relative else None)
    env = {**REPORT_ENV[entry.family], **entry.report_env, **entry.environ()}
    for _ in range(ATTEMPTS):
        r = suite.run(stack, bdir, "pingpong", PINGPONG_ARGS, 2, case=entry.name, env=env, timeout=RUN_TIMEOUT)
        out = r.out
        hung_after_report = (r.returncode == -999 and "latency" in out.foms
                             and out.verify.get("payload", ("",))[0] == "PASS")
        if hung_after_report:
            # Its report and latency are complete: use them, and count the hang.
            res.finalize_hangs += 1
            r.returncode = 0
        problems = suite.problems(r)
        if out.params.get("interconnect") != entry.name:
            problems.append(f"PARAM interconnect is {out.params.get('interconnect')!r}, not {entry.name!r}")
        if "latency" not in out.foms:
            problems.append("no FOM latency")
        if problems:
            res.verdict, res.detail = "failed", "; ".join(problems)
            break
        res.proof_lines, res.missing, res.rejected = check_report(entry, r.stdout + "\n" + r.stderr)
        lats.append(out.foms["latency"][0])
        res.latency_us = min(lats)
        if res.missing or res.rejected:
            res.verdict = "not proven"
            res.detail = ("report lacks " + ", ".join(map(repr, res.missing)) if res.missing
                          else "report shows another transport: " + res.rejected[0])
            break
        # The signature is the fastest attempt: load only slows a run. A band
        # with a floor (tcp) takes every attempt, because a slowed shared
        # memory run can look like TCP once, but rarely three times.
        in_band = band[0] <= res.latency_us < band[1]
        res.verdict = "proven" if in_band else "latency mismatch"
        res.detail = "" if in_band else (
            f"{entry.transport} band is [{band[0]:g}, {band[1]:g}) us"
            + (f" ({TCP_OVER_SHM:g}x {shm_us:g} us of shared memory on this stack)" if entry.relative else "")
            + f"; measured {lats} us")
        if in_band and band[0] == 0:
            break
    if res.finalize_hangs and res.finalize_hangs == len(lats):
        res.verdict, res.detail = "failed", f"every attempt ({len(lats)}) hung in MPI_Finalize after a complete run"
    res.seconds = round(time.monotonic() - t0, 2)
    return res


def verify(selected: list[Entry], site: str | None = None) -> list[Result]:
    import suite  # the same per-stack builds (build/<stack>) the tests and ci/suite.py use
    results, builds, shm = [], {}, {}
    names = {s.name for s in mpi_stacks.catalog()}
    for e in selected:
        if e.stack not in names or not mpi_stacks.by_name(e.stack).present():
            why = (f"stack {e.stack} is not installed here" if e.stack in names else
                   f"{e.stack} is a site stack, not one of commscope/workflow/stacks.py; prove it on the site")
            results.append(Result(e.name, e.stack, e.transport, "unverifiable", [], [], [], None, [], e.band(),
                                  0.0, why))
            continue
        if e.stack not in builds:
            builds[e.stack] = suite.build(mpi_stacks.by_name(e.stack))
        # A shared-memory entry proven earlier in this run is the TCP entries' reference.
        results.append(verify_entry(e, builds[e.stack], shm_us=shm.get(e.stack) if e.relative else None, site=site))
        r = results[-1]
        if e.transport == "shm" and r.verdict == "proven" and shm_entry(e.stack, site) == e:
            shm[e.stack] = r.latency_us
        print(f"  {r.name:22} {r.verdict:17} {fmt_lat(r.latency_us)}", flush=True)
    return results


def fmt_lat(v) -> str:
    return f"{v:8.2f} us" if v is not None else "       - "


def table(results: list[Result]) -> str:
    rows = [f"{'entry':22} {'class':6} {'band us':12} {'latency':11} {'verdict':17} proof"]
    for r in results:
        band = "[" + ("?" if r.band_us[0] is None else f"{r.band_us[0]:.3g}") + f",{r.band_us[1]:g})"
        proof = " | ".join(r.proof_lines) if r.proof_lines else (r.detail.splitlines() or [""])[0]
        verdict = r.verdict + (f" ({r.finalize_hangs} hung)" if r.finalize_hangs else "")
        rows.append(f"{r.name:22} {r.transport:6} {band:12} {fmt_lat(r.latency_us):11} {verdict:17} {proof}")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("list", help="print the catalog")
    vp = sub.add_parser("verify", help="prove every entry with a real 2-rank run")
    for p in (lp, vp):
        p.add_argument("--site", help=f"add ramble/sites/SITE/interconnects.yaml (have: {', '.join(sites()) or 'none'})")
        p.add_argument("--stacks", nargs="+", metavar="STACK", help="only these stacks")
        p.add_argument("--entries", nargs="+", metavar="NAME", help="only these entries")
    lp.add_argument("--json", action="store_true")
    vp.add_argument("--out", type=Path, help="results JSON (default: <build dir>/interconnects/verify.json)")
    args = ap.parse_args()

    try:
        chosen = catalog(args.site)
        if args.stacks:
            known = [s.name for s in mpi_stacks.catalog()]
            for s in args.stacks:
                if s not in known:
                    raise KeyError(f"unknown MPI stack {s!r}; known: {', '.join(known)}")
            chosen = [e for e in chosen if e.stack in args.stacks]
        if args.entries:
            chosen = [get(n, args.site) for n in args.entries]
    except (KeyError, ValueError, RuntimeError) as e:
        print(f"interconnects: error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 2

    if args.cmd == "list":
        if args.json:
            print(json.dumps([asdict(e) for e in chosen], indent=2))
        else:
            for e in chosen:
                env = " ".join(f"{k}={v}" for k, v in e.env.items()) or "(stack defaults)"
                print(f"{e.name:22} {e.stack:16} {e.transport:6} {env}")
        return 0

    import suite
    out = args.out or suite.BUILD / "interconnects" / "verify.json"
    print(f"[interconnects] verifying {len(chosen)} entries with 2-rank pingpong", flush=True)
    results = verify(chosen, args.site)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(r) for r in results], indent=2))
    tmp.replace(out)
    print(table(results))
    bad = [r for r in results if r.verdict not in ("proven", "unverifiable")]
    print(f"[interconnects] {len(results) - len(bad)} of {len(results)} proven or unverifiable here; "
          f"{len(bad)} problems; results in {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
