"""`commscope run reference`: the five reference studies in one Ramble workspace (ramble/studies/reference).

The dry run renders every experiment; its scripts are compared with the study's ramble.yaml read here on its own
(the matrix crossed, the exclusions applied, n_repeats copies) and with the contrasts each paper's headline effect
needs, written down here from the papers, not from the study: the workload command line each script launches
(its flags are the workloads' documented options, workloads/README.md) must carry them. The live run runs a
few of its experiments for real and checks that Ramble's repeats are stored as separate runs of one experiment
with equal parameters, each holding the FOMs its own output printed.

Both need Ramble (RAMBLE_ROOT), which is in no package registry, and Debian Open MPI 4.1, which `commscope
setup` builds the workloads with."""
from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import statistics
import subprocess
import tempfile
import sys
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
import yaml

from conftest import CALIPER_PREFIX, ROOT, fresh_database, stack_or_skip

STUDY = ROOT / "ramble" / "studies" / "reference"
CLI = [sys.executable, "-m", "commscope.cli"]
RAMBLE_ROOT = os.environ.get("RAMBLE_ROOT")
needs_ramble = pytest.mark.skipif(
    not RAMBLE_ROOT or not Path(RAMBLE_ROOT, "bin", "ramble").exists(),
    reason="Ramble is in no package registry: set RAMBLE_ROOT to a checkout of GoogleCloudPlatform/ramble at the "
           "commit in versions.yaml to render and run the reference study")
WORKLOADS = ("halo3d", "stencil2d", "commgraph", "cgsolve", "pio", "collsweep")


# ---- the study as its ramble.yaml says, expanded here -----------------------------------------------------

def _sub(text: str, values: dict) -> str:
    """{name} replaced by its value, repeatedly (values may refer to others, as n: '{size},{size},{size}')."""
    for _ in range(10):
        new = re.sub(r"\{([A-Za-z0-9_]+)\}", lambda m: str(values.get(m.group(1), m.group(0))), text)
        if new == text:
            return new
        text = new
    return text


def expected_configurations(stacks: list[str], interconnects: list[str]) -> dict[str, dict]:
    """Experiment name -> its variables, for every configuration the study defines (before repeats)."""
    doc = yaml.safe_load((STUDY / "ramble.yaml").read_text())["ramble"]
    ws_vars = doc.get("variables") or {}
    pairs = [{"stack": s, "interconnect": i} for s in stacks for i in interconnects]
    out = {}
    for app, a in doc["applications"].items():
        for wl, w in a["workloads"].items():
            for template, e in w["experiments"].items():
                variables = {**ws_vars, **(e.get("variables") or {})}
                axes = []
                for m in e.get("matrix") or []:
                    axes.append(pairs if m == "stack_interconnect" else [{m: v} for v in variables[m]])
                for pick in itertools.product(*axes):
                    v = {**variables, "application_name": app, "workload_name": wl}
                    for p in pick:
                        v.update(p)
                    assert not any(isinstance(x, list) for x in v.values()), f"{template}: a list outside the matrix"
                    excluded = any(eval(_sub(w_, v)) for w_ in (e.get("exclude") or {}).get("where") or [])
                    if not excluded:
                        v = {k: _sub(str(x), v) for k, x in v.items()}
                        out[_sub(template, v)] = v
    return out


def repeats(study: Path = STUDY) -> int:
    doc = yaml.safe_load((study / "ramble.yaml").read_text())["ramble"]
    return int((doc.get("config") or {}).get("n_repeats") or 0)


# The live runs' repeats. The study's own n_repeats gives a spread on a real machine; 2 repeats still give every
# experiment more than one run of one series, and every contrast pairs by repeat index in each campaign (4 over two
# campaigns, with their median), in 2/5 of the runs.
LIVE_REPEATS = 2


