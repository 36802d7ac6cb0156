"""The Ramble repo, studies and sites, checked without Ramble (which is in no registry):
every YAML parses, every study names existing applications, workloads, variables and values, and the
modifiers it declares are ones Ramble knows (asked of the real Ramble when RAMBLE_ROOT is set), and every FOM
regex and success criterion matches real output of the workloads built in this run."""
from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from commscope.workflow import errors, plan as workflow_plan

import ramble_static as rs
import suite
from conftest import _builds, stack_or_skip

APPS = rs.applications()
STUDIES = rs.studies()
SITES = sorted(p.name for p in (rs.RAMBLE / "sites").iterdir() if (p / "site.yaml").exists())
REFERENCE_STUDIES = {"smoke", "nightly", "overlap", "decomposition", "placement",
                     "barriers", "collectives", "allreduce", "io"}


def test_every_yaml_file_parses():
    files = sorted(rs.RAMBLE.rglob("*.yaml")) + [rs.ROOT / "versions.yaml"]
    assert len(files) > 15
    for f in files:
        doc = yaml.safe_load(f.read_text())
        assert isinstance(doc, dict) and doc, f"{f}: empty or not a mapping"


def test_versions_file_pins_spack_packages_and_ramble():
    v = yaml.safe_load((rs.ROOT / "versions.yaml").read_text())
    assert v["spack"]["tag"] == "v1.1.0"
    assert v["spack-packages"]["branch"] == "releases/v2025.11"
    for tool in ("spack", "spack-packages", "ramble"):
        assert re.fullmatch(r"[0-9a-f]{40}", v[tool]["commit"]), tool


def test_every_reference_study_exists():
    assert REFERENCE_STUDIES <= set(STUDIES), sorted(REFERENCE_STUDIES - set(STUDIES))


def test_applications_are_declarative_and_complete():
    assert {"halo3d", "stencil2d", "commgraph", "collsweep", "cgsolve", "pio"} <= set(APPS)
    for name, app in APPS.items():
        assert app.name == name
        assert app.workloads, name
        for wl, exes in app.workloads.items():
            assert all(e in app.executables for e in exes), (name, wl)
        # every {var} of an executable is a workload variable (or Ramble's own)
        for exe, tpl in app.executables.items():
            for ref in rs.references(tpl):
                assert ref in app.variables or ref in rs.RAMBLE_BUILTINS, f"{name}: {exe} uses undefined {{{ref}}}"
        assert {"verify_passed", "verify_none_failed", "world_size"} <= set(app.criteria), name
        # a variable's default must be one of its listed values
        for var, d in app.variables.items():
            if d["values"] and "{" not in str(d["default"]):
                assert d["default"] in d["values"], (name, var)


STUDY_FILES = {name: rs.RAMBLE / "studies" / name / "ramble.yaml" for name in STUDIES}


@functools.lru_cache(maxsize=1)
def known_modifiers() -> dict[str, list[str]] | None:
    """Every modifier Ramble knows with its modes, asked of the real Ramble ($RAMBLE_ROOT, with the repo's
    ramble/modifiers); None without it."""
    root = os.environ.get("RAMBLE_ROOT")
    if not root or not Path(root, "bin", "ramble").exists():
        return None
    return workflow_plan.ramble_definitions([])["modifiers"]


def check_study_modifiers(study_file: Path, doc: dict) -> None:
    """Every modifier the study declares, at any level, is one Ramble knows in one of its modes (the check
    `commscope run` makes). Without Ramble: the repo's own modifiers by their definitions (ramble_static); a
    builtin one is checked when RAMBLE_ROOT is set."""
    declared = workflow_plan.study_modifiers(doc)
    if not declared:
        return
    known = known_modifiers()
    if known is None:
        known = {p.parent.name: rs.load(p).modes for p in (rs.RAMBLE / "modifiers").glob("*/modifier.py")}
        others = sorted({m.get("name") for _w, m in declared if isinstance(m, dict)} - set(known))
        if others:
            pytest.skip(f"{study_file} declares modifiers {others}, not the repo's: set RAMBLE_ROOT to a checkout "
                        f"of Ramble (versions.yaml) to check them against its builtin ones")
    workflow_plan.check_modifiers(study_file, declared, known)


