"""Nightly histories across a software change, as workload outputs: one real cgsolve output
(tests/data/cgsolve-direct-n4.mpi-profile.out) rewritten with run times drawn from the real samples in
bench/results/regression_accuracy_samples.json (cgsolve idle, each less its wait for a core), one series per
iteration count. From the change on, the MPI library line, or the compiler, Spack hash or kernel release given at
ingest changes, and the SLOWED series run 30 % slower. tests/stores/README.md says how the schema-37 dump was made
from this."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
TEMPLATE = ROOT / "tests" / "data" / "cgsolve-direct-n4.mpi-profile.out"
SAMPLES = ROOT / "bench" / "results" / "regression_accuracy_samples.json"
OLD_MPI = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"
NEW_MPI = "Open MPI v4.1.6, package: Debian OpenMPI, ident: 4.1.6, repo rev: v4.1.6, Sep 30, 2023"
SERIES = 10
SLOWED = range(5)          # series slower from the change on
SLOWER = 1.30
NIGHTS = 14
CHANGE = 13                # the first night on the new version
RUNS = 3
# scenario -> (system, what changes, (before, after))
SCENARIOS = {"mpi": ("upgrade-mpi", "MPI library", (OLD_MPI, NEW_MPI)),
             "compiler": ("upgrade-compiler", "compiler", ("gcc 12.2.0", "gcc 13.2.0")),
             "spack": ("upgrade-spack", "Spack spec hash", ("4kzqnbb5tqykvvbqyw6lqzzx3ymk2pyq",
                                                            "xq3dlj5n7g3w4ys4pwdmzjmfwbdmq4hl")),
             "kernel": ("upgrade-kernel", "kernel", ("6.1.0-18-amd64", "6.1.0-21-amd64"))}


def samples() -> list[float]:
    """cgsolve's loop times on an idle machine, each less its wait for a core (the quiet cell of the gate's
    harness, bench/regression_accuracy.py)."""
    doc = json.loads(SAMPLES.read_text())
    return [s["value"] * (1 - s["runqueue_wait_share_max"]) for s in doc["samples"]
            if s["workload"] == "cgsolve" and s["level"] == "idle"]


def output(value: float, iters: int, library: str) -> str:
    """The template with its MPI library, iteration count and loop time (the other timers scaled with it)
    replaced."""
    text = TEMPLATE.read_text()
    old = float(re.search(r"^FOM total_time (\S+) s$", text, re.M)[1])
    text = re.sub(r"^MPI_LIBRARY .*$", f"MPI_LIBRARY {library}", text, flags=re.M)
    text = re.sub(r"^PARAM iters .*$", f"PARAM iters {iters}", text, flags=re.M)
    text = re.sub(r"^FOM (\w+_time\w*|time_per_iter) (\S+) s$",
                  lambda m: f"FOM {m[1]} {float(m[2]) * value / old:.9g} s", text, flags=re.M)
    return text


def first_iters(scenario: str) -> int:
    """The iteration count of the scenario's series 0 (series s runs first_iters + s)."""
    return 2000 + 100 * list(SCENARIOS).index(scenario)


def write_nights(root: Path, scenario: str, seed: int = 43, nights: int = NIGHTS) -> list[tuple[int, Path, dict]]:
    """(night, folder of its outputs, ingest options) for each night of SCENARIO, written under ROOT."""
    system, _what, (before, after) = SCENARIOS[scenario]
    rnd, pool, base = random.Random(seed), samples(), first_iters(scenario)
    out = []
    for night in range(1, nights + 1):
        new = night >= CHANGE
        folder = root / scenario / f"night{night:02d}"
        folder.mkdir(parents=True)
        for s in range(SERIES):
            for i in range(RUNS):
                value = rnd.choice(pool)
                # a run's file is its identity in the store: runs that drew the same sample differ in the 7th digit
                scale = (SLOWER if new and s in SLOWED else 1.0) * (1 + 1e-6 * (night * 100 + s * RUNS + i))
                library = after if new and scenario == "mpi" else OLD_MPI
                (folder / f"cgsolve-s{s}-r{i}.out").write_text(output(value * scale, base + s, library))
        opts = {"--system": system, "--started-at": f"2026-10-{night:02d}T02:00:00+00:00"}
        if scenario == "compiler":
            opts["--compiler"] = after if new else before
        if scenario == "spack":
            opts["--spack-hash"] = after if new else before
        if scenario == "kernel":
            opts["--kernel"] = after if new else before
        out.append((night, folder, opts))
    return out
