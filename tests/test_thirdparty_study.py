"""A study of one of Ramble's builtin applications run by `commscope run` (issue 15, item 2 and "Add your
application"): ramble/studies/imb/ runs Ramble's intel-mpi-benchmarks (IMB PingPong and Allreduce at 2 ranks) on
the local site with Ramble's null package manager and an IMB-MPI1 built by hand, found on PATH.

Without Ramble (CI): the study is listed, its commscope.yaml is what `commscope run` reads, and every refusal
(no IMB-MPI1 on PATH, --spack, a malformed commscope.yaml) names the input and creates nothing.
With RAMBLE_ROOT and IMB-MPI1: `commscope setup` and `commscope run imb` for real, into a real PostgreSQL. The
stored FOMs are checked against IMB's own tables in each experiment's .out file, read by their column headers
(tests/helpers.py's reader, not Ramble's or commscope's regexes); the parameters against the
study's ramble.yaml and IMB's "Calling sequence" line, and against the site's and run scope's files (none of
their variables is a parameter); the report's FOM section against the same tables."""
from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import yaml

from commscope.workflow import errors, paths, plan as workflow_plan
from conftest import ROOT, private_home, stack_or_skip
from helpers import (calling_sequence, check_profiles, expected_foms, experiments, imb_prefix, out_file,
                     profile_reference)

STUDY = "imb"
STUDY_DIR = ROOT / "ramble" / "studies" / STUDY
APP = "intel-mpi-benchmarks"
COMMSCOPE = [sys.executable, "-m", "commscope.cli"]
RAMBLE_ROOT = os.environ.get("RAMBLE_ROOT")


def commscope(*args, home: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, "COMMSCOPE_HOME": str(home), **(env or {})}
    return subprocess.run([*COMMSCOPE, *args], capture_output=True, text=True, env=e, timeout=600, cwd=ROOT)


# ---- the study's files, without Ramble ----------------------------------------------------------------

def test_the_study_is_listed_and_runs_a_ramble_builtin_application_with_no_package_manager():
    assert STUDY in paths.studies()
    doc = yaml.safe_load((STUDY_DIR / "ramble.yaml").read_text())
    assert set(doc) == {"ramble"} and not {"include", "repos", "modifiers", "software"} & set(doc["ramble"])
    assert set(doc["ramble"]["applications"]) == {APP}
    # Ramble's own definition is used: there is none of ours to shadow it
    assert not (ROOT / "ramble" / "applications" / APP).exists()
    conf = workflow_plan.study_config(STUDY)
    assert conf == {"package_manager": None, "prefixes": {"intel-mpi-benchmarks_path": "IMB-MPI1"}}
    assert workflow_plan.study_caliper_mode(STUDY) is None
    # IMB is not commscope's: it is profiled by preloading a no-GOTCHA Caliper, which gives MPI profiles only
    assert workflow_plan.unannotated_applications(STUDY) == [APP]


def test_without_imb_on_path_the_run_names_the_program_and_creates_nothing(tmp_path):
    home = tmp_path / "home"
    empty = tmp_path / "empty-path"
    empty.mkdir()
    p = commscope("run", STUDY, "--dry-run", home=home, env={"PATH": str(empty)})
    assert p.returncode == 1, p.stdout + p.stderr
    assert "study imb needs IMB-MPI1 on PATH" in p.stderr and "intel-mpi-benchmarks_path" in p.stderr, p.stderr
    assert not (home / "workspaces").exists()


def test_only_programs_path_does_not_find_put_their_folder_first_on_path(tmp_path):
    """The run scope's PATH prepend: a program PATH already finds (sh, in /usr/bin) leaves PATH alone, so /usr/bin
    never goes before the stack's bin and its mpirun; a program in a folder off PATH, and another copy of a program
    PATH finds elsewhere, put their folders first. (Before, every program's folder went first, /usr/bin too.)"""
    from commscope.workflow import run as workflow_run
    tools, shadow = tmp_path / "tools", tmp_path / "shadow"
    for d, name in ((tools, "myprog"), (shadow, "sh")):
        d.mkdir()
        (d / name).write_text("#!/bin/sh\n")
        (d / name).chmod(0o755)
    system_sh = Path(os.path.abspath(shutil.which("sh")))
    plan = workflow_plan.Plan(study="s", site="local", stacks=[], interconnects=[], caliper="off", where=None,
                              dry_run=True, workspace=tmp_path / "ws",
                              prefixes={"sh_path": system_sh, "myprog_path": tools / "myprog",
                                        "other_sh_path": shadow / "sh"})
    files = workflow_run.run_scope_files(plan)
    (entry,) = files["env_vars.yaml"]["env_vars"]["prepend"]
    assert entry["paths"]["PATH"].split(":") == [str(tools), str(shadow)], entry
    only_system = workflow_plan.Plan(study="s", site="local", stacks=[], interconnects=[], caliper="off",
                                     where=None, dry_run=True, workspace=tmp_path / "ws2",
                                     prefixes={"sh_path": system_sh})
    assert "env_vars.yaml" not in workflow_run.run_scope_files(only_system)


