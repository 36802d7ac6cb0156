"""Ramble's spack package manager: spack.yaml narrowed to one MPI stack per environment, and their install."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import yaml

from commscope.store import db
from commscope.workflow.checkouts import missing_message, ramble_env, spack_root
from commscope.workflow.errors import WorkflowError, choose
from commscope.workflow.paths import ROOT, SITES_DIR, local_site_dir, sites


def spack_mpi_specs(site: str, site_conf: dict) -> dict[str, str]:
    """Each stack's MPI as a Spack spec. Sites on this machine's builds (local, slurm-local):
    the externals generate_spack_externals.py found, by stack name; other sites: site.yaml's
    spack_specs."""
    if site_conf.get("builds") == "local-builds":
        f = db.home() / "spack" / "local" / "stacks.yaml"
        launch = local_site_dir() / "variables.yaml"
        if not f.exists() or not launch.exists():
            raise WorkflowError(f"{f if not f.exists() else launch} is missing: run `commscope setup` (it "
                                f"writes the local site and its Spack externals), or pass --no-spack")
        launchable = {k[len("mpirun_"):] for k in yaml.safe_load(launch.read_text())["variables"]
                      if k.startswith("mpirun_")}
        return {k: v for k, v in yaml.safe_load(f.read_text())["stacks"].items() if k in launchable}
    specs = site_conf.get("spack_specs") or {}
    if not specs:
        raise WorkflowError(f"site {site} has no spack_specs in {SITES_DIR / site / 'site.yaml'}; add one "
                            f"Spack spec per stack, or pass --no-spack")
    unknown = sorted(set(specs) - set(site_conf.get("stacks") or []))
    if unknown:
        raise WorkflowError(f"{SITES_DIR / site / 'site.yaml'}: spack_specs names stacks the site does not "
                            f"offer: {', '.join(unknown)}")
    return dict(specs)


def spack_env_for(stack_spec: str, site: str) -> dict:
    """spack.yaml narrowed to one MPI: the same repos, site scope, develop source and package
    requirements, the workloads crossed with this MPI only, and a view (so activating the
    environment puts the workloads on PATH). Paths are absolute: Ramble copies the file into
    the workspace."""
    cfg = yaml.safe_load((ROOT / "spack.yaml").read_text())
    s = cfg["spack"]
    workloads = next(d["workloads"] for d in s["definitions"] if "workloads" in d)
    s["include"] = [str(SITES_DIR / site / "spack")]
    s["repos"] = [str((ROOT / r).resolve()) for r in s["repos"]]
    for dev in s.get("develop", {}).values():
        dev["path"] = str((ROOT / dev["path"]).resolve())
    del s["definitions"]
    s["specs"] = [f"{w} ^{stack_spec}" for w in workloads]
    s["concretizer"] = {"unify": True}
    s["view"] = True
    return cfg


def write_spack_env(env_dir: Path, stack: str, stack_spec: str, site: str, made_by: str) -> None:
    (env_dir / "spack.yaml").write_text(f"# spack.yaml narrowed to {stack} by {made_by}.\n"
                                        + yaml.safe_dump(spack_env_for(stack_spec, site), sort_keys=False, width=1000))


def spack_caliper_config() -> str:
    """The Caliper modifier's config name for the Caliper spack.yaml pins: runtime-profile
    from 2.13 on, hatchet-region-profile before."""
    req = yaml.safe_load((ROOT / "spack.yaml").read_text())["spack"]["packages"]["caliper"]["require"]
    m = re.search(r"@=?(\d+)\.(\d+)", req if isinstance(req, str) else " ".join(map(str, req)))
    if m and (int(m.group(1)), int(m.group(2))) < (2, 13):
        return "hatchet-region-profile"
    return "runtime-profile"


def spack_env_name(stack: str) -> str:
    return f"commscope-{stack}"


def spack_install(site: str, stacks: list[str] | None = None, log=print) -> dict[str, str]:
    """Installs each stack's narrowed environment (spack_env_for) under
    $COMMSCOPE_HOME/spack-envs/<site>/<stack>, so that a later `commscope run` finds every build
    installed: Ramble's copy of the same file concretizes to the same hashes. Returns
    {stack: DAG hash of the workloads build}. This is the pipelines' setup stage."""
    choose("site", [site], sites())
    root = spack_root()
    if root is None:
        raise WorkflowError(missing_message("spack", "SPACK_ROOT"))
    site_conf = yaml.safe_load((SITES_DIR / site / "site.yaml").read_text())
    specs = spack_mpi_specs(site, site_conf)
    stacks = choose("stack", stacks, sorted(specs)) if stacks else sorted(specs)
    env = ramble_env()
    hashes = {}
    for st in stacks:
        d = db.home() / "spack-envs" / site / st
        d.mkdir(parents=True, exist_ok=True)
        write_spack_env(d, st, specs[st], site, "`commscope setup --spack-install`")
        for args in (["concretize", "-f"], ["install"]):
            t0 = time.monotonic()
            cmd = [str(root / "bin" / "spack"), "-e", str(d), *args]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if p.returncode:
                raise WorkflowError(f"{shlex.join(cmd)} failed (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
            log(f"[setup] spack {args[0]} {st}: {time.monotonic() - t0:.0f} s")
        roots = json.loads((d / "spack.lock").read_text())["roots"]
        hashes[st] = roots[0]["hash"]
        log(f"[setup] {st}: {roots[0]['spec']} /{hashes[st][:7]} in {d}")
    return hashes
