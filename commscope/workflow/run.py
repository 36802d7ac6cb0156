"""`commscope run`: a study rendered into a Ramble workspace, `ramble workspace setup`, `ramble on` (and the
Slurm queue), `ramble workspace analyze`, then the workspace into the store and its report."""
from __future__ import annotations

import datetime as dt
import json
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import yaml

from commscope.store import db
from commscope.workflow.checkouts import ramble_cmd, ramble_env
from commscope.workflow import mpi_library
from commscope.workflow.errors import Unprofiled, WorkflowError
from commscope.workflow.paths import RAMBLE_DIR, ROOT, SITES_DIR, git_commit, local_site_dir
from commscope.workflow.plan import Plan, link_prefix, prefix_of
from commscope.workflow.progress import pace
from commscope.workflow.sites import env_words, site_hardware
from commscope.workflow.spack_envs import spack_caliper_config, spack_env_name, write_spack_env

SLURM_WAIT_LIMIT = 6 * 3600  # seconds; a queue that never drains is reported, not waited on forever


def render(plan: Plan) -> dict:
    """The study's ramble.yaml with the site, the run scope and the Caliper modifier added."""
    cfg = yaml.safe_load((plan.study_dir / "ramble.yaml").read_text())
    r = cfg["ramble"]
    run_scope = plan.workspace / "commscope" / "run-scope"
    # Ramble: earlier includes take precedence; the run scope overrides the site.
    r["include"] = [str(run_scope)] + [str(d) for d in site_scopes(plan)]
    r["repos"] = [str(RAMBLE_DIR)]
    if plan.caliper != "off":
        r["modifiers"] = list(r.get("modifiers") or []) + [{"name": "caliper", "mode": plan.modifier_mode}]
    if plan.package_manager == "spack":
        # One external environment per stack (spack_env_for), written by create_workspace;
        # each experiment picks its stack's through env_name (run_scope_files).
        r.setdefault("variants", {})["package_manager"] = "spack"
        r["software"] = {"packages": {}, "environments": {
            spack_env_name(st): {"external_env": str(plan.workspace / "commscope" / "spack-envs" / st)}
            for st in plan.stacks}}
    else:
        # Ramble's null package manager: no package_manager variant, no software, binaries from PATH.
        (r.get("variants") or {}).pop("package_manager", None)
        r["software"] = {"packages": {}, "environments": {}}
    return cfg


def site_scopes(plan: Plan) -> list[Path]:
    """The site's Ramble scopes a workspace includes: its folder, and for the sites on this machine's builds
    the local site's generated one."""
    return [SITES_DIR / plan.site] + ([local_site_dir()] if plan.site_conf.get("builds") == "local-builds" else [])


def run_variable_names(plan: Plan, run_scope: dict) -> list[str]:
    """The Ramble variables the run scope and the site scopes define and the study does not set itself:
    where and how the study ran (stack, launcher, provenance), never what, and the application's variables
    made of the rank count (IMB's min_collective_ranks), which is the run's ranks. A Ramble application's other
    variables are its parameters (commscope/read/ramble.py); these are not."""
    names = set(run_scope["variables.yaml"]["variables"]) | set(plan.rank_variables)
    for d in site_scopes(plan):
        f = d / "variables.yaml"
        if f.is_file():
            names |= set((yaml.safe_load(f.read_text()) or {}).get("variables") or {})

    def set_by_study(node) -> set:
        if isinstance(node, dict):
            own = set(node["variables"]) if isinstance(node.get("variables"), dict) else set()
            return own.union(*(set_by_study(v) for v in node.values()))
        return set()
    return sorted(names - set_by_study(yaml.safe_load((plan.study_dir / "ramble.yaml").read_text())))