def live_study(parent: Path) -> Path:
    """A copy of the reference study, run as `commscope run FOLDER`: the same experiments (its rank maps are read
    from the checkout), LIVE_REPEATS repeats each. The folder is named reference, as the study is."""
    study = parent / "reference"
    shutil.copytree(STUDY, study)
    text = (study / "ramble.yaml").read_text()
    text, n = re.subn(r"^(\s*n_repeats:\s*)'\d+'$", rf"\g<1>'{LIVE_REPEATS}'", text, flags=re.M)
    assert n == 1 and LIVE_REPEATS < repeats(), "the study's n_repeats is no longer one quoted line above 3"
    (study / "ramble.yaml").write_text(text)
    assert repeats(study) == LIVE_REPEATS
    return study


# ---- the rendered scripts ---------------------------------------------------------------------------------

def launched(script: Path) -> tuple[dict, int, str, dict]:
    """(environment, ranks, workload, {option: value or True}) of the workload an execute_experiment launches.
    The run's own folder reads as RUN_DIR (pio's --dir), and a rank map copied into it, `--rank-map $(cp SRC .
    && echo NAME)`, as SRC and NAME."""
    run_dir = str(script.parent)
    for line in script.read_text().splitlines():
        line = line.replace(run_dir, "RUN_DIR")
        line = re.sub(r"--rank-map \$\(cp (\S+) \. && echo (\S+)\)", r"--rank-map \1:\2", line)
        words = shlex.split(line, comments=False) if "mpirun" in line else []
        app = next((w for w in words if w in WORKLOADS), None)
        if app is None:
            continue
        # the launcher's environment, and the workload's own `env A=B` (collsweep's algorithm controls)
        env = dict(w.split("=", 1) for w in words[:words.index(app)] if "=" in w and not w.startswith("-"))
        ranks = int(words[words.index("-n") + 1])
        args = words[words.index(app) + 1:]
        args = args[:args.index(">>")] if ">>" in args else args
        opts: dict = {}
        i = 0
        while i < len(args):
            if i + 1 < len(args) and not args[i + 1].startswith("--"):
                opts[args[i]] = args[i + 1]
                i += 2
            else:
                opts[args[i]] = True
                i += 1
        return env, ranks, app, opts
    raise AssertionError(f"{script}: no workload launch line")


def check_command(name: str, v: dict, env: dict, ranks: int, app: str, o: dict) -> None:
    """The launched command carries every variable of the configuration, as the workload's options."""
    assert app == v["application_name"] and ranks == int(v["n_ranks"]), name
    assert ("OMPI_MCA_btl" in env and "tcp" in env["OMPI_MCA_btl"]) == (v["interconnect"] == "tcp"), (name, env)
    if "n" in v:
        assert o["--n"] == v["n"], name
    flags = {"cgsolve": {"allreduce": "--allreduce"},
             "halo3d": {"variant": "--variant", "pml_width": "--pml-width", "pml_faces": "--pml-faces",
                        "dims": "--dims", "iters": "--iters"},
             "stencil2d": {"decomp": "--decomp", "send": "--send", "iters": "--iters"},
             "commgraph": {"pattern": "--pattern", "iters": "--iters", "large_bytes": "--large-bytes"},
             "pio": {"method": "--method", "group_size": "--group-size"},
             "collsweep": {"coll": "--coll", "sizes": "--sizes", "iters": "--iters"}}[app]
    for var, flag in flags.items():
        if var in v:
            assert o.get(flag) == v[var], (name, var, o)
    if app == "cgsolve":
        assert ("--debug-barriers" in o) == (v.get("debug_barriers") == "on"), name
    if app == "halo3d":
        assert ("--fused" in o) == (v.get("fused") == "on"), name
    if app == "commgraph":
        rank_map = o.get("--rank-map")
        if v["placement"] == "default":
            assert rank_map is None, name
        else:
            # copied into the run folder under its own file name, which names the placement
            src, _, as_name = rank_map.partition(":")
            assert Path(src).is_file() and as_name == Path(src).name, (name, rank_map)
            assert as_name.startswith(v["placement"]), (name, rank_map)
            world = [int(x) for x in re.sub(r"#.*", "", Path(src).read_text()).split()]
            assert sorted(world) == list(range(ranks)) and world != list(range(ranks)), (name, world)


