"""What a site offers a run: each stack's interconnect selections, the hardware description, and the `local`
site's generated scope (launchers, builds) and Spack externals."""
from __future__ import annotations

import datetime as dt
import os
import platform
import shlex
import subprocess
from pathlib import Path

import yaml

from commscope.store import db
from commscope.workflow import caliper, interconnects
from commscope.workflow import stacks
from commscope.workflow.builds import Build, caliper_profile_config
from commscope.workflow.errors import WorkflowError
from commscope.workflow.paths import SITES_DIR, local_site_dir


def interconnect_catalog(stack_names: list[str], site: str | None = None) -> dict[str, dict[str, dict]]:
    """Per stack, its transport selections by label: {stack: {label: {"name", "env"}}}.

    From commscope.workflow.interconnects (built-in entries plus the site's interconnects.yaml). Every
    selection there is environment only, so it works under mpirun and srun alike. Every stack
    also has `default`: the stack's own choice, no settings."""
    prefix = interconnects.STACK_PREFIX
    own = site if site in interconnects.sites() else None   # a site without interconnects.yaml adds none
    cat: dict[str, dict[str, dict]] = {}
    for s in stack_names:
        cat[s] = {"default": {"name": f"{prefix.get(s, s)}/default", "env": {}}}
        for e in interconnects.entries(s, own):
            cat[s][e.label] = {"name": e.name, "env": dict(e.env)}
    return cat


def env_words(env: dict) -> str:
    return " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())


# ---- hardware ------------------------------------------------------------------------

def detect_hardware(site: str = "local") -> dict:
    """This machine's hardware description (the same fields as a site's hardware.yaml)."""
    cpu = {}
    p = subprocess.run(["lscpu"], capture_output=True, text=True)
    info = dict(line.split(":", 1) for line in p.stdout.splitlines() if ":" in line)
    info = {k.strip(): v.strip() for k, v in info.items()}
    cpu["model"] = info.get("Model name", platform.processor() or "unknown")
    cpu["sockets_per_node"] = int(info.get("Socket(s)", "1") or 1)
    cpu["cores_per_node"] = os.cpu_count() or 1
    cpu["threads_per_core"] = int(info.get("Thread(s) per core", "1") or 1)
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    return {
        "site": site,
        "hostname": platform.node(),
        "cpu": cpu,
        "memory_per_node_gb": round(mem_kb / 1024 / 1024, 1),
        "nodes": 1,
        "interconnect": {"name": "shared memory (single node)", "technology": "shm"},
        "topology": {"type": "single-node", "numa_nodes": int(info.get("NUMA node(s)", "1") or 1)},
        "detected": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def site_hardware(site: str) -> dict:
    f = SITES_DIR / site / "hardware.yaml"
    if f.exists():
        return yaml.safe_load(f.read_text())
    gen = local_site_dir() / "hardware.yaml"
    if gen.exists():
        return dict(yaml.safe_load(gen.read_text()), site=site)
    return detect_hardware(site)


# ---- the local site's generated scope ------------------------------------------------

def write_local_site(builds: dict[str, Build]) -> Path:
    """$COMMSCOPE_HOME/sites/local: variables.yaml (per-stack absolute paths) and hardware.yaml."""
    d = local_site_dir()
    d.mkdir(parents=True, exist_ok=True)
    vars_: dict = {}
    # How to launch every stack installed here (a Spack build of it needs that too); where
    # its binaries are only for the stacks built.
    for s in [s for s in stacks.catalog() if s.present() or s.name in builds]:
        name = s.name
        vars_[f"mpirun_{name}"] = " ".join([s.mpirun, *s.oversubscribe])
        vars_[f"stack_env_{name}"] = env_words(s.env)
        vars_[f"family_{name}"] = s.family   # openmpi | mpich | impi: studies key runtime controls on it
        vars_[f"srun_mpi_{name}"] = stacks.SRUN_MPI[s.family]   # as proven by tests/test_slurm.py
        # the Fortran binding its fjacobi takes (a label of fjacobi's series): mpi_f08, or `use mpi` (NO_F08)
        vars_[f"fortran_binding_{name}"] = "mpi" if name in stacks.NO_F08 else "f08"
        if name in builds:
            b = builds[name]
            vars_[f"bin_{name}"] = str(b.path)
            vars_[f"caliper_{name}"] = "yes" if b.caliper else "no"
            vars_[f"caliper_config_{name}"] = caliper_profile_config(b.caliper_dir)
            # the no-GOTCHA Caliper that the modifier's preload mode puts into unmodified binaries
            vars_[f"caliper_preload_prefix_{name}"] = str(caliper.preload_prefix(s, b.caliper_prefix) or "")
            # the library that forwards a Fortran application's MPI calls to the C ones Caliper wraps
            forward = b.path / "libcommscope-mpif.so"
            vars_[f"caliper_preload_fortran_{name}"] = str(forward) if forward.exists() else ""
    header = "# Generated by `commscope setup` from commscope/workflow/stacks.py and the builds it made. Do not edit.\n"
    (d / "variables.yaml").write_text(header + yaml.safe_dump({"variables": vars_}, sort_keys=True, width=1000))
    _write_hardware(d / "hardware.yaml", detect_hardware("local"))
    return d


def _write_hardware(f: Path, found: dict) -> None:
    """The detected hardware, unless the file already describes the same machine: the description is part of
    every series' key, so the time it was detected must not make tonight's series new ones."""
    if f.exists():
        before = yaml.safe_load(f.read_text()) or {}
        if {k: v for k, v in before.items() if k != "detected"} == {k: v for k, v in found.items() if k != "detected"}:
            return
    f.write_text("# Detected by `commscope setup`.\n" + yaml.safe_dump(found, sort_keys=False))


def write_spack_externals(source_mirror: Path | None = None) -> Path:
    """The local site's Spack scope (absolute-path externals of the stacks
    found here) under COMMSCOPE_HOME, from ramble/sites/local/generate_spack_externals.py."""
    import importlib.util
    path = SITES_DIR / "local" / "generate_spack_externals.py"
    spec = importlib.util.spec_from_file_location("generate_spack_externals", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        return mod.generate(home=db.home(), source_mirror=source_mirror)
    except mod.GenerateError as e:
        raise WorkflowError(f"{path.name}: {e}") from None