def test_the_spack_package_manager_is_refused_for_a_study_built_by_hand(tmp_path):
    p = commscope("run", STUDY, "--spack", "--dry-run", home=tmp_path / "home", env={"SPACK_ROOT": ""})
    assert p.returncode == 1 and "null package manager only" in p.stderr and "drop --spack" in p.stderr, p.stderr
    assert not (tmp_path / "home" / "workspaces").exists()


@pytest.mark.parametrize("text, message", [
    ("caliper: off\n", r"caliper: False is not a Caliper mode.*quote 'off'"),
    ("package_manager: spack\n", r"package_manager: 'spack'; only null"),
    ("prefixes: [IMB-MPI1]\n", r"prefixes must map a Ramble variable to a program's name"),
    ("binaries: {x: y}\n", r"unknown key\(s\) binaries"),
])
def test_a_malformed_commscope_yaml_names_the_file_and_the_key(tmp_path, monkeypatch, text, message):
    study = tmp_path / "studies" / STUDY
    study.mkdir(parents=True)
    shutil.copy(STUDY_DIR / "ramble.yaml", study)
    (study / "commscope.yaml").write_text(text)
    monkeypatch.setattr(paths, "STUDIES_DIR", tmp_path / "studies")
    with pytest.raises(errors.WorkflowError, match=re.escape(str(study / "commscope.yaml")) + ": " + message):
        workflow_plan.study_config(STUDY)


def test_prefixes_find_the_program_where_the_user_put_it(tmp_path, monkeypatch):
    """A `prefixes` entry names a program on PATH, or gives its path (absolute, ~, $VARS, or relative to the
    study's folder). In a bin/ folder its install prefix is the folder above; anywhere else commscope run makes
    one in the workspace (checked for real by the end-to-end test below)."""
    installed = tmp_path / "prefix" / "bin" / "commscope-probe"
    loose = tmp_path / "build" / "commscope-probe"
    for f in (installed, loose):
        f.parent.mkdir(parents=True)
        shutil.copy("/bin/true", f)
    study = tmp_path / "studies" / "probe"
    study.mkdir(parents=True)
    conf = {"prefixes": {"tool_path": "commscope-probe"}}
    monkeypatch.setenv("PATH", str(installed.parent))
    found = workflow_plan.install_prefixes("probe", conf, study)
    assert found == {"tool_path": installed} and workflow_plan.prefix_of(installed) == tmp_path / "prefix"
    monkeypatch.setenv("PATH", str(loose.parent))
    assert workflow_plan.install_prefixes("probe", conf, study) == {"tool_path": loose}
    assert workflow_plan.prefix_of(loose) is None
    monkeypatch.setenv("PROBE_HOME", str(tmp_path / "prefix"))
    for given, program in [(str(loose), loose), ("../../build/commscope-probe", loose),
                           ("$PROBE_HOME/bin/commscope-probe", installed)]:
        got = workflow_plan.install_prefixes("probe", {"prefixes": {"tool_path": given}}, study)
        assert got == {"tool_path": program}, given
    for given, message in [(str(loose.parent), r"is a folder; name the program in it"),
                           (str(tmp_path / "none" / "x"), r"is not an executable file")]:
        with pytest.raises(errors.WorkflowError, match=r"study probe: prefixes: tool_path: .*" + message):
            workflow_plan.install_prefixes("probe", {"prefixes": {"tool_path": given}}, study)


# ---- for real: Ramble, IMB, PostgreSQL ----------------------------------------------------------------

def report_foms(page: str) -> list[dict]:
    """The rows of the report's "Figures of merit" table, each a dict column -> text."""
    m = re.search(r"<h2>Figures of merit</h2>.*?<table>(.*?)</table>", page, re.S)
    assert m, "the report has no Figures of merit table"
    cols = [html.unescape(c) for c in re.findall(r"<th>(.*?)</th>", m.group(1))]
    rows = re.findall(r"<tr>(.*?)</tr>", m.group(1).split("</thead>", 1)[1], re.S)
    return [dict(zip(cols, (html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)))) for r in rows]


def scope_variable_names(ws: Path, home: Path) -> set[str]:
    """Every variable the run scope, the local site and its generated scope define, read from their files."""
    names = set()
    for f in (ws / "commscope" / "run-scope" / "variables.yaml", ROOT / "ramble" / "sites" / "local" / "variables.yaml",
              home / "sites" / "local-generated" / "variables.yaml"):
        names |= set(yaml.safe_load(f.read_text())["variables"])
    return names