def run_scope_files(plan: Plan) -> dict[str, dict]:
    """The run's own Ramble scope: the chosen axes and their settings, the provenance."""
    v: dict = {
        # One entry per (stack, interconnect) pair, zipped: studies put `stack_interconnect` in their matrices.
        "stack": [s for s, _ in plan.pairs],
        "interconnect": [i for _, i in plan.pairs],
        "commscope_git_commit": git_commit(),
        "commscope_study": plan.study,
        "commscope_site": plan.site,
        "commscope_root": str(ROOT),      # studies name their own files under it (placement maps)
        **{var: str(install_prefix(plan, var)) for var in plan.prefixes},   # the study's programs (study_config)
        **plan.unused_defaults,           # required by Ramble, used by no workload of the application
    }
    for s, i in plan.pairs:
        e = plan.catalog[s][i]
        v[f"ic_name_{s}_{i}"] = e["name"]
        v[f"ic_env_{s}_{i}"] = env_words(e["env"])
    if plan.package_manager == "spack":
        # The stack's Spack environment replaces the builds of `commscope setup`: its view's bin
        # goes first on PATH (the sites prepend bin_<stack>), with the Caliper that Spack built.
        v["env_name"] = spack_env_name("{stack}")
        for s in plan.stacks:
            v[f"bin_{s}"] = "{env_path}/.spack-env/view/bin"
            v[f"caliper_{s}"] = "yes"
            v[f"caliper_config_{s}"] = spack_caliper_config()
    files = {"variables.yaml": {"variables": v},
            "zips.yaml": {"zips": {"stack_interconnect": ["stack", "interconnect"]}},
            "modifier_repos.yaml": {"modifier_repos": [str(RAMBLE_DIR)]},
            # the applications' shared output contract (ramble/base_applications/commscope-workload)
            "base_application_repos.yaml": {"base_application_repos": [str(RAMBLE_DIR)]}}
    folders = folders_for_path(plan.prefixes)
    if folders:   # an application may run its program by name
        files["env_vars.yaml"] = {"env_vars": {"prepend": [{"paths": {"PATH": ":".join(folders)}}]}}
    return files


def folders_for_path(programs: dict[str, Path]) -> list[str]:
    """The folders of the study's PROGRAMS to put first on the experiments' PATH: those of the programs that PATH
    would not find by name. A program PATH already finds keeps its place, so its folder (/usr/bin, say) never goes
    before the stack's and shadows its mpirun."""
    def found(p: Path) -> bool:
        hit = shutil.which(p.name)
        return hit is not None and Path(hit).resolve() == p.resolve()
    return list(dict.fromkeys(str(p.parent) for p in programs.values() if not found(p)))


def install_prefix(plan: Plan, var: str) -> Path:
    """The install prefix a `prefixes` variable is set to: the folder above the program's bin/, or one made in
    the workspace whose bin/ links to the program's folder (make_prefixes)."""
    return prefix_of(plan.prefixes[var]) or link_prefix(plan.workspace, var)


def make_prefixes(plan: Plan) -> None:
    """For each program outside a bin/ folder, its install prefix in the workspace: bin/ links to the program's
    folder, and each entry of that folder is linked beside bin/."""
    for var, program in plan.prefixes.items():
        if prefix_of(program) is not None:
            continue
        d = link_prefix(plan.workspace, var)
        d.mkdir(parents=True)
        (d / "bin").symlink_to(program.parent, target_is_directory=True)
        for entry in program.parent.iterdir():
            if entry.name != "bin":
                (d / entry.name).symlink_to(entry)