def contrasts_present(cmds: dict[str, tuple]) -> None:
    """Every contrast of the five papers' headline effects is among the launched commands (names are the
    study prefixes; each effect compares commands equal in everything but the contrast)."""
    def group(prefix: str, key, vary):
        """{everything but the contrast: {contrast values}} of the commands whose experiment starts with prefix."""
        g = defaultdict(set)
        for name, (env, ranks, app, o) in cmds.items():
            if name.startswith(prefix):
                base = key(env, ranks, o)
                g[base].add(vary(env, ranks, o))
        assert g, f"no {prefix} experiments"
        return g

    ic = lambda env: env.get("OMPI_MCA_btl", "default")  # noqa: E731
    # reservoir: debug barriers on and off at every grid and rank count (MPI time, MPI fraction over the grid)
    g = group("reservoir-barriers-", lambda e, r, o: (r, o["--n"], o["--allreduce"]),
              lambda e, r, o: "--debug-barriers" in o)
    assert all(s == {True, False} for s in g.values()) and len({k[1] for k in g}) >= 2, g
    # reservoir / groundwater: the three Allreduce methods without debugging barriers, at every grid and rank
    # count of reservoir-allreduce-* (whose direct baseline is a reservoir-barriers-* experiment)
    g = defaultdict(set)
    for name, (e, r, app, o) in cmds.items():
        if app == "cgsolve" and "--debug-barriers" not in o:
            g[r, o["--n"]].add(o["--allreduce"])
    swept = {(r, o["--n"]) for name, (e, r, app, o) in cmds.items() if name.startswith("reservoir-allreduce-")}
    assert swept and all(g[k] == {"direct", "hierarchical", "nonblocking"} for k in swept), g
    # no two experiments launch the same command (the experiment's own name read as NAME): each configuration is
    # one experiment, so its repeats pair one-to-one with the other side's; two experiments of one configuration
    # would give that side 2 x n_repeats runs of one condition
    same = defaultdict(list)
    for name, (env, ranks, app, o) in cmds.items():
        same[repr((sorted(env.items()), ranks, app, sorted(o.items()))).replace(name, "NAME")].append(name)
    assert all(len(names) == 1 for names in same.values()), [n for n in same.values() if len(n) > 1]
    # weather codes: default, advised and random placement of the same graph
    g = group("placement-", lambda e, r, o: (r, o["--pattern"]),
              lambda e, r, o: o["--rank-map"].partition(":")[2].split("-")[0] if "--rank-map" in o else "default")
    assert all(s == {"default", "advised", "random"} for s in g.values()) and r_at_least(g, 4), g
    # seismic: blocking, overlap and RMA at 3 or more grid sizes on shared memory and on TCP
    g = group("seismic-overlap-", lambda e, r, o: (ic(e), o["--n"]), lambda e, r, o: o["--variant"])
    assert all(s == {"blocking", "overlap", "rma"} for s in g.values()), g
    assert {k[0] for k in g} == {"default", "self,tcp"} and all(
        len({n for i, n in g if i == t}) >= 3 for t in ("default", "self,tcp")), sorted(g)
    # seismic: fusion on and off with an absorbing layer, on an unbalanced layout
    g = group("seismic-fusion-", lambda e, r, o: (o["--pml-width"], o["--pml-faces"]), lambda e, r, o: "--fused" in o)
    assert all(s == {True, False} and int(k[0]) > 0 and k[1] != "all" for k, s in g.items()), g
    # 2D stencil: every decomposition x send mode at 2 and 4 ranks, and the decompositions at 1, 2 and 4 ranks
    g = group("stencil-decomp-", lambda e, r, o: r, lambda e, r, o: (o["--decomp"], o["--send"]))
    full = set(itertools.product(("row-naive", "row-vector", "col", "cart"), ("ssend", "send", "isend")))
    assert g[2] == full and g[4] == full and {d for d, _ in g[1]} == {d for d, _ in full}, g
    # ... and over a network transport, where every message pays its latency
    g = group("stencil-transport-", lambda e, r, o: (ic(e), r), lambda e, r, o: (o["--decomp"], o["--send"]))
    assert all(k[0] != "default" and {d for d, _ in s} >= {"row-naive", "col"}
               and {m for _, m in s} == {"ssend", "send", "isend"} for k, s in g.items()), g
    # reservoir: the library's default Allreduce algorithm and two others forced through its own control
    controls = ("_allreduce_algorithm", "ALLREDUCE_INTRA_ALGORITHM", "I_MPI_ADJUST_ALLREDUCE")
    g = group("reservoir-collectives-", lambda e, r, o: (r, o["--coll"]),
              lambda e, r, o: next((v for k, v in e.items() if k.endswith(controls)), "default"))
    assert all(len(s) == 3 and "default" in s for s in g.values()) and {k[0] for k in g} == {2, 4}, g
    # groundwater: independent, collective and two-phase I/O, two-phase with more than one group size
    g = group("groundwater-io-", lambda e, r, o: (r, o["--n"]), lambda e, r, o: (o["--method"], o["--group-size"]))
    for s in g.values():
        assert {m for m, _ in s} == {"independent", "collective", "two-phase"}, s
        assert len({gs for m, gs in s if m == "two-phase"}) >= 2, s


