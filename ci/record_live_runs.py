#!/usr/bin/env python3
"""Records the real runs that three tests read, so their verdicts do not depend on the load of the machine that
runs the tests (tests/live-runs/README.md says when and where they were made):

- attribution/: test_attribution's nights: halo3d, commgraph and pingpong on Debian Open MPI, five baseline nights
  over shared memory, a night with halo3d built without optimisation ("software"), and two nights over TCP
  loopback ("platform", "canary-first"); every run of every night made in turn, so load falls on all alike.
- tcp-switch/: test_regressions' commgraph series: four nights over shared memory, then two over TCP.
- reference/: test_reference_report's configurations, each run REFERENCE_REPEATS times, in turn.

    .venv/bin/python ci/record_live_runs.py [attribution|tcp-switch|reference ...]

Each set is written to a temporary folder and moved into place once every run passed its checks.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import suite  # ci/, beside this script
from commscope.workflow import interconnects, stacks as mpi_stacks

ROOT = Path(__file__).resolve().parent.parent
LIVE = ROOT / "tests" / "live-runs"
STACK = "debian-openmpi4"

# ---- attribution ----
HALO = ["--n", "40,40,40", "--iters", "30", "--variant", "blocking"]
COMMGRAPH = ["--pattern", "pairs", "--iters", "200", "--small-bytes", "8", "--large-bytes", "8"]
PINGPONG = ["--bytes", "8", "--iters", "200", "--batches", "20"]
RANKS = {"halo3d": 1, "commgraph": 2, "pingpong": 2}
RUNS = 4   # per night and application
BASE_NIGHTS = ("night1", "night2", "night3", "night4", "night5")
SHM, TCP = "openmpi4/shm", "openmpi4/tcp"

# ---- tcp-switch ----
TCP_SWITCH_NIGHTS = ["self,vader"] * 4 + ["self,tcp"] * 2
TCP_SWITCH_RUNS = 3

# ---- reference ----
REFERENCE_REPEATS = 2
HALO_REF = ["--n", "32,32,32", "--iters", "10"]
REFERENCE = {
    "halo": {
        "halo-blocking": ("halo3d", HALO_REF + ["--variant", "blocking", "--pml-width", "0"]),
        "halo-overlap": ("halo3d", HALO_REF + ["--variant", "overlap", "--pml-width", "0"]),
        "halo-rma": ("halo3d", HALO_REF + ["--variant", "rma", "--pml-width", "0"]),
        "halo-pml-unfused": ("halo3d", HALO_REF + ["--variant", "blocking", "--pml-width", "4"]),
        "halo-pml-fused": ("halo3d", HALO_REF + ["--variant", "blocking", "--pml-width", "4", "--fused"]),
    },
    "others": {
        "st-col-send": ("stencil2d", ["--n", "128,128", "--iters", "20", "--decomp", "col", "--send", "send"]),
        "st-row-send": ("stencil2d", ["--n", "128,128", "--iters", "20", "--decomp", "row-naive", "--send", "send"]),
        "st-col-ssend": ("stencil2d", ["--n", "128,128", "--iters", "20", "--decomp", "col", "--send", "ssend"]),
        "st-col-isend": ("stencil2d", ["--n", "128,128", "--iters", "20", "--decomp", "col", "--send", "isend"]),
        "cg-direct-barriers": ("cgsolve", ["--n", "16,16,16", "--allreduce", "direct", "--debug-barriers"]),
        "cg-direct": ("cgsolve", ["--n", "16,16,16", "--allreduce", "direct"]),
        "cg-hierarchical": ("cgsolve", ["--n", "16,16,16", "--allreduce", "hierarchical"]),
        "cg-nonblocking": ("cgsolve", ["--n", "16,16,16", "--allreduce", "nonblocking"]),
        "pio-independent": ("pio", ["--n", "32,32,32", "--method", "independent"]),
        "pio-two-phase": ("pio", ["--n", "32,32,32", "--method", "two-phase", "--group-size", "2"]),
        "cg-identity": ("commgraph", ["--iters", "5", "--pattern", "pairs", "--large-bytes", "65536"]),
        "cg-random": ("commgraph", ["--iters", "5", "--pattern", "pairs", "--large-bytes", "65536",
                                    "--rank-map", "{maps}/random-2.map"]),
        "cg-advised": ("commgraph", ["--iters", "5", "--pattern", "pairs", "--large-bytes", "65536",
                                     "--rank-map", "{maps}/advised-2.map"]),
        "coll-default": ("collsweep", ["--coll", "allreduce", "--sizes", "8,1K,64K", "--iters", "50"]),
        "coll-forced": ("collsweep", ["--coll", "allreduce", "--sizes", "8,1K,64K", "--iters", "50"]),
    },
}
# Open MPI's recursive doubling forced for the second collsweep configuration (workloads/README.md).
REFERENCE_ENV = {"coll-forced": {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                                 "OMPI_MCA_coll_tuned_allreduce_algorithm": "3"}}


def checked(stack, bdir: Path, workload: str, args: list[str], ranks: int, env=None, allow_skip=False) -> str:
    r = suite.run(stack, bdir, workload, args, ranks, env=env)
    bad = suite.problems(r, allow_skip=allow_skip)
    if bad:
        raise SystemExit(f"{workload} {' '.join(args)}: {bad}\n{r.stderr}")
    return r.stdout


def attribution(stack, usual: Path, tmp: Path, out: Path) -> None:
    unoptimised = suite.build(stack, build_dir=tmp / "build-O0", extra=["-DCMAKE_BUILD_TYPE=Debug"])
    plan = {n: (usual, SHM) for n in BASE_NIGHTS} | {"software": (unoptimised, SHM), "platform": (usual, TCP),
                                                      "canary-first": (usual, TCP)}
    for name, bdir, args in (("halo3d", usual, HALO), ("halo3d", unoptimised, HALO), ("commgraph", usual, COMMGRAPH)):
        suite.run(stack, bdir, name, args, RANKS[name])   # not kept: the first run after a build is the slowest
    for i in range(RUNS):
        for night, (halo_build, entry) in plan.items():
            d = out / night
            d.mkdir(exist_ok=True)
            env = interconnects.get(entry).environ()
            for name, bdir, args in (("halo3d", halo_build, HALO), ("commgraph", usual, COMMGRAPH),
                                     ("pingpong", usual, PINGPONG)):
                text = checked(stack, bdir, name, args, RANKS[name], env=env)
                assert f"PARAM interconnect {entry}" in text
                (d / f"{name}-{i}.out").write_text(text)


def tcp_switch(stack, usual: Path, tmp: Path, out: Path) -> None:
    for night, btl in enumerate(TCP_SWITCH_NIGHTS):
        d = out / f"night{night}"
        d.mkdir()
        for i in range(TCP_SWITCH_RUNS):
            text = checked(stack, usual, "commgraph", COMMGRAPH, 2, env={"OMPI_MCA_btl": btl, "OMPI_MCA_pml": "ob1"})
            (d / f"run{i}.out").write_text(text)


def reference(stack, usual: Path, tmp: Path, out: Path) -> None:
    maps = tmp / "maps"
    maps.mkdir()
    (maps / "random-2.map").write_text("1 0\n")
    (maps / "advised-2.map").write_text("# advised\n0 1\n")
    for part, configs in REFERENCE.items():
        d = out / part
        d.mkdir()
        for rep in range(REFERENCE_REPEATS):
            for name, (workload, args) in configs.items():
                args = [a.replace("{maps}", str(maps)) for a in args]
                if workload == "pio":
                    args += ["--dir", str(tmp)]
                text = checked(stack, usual, workload, args, 2, env=REFERENCE_ENV.get(name), allow_skip=True)
                (d / f"{name}.{rep}.out").write_text(text)
    # pio's folder's file system as findmnt names it, for the test to compare with what the runs said
    (out / "pio-dir.findmnt").write_text(subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", str(tmp)],
                                                        capture_output=True, text=True, check=True).stdout)


SETS = {"attribution": attribution, "tcp-switch": tcp_switch, "reference": reference}


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in SETS]
    if unknown:
        raise SystemExit(f"record_live_runs.py: no set {', '.join(unknown)}; the sets are {', '.join(SETS)}")
    stack = mpi_stacks.by_name(STACK)
    for name in names or list(SETS):
        with tempfile.TemporaryDirectory(prefix=f"record-{name}-") as t:
            tmp = Path(t)
            usual = suite.build(stack, build_dir=tmp / "build")
            out = tmp / "out"
            out.mkdir()
            load = os.getloadavg()[0]
            SETS[name](stack, usual, tmp, out)
            dest = LIVE / name
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(out, dest)
            host = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
            print(f"{name}: {sum(1 for _ in dest.rglob('*.out'))} outputs in {dest.relative_to(ROOT)} "
                  f"(load {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; {host})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