def _ramble(ws: Path, *args: str, log_to: Path | None = None, where: str | None = None) -> subprocess.CompletedProcess:
    cmd = [*ramble_cmd(), "-P", "-D", str(ws), *args]
    if where:
        cmd += ["--where", where]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ramble_env())
    if log_to:
        with log_to.open("a") as f:
            f.write(f"$ {shlex.join(cmd)}\n{p.stdout}{p.stderr}\n")
    if p.returncode:
        missing = re.findall(r'Required key "([^"]+)" is not defined', p.stdout + p.stderr)
        if missing:   # Ramble's warning per variable, then a generic error: one line naming them
            raise WorkflowError(f"Ramble requires {', '.join(sorted(set(missing)))}, which neither the study "
                                f"{plan_study(ws)} nor the site sets: set it under variables: in the study's "
                                f"ramble.yaml (an install prefix: prefixes: in its commscope.yaml)"
                                + (f"; see {log_to}" if log_to else ""))
        raise WorkflowError(f"{shlex.join(cmd)} failed (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
    return p


def plan_study(ws: Path) -> str:
    """The study a workspace runs, as commscope-run.json names it."""
    f = ws / "commscope-run.json"
    return json.loads(f.read_text())["study"] if f.is_file() else ws.name


def create_workspace(plan: Plan) -> Path:
    ws = plan.workspace
    if ws.exists():
        raise WorkflowError(f"workspace {ws} exists already")
    if plan.package_manager == "spack":
        for st, spec in plan.spack_specs.items():
            env_dir = ws / "commscope" / "spack-envs" / st
            env_dir.mkdir(parents=True)
            write_spack_env(env_dir, st, spec, plan.site, "`commscope run`; Ramble copies it into software/")
    meta = ws.parent / f".{ws.name}.render"
    meta.mkdir(parents=True, exist_ok=True)
    cfg_file = meta / "ramble.yaml"
    cfg_file.write_text(yaml.safe_dump(render(plan), sort_keys=False, width=1000))
    cmd = [*ramble_cmd(), "-P", "workspace", "create", "-d", str(ws), "-c", str(cfg_file)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ramble_env())
    shutil.rmtree(meta)
    if p.returncode:
        raise WorkflowError(f"{shlex.join(cmd)} failed:\n{(p.stdout + p.stderr)[-3000:]}")
    scope = ws / "commscope" / "run-scope"
    scope.mkdir(parents=True)
    scope_files = run_scope_files(plan)
    for name, content in scope_files.items():
        (scope / name).write_text(yaml.safe_dump(content, sort_keys=False, width=1000))
    make_prefixes(plan)
    for tpl in [RAMBLE_DIR / "execute_experiment.tpl", *(SITES_DIR / plan.site).glob("*.tpl")]:
        shutil.copy(tpl, ws / "configs" / tpl.name)
    # What ingest reads besides Ramble's results (read/ramble.py): the site's hardware and the run's provenance.
    (ws / "hardware.yaml").write_text(yaml.safe_dump(site_hardware(plan.site), sort_keys=False))
    (ws / "commscope-run.json").write_text(json.dumps({
        "study": plan.study, "site": plan.site, "stacks": plan.stacks, "interconnects": plan.interconnects,
        "caliper": plan.caliper, "package_manager": plan.package_manager, "where": plan.where,
        "git_commit": git_commit(), "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "run_variables": run_variable_names(plan, scope_files),
    }, indent=2) + "\n")
    return ws


def experiment_dirs(ws: Path) -> list[Path]:
    """Run directories of the experiments `ramble workspace setup` made (each holds execute_experiment)."""
    return sorted(p.parent for p in (ws / "experiments").glob("*/*/*/execute_experiment"))


def _run_with_progress(ws: Path, plan: Plan, log_to: Path, echo) -> None:
    """`ramble on` in the background; progress is the count of experiments whose log exists."""
    dirs = experiment_dirs(ws)
    cmd = [*ramble_cmd(), "-P", "-D", str(ws), "on"] + (["--where", plan.where] if plan.where else [])
    with log_to.open("a") as f:
        f.write(f"$ {shlex.join(cmd)}\n")
        f.flush()
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, text=True, env=ramble_env())
        shown, t0 = -1, time.monotonic()
        while p.poll() is None:
            done = sum(1 for d in dirs if (d / f"{d.name}.out").exists())
            if done != shown and plan.site_conf.get("scheduler") != "slurm":
                echo(f"  running: {pace(done, len(dirs), time.monotonic() - t0, 'experiments started')}")
                shown = done
            time.sleep(1)
    if p.returncode:
        raise WorkflowError(f"{shlex.join(cmd)} failed (exit {p.returncode}); see {log_to}")


def wait_for_slurm(ws: Path, echo, limit: float = SLURM_WAIT_LIMIT) -> None:
    """Waits until no job of this workspace is queued or running. The jobs are named
    <workspace name>/<experiment> (sites/*/slurm_experiment.tpl); `ramble on` has submitted
    them all by the time it returns."""
    prefix = f"{ws.name}/"
    total = len(experiment_dirs(ws))
    t0 = time.monotonic()
    shown = -1
    while True:
        p = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True)
        if p.returncode:
            raise WorkflowError(f"squeue failed: {p.stderr.strip()}")
        left = [j for j in p.stdout.split() if j.startswith(prefix)]
        if not left:
            return
        if len(left) != shown:
            echo(f"  Slurm: {pace(total - len(left), total, time.monotonic() - t0, 'jobs done')}")
            shown = len(left)
        if time.monotonic() - t0 > limit:
            raise WorkflowError(f"{len(left)} Slurm jobs of {ws.name} still queued after {limit:.0f} s")
        time.sleep(2)