def _study_vars(study: dict) -> dict:
    return dict(study["ramble"].get("variables") or {})


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_study_names_existing_applications_variables_and_values(study):
    doc = STUDIES[study]
    assert set(doc) == {"ramble"}, "a study is a plain ramble.yaml"
    r = doc["ramble"]
    assert not ({"include", "repos"} & set(r)), "site and repos are added by commscope run"
    check_study_modifiers(STUDY_FILES[study], doc)
    ws_vars = _study_vars(doc)
    seen = 0
    for app, wl, name, exp_vars, matrix in rs.experiments(doc):
        a = APPS.get(app)
        if a is None and app in rs.RAMBLE_BUILTIN_APPS:   # Ramble's own definition, from its checkout
            a = rs.builtin_application(app)
            if a is None:
                pytest.skip(f"{study} runs Ramble's builtin {app}: set RAMBLE_ROOT to a checkout of Ramble "
                            f"(versions.yaml) to check the study against its definition")
        assert a is not None, f"{study}: unknown application {app}; known: {sorted(APPS)} and Ramble's " \
                              f"{sorted(rs.RAMBLE_BUILTIN_APPS)}"
        assert wl in a.workloads, f"{study}: {app} has no workload {wl}"
        assert "stack_interconnect" in matrix, f"{study}/{name}: the run's (stack, interconnect) axis is not in the matrix"
        all_vars = {**ws_vars, **exp_vars}
        defined = set(a.variables) | rs.RAMBLE_BUILTINS | rs.RUN_SCOPE | set(all_vars)
        patterns = set()
        for v in list(all_vars.values()) + [name] + list(a.variables.values()):
            vals = v if isinstance(v, list) else [v.get("default") if isinstance(v, dict) else v]
            for x in vals:
                patterns |= {p[3:] for p in rs.references(x) if p.startswith("re:")}
        # every variable the study sets is the application's, Ramble's, or a helper some value refers to
        for var in all_vars:
            if var in a.variables or var in rs.RAMBLE_BUILTINS:
                continue
            used = any(var in rs.references(v) for vals in all_vars.values()
                       for v in (vals if isinstance(vals, list) else [vals]))
            used = used or any(re.fullmatch(p, var) for p in patterns)
            assert used, f"{study}/{name}: variable {var!r} is not a variable of {app} and nothing uses it"
        # every value it refers to is defined somewhere (site variables are checked per site below)
        site_vars = {"bin_", "mpirun_", "stack_env_", "family_", "ic_name_", "ic_env_", "srun_mpi_", "caliper_config_"}
        for v in [name] + [x for vals in all_vars.values() for x in (vals if isinstance(vals, list) else [vals])]:
            for ref in rs.references(v):
                if ref.startswith("re:"):
                    continue
                assert ref in defined or ref.startswith(tuple(site_vars)), f"{study}/{name}: {{{ref}}} is not defined"
        for m in matrix:
            assert m in rs.RUN_ZIPS or isinstance(all_vars.get(m), list), f"{study}/{name}: matrix names {m}, not a list"
        # listed values of the application's variables are valid values
        for var, val in all_vars.items():
            allowed = a.variables.get(var, {}).get("values")
            for x in (val if isinstance(val, list) else [val]):
                if allowed and "{" not in str(x):
                    assert x in allowed, f"{study}/{name}: {var}={x!r}; {app} allows {allowed}"
        seen += 1
    assert seen, f"{study}: no experiments"


@pytest.mark.parametrize("site", SITES)
def test_site_defines_the_launch_line(site):
    d = rs.RAMBLE / "sites" / site
    conf = yaml.safe_load((d / "site.yaml").read_text())
    assert conf["site"] == site and conf["scheduler"] in ("none", "slurm")
    v = yaml.safe_load((d / "variables.yaml").read_text())["variables"]
    assert "{n_ranks}" in v["mpi_command"] and "{ic_env_{stack}_{interconnect}}" in v["mpi_command"]
    if conf["scheduler"] == "slurm":
        assert "srun --mpi={srun_mpi_{stack}}" in v["mpi_command"]
        assert (d / "slurm_experiment.tpl").exists() and "{slurm_experiment}" in v["batch_submit"]
    if conf["builds"] != "local-builds":  # its stacks' per-stack variables are in the file
        for s in conf["stacks"]:
            for prefix in ("bin_", "srun_mpi_", "stack_env_", "family_", "fortran_binding_"):
                assert f"{prefix}{s}" in v, f"{site}: {prefix}{s} missing for stack {s}"
        hw = yaml.safe_load((d / "hardware.yaml").read_text())
        assert {"cpu", "memory_per_node_gb", "interconnect", "topology"} <= set(hw)