@pytest.mark.skipif(not RAMBLE_ROOT or not Path(RAMBLE_ROOT, "bin", "ramble").exists(),
                    reason="Ramble is in no package registry: set RAMBLE_ROOT to a checkout of "
                           "GoogleCloudPlatform/ramble at the commit in versions.yaml to run the study for real")
def test_commscope_run_imb_stores_imb_s_numbers_with_the_study_s_parameters_and_reports_them(dsn):
    stack_or_skip("debian-openmpi4")
    prefix = imb_prefix()
    if not prefix or not (prefix / "bin" / "IMB-MPI1").exists():
        pytest.skip("no Intel MPI Benchmarks here: build IMB-MPI1 2021.11 with mpicc.openmpi "
                    "(tests/thirdparty/ramble-imb/README.md) and set COMMSCOPE_IMB_PREFIX to its prefix or put it on PATH")
    home = private_home()
    env = {"COMMSCOPE_DB_URL": dsn, "SPACK_ROOT": "", "PATH": f"{prefix / 'bin'}:{os.environ['PATH']}"}
    try:
        p = commscope("setup", "--stacks", "debian-openmpi4", home=home, env=env)
        assert p.returncode == 0 or "spack is missing" in p.stderr, p.stdout + p.stderr
        p = commscope("run", STUDY, "--stacks", "debian-openmpi4", "--caliper", "off", home=home, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "stored 2 runs" in p.stdout and "Caliper off; package manager null" in p.stdout, p.stdout
        ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
        check_workspace(dsn, ws, home, prefix)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_study_folder_without_ramble_yaml_is_named_and_nothing_is_created(tmp_path):
    folder = tmp_path / "not-a-study"
    folder.mkdir()
    p = commscope("run", str(folder), "--dry-run", home=tmp_path / "home")
    assert p.returncode == 2, p.stdout + p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert str(folder) in line and "no ramble.yaml" in line and "smoke" in line, line
    assert not (tmp_path / "home" / "workspaces").exists()


def test_a_caliper_mode_an_unannotated_application_cannot_give_is_refused(tmp_path):
    """IMB has no regions: only the MPI profile a preloaded Caliper records applies to it."""
    p = commscope("run", STUDY, "--caliper", "comm", "--dry-run", home=tmp_path / "home")
    assert p.returncode == 2, p.stdout + p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert APP in line and "--caliper mpi" in line and "comm" in line, line
    assert not (tmp_path / "home" / "workspaces").exists()


@pytest.mark.skipif(not RAMBLE_ROOT or not Path(RAMBLE_ROOT, "bin", "ramble").exists()
                    or not os.environ.get("COMMSCOPE_CALIPER_NOGOTCHA_PREFIX")
                    or not os.environ.get("COMMSCOPE_SOURCE_MIRROR"),
                    reason="needs RAMBLE_ROOT, COMMSCOPE_CALIPER_NOGOTCHA_PREFIX and COMMSCOPE_SOURCE_MIRROR (ci/setup.sh "
                           "makes them from a source mirror); Ramble and Caliper are in no package registry")
def test_commscope_run_imb_profiles_it_by_preloading_the_stacks_no_gotcha_caliper(dsn, tmp_path):
    """`commscope setup` (the toolchain's cached Caliper builds, shared into a fresh home) then `commscope run` of
    the imb study copied to a folder outside the package, with its default Caliper mode: the run says it preloads
    the no-GOTCHA Caliper, every experiment writes a profile, and each run's MPI time per function, time and MPI
    fractions equal caliper-reader's records of that profile; IMB's own FOMs are stored as before. The preloaded
    profiles record no MPI library: each run's is the stack's, as Open MPI's own ompi_info spells its parts."""
    stack_or_skip("debian-openmpi4")
    prefix = imb_prefix()
    if not prefix or not (prefix / "bin" / "IMB-MPI1").exists():
        pytest.skip("no Intel MPI Benchmarks here: `commscope setup --imb` builds it (COMMSCOPE_IMB_PREFIX)")
    preload = Path(os.environ["COMMSCOPE_CALIPER_NOGOTCHA_PREFIX"])
    home = private_home()
    (home / "cache").symlink_to(preload.parents[3])
    env = {"COMMSCOPE_DB_URL": dsn, "SPACK_ROOT": "", "PATH": f"{prefix / 'bin'}:{os.environ['PATH']}"}
    try:
        p = commscope("setup", "--stacks", "debian-openmpi4", "--source-mirror", os.environ["COMMSCOPE_SOURCE_MIRROR"],
                      home=home, env=env)
        assert p.returncode == 0 and "building into" not in p.stdout, p.stdout + p.stderr
        elsewhere = tmp_path / "site-studies" / STUDY
        shutil.copytree(STUDY_DIR, elsewhere)
        p = commscope("run", str(elsewhere), "--stacks", "debian-openmpi4", home=home, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "Caliper mpi; package manager null" in p.stdout, p.stdout
        mine = home / "cache" / preload.relative_to(preload.parents[3])
        assert f"profiles on debian-openmpi4: Caliper preload (preloading the no-GOTCHA Caliper {mine})" in p.stdout
        assert "stored 2 runs" in p.stdout, p.stdout
        ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
        assert len(list(ws.glob("experiments/*/*/*/*.cali"))) == 2
        check_profiles(dsn, ws)
        with psycopg.connect(dsn) as conn:
            for exp in json.loads((ws / "results.latest.json").read_text())["experiments"]:
                run_id = conn.execute("SELECT id FROM runs WHERE experiment = %s", (exp["name"],)).fetchone()[0]
                stored = {(c, n): v for c, n, v, _u in conn.execute(
                    "SELECT context, name, value, unit FROM v_foms WHERE run_id = %s", (run_id,))}
                expected = {k: v for k, (v, _u) in expected_foms(out_file(ws, exp)).items()}
                assert stored == pytest.approx(expected), exp["name"]
            libraries = conn.execute("SELECT v.mpi_library, r.metadata->>'mpi_library_source', count(*) "
                                     "FROM v_run_versions v JOIN runs r ON r.id = v.run_id GROUP BY 1, 2").fetchall()
        assert libraries == [(ompi_info_library(), "commscope run probe", 2)], libraries
        assert f"MPI library on debian-openmpi4: {ompi_info_library()}" in p.stdout, p.stdout
    finally:
        shutil.rmtree(home, ignore_errors=True)


def ompi_info_library() -> str:
    """Debian Open MPI's MPI_Get_library_version string as Open MPI composes it (ompi/mpi/c/get_library_version.c:
    "Open MPI v<version>, package: <package>, ident: <ident>, repo rev: <repo>, <release date>"), from the parts
    its own ompi_info prints."""
    p = subprocess.run(["ompi_info", "--parsable"], capture_output=True, text=True, check=True,
                       env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    keys = ("package", "ident", "ompi:version:full", "ompi:version:repo", "ompi:version:release_date")
    parts = {k: line[len(k) + 1:] for line in p.stdout.splitlines() for k in keys if line.startswith(f"{k}:")}
    return (f"Open MPI v{parts['ompi:version:full']}, package: {parts['package']}, ident: {parts['ident']}, "
            f"repo rev: {parts['ompi:version:repo']}, {parts['ompi:version:release_date']}")


def check_workspace(dsn: str, ws: Path, home: Path, prefix: Path) -> None:
    exps = json.loads((ws / "results.latest.json").read_text())["experiments"]
    assert sorted(e["name"] for e in exps) == [
        f"{APP}.collective.imb-Allreduce-debian-openmpi4-default-n2", f"{APP}.pingpong.imb-pingpong-debian-openmpi4-default-n2"]
    assert all(e["RAMBLE_STATUS"] == "SUCCESS" for e in exps)
    study = yaml.safe_load((STUDY_DIR / "ramble.yaml").read_text())["ramble"]
    study_vars = {k: str(v) for k, v in study["variables"].items() if k != "n_ranks"}
    not_params = scope_variable_names(ws, home)
    assert {"stack", "interconnect", "commscope_git_commit", "mpi_command", "mpirun_debian-openmpi4"} <= not_params
    with psycopg.connect(dsn) as conn:
        runs = {r[0]: r[1:] for r in conn.execute(
            "SELECT r.experiment, r.id, r.status, r.ranks, r.nodes, r.profile_kind, r.wall_time, r.mpi_fraction_avg, "
            "s.parameters, s.environment->>'stack', s.environment->>'interconnect', r.metadata->'ramble_variables' "
            "FROM runs r JOIN series s ON s.id = r.series_id WHERE r.app = %s", (APP,))}
        assert sorted(runs) == sorted(e["name"] for e in exps)
        for exp in exps:
            run_id, status, ranks, nodes, kind, wall, frac, params, stack, ic, ramble_vars = runs[exp["name"]]
            # IMB has no Caliper: commscope measured nothing, and says so with NULL
            assert (status, ranks, nodes, kind, wall, frac) == ("ok", 2, 1, "none", None, None)
            assert (stack, ic) == ("debian-openmpi4", "openmpi4/default")
            # the IMB that ran is the one on PATH
            assert ramble_vars["intel-mpi-benchmarks_path"] == str(prefix)
            out = out_file(ws, exp)
            stored = {(c, n): (v, u) for c, n, v, u in conn.execute(
                "SELECT context, name, value, unit FROM v_foms WHERE run_id = %s", (run_id,))}
            expected = expected_foms(out)
            assert len(expected) >= 14   # PingPong: 14 sizes of one FOM; Allreduce: 12 sizes of three
            assert stored.keys() == expected.keys()
            for key, (value, unit) in expected.items():
                assert stored[key] == (pytest.approx(value), unit), key

            # the parameters: the study's variables, the experiment's own, Ramble's workload, ranks and nodes,
            # and the application's other inputs at their defaults, each seen in the command IMB ran
            entry = study["applications"][APP]["workloads"][exp["workload_name"]]["experiments"]
            own = {k: str(v) for e in entry.values() for k, v in e["variables"].items()}
            cmd = calling_sequence(out)
            assert {**study_vars, **own}.items() <= params.items()
            assert (params["ranks"], params["nodes"], params["ramble_workload"]) == (2, 1, exp["workload_name"])
            assert cmd[1] == own.get("collective_type", own.get("pingpong_type"))
            assert f"-msglog {params['msglog_min']}:{params['msglog_max']}" in " ".join(cmd)
            assert cmd[cmd.index("-iter") + 1] == params["num_iterations"]
            rest = {k: v for k, v in params.items()
                    if k not in {**study_vars, **own} and k not in ("ranks", "nodes", "ramble_workload", "n_threads")}
            for k, v in rest.items():
                assert v == "" or str(v) in cmd, (k, v, cmd)
            # where and how it ran is not what it was: nothing the site or the run scope defines is a parameter
            assert not (set(params) & not_params), sorted(set(params) & not_params)

    # the report of the run's campaign shows every FOM of both experiments, as IMB printed it
    rows = [r for r in report_foms((ws / "report.html").read_text()) if r["app"] == APP]
    for exp in exps:
        expected = expected_foms(out_file(ws, exp))
        shown = {(r["context"], r["name"]): r for r in rows if r["experiment"] == exp["name"]}
        assert shown.keys() == expected.keys(), exp["name"]
        for key, (value, unit) in expected.items():
            assert float(shown[key]["value"]) == pytest.approx(value, rel=5e-4, abs=1e-9), key
            assert shown[key]["unit"] == unit and shown[key]["ranks"] == "2"


# ---- studies from anywhere, with Ramble: required variables and modifiers (issue 33 items 1 and 2) ------------

LIVE_SETUP = pytest.mark.skipif(
    not RAMBLE_ROOT or not Path(RAMBLE_ROOT, "bin", "ramble").exists()
    or not os.environ.get("COMMSCOPE_CALIPER_NOGOTCHA_PREFIX") or not os.environ.get("COMMSCOPE_SOURCE_MIRROR"),
    reason="needs RAMBLE_ROOT, COMMSCOPE_CALIPER_NOGOTCHA_PREFIX and COMMSCOPE_SOURCE_MIRROR (ci/setup.sh makes them "
           "from a source mirror); Ramble and Caliper are in no package registry")

# Ramble's builtin LULESH (var/ramble/repos/builtin/applications/lulesh) runs `lulesh2.0 {flags}` from PATH, yet
# without a package manager Ramble requires lulesh_path of it (its required_package).
LULESH_STUDY = """\
ramble:
  variables:
    n_ranks: [1, 8]
  applications:
    lulesh:
      workloads:
        standard:
          experiments:
            'lulesh-s{size}-{stack}-{interconnect}-n{n_ranks}':
              variables:
                size: '8'
                size_flag: '-s {size}'
                iteration_flag: '-i 20'
              matrix: [stack_interconnect, n_ranks]
"""


@pytest.fixture(scope="module")
def set_up_home():
    """A COMMSCOPE_HOME after `commscope setup` (the toolchain's cached Caliper builds shared into it)."""
    preload = Path(os.environ["COMMSCOPE_CALIPER_NOGOTCHA_PREFIX"])
    home = private_home()
    (home / "cache").symlink_to(preload.parents[3])
    p = commscope("setup", "--stacks", "debian-openmpi4", "--source-mirror", os.environ["COMMSCOPE_SOURCE_MIRROR"],
                  home=home, env={"SPACK_ROOT": ""})
    assert p.returncode == 0, p.stdout + p.stderr
    yield home
    shutil.rmtree(home, ignore_errors=True)


def write_study(folder: Path, ramble_yaml: str, commscope_yaml: str | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "ramble.yaml").write_text(ramble_yaml)
    if commscope_yaml is not None:
        (folder / "commscope.yaml").write_text(commscope_yaml)
    return folder


@LIVE_SETUP
def test_a_required_variable_the_application_never_uses_gets_an_empty_default(set_up_home, tmp_path):
    """A LULESH study outside the package with Ramble's null package manager: `commscope run` sets lulesh_path
    to '' (saying so) and Ramble sets the experiments up, each running lulesh2.0 with the study's flags."""
    stack_or_skip("debian-openmpi4")
    study = write_study(tmp_path / "my-studies" / "lulesh", LULESH_STUDY, "package_manager: null\n")
    p = commscope("run", str(study), "--dry-run", home=set_up_home, env={"SPACK_ROOT": ""})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "  lulesh_path = '' (Ramble requires it without a package manager; the application does not use it)" \
        in p.stdout.splitlines(), p.stdout
    assert "set up 2 experiments" in p.stdout, p.stdout   # LULESH takes cubes of ranks: 1 and 8
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    scope = yaml.safe_load((ws / "commscope" / "run-scope" / "variables.yaml").read_text())["variables"]
    assert scope["lulesh_path"] == ""
    # a run-scope variable: where and how it ran, never a parameter of the runs
    assert "lulesh_path" in json.loads((ws / "commscope-run.json").read_text())["run_variables"]
    scripts = sorted(ws.glob("experiments/lulesh/standard/*/execute_experiment"))
    assert len(scripts) == 2 and all(re.search(r" lulesh2\.0 -s 8 -i 20 ", f.read_text()) for f in scripts)


@LIVE_SETUP
def test_ramble_s_own_missing_variable_error_is_one_line(set_up_home, tmp_path, monkeypatch):
    """Without the default, Ramble refuses the workspace (a warning per variable, then a generic error): run
    turns that into one line naming the variable and where to set it."""
    stack_or_skip("debian-openmpi4")
    from commscope.workflow import run as workflow_run
    study = write_study(tmp_path / "lulesh", LULESH_STUDY, "package_manager: null\n")
    monkeypatch.setenv("COMMSCOPE_HOME", str(set_up_home))
    monkeypatch.setenv("SPACK_ROOT", "")
    plan = workflow_plan.plan_run(str(study), dry_run=True)
    assert plan.unused_defaults == {"lulesh_path": ""}
    plan.unused_defaults = {}
    with pytest.raises(errors.WorkflowError) as e:
        workflow_run.run(plan, echo=lambda m: None, ingest=False)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("Ramble requires lulesh_path, which neither the study lulesh nor "
                                              "the site sets: set it under variables: in the study's ramble.yaml"), msg


@LIVE_SETUP
def test_a_required_variable_the_application_uses_is_refused_before_anything_is_created(set_up_home, tmp_path):
    """Ramble's IMB runs {intel-mpi-benchmarks_path}/bin/IMB-MPI1: a study that neither sets it nor names the
    program under prefixes is refused in one line saying where to name it."""
    study = write_study(tmp_path / "imb-noprefix", (STUDY_DIR / "ramble.yaml").read_text(), "package_manager: null\n")
    home = set_up_home
    before = set((home / "workspaces").glob("*")) if (home / "workspaces").exists() else set()
    p = commscope("run", str(study), "--dry-run", home=home, env={"SPACK_ROOT": ""})
    assert p.returncode == 1, p.stdout + p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert len(p.stderr.strip().splitlines()) == 1 and "needs intel-mpi-benchmarks_path" in line \
        and "prefixes: {intel-mpi-benchmarks_path: /path/to/PROGRAM}" in line, p.stderr
    after = set((home / "workspaces").glob("*")) if (home / "workspaces").exists() else set()
    assert after == before


def _with_modifiers(modifiers: list) -> str:
    doc = yaml.safe_load((STUDY_DIR / "ramble.yaml").read_text())
    doc["ramble"]["modifiers"] = modifiers
    return yaml.safe_dump(doc, sort_keys=False)


@LIVE_SETUP
def test_a_study_may_declare_a_modifier_ramble_knows(set_up_home, tmp_path):
    """A study's own Ramble modifier (builtin lscpu) is kept beside the Caliper modifier commscope run adds."""
    stack_or_skip("debian-openmpi4")
    prefix = imb_prefix()
    if not prefix or not (prefix / "bin" / "IMB-MPI1").exists():
        pytest.skip("no Intel MPI Benchmarks here: `commscope setup --imb` builds it (COMMSCOPE_IMB_PREFIX)")
    study = write_study(tmp_path / "imb-lscpu", _with_modifiers([{"name": "lscpu"}]),
                        f"package_manager: null\nprefixes:\n  intel-mpi-benchmarks_path: {prefix / 'bin' / 'IMB-MPI1'}\n")
    p = commscope("run", str(study), "--dry-run", home=set_up_home, env={"SPACK_ROOT": ""})
    assert p.returncode == 0, p.stdout + p.stderr
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    conf = yaml.safe_load((ws / "configs" / "ramble.yaml").read_text())["ramble"]
    assert conf["modifiers"] == [{"name": "lscpu"}, {"name": "caliper", "mode": "preload"}]
    script = next(ws.glob("experiments/*/*/*/execute_experiment")).read_text()
    assert "lscpu" in script and "libcaliper.so" in script


@LIVE_SETUP
@pytest.mark.parametrize("modifiers, message", [
    ([{"name": "no-such-modifier"}], r"ramble: Ramble knows no modifier 'no-such-modifier'; known: .*lscpu"),
    ([{"name": "lscpu", "mode": "loud"}], r"ramble: modifier lscpu has no mode 'loud'; its modes: standard"),
    ([{"name": "caliper", "mode": "preload"}], r"ramble: the caliper modifier is added by commscope run; .*--caliper MODE"),
    (["lscpu"], r"ramble: modifier 'lscpu' is not a mapping of name, mode and on_executable"),
])
def test_a_modifier_ramble_does_not_know_is_refused_in_one_line(set_up_home, tmp_path, modifiers, message):
    study = write_study(tmp_path / "imb-bad", _with_modifiers(modifiers),
                        "package_manager: null\nprefixes:\n  intel-mpi-benchmarks_path: /bin/true\n")
    before = set((set_up_home / "workspaces").glob("*")) if (set_up_home / "workspaces").exists() else set()
    p = commscope("run", str(study), "--dry-run", home=set_up_home, env={"SPACK_ROOT": ""})
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(re.escape(str(study / "ramble.yaml")) + ": " + message, lines[0]), p.stderr
    after = set((set_up_home / "workspaces").glob("*")) if (set_up_home / "workspaces").exists() else set()
    assert after == before


# ---- done when: a third-party application from a folder outside the package to the panels (issue 33) ---------

# IMB Allreduce at 1 and 2 ranks. IMB's message sizes are each rank's, so 2 ranks move twice the data: the
# study declares them per rank (weak scaling), as `commscope ingest --per-rank` would.
SCALING_STUDY = """\
ramble:
  variables:
    n_ranks: [1, 2]
    msglog_min: 0
    msglog_max: 10
    num_iterations: 100
    commscope_per_rank: msglog_min,msglog_max
  applications:
    intel-mpi-benchmarks:
      workloads:
        collective:
          experiments:
            'imb-{collective_type}-{stack}-{interconnect}-n{n_ranks}':
              variables:
                collective_type: Allreduce
              matrix: [stack_interconnect, n_ranks]
"""


def pop_reference(cali: Path) -> dict[str, float]:
    """The run window's MPI fraction and POP efficiencies from the profile's records (caliper-reader): useful
    time is each rank's time outside MPI; time is the slowest rank's."""
    total, mpi, _ = profile_reference(cali)
    useful = {r: total[r] - mpi.get(r, 0.0) for r in total}
    time = max(total.values())
    lb, ce = (sum(useful.values()) / len(useful)) / max(useful.values()), max(useful.values()) / time
    return {"time": time, "mpi_fraction": sum(mpi.values()) / sum(total.values()), "load_balance": lb,
            "communication_efficiency": ce, "parallel_efficiency": lb * ce}


@LIVE_SETUP
def test_a_third_party_application_goes_from_a_folder_outside_the_package_to_the_panels(set_up_home, dsn, tmp_path):
    """IMB-MPI1 (Ramble's builtin application, not commscope's) put by the user in a folder of their own, no bin/,
    run from a study folder outside the package by `commscope run FOLDER --caliper mpi`: the MPI-fraction and POP
    panels show each run with caliper-reader's numbers from its .cali file, the report's FOM table IMB's own tables,
    no label says "unknown", and the 1- and 2-rank runs are the weak scaling the study declares (v_scaling and the
    weak-scaling panel; no strong-scaling panel)."""
    from commscope.views import panels as P
    stack_or_skip("debian-openmpi4")
    built = imb_prefix()
    if not built or not (built / "bin" / "IMB-MPI1").exists():
        pytest.skip("no Intel MPI Benchmarks here: `commscope setup --imb` builds it (COMMSCOPE_IMB_PREFIX)")
    mine = tmp_path / "opt" / "imb"
    mine.mkdir(parents=True)
    shutil.copy(built / "bin" / "IMB-MPI1", mine / "IMB-MPI1")
    study = write_study(tmp_path / "my-studies" / "imb-scaling", SCALING_STUDY,
                        "package_manager: null\nprefixes:\n  intel-mpi-benchmarks_path: ../../opt/imb/IMB-MPI1\n")
    t0 = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)
    p = commscope("run", str(study), "--caliper", "mpi", "--stacks", "debian-openmpi4", home=set_up_home,
                  env={"COMMSCOPE_DB_URL": dsn, "SPACK_ROOT": ""})
    assert p.returncode == 0, p.stdout + p.stderr
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    assert f"({mine / 'IMB-MPI1'}, linked as {ws}/commscope/prefixes/intel-mpi-benchmarks_path/bin/IMB-MPI1)" in p.stdout
    assert "profiles on debian-openmpi4: Caliper preload (preloading the no-GOTCHA Caliper" in p.stdout, p.stdout
    assert "stored 2 runs" in p.stdout, p.stdout
    exps = sorted(experiments(ws), key=lambda e: e["n_ranks"])
    assert [int(e["n_ranks"]) for e in exps] == [1, 2] and all(e["RAMBLE_STATUS"] == "SUCCESS" for e in exps)
    check_profiles(dsn, ws)   # MPI time per function, time and MPI fractions equal caliper-reader's
    ref = {int(e["n_ranks"]): pop_reference(out_file(ws, e).with_suffix(".cali")) for e in exps}
    t1 = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1)
    with psycopg.connect(dsn) as conn:
        values = P.all_values(conn)
        rows = conn.execute(P.expand(P.MPI_FRACTION_SQL, t0, t1, values)).fetchall()
        cols = ["time", "metric", "mpi_fraction", "mpi_fraction_slowest", "parallel_efficiency", "load_balance",
                "communication_efficiency"]
        shown = {r[1]: dict(zip(cols, r)) for r in rows}
        labels = dict(conn.execute("SELECT DISTINCT ranks, series_label FROM v_shown_metrics_daily WHERE app = %s",
                                   (APP,)).fetchall())
        series = conn.execute("SELECT system, app, workload, variant, stack, interconnect, ranks FROM v_series "
                              "WHERE app = %s", (APP,)).fetchall()
        scaling = {r[0]: r[1:] for r in conn.execute(
            "SELECT ranks, kind, base_ranks, time_s, speedup, efficiency FROM v_scaling WHERE app = %s AND "
            "\"window\" = 'run'", (APP,))}
        # the Scaling dashboard's panels: (title, rows) of this application's series
        scaling_panels = {panel.title: [r for r in conn.execute(P.expand(panel.sql, t0, t1, values)).fetchall()
                                        if APP in r[0]] for panel in P.SCALING.panels}
        for e in exps:   # IMB's own tables, as the report's FOM table and v_foms show them
            run_id = conn.execute("SELECT id FROM runs WHERE experiment = %s", (e["name"],)).fetchone()[0]
            stored = {(c, n): v for c, n, v in conn.execute(
                "SELECT context, name, value FROM v_foms WHERE run_id = %s", (run_id,))}
            expected = {k: v for k, (v, _u) in expected_foms(out_file(ws, e)).items()}
            assert len(expected) >= 11 and stored == pytest.approx(expected), e["name"]
    # the MPI-fraction and POP panels: one line per run's series, its run window, caliper-reader's numbers
    assert sorted(labels) == [1, 2]
    for ranks, want in ref.items():
        got = shown[f"{labels[ranks]} [run]"]
        for k in ("mpi_fraction", "load_balance", "communication_efficiency", "parallel_efficiency"):
            assert got[k] == pytest.approx(want[k], rel=1e-9), (ranks, k)
    for e in exps:
        foms = {(r["context"], r["name"]): r for r in report_foms((ws / "report.html").read_text())
                if r["experiment"] == e["name"]}
        for key, (value, unit) in expected_foms(out_file(ws, e)).items():
            assert float(foms[key]["value"]) == pytest.approx(value, rel=5e-4, abs=1e-9), key
    # labels a person can read: the system, stack, interconnect and parameters are named
    for text in [*shown, *labels.values(), *(" ".join(map(str, s)) for s in series)]:
        assert "unknown" not in text, text
    assert all("msglog_max=10" in lab and "num_iterations=100" in lab for lab in labels.values()), labels
    # the 2-rank run against the 1-rank one, as the weak scaling declared: efficiency = base time / time
    assert sorted(scaling) == [1, 2], scaling
    assert {k for k, *_ in scaling.values()} == {"weak"} and {b for _k, b, *_ in scaling.values()} == {1}
    assert scaling[2][2] == pytest.approx(ref[2]["time"], rel=1e-9)
    assert scaling[2][3] is None   # a weak pair has no speedup
    assert scaling[2][4] == pytest.approx(ref[1]["time"] / ref[2]["time"], rel=1e-9)
    # the weak-scaling panel draws the same pair; no strong-scaling panel holds it (its problem grew with the ranks)
    weak = scaling_panels.pop("Weak scaling: parallel efficiency")
    assert sorted(r[1] for r in weak) == [1, 2] and len({r[0] for r in weak}) == 1, weak
    assert dict((r[1], r[2]) for r in weak) == pytest.approx({1: 1.0, 2: ref[1]["time"] / ref[2]["time"]}, rel=1e-9)
    assert "unknown" not in weak[0][0], weak
    assert scaling_panels == {title: [] for title in scaling_panels}, scaling_panels