def summarize(ws: Path) -> dict:
    """Experiment names by Ramble status. A repeated experiment's base entry (N_REPEATS > 0) only summarises
    its repeats, which are the experiments that ran: it is not counted."""
    res = json.loads((ws / "results.latest.json").read_text())
    exps = [e for e in res.get("experiments", []) if not int(e.get("N_REPEATS") or 0)]
    status = {}
    for e in exps:
        status.setdefault(e.get("RAMBLE_STATUS", "UNKNOWN"), []).append(e["name"])
    return status


def run(plan: Plan, echo=print, ingest: bool = True, allow_unprofiled: bool = False) -> Path:
    """Runs the plan's study; an experiment that asked for a profile and wrote none is said in one line each, and
    raises Unprofiled (exit 3) at the end unless ALLOW_UNPROFILED."""
    t0 = time.monotonic()
    ws = create_workspace(plan)
    log = ws / "commscope" / "run.log"
    echo(f"workspace: {ws}")
    echo(f"study {plan.study} on site {plan.site}: stacks {', '.join(plan.stacks)}; interconnects "
         f"{', '.join(plan.interconnects)}; Caliper {plan.caliper}; package manager {plan.package_manager}")
    for var, program in plan.prefixes.items():
        how = "" if prefix_of(program) else f", linked as {install_prefix(plan, var) / 'bin' / program.name}"
        echo(f"  {var} = {install_prefix(plan, var)} ({program}{how})")
    for var in plan.unused_defaults:
        echo(f"  {var} = '' (Ramble requires it without a package manager; the application does not use it)")
    setup_args = ["workspace", "setup"] + (["--dry-run"] if plan.dry_run else [])
    _ramble(ws, *setup_args, log_to=log, where=plan.where)
    dirs = experiment_dirs(ws)
    echo(f"  set up {len(dirs)} experiments ({time.monotonic() - t0:.1f} s)")
    if not dirs:
        raise WorkflowError(f"the study rendered no experiments (--where {plan.where!r}?); see {log}")
    say_profiles(plan, dirs, echo)
    if plan.dry_run:
        scripts = "slurm_experiment and execute_experiment" if plan.site_conf.get("scheduler") == "slurm" \
            else "execute_experiment"
        echo(f"dry run: rendered {scripts} scripts in {ws}/experiments/<app>/<workload>/<experiment>/; nothing ran")
        return ws
    if ingest:
        ensure_store(echo)   # before any experiment runs, not after
    mpi_library.record(plan.stacks, ws, echo)   # for runs whose profile records no MPI library
    _run_with_progress(ws, plan, log, echo)
    if plan.site_conf.get("scheduler") == "slurm":
        wait_for_slurm(ws, echo)
    _ramble(ws, "workspace", "analyze", "-f", "json", log_to=log, where=plan.where)
    status = summarize(ws)
    counts = ", ".join(f"{len(v)} {k}" for k, v in sorted(status.items()))
    echo(f"  analyzed: {counts} ({time.monotonic() - t0:.1f} s)")
    for name in status.get("FAILED", []):
        echo(f"  FAILED: {name}")
    stored = _ingest(ws, plan, echo) if ingest else True
    unprofiled = say_unprofiled(plan, ws, echo)
    echo(f"results: {ws / 'results.latest.json'}")
    echo(f"experiment logs and profiles: {ws / 'experiments'}")
    echo(f"ramble log: {log}")
    # Everything is on disk and said; the exit status still tells CI that the job did not succeed.
    if status.get("FAILED") or not stored:
        raise WorkflowError(f"{len(status.get('FAILED', []))} experiments FAILED" if status.get("FAILED")
                            else f"the results were not stored; retry with: commscope ingest {ws}")
    if unprofiled and not allow_unprofiled:
        raise Unprofiled(f"{len(unprofiled)} experiments asked for a Caliper profile and wrote none"
                         f"{' (stored as not profiled)' if ingest else ''}; --allow-unprofiled accepts that")
    return ws