def test_caliper_modifier_modes_and_environment():
    mod = rs.load(rs.RAMBLE / "modifiers" / "caliper" / "modifier.py")
    assert mod.name == "caliper" and set(mod.modes) == {"time", "mpi", "counts", "comm", "matrix", "preload"}
    by_mode = {m: {n: v for n, v, meth, modes in mod.env_mods if m in modes and meth == "set"} for m in mod.modes}
    assert "profile.mpi" not in by_mode["time"]["CALI_CONFIG"]
    assert "profile.mpi" in by_mode["mpi"]["CALI_CONFIG"]
    assert {"profile.mpi", "region.count"} <= set(by_mode["counts"]["CALI_CONFIG"].split(","))
    assert "comm.stats" in by_mode["comm"]["CALI_CONFIG"] and "mpi.message.size" in by_mode["comm"]["CALI_CONFIG"]
    m = by_mode["matrix"]
    assert m["CALI_SERVICES_ENABLE"] == "adiak_import,aggregate,mpi,recorder"
    assert m["CALI_MPI_MSG_TRACING"] == "true" and m["CALI_AGGREGATE_KEY"] == "mpi.rank,mpi.msg.dst,mpi.msg.src"
    assert "%mpi.rank%" in mod.modifier_variables["matrix"]["caliper_rank_files"]
    # preload: an application without Caliper (tests/test_thirdparty_ramble.py runs it); no COMMSCOPE_META_*,
    # which only commscope's workloads read
    assert "profile.mpi" in by_mode["preload"]["CALI_CONFIG"]
    assert ("LD_PRELOAD", "{caliper_preload_lib}", "prepend", ["preload"]) in mod.env_mods
    for mode in set(mod.modes) - {"preload"}:
        for key in ("experiment", "stack", "git_commit"):
            assert f"COMMSCOPE_META_{key}" in by_mode[mode]


# ---- the contract with real output ------------------------------------------------------

def _build():
    stack = stack_or_skip("debian-openmpi4")
    if stack.name not in _builds:
        _builds[stack.name] = suite.build(stack)
    return stack, _builds[stack.name]


def study_commands(study: str, tmp: Path, where=lambda combo: True) -> list[tuple[str, int, str]]:
    """(application, ranks, command line) of a study's experiments at 2 ranks on debian-openmpi4,
    expanded from the study and the application defaults the way Ramble expands them."""
    doc = STUDIES[study]
    out = []
    for app, wl, name, exp_vars, matrix in rs.experiments(doc):
        a = APPS[app]
        ws = {k: v for k, v in _study_vars(doc).items()}
        ws.update({"n_ranks": [2], "stack": ["debian-openmpi4"], "interconnect": ["default"]})
        for combo in rs.combos(ws, exp_vars, matrix, {"stack_interconnect": ["stack", "interconnect"]}):
            if not where(combo):
                continue
            variables = {k: v["default"] for k, v in a.variables.items()}
            variables.update(combo)
            variables.update({"experiment_run_dir": str(tmp), "family_debian-openmpi4": "openmpi"})
            for exe in a.workloads[wl]:
                cmd = rs.expand(a.executables[exe], variables)
                assert "{" not in cmd, f"unexpanded: {cmd}"
                out.append((app, int(combo["n_ranks"]), cmd))
    return out


