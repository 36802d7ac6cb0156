"""`commscope setup` / `commscope run`: bad input everywhere; with RAMBLE_ROOT, the smoke study for
real through Ramble (null package manager) into a real PostgreSQL, and the Slurm scripts a 2-node
matrix renders; with SPACK_ROOT too, the same through Ramble's spack package manager. Ramble and
Spack are in no package registry: those tests skip on a fresh machine, with the reason."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, stack_or_skip

COMMSCOPE = [sys.executable, "-m", "commscope.cli"]
RAMBLE_ROOT = os.environ.get("RAMBLE_ROOT")
needs_ramble = pytest.mark.skipif(
    not RAMBLE_ROOT or not Path(RAMBLE_ROOT, "bin", "ramble").exists(),
    reason="Ramble is in no package registry: set RAMBLE_ROOT to a checkout of GoogleCloudPlatform/ramble "
           "at the commit in versions.yaml to run the studies for real")


def commscope(*args, home: Path, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    e = {**os.environ, "COMMSCOPE_HOME": str(home), **(env or {})}
    return subprocess.run([*COMMSCOPE, *args], capture_output=True, text=True, env=e, timeout=timeout, cwd=ROOT)


# ---- bad input: no Ramble needed, nothing is created ----------------------------------------

@pytest.mark.parametrize("args, kind, some_valid", [
    (["run", "no-such-study"], "study", "smoke"),
    (["run", "smoke", "--site", "no-such-site"], "site", "slurm-cluster"),
    (["run", "smoke", "--site", "slurm-cluster", "--stacks", "openmpi,nompi"], "stack", "cray-mpich"),
    (["run", "smoke", "--site", "slurm-cluster", "--interconnects", "warp-drive"], "interconnect", "default"),
])
def test_unknown_names_are_errors_listing_the_valid_ones(tmp_path, args, kind, some_valid):
    p = commscope(*args, home=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    msg = p.stderr.strip().splitlines()[-1]
    assert msg.startswith("commscope: error: unknown ") and kind in msg and "valid:" in msg, msg
    assert some_valid in msg.split("valid:", 1)[1], msg
    assert not (tmp_path / "workspaces").exists(), "a rejected run created a workspace"


def test_caliper_mode_must_be_known(tmp_path):
    p = commscope("run", "smoke", "--caliper", "everything", home=tmp_path)
    assert p.returncode == 2 and "everything" in p.stderr and "matrix" in p.stderr


def test_run_without_builds_says_to_run_setup(tmp_path):
    p = commscope("run", "smoke", home=tmp_path)
    assert p.returncode == 1 and "commscope setup" in p.stderr, p.stderr


def test_missing_ramble_says_which_piece_and_how_to_provide_it(tmp_path):
    p = commscope("run", "smoke", "--site", "slurm-cluster", "--dry-run", home=tmp_path, env={"RAMBLE_ROOT": ""})
    assert p.returncode == 1
    assert "ramble is missing: set RAMBLE_ROOT" in p.stderr and "e2d88e88ab49d568aea46c367bddca5030d3b1e5" in p.stderr


def test_setup_rejects_a_malformed_caliper_prefix(tmp_path):
    p = commscope("setup", "--caliper-prefix", "no-equals-sign", home=tmp_path)
    assert p.returncode == 2 and "STACK=PREFIX" in p.stderr


def test_setup_builds_per_stack_and_writes_the_local_site_even_without_ramble(tmp_path):
    """No Ramble or Spack given (set but empty: nothing is cloned): setup still builds the
    workloads and writes the local site, then says Ramble is missing and exits 1. Spack is optional (only `run
    --spack` needs it): one line says so, and it is not called missing."""
    stack_or_skip("debian-openmpi4")
    home = tmp_path / "home"
    p = commscope("setup", "--stacks", "debian-openmpi4", home=home, env={"RAMBLE_ROOT": "", "SPACK_ROOT": ""})
    assert p.returncode == 1, p.stdout + p.stderr
    assert "missing: ramble is missing: set RAMBLE_ROOT" in p.stderr and "missing: spack" not in p.stderr
    assert "[setup] spack: not in place; only `commscope run --spack` needs it (SPACK_ROOT names" in p.stdout
    assert "cloning" not in p.stdout
    build = json.loads((home / "builds" / "debian-openmpi4" / "commscope-build.json").read_text())
    bdir = Path(build["path"])
    for w in ("halo3d", "stencil2d", "commgraph"):
        assert (bdir / w).exists(), w
    gen = yaml.safe_load((home / "sites" / "local-generated" / "variables.yaml").read_text())["variables"]
    assert gen["bin_debian-openmpi4"] == str(bdir)
    assert gen["mpirun_debian-openmpi4"] == "/usr/bin/mpirun.openmpi --oversubscribe"
    assert gen["stack_env_debian-openmpi4"] == "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    assert gen["family_debian-openmpi4"] == "openmpi" and gen["srun_mpi_debian-openmpi4"] == "pmix"
    assert gen["caliper_debian-openmpi4"] == ("yes" if build["caliper"] else "no")
    hw = yaml.safe_load((home / "sites" / "local-generated" / "hardware.yaml").read_text())
    assert hw["cpu"]["cores_per_node"] == os.cpu_count() and hw["memory_per_node_gb"] > 0
    # and the local site's Spack scope: absolute-path externals of the stacks found here
    ext = yaml.safe_load((home / "spack" / "local" / "packages.yaml").read_text())["packages"]
    assert {"openmpi", "mpich", "cmake", "gmake", "python"} <= set(ext)
    assert all(Path(e["prefix"]).is_absolute() for p in ext.values() for e in p.get("externals", []))


def test_a_second_setup_keeps_the_local_sites_hardware_so_tonights_series_continue_last_nights(tmp_path):
    """The local site's hardware.yaml is part of every series' key: a second `commscope setup` on the same machine
    leaves it as it was (its detection time too), and a description that no longer fits the machine (lscpu's
    model, as the file names it) is written afresh."""
    home = tmp_path / "home"
    env = {"RAMBLE_ROOT": "", "SPACK_ROOT": ""}
    commscope("setup", "--no-build", home=home, env=env)
    hw = home / "sites" / "local-generated" / "hardware.yaml"
    first = hw.read_text()
    time.sleep(1.1)   # the detection time is written to the second
    commscope("setup", "--no-build", home=home, env=env)
    assert hw.read_text() == first
    hw.write_text(first.replace("model:", "model: another"))
    commscope("setup", "--no-build", home=home, env=env)
    model = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    assert yaml.safe_load(hw.read_text())["cpu"]["model"] in model


def test_run_without_spack_refuses_the_spack_package_manager(tmp_path):
    p = commscope("run", "smoke", "--spack", "--dry-run", home=tmp_path, env={"SPACK_ROOT": ""})
    assert p.returncode == 1 and "spack is missing: set SPACK_ROOT" in p.stderr, p.stderr
    assert not (tmp_path / "workspaces").exists()


def test_setup_spack_install_names_a_bad_site_or_the_missing_spack(tmp_path):
    p = commscope("setup", "--no-build", "--spack-install", "moon-base", home=tmp_path, env={"SPACK_ROOT": ""})
    assert p.returncode == 2 and "unknown site 'moon-base'" in p.stderr and "slurm-cluster" in p.stderr, p.stderr
    p = commscope("setup", "--no-build", "--spack-install", "slurm-cluster", home=tmp_path, env={"SPACK_ROOT": ""})
    assert p.returncode == 1 and "spack is missing: set SPACK_ROOT" in p.stderr, p.stderr
    assert not (tmp_path / "spack-envs").exists()


def test_spack_environment_per_stack_is_spack_yaml_narrowed():
    """What Ramble's spack package manager gets for one stack: spack.yaml's own repos, develop
    source and requirements, with absolute paths (Ramble copies the file into the workspace),
    the site's scope, and the workloads crossed with that stack's MPI only."""
    from commscope.workflow import spack_envs

    top = yaml.safe_load((ROOT / "spack.yaml").read_text())["spack"]
    env = spack_envs.spack_env_for("openmpi@=4.1.4", "slurm-cluster")["spack"]
    workloads = next(d["workloads"] for d in top["definitions"] if "workloads" in d)
    assert env["specs"] == [f"{w} ^openmpi@=4.1.4" for w in workloads]
    assert env["include"] == [str(ROOT / "ramble" / "sites" / "slurm-cluster" / "spack")]
    assert env["repos"] == [str(ROOT / r) for r in top["repos"]]
    assert env["develop"]["commscope-workloads"]["path"] == str(ROOT / "workloads")
    assert env["packages"] == top["packages"] and env["config"] == top["config"]
    assert env["concretizer"]["unify"] is True and env["view"] is True and "definitions" not in env
    for path in [*env["include"], *env["repos"], env["develop"]["commscope-workloads"]["path"]]:
        assert Path(path).is_dir(), path
    # The Caliper modifier's config name follows the Caliper version spack.yaml pins.
    req = top["packages"]["caliper"]["require"]
    major_minor = tuple(int(x) for x in re.search(r"@=?(\d+)\.(\d+)", req).groups())
    assert spack_envs.spack_caliper_config() == ("runtime-profile" if major_minor >= (2, 13)
                                               else "hatchet-region-profile")


def test_slurm_cluster_spack_specs_name_its_stacks_and_externals():
    site = yaml.safe_load((ROOT / "ramble" / "sites" / "slurm-cluster" / "site.yaml").read_text())
    externals = yaml.safe_load((ROOT / "ramble" / "sites" / "slurm-cluster" / "spack" / "packages.yaml")
                               .read_text())["packages"]
    assert set(site["spack_specs"]) == set(site["stacks"])
    for stack, spec in site["spack_specs"].items():
        name = spec.split()[0].split("@")[0]
        variants = set(spec.split()[1:])
        assert any(variants <= set(e["spec"].split()[1:]) for e in externals[name]["externals"]), (stack, spec)


# ---- for real, with Ramble -------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_stack_home(tmp_path_factory):
    """(home, setup's process) of one `commscope setup --stacks debian-openmpi4,debian-mpich4` without Spack,
    shared by the tests that run the smoke study from it (each run gets a workspace of its own)."""
    for s in ("debian-openmpi4", "debian-mpich4"):
        stack_or_skip(s)
    home = tmp_path_factory.mktemp("two-stacks") / "home"
    t0 = time.monotonic()
    p = commscope("setup", "--stacks", "debian-openmpi4,debian-mpich4", home=home, env={"SPACK_ROOT": ""})
    print(f"[ramble] setup: {time.monotonic() - t0:.1f} s")
    return home, p


@needs_ramble
def test_smoke_study_end_to_end_through_ramble(two_stack_home, server, dsn):
    """setup builds the workloads for two stacks, run smoke executes every experiment through
    Ramble, analyze judges them, and the workspace is ingested into a real PostgreSQL."""
    home, p = two_stack_home
    env = {"COMMSCOPE_DB_URL": dsn, "SPACK_ROOT": ""}
    assert p.returncode == 0 or "spack is missing" in p.stderr, p.stdout + p.stderr
    builds = {json.loads(f.read_text())["stack"] for f in home.glob("builds/*/commscope-build.json")}
    assert builds == {"debian-openmpi4", "debian-mpich4"}
    gen = yaml.safe_load((home / "sites" / "local-generated" / "variables.yaml").read_text())["variables"]
    assert gen["mpirun_debian-mpich4"] == "/usr/bin/mpirun.mpich"

    t0 = time.monotonic()
    p = commscope("run", "smoke", "--interconnects", "default,tcp", home=home, env=env)
    secs = time.monotonic() - t0
    print(f"[ramble] run smoke: {secs:.1f} s\n{p.stdout}")
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    res = json.loads((ws / "results.latest.json").read_text())
    exps = res["experiments"]
    # 3 workloads (halo3d twice) x 2 rank counts x 2 stacks x 2 interconnects
    assert len(exps) == 4 * 2 * 2 * 2
    bad = [e["name"] for e in exps if e["RAMBLE_STATUS"] != "SUCCESS"]
    assert not bad, bad
    for e in exps:
        foms = {f["name"]: f["value"] for c in e["CONTEXTS"] for f in c["foms"]}
        assert foms["ranks"] == e["n_ranks"]
        assert all(v == "PASS" for k, v in foms.items() if k.startswith("verify_") and not k.endswith("_value"))
        stack = e["RAMBLE_VARIABLES"]["stack"]
        assert ("Open MPI" if "openmpi" in stack else "MPICH") in foms["mpi_library"]
    tcp = [e for e in exps if e["RAMBLE_VARIABLES"]["interconnect"] == "tcp"]
    assert {e["RAMBLE_VARIABLES"]["interconnect_name"] for e in tcp} == {"openmpi4/tcp", "mpich4/tcp"}
    assert p.returncode == 0 and "stored" in p.stdout and "ingest failed" not in p.stdout, p.stdout + p.stderr
    # the run says where the results are
    assert f"results: {ws / 'results.latest.json'}" in p.stdout


@needs_ramble
def test_slurm_dry_run_renders_sbatch_and_srun_for_a_two_node_matrix(tmp_path):
    """slurm-cluster's scripts for 1 and 2 ranks at one rank per node: the 2-rank experiments ask
    Slurm for 2 nodes and srun the stack's PMI; nothing is submitted."""
    from commscope.workflow import plan as workflow_plan, run as workflow_run

    home = tmp_path / "home"
    os.environ["COMMSCOPE_HOME"] = str(home)
    try:
        plan = workflow_plan.plan_run("smoke", site="slurm-cluster", stacks=["openmpi", "mpich"], caliper="mpi",
                                 dry_run=True, workspace=tmp_path / "ws", spack=False)
        ws = workflow_run.create_workspace(plan)
        scope = ws / "commscope" / "run-scope" / "variables.yaml"
        doc = yaml.safe_load(scope.read_text())
        doc["variables"]["processes_per_node"] = 1      # a 2-rank experiment then needs 2 nodes
        scope.write_text(yaml.safe_dump(doc))
        workflow_run._ramble(ws, "workspace", "setup", "--dry-run")
    finally:
        os.environ.pop("COMMSCOPE_HOME")
    dirs = workflow_run.experiment_dirs(ws)
    assert len(dirs) == 4 * 2 * 2          # 4 experiments x n_ranks 1,2 x 2 stacks
    for d in dirs:
        ranks = int(re.search(r"-n(\d+)$", d.name).group(1))
        sbatch = (d / "slurm_experiment").read_text()
        assert f"#SBATCH --nodes={ranks}\n" in sbatch and f"#SBATCH --ntasks={ranks}\n" in sbatch, sbatch
        assert "#SBATCH --partition=pbatch" in sbatch and f"bash {d}/execute_experiment" in sbatch
        script = (d / "execute_experiment").read_text()
        pmi = "pmix" if "-openmpi-" in d.name else "pmi2"
        assert re.search(rf"^env .*srun --mpi={pmi} -N {ranks} -n {ranks} \S+", script, re.M), script
        assert "export CALI_CONFIG=" in script and not (d / "slurm-job-id").exists()
        assert "#SBATCH --job-name=ws/" in sbatch
    assert "{" not in "".join((d / "execute_experiment").read_text().replace("${PATH}", "") for d in dirs)


@needs_ramble
def test_smoke_on_the_single_node_slurm_cluster(tmp_path, two_stack_home):
    """slurm-local for real: every experiment is an sbatch job whose srun uses the stack's PMI;
    commscope waits for the jobs, and every experiment must report the world size it asked for
    (MPICH under the wrong PMI runs as 1-rank copies and still exits 0)."""
    import slurm_local   # ci/, on the path by conftest.py

    reason = slurm_local.unavailable()
    if reason:
        pytest.skip(reason)
    home, p = two_stack_home
    assert (home / "sites" / "local-generated" / "variables.yaml").exists(), p.stdout + p.stderr
    with slurm_local.running(tmp_path / "slurm") as cluster:
        t0 = time.monotonic()
        p = commscope("run", "smoke", "--site", "slurm-local", "--caliper", "off", "--no-ingest",
                      "--where", '"{application_name}" in ["halo3d", "cgsolve"]',
                      home=home, env={"SPACK_ROOT": "",   # this machine's builds, even where Spack is set up
                                      **{k: v for k, v in cluster.env().items() if k in ("PATH", "SLURM_CONF")}})
        print(f"[ramble] slurm-local smoke: {time.monotonic() - t0:.1f} s\n{p.stdout}")
    assert p.returncode == 0, p.stdout + p.stderr
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    exps = json.loads((ws / "results.latest.json").read_text())["experiments"]
    assert len(exps) == 3 * 2 * 2      # halo3d x2, cgsolve; 1 and 2 ranks; 2 stacks
    assert [e["name"] for e in exps if e["RAMBLE_STATUS"] != "SUCCESS"] == []
    for d in (ws / "experiments").glob("*/*/*"):
        assert (d / "slurm-job-id").read_text().strip(), d      # it went through sbatch
        assert "srun --mpi=" in (d / "execute_experiment").read_text()


@needs_ramble
def test_smoke_through_ramble_with_the_spack_package_manager(tmp_path, server, dsn):
    """`commscope run --spack`: Ramble's spack package manager concretizes and installs spack.yaml
    narrowed to each stack, activates that environment in every experiment, and the binaries it
    runs are Spack's (their MPI is the stack's). Needs Spack, and builds Caliper and Adiak for
    the stack (the externals live under this test's home), so it runs only when asked."""
    spack_root = os.environ.get("SPACK_ROOT")
    if not spack_root or not Path(spack_root, "bin", "spack").exists():
        pytest.skip("Spack is in no package registry: set SPACK_ROOT (packages/README.md) to run it")
    if not os.environ.get("COMMSCOPE_SPACK_INSTALL") or not os.environ.get("COMMSCOPE_SPACK_MIRROR"):
        pytest.skip("installs Caliper and Adiak with Spack (minutes on 2 cores): set COMMSCOPE_SPACK_INSTALL=1 "
                    "and COMMSCOPE_SPACK_MIRROR to the Caliper/Adiak source mirror to run it")
    stack_or_skip("debian-openmpi4")
    home = tmp_path / "home"
    env = {"COMMSCOPE_DB_URL": dsn}
    p = commscope("setup", "--stacks", "debian-openmpi4", "--no-build",
                  "--spack-source-mirror", os.environ["COMMSCOPE_SPACK_MIRROR"], home=home, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    t0 = time.monotonic()
    p = commscope("run", "smoke", "--spack", "--stacks", "debian-openmpi4", "--where", "{n_ranks} == 2",
                  home=home, env=env, timeout=3 * 3600)
    print(f"[ramble+spack] run smoke: {time.monotonic() - t0:.1f} s\n{p.stdout}")
    assert "package manager spack" in p.stdout, p.stdout + p.stderr
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    assert p.returncode == 0, p.stdout + p.stderr + (ws / "commscope" / "run.log").read_text()[-4000:]
    env_dir = ws / "software" / "commscope-debian-openmpi4"
    lock = json.loads((env_dir / "spack.lock").read_text())
    (root,) = lock["roots"]
    assert root["spec"].startswith("commscope-workloads+caliper ^openmpi@=4.1.4"), root
    view_bin = env_dir / ".spack-env" / "view" / "bin"
    exps = json.loads((ws / "results.latest.json").read_text())["experiments"]
    assert len(exps) == 6 and all(e["RAMBLE_STATUS"] == "SUCCESS" for e in exps), [e["name"] for e in exps]
    for d in workflow_experiment_dirs(ws):
        script = (d / "execute_experiment").read_text()
        assert f"spack env activate {env_dir}" in script and str(view_bin) in script, script
    # The binary Ramble ran is Spack's build, linked to this stack's Open MPI.
    halo3d = (view_bin / "halo3d").resolve()
    loc = subprocess.run([str(Path(spack_root, "bin", "spack")), "-e", str(env_dir), "location", "-i",
                          "commscope-workloads"], capture_output=True, text=True,
                         env={**os.environ, "COMMSCOPE_HOME": str(home)})
    assert loc.returncode == 0 and halo3d == Path(loc.stdout.strip(), "bin", "halo3d").resolve(), (loc, halo3d)
    ldd = subprocess.run(["ldd", str(halo3d)], capture_output=True, text=True).stdout
    assert "libmpi.so.40" in ldd and "libcaliper" in ldd, ldd
    assert all(any(c["foms"] and f["name"] == "mpi_library" and "Open MPI v4.1" in f["value"]
                   for c in e["CONTEXTS"] for f in c["foms"]) for e in exps)
    assert any(ws.glob("experiments/*/*/*/*.cali")), "Caliper (Spack's) wrote no profile"
    assert "stored" in p.stdout


def workflow_experiment_dirs(ws: Path) -> list[Path]:
    return sorted(p.parent for p in (ws / "experiments").glob("*/*/*/execute_experiment"))


def test_setup_counts_its_builds_and_says_the_time_left_at_the_pace_so_far():
    """Four builds of 100, 140, 80 and 120 s: after each, how many are done, the time so far and, until the last,
    the builds left times the mean so far (worked out by hand: 3 x 100 s, 2 x 120 s, 1 x 106.7 s), in whole
    minutes from 90 s on."""
    from commscope.workflow.progress import Progress
    said = []
    p = Progress("Caliper + Adiak builds", 4, said.append)
    for seconds in (100, 140, 80, 120):
        p.done(seconds)
    assert said == ["[setup] Caliper + Adiak builds: 1 of 4 done in 2 min; about 5 min left",
                    "[setup] Caliper + Adiak builds: 2 of 4 done in 4 min; about 4 min left",
                    "[setup] Caliper + Adiak builds: 3 of 4 done in 5 min; about 2 min left",
                    "[setup] Caliper + Adiak builds: 4 of 4 done in 7 min"]


def test_run_says_the_experiments_started_and_the_time_left():
    """3 of 12 experiments started in 30 s: 9 left at 10 s each is 90 s, said in minutes from 90 s on."""
    from commscope.workflow.progress import pace
    assert pace(3, 12, 30, "experiments started") == "3 of 12 experiments started in 30 s; about 2 min left"
    assert pace(0, 12, 5, "experiments started") == "0 of 12 experiments started in 5 s"
    assert pace(12, 12, 120, "jobs done") == "12 of 12 jobs done in 2 min"