def say_unprofiled(plan: Plan, ws: Path, echo) -> list[str]:
    """The experiments that ran, asked for a profile and wrote none (read.ramble's profiles_missing); one line
    each naming it and the likely cause."""
    from commscope.read.files import BadProfile
    from commscope.read.ramble import read_workspace
    if plan.caliper == "off":
        return []
    try:
        missing = read_workspace(ws).profiles_missing()
    except BadProfile as e:   # results Ramble could not write: said by the ingest, which reads them too
        echo(f"  profiles not checked: {e}")
        return []
    for name, d in missing:
        echo(f"  NOT PROFILED: {name} wrote no profile in {d}; likely cause: {unprofiled_cause(plan, d)}")
    return [name for name, _d in missing]


def unprofiled_cause(plan: Plan, run_dir: Path) -> str:
    """Why an experiment that asked for a profile likely wrote none, from its script and the program it ran."""
    script = run_dir / "execute_experiment"
    text = script.read_text(errors="replace") if script.is_file() else ""
    if plan.preload and "libcommscope-mpif" not in text:
        return ("the preloaded Caliper wraps the C MPI_* only and never started: a Fortran application's MPI "
                "bindings call PMPI_* directly; preload libcommscope-mpif.so beside it (`commscope setup` builds it "
                "for the Debian stacks' builds)")
    if plan.preload:
        return ("the preloaded Caliper never saw MPI_Init through the C or forwarded Fortran calls (an MPI call "
                "libcommscope-mpif does not forward, or a run that ended before MPI_Finalize)")
    return ("the program is not built with this Caliper or ended before MPI_Finalize (Caliper writes at "
            "MPI_Finalize); see the experiment's .out")


def say_profiles(plan: Plan, dirs: list[Path], echo) -> None:
    """Per stack, whether its experiments will record Caliper profiles and why, and how many experiments will
    carry none: a Caliper mode applies only to the stacks whose builds have Caliper."""
    if plan.caliper == "off":
        echo("  profiles: none (Caliper off)")
        return
    for s in plan.stacks:
        yes, why = plan.profiled.get(s, (True, ""))
        echo(f"  profiles on {s}: {'Caliper ' + plan.modifier_mode if yes else 'none'} ({why})")
    bare = [s for s in plan.stacks if not plan.profiled.get(s, (True, ""))[0]]
    unprofiled = [d for d in dirs if any(f"-{s}-" in d.name for s in bare)]
    if unprofiled:
        how = ("have no no-GOTCHA Caliper to preload; `commscope setup` builds one" if plan.preload else
               "were built without Caliper; `commscope setup --caliper-prefix STACK=PREFIX`")
        echo(f"  {len(unprofiled)} of {len(dirs)} experiments will carry no profile (stacks {', '.join(bare)} {how})")


def ensure_store(echo=print) -> None:
    """The store a run ingests into, ready before its experiments run: a server named by COMMSCOPE_DB_URL or
    PG* must answer; without one, the embedded store is started and migrated as `commscope db start` does.
    Checked first, so a run does not find out only after its experiments that nothing can store them."""
    try:
        if db.external_dsn() is not None:
            db.connect().close()   # a site's server: its schema is its owner's to migrate
            return
        emb = db.Embedded()
        if not emb.running():
            echo(f"  starting the embedded store under {emb.root} (no COMMSCOPE_DB_URL or PG* names a server; "
                 f"'commscope db stop' stops it)")
            emb.start()
        with db.connect() as conn:
            db.migrate(conn)
    except db.DBError as e:
        raise WorkflowError(f"the store this run would ingest into is not usable, so nothing was run: {e} "
                            f"(or give --no-ingest)") from e


def _ingest(ws: Path, plan: Plan, echo) -> bool:
    """The workspace into the store, as `commscope ingest <workspace>` does, then its report
    (workflow.ingest.ingest_and_report)."""
    from commscope.read.storable import Provenance
    from commscope.workflow.ingest import ingest_and_report
    prov = Provenance(system=plan.site, stack=None, interconnect=None, git_commit=git_commit(), ci_pipeline=None)

    def said(res) -> None:
        echo(f"  stored {len(res.inserted)} runs, {len(res.skipped)} already stored"
             + (f", campaign {res.campaign_id}" if res.campaign_id else ""))
    try:
        _, reported = ingest_and_report([ws], prov, lambda m: echo(f"  {m}"), report_to=ws / "report.html",
                                        stored=said)
    except Exception as e:  # the results stay on disk; say how to retry
        echo(f"  ingest failed: {e}\n  the workspace is intact; retry with: commscope ingest {ws}")
        return False
    echo(reported)
    return True