def test_fom_regexes_and_success_criteria_match_real_output(tmp_path):
    """Runs every smoke experiment (2 ranks, Debian Open MPI), plus the collectives study's forced
    algorithms, whose header carries the env.* and mpit.* lines, and the nightly study's commgraph pairs."""
    stack, bdir = _build()
    cmds = study_commands("smoke", tmp_path)
    cmds += study_commands("collectives", tmp_path, lambda c: c.get("algorithm") == "recursive_doubling")
    cmds += [c for c in study_commands("nightly", tmp_path, lambda c: c.get("pattern") == "pairs")
             if c[0] == "commgraph"]
    assert {a for a, _, _ in cmds} == {a for a, *_ in rs.experiments(STUDIES["smoke"])} | {"collsweep", "commgraph"}
    env = stack.environ({"PATH": f"{bdir}:{os.environ['PATH']}"})
    outputs: dict[str, list[str]] = {}
    for app, ranks, cmd in cmds:
        p = subprocess.run(stack.launch(ranks, shlex.split(cmd)), env=env, capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
        assert p.returncode == 0, f"{cmd}\n{p.stderr[-2000:]}"
        lines = p.stdout.splitlines()
        outputs.setdefault(app, []).extend(lines)
        a = APPS[app]
        regexes = [(n, re.compile(rx), g) for n, rx, g, _ in a.foms]
        # every FOM and VERIFY line the workload prints is caught by some regex
        for line in lines:
            if line.startswith(("FOM ", "VERIFY ")):
                assert any(rx.match(line) for _, rx, _ in regexes), f"{app}: no FOM regex matches {line!r}"
        crit = a.criteria
        assert any(re.match(crit["verify_passed"]["match"], line) for line in lines), cmd
        assert not any(re.match(crit["verify_none_failed"]["anti_match"], line) for line in lines), cmd
        ranks_rx = next(rx for n, rx, g in regexes if n == "ranks")
        assert int(next(ranks_rx.match(ln).group("value") for ln in lines if ranks_rx.match(ln))) == ranks
    # every regex of every application matches some line, with its group
    for app, lines in outputs.items():
        for n, rx, g, _ in APPS[app].foms:
            hits = [m for m in map(re.compile(rx).match, lines) if m]
            assert hits, f"{app}: FOM {n} matches no line of its runs"
            assert all(h.group(g) for h in hits), (app, n)


def test_success_criteria_reject_a_failed_verify():
    """A VERIFY FAIL or SKIP line trips the anti-match; a PASS line does not."""
    for app in APPS.values():
        anti = re.compile(app.criteria["verify_none_failed"]["anti_match"])
        ok = re.compile(app.criteria["verify_passed"]["match"])
        assert anti.match("VERIFY checksum FAIL 00ff") and anti.match("VERIFY fields_vs_serial SKIP -1")
        assert not anti.match("VERIFY checksum PASS 00ff") and ok.match("VERIFY checksum PASS 00ff")


@pytest.mark.parametrize("modifiers, message", [
    ([{"name": "lscpu"}, {"name": "status-markers", "mode": "standard", "on_executable": ["*"]}], None),
    ([{"name": "no-such-modifier"}], r"ramble: Ramble knows no modifier 'no-such-modifier'"),
    ([{"name": "lscpu", "mode": "loud"}], r"ramble: modifier lscpu has no mode 'loud'; its modes: standard"),
    ([{"name": "caliper", "mode": "mpi"}], r"ramble: the caliper modifier is added by commscope run"),
    ([{"name": "lscpu", "when": "always"}], r"ramble: modifier .* is not a mapping of name, mode and on_executable"),
])
def test_a_study_s_modifiers_are_checked_not_refused(modifiers, message):
    """A study may declare Ramble modifiers (builtin or the repo's), at any level; each must be one Ramble knows,
    in one of its modes, and the caliper modifier stays commscope run's to add."""
    if known_modifiers() is None:
        pytest.skip("lscpu and status-markers are Ramble's builtin modifiers: set RAMBLE_ROOT to check them")
    doc = yaml.safe_load(yaml.safe_dump(STUDIES["smoke"]))
    doc["ramble"]["modifiers"] = modifiers
    if message is None:
        check_study_modifiers(STUDY_FILES["smoke"], doc)
        return
    with pytest.raises(errors.WorkflowError, match=re.escape(str(STUDY_FILES["smoke"])) + ": " + message):
        check_study_modifiers(STUDY_FILES["smoke"], doc)
    # at the level of an experiment too
    doc["ramble"].pop("modifiers")
    app, wl, name, _v, _m = next(rs.experiments(doc))
    doc["ramble"]["applications"][app]["workloads"][wl]["experiments"][name]["modifiers"] = modifiers
    with pytest.raises(errors.WorkflowError, match=re.escape(f"{app}/{wl}/{name}: ")):
        check_study_modifiers(STUDY_FILES["smoke"], doc)


def test_two_runs_of_a_study_started_in_one_second_get_two_workspaces(tmp_path, monkeypatch):
    """The workspace is named by the study and the second it started; a second run in that second gets -2, not a
    refusal ("workspace ... exists already"), and a workspace the user names is still theirs to choose."""
    import datetime as dt
    monkeypatch.setenv("COMMSCOPE_HOME", str(tmp_path))
    now = dt.datetime.now()
    taken = set()
    for s in range(4):   # every second this test might plan in, taken by a run before it
        ws = tmp_path / "workspaces" / f"smoke-{(now + dt.timedelta(seconds=s)).strftime('%Y%m%d-%H%M%S')}"
        ws.mkdir(parents=True)
        taken.add(ws)
    plan = workflow_plan.plan_run("smoke", site="slurm-cluster", spack=False)
    assert plan.workspace.parent == tmp_path / "workspaces" and plan.workspace not in taken
    assert not plan.workspace.exists() and plan.workspace.with_name(plan.workspace.name[:-2]) in taken
    assert plan.workspace.name.endswith("-2")
    mine = tmp_path / "mine"
    assert workflow_plan.plan_run("smoke", site="slurm-cluster", spack=False, workspace=mine).workspace == mine