def r_at_least(g: dict, ranks: int) -> bool:
    return all(k[0] >= ranks for k in g)


_homes: dict[bool, dict] = {}


def _home_with_builds(tmp_path: Path, caliper: bool) -> dict:
    """The environment of a private COMMSCOPE_HOME with the workloads built for Debian Open MPI 4.1 (with Caliper
    when asked), set up once per module for each: the tests' workspaces differ, the builds do not."""
    stack_or_skip("debian-openmpi4")
    if caliper not in _homes:
        home = Path(tempfile.mkdtemp(prefix="reference-home-", dir=tmp_path.parent))
        env = {**os.environ, "COMMSCOPE_HOME": str(home), "SPACK_ROOT": ""}
        cmd = [*CLI, "setup", "--stacks", "debian-openmpi4"]
        if caliper and CALIPER_PREFIX:
            cmd += ["--caliper-prefix", f"debian-openmpi4={CALIPER_PREFIX}"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
        assert "built debian-openmpi4" in p.stdout + p.stderr, p.stdout + p.stderr
        _homes[caliper] = env
    return dict(_homes[caliper])


def test_the_study_runs_on_its_own_stacks_and_interconnects_unless_told(tmp_path, monkeypatch):
    """commscope.yaml's stacks and interconnects are the default, limited to those the site has; --stacks and
    --interconnects still choose; a malformed list is refused by name. (The site slurm-cluster offers stacks
    openmpi, mpich and cray-mpich, and the selection ucx-rc for openmpi alone in its interconnects.yaml.)"""
    from commscope.workflow import errors, paths, plan as workflow_plan
    study = tmp_path / "studies" / "reference"
    study.mkdir(parents=True)
    (study / "ramble.yaml").write_text((STUDY / "ramble.yaml").read_text())
    monkeypatch.setattr(paths, "STUDIES_DIR", tmp_path / "studies")
    site_stacks = yaml.safe_load((ROOT / "ramble" / "sites" / "slurm-cluster" / "site.yaml").read_text())["stacks"]
    (study / "commscope.yaml").write_text("stacks: [mpich, not-here]\ninterconnects: [default, no-such-fabric]\n")
    plan = workflow_plan.plan_run("reference", site="slurm-cluster", spack=False)
    assert plan.stacks == ["mpich"] and plan.pairs == [("mpich", "default")]
    (study / "commscope.yaml").write_text("stacks: [openmpi, mpich]\ninterconnects: [default, ucx-rc]\n")
    plan = workflow_plan.plan_run("reference", site="slurm-cluster", spack=False)
    assert plan.pairs == [("mpich", "default"), ("openmpi", "default"), ("openmpi", "ucx-rc")]
    plan = workflow_plan.plan_run("reference", site="slurm-cluster", stacks=["openmpi"], interconnects=["default"],
                             spack=False)
    assert plan.stacks == ["openmpi"] and plan.pairs == [("openmpi", "default")]
    (study / "commscope.yaml").write_text("stacks: [not-here]\n")   # none of them: every stack of the site
    assert workflow_plan.plan_run("reference", site="slurm-cluster", spack=False).stacks == sorted(site_stacks)
    (study / "commscope.yaml").write_text("stacks: mpich\n")
    with pytest.raises(errors.WorkflowError, match=r"reference/commscope.yaml: stacks must be a list of names"):
        workflow_plan.plan_run("reference", site="slurm-cluster", spack=False)


@needs_ramble
def test_dry_run_renders_every_contrast_with_repeats(tmp_path):
    env = _home_with_builds(tmp_path, caliper=False)
    p = subprocess.run([*CLI, "run", "reference", "--dry-run"], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    # by default the study's own stacks and interconnects (commscope.yaml), not every stack of the site
    conf = yaml.safe_load((STUDY / "commscope.yaml").read_text())
    assert f"stacks {', '.join(conf['stacks'])}; interconnects {', '.join(conf['interconnects'])}" in p.stdout
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    rendered = {d.name: d / "execute_experiment" for d in ws.glob("experiments/*/*/*") if d.is_dir()}
    expected = expected_configurations(conf["stacks"], conf["interconnects"])
    n = repeats()
    assert n >= 3, "every configuration needs repeats for a spread"
    assert set(rendered) == {f"{name}.{i}" for name in expected for i in range(1, n + 1)}
    assert f"set up {len(expected) * n} experiments" in p.stdout
    cmds = {}
    for name, v in expected.items():
        runs = [launched(rendered[f"{name}.{i}"]) for i in range(1, n + 1)]
        for r in runs:
            check_command(name, v, *r)
        # the repeats launch the same command, each in its own folder
        assert all(r == runs[0] for r in runs), (name, runs)
        cmds[name] = runs[0]
    contrasts_present(cmds)


@needs_ramble
def test_live_repeats_are_separate_runs_with_equal_parameters(tmp_path, dsn):
    """A few reference experiments for real (cgsolve with and without debug barriers, and pio two-phase),
    ingested: every repeat is one run of its experiment, the repeats' parameters are equal, the contrast's
    differ, and each run's FOMs are what its own output printed."""
    env = {**_home_with_builds(tmp_path, caliper=True), "COMMSCOPE_DB_URL": dsn}
    where = ('re_search("^(reservoir-barriers-direct-barriers-o(n|ff)-s24|groundwater-io-two-phase-g2-s64)-", '
             '"{experiment_name}") and "{interconnect}" == "default"')
    study = live_study(tmp_path)
    p = subprocess.run([*CLI, "run", str(study), "--where", where], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    ws = Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1))
    dirs = sorted(d for d in ws.glob("experiments/*/*/*") if d.is_dir())
    n = repeats(study)
    assert len(dirs) == 5 * n, [d.name for d in dirs]   # barriers on/off at 2 and 4 ranks, one pio configuration
    # the experiments that ran, not Ramble's summary entry of each configuration's repeats
    assert f"analyzed: {len(dirs)} SUCCESS" in p.stdout, p.stdout
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT r.id, r.experiment, s.parameters, r.series_id, "
                            "r.metadata->'ramble_variables'->>'repeat_index' "
                            "FROM runs r JOIN series s ON s.id = r.series_id").fetchall()
        foms = conn.execute("SELECT run_id, name, repeat, value FROM foms").fetchall()
        # the run's ingest brought every series' change points up to date, as `commscope ingest` does
        fresh = conn.execute("SELECT s.series_id FROM (SELECT series_id, count(*) AS n, max(id) AS last FROM runs "
                             "WHERE status = 'ok' GROUP BY 1) s JOIN change_point_state c ON c.series_id = s.series_id "
                             "AND c.metric = 'time_s' AND c.runs = s.n AND c.max_run_id = s.last").fetchall()
    assert len(fresh) == len({series for _r, _e, _p, series, _rep in rows}), fresh
    by_exp = defaultdict(list)
    for rid, exp, params, series, rep in rows:   # stored as Ramble names it: application.workload.experiment
        by_exp[exp.split(".", 2)[2]].append((rid, params, series, rep))
    assert set(by_exp) == {d.name.rsplit(".", 1)[0] for d in dirs}
    stored_fom = {(rid, name, rep): value for rid, name, rep, value in foms}
    for exp, runs in by_exp.items():
        assert len(runs) == n and len({rid for rid, *_ in runs}) == n, (exp, runs)
        # one series: the same parameters and environment
        assert all(params == runs[0][1] and series == runs[0][2] for _, params, series, _ in runs), exp
        assert sorted(int(rep) for *_, rep in runs) == list(range(1, n + 1)), exp
        for rid, *_, rep in runs:
            out = next(ws.glob(f"experiments/*/*/{exp}.{rep}/{exp}.{rep}.out")).read_text()
            printed = {m.group(1): float(m.group(2)) for m in re.finditer(r"^FOM (\S+) (\S+) \S+$", out, re.M)}
            assert stored_fom[(rid, "total_time", int(rep))] == pytest.approx(printed["total_time"], rel=1e-9)
    # the contrast: debug barriers on and off differ in the parameters that name it, and only there
    params = {exp: runs[0][1] for exp, runs in by_exp.items()}
    for r in (2, 4):
        on, off = (params[f"reservoir-barriers-direct-barriers-{s}-s24-debian-openmpi4-default-n{r}"]
                   for s in ("on", "off"))
        assert {k for k in on if on[k] != off.get(k)} == {"param.debug-barriers"}, (on, off)


# The reservoir experiments at 24^3 and 2 ranks: debugging barriers on and off, and the Allreduce methods.
RESERVOIR_S24_N2 = ('re_search("^reservoir-(barriers-direct-barriers-o(n|ff)|allreduce-[a-z]+)-s24-", '
                    '"{experiment_name}") and "{n_ranks}" == "2"')
# The experiments of the machine-limit rows: the stencil's row-naive and col decompositions, the pairs graph with
# and without the advised placement, pio independent against two-phase.
MACHINE_ROWS = ('re_search("^stencil-decomp-(col|row-naive)-isend-", "{experiment_name}") or '
                're_search("^placement-pairs-(default|advised)-", "{experiment_name}") or '
                're_search("^groundwater-io-(independent|two-phase-g2)-s64-", "{experiment_name}")')


@pytest.fixture(scope="module")
def two_campaigns(tmp_path_factory, server):
    """Two live `commscope run FOLDER --caliper off` of live_study on the local site into one database, as two
    campaigns: the first runs RESERVOIR_S24_N2 and MACHINE_ROWS, the second RESERVOIR_S24_N2 again. Yields
    (database, [workspace of each campaign], the repeats each experiment ran). Each run renders the whole study, so
    the two tests reading it share it."""
    if not RAMBLE_ROOT or not Path(RAMBLE_ROOT, "bin", "ramble").exists():
        pytest.skip("Ramble is in no package registry: set RAMBLE_ROOT")
    with fresh_database(server[0]) as dsn:
        env = {**_home_with_builds(tmp_path_factory.mktemp("campaigns"), caliper=False), "COMMSCOPE_DB_URL": dsn}
        env.pop("COMMSCOPE_IO_DIR", None)   # pio writes into each experiment's folder
        workspaces = []
        study = live_study(tmp_path_factory.mktemp("study"))
        for where in (f"({RESERVOIR_S24_N2} or {MACHINE_ROWS})", RESERVOIR_S24_N2):
            p = subprocess.run([*CLI, "run", str(study), "--where", f'({where}) and "{{interconnect}}" == "default"',
                                "--caliper", "off"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200)
            assert p.returncode == 0, p.stdout + p.stderr
            workspaces.append(Path(re.search(r"^workspace: (\S+)$", p.stdout, re.M).group(1)))
        yield dsn, workspaces, repeats(study)


@needs_ramble
def test_live_repeats_pair_one_to_one_within_and_across_campaigns(two_campaigns):
    """The reservoir experiments at 24^3 and 2 ranks (debugging barriers on and off, the Allreduce methods) run
    for real twice, without Caliper (the MPI time is then cgsolve's own comm_time_avg), as two campaigns. Each
    condition of the report's debugging-barrier and Allreduce rows has one run per repeat and campaign, so its
    repeats pair one-to-one: in one campaign n_repeats ratios, over both 2 x n_repeats (both campaigns number
    their repeats from 1), each the ratio of the two experiments' own printed comm_time_avg at one repeat index.
    The first campaign also holds the other workloads' experiments of two_campaigns: their runs join no reservoir
    row."""
    from commscope.views import reference
    dsn, workspaces, n = two_campaigns
    comm: dict[tuple[int, str, int], float] = {}   # (campaign, allreduce/barriers, repeat) -> comm_time_avg
    for attempt, ws in enumerate(workspaces, 1):
        for out in ws.glob("experiments/cgsolve/cgsolve/*/*.out"):
            m = re.fullmatch(r"reservoir-(?:allreduce-(\w+)|barriers-direct-barriers-(on|off))-s24-.*\.(\d+)\.out",
                             out.name)
            assert m, out.name
            name = m.group(1) or f"barriers-{m.group(2)}"
            printed = dict(re.findall(r"^FOM (\S+) (\S+) \S+$", out.read_text(), re.M))
            comm[attempt, name, int(m.group(3))] = float(printed["comm_time_avg"])
    # the experiments that ran: barriers on and off, and of the Allreduce methods the two without a twin
    assert {name for _, name, _ in comm} == {"barriers-on", "barriers-off", "hierarchical", "nonblocking"}, comm
    assert len(comm) == 2 * 4 * n
    with psycopg.connect(dsn) as conn:
        campaigns = [c for (c,) in conn.execute("SELECT DISTINCT campaign_id FROM runs ORDER BY 1").fetchall()]
        assert len(campaigns) == 2
        one = reference.compute(conn, (campaigns[0],))
        both = reference.compute(conn)
    contrasts = {"reservoir-debug-barriers": ("barriers-on", "barriers-off"),
                 "groundwater-allreduce-hierarchical": ("barriers-off", "hierarchical"),
                 "groundwater-allreduce-nonblocking": ("barriers-off", "nonblocking")}
    for key, (base, treat) in contrasts.items():
        for rows, attempts in ((one, (1,)), (both, (1, 2))):
            (row,) = [r for r in rows if r.effect.key == key]
            ratios = [comm[a, treat, i] / comm[a, base, i] for a in attempts for i in range(1, n + 1)]
            assert row.paired_by == "repeat index", (key, row.paired_by, row.runs_baseline, row.runs_treatment)
            assert (row.runs_baseline, row.runs_treatment, row.pairs) == (len(ratios),) * 3, (key, row)
            assert row.ratio == pytest.approx(statistics.median(ratios), rel=1e-9), key
            assert (row.ratio_min, row.ratio_max) == pytest.approx((min(ratios), max(ratios)), rel=1e-9), key


@needs_ramble
def test_live_rows_say_what_the_machine_lacked(two_campaigns):
    """The stencil's row-naive and col decompositions at 1, 2 and 4 ranks, the pairs graph with and without the
    advised placement, and pio independent against two-phase on the local disk, run for real through Ramble on the
    local site (Caliper off; two_campaigns' first) and stored as `commscope run` stores them (Ramble's n_nodes, the
    site's hardware.yaml).
    Where the report's rows are not or partly reproduced their reasons say, and every row's machine limits list:
    - the stencil's 12x is at 16 ranks; the cores are `nproc`'s; the trend is the median over repeats of each
      repeat's row-naive / col comm_time_avg (the outputs' FOM lines) at 1, 2 and 4 ranks; 4 ranks outnumber them;
    - placement: all runs on one node, and commgraph's own internode_bytes_per_iter 0 in every output;
    - two-phase I/O: the file system findmnt names for the experiments' folder, a local disk here."""
    from commscope.views import reference
    nproc = int(subprocess.run(["nproc", "--all"], capture_output=True, text=True, check=True).stdout)
    if nproc >= 16:
        pytest.skip(f"{nproc} cores: this machine can run the stencil study's 16 ranks one per core")
    dsn, (ws, _second), n = two_campaigns

    def foms(app: str, exp_start: str) -> dict[tuple[int, int], dict]:
        """(ranks, repeat) -> the FOMs printed by each run of the experiments starting with exp_start."""
        got = {}
        for out in ws.glob(f"experiments/{app}/{app}/{exp_start}*/*.out"):
            ranks, rep = re.search(r"-n(\d+)\.(\d+)\.out$", out.name).groups()
            got[int(ranks), int(rep)] = {k: float(v) for k, v in re.findall(r"^FOM (\S+) (\S+) \S+$",
                                                                             out.read_text(), re.M)}
        return got
    col, row = foms("stencil2d", "stencil-decomp-col-isend-"), foms("stencil2d", "stencil-decomp-row-naive-isend-")
    assert sorted(col) == sorted(row) == [(r, i) for r in (1, 2, 4) for i in range(1, n + 1)], sorted(col)
    trend = {r: statistics.median(row[r, i]["comm_time_avg"] / col[r, i]["comm_time_avg"] for i in range(1, n + 1))
             for r in (1, 2, 4)}
    graphs = [*foms("commgraph", "placement-pairs-default-").values(),
              *foms("commgraph", "placement-pairs-advised-").values()]
    assert len(graphs) == 2 * n and all(g["internode_bytes_per_iter"] == 0 and g["intranode_bytes_per_iter"] > 0
                                        for g in graphs)
    fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", str(ws / "experiments")],
                        capture_output=True, text=True, check=True).stdout.strip()
    with psycopg.connect(dsn) as conn:
        rows = reference.compute(conn)

    def says(row, text):
        assert any(text in m for m in row.machine), (row.effect.key, row.condition, text, row.machine)
        if row.verdict in ("not", "partly"):
            assert text in row.reason, (row.effect.key, row.verdict, row.reason)

    stencil = [r for r in rows if r.effect.key == "stencil-row-vs-col"]
    assert sorted(re.search(r"\bn(\d+)\b", r.condition).group(1) for r in stencil) == ["2", "4"], \
        [r.condition for r in stencil]
    for r in stencil:
        says(r, f"the study's figure is at 16 ranks, one per core; the runs' machine has {nproc} cores")
        text = next(m for m in r.machine if "trend" in m)
        shown = {int(k): float(v) for v, k in re.findall(r"([0-9.]+)× at (\d+) ranks?", text)}
        assert shown.keys() == {1, 2, 4}, text
        for k, v in shown.items():
            assert v == pytest.approx(trend[k], rel=6e-3), (k, text, trend)   # shown to 3 significant digits
        if " n4 " in f" {r.condition} ":
            says(r, f"4 ranks on {nproc} cores")
        else:
            assert not any("ranks on" in m for m in r.machine), r.machine
    placement = [r for r in rows if r.effect.key in ("weather-advised-time", "weather-advised-mpi")]
    assert len(placement) == 2 and all(r.verdict != "not run" for r in placement), placement
    for r in placement:
        says(r, f"all {2 * n} runs on one node, commgraph counted 0 bytes sent between nodes in every run")
    io = [r for r in rows if r.effect.key.startswith("groundwater-two-phase-")]
    assert len(io) == 2 and all(r.verdict != "not run" for r in io), io
    for r in io:
        if fs in {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "tmpfs", "overlay"}:
            says(r, f"the file went to {fs}, a local file system")
        else:
            assert not any("the file went to" in m for m in r.machine), (fs, r.machine)
