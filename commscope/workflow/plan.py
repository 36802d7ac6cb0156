"""A run's plan, validated before anything is created: the study's own settings (commscope.yaml), the site,
stacks, interconnects, Caliper mode and package manager."""
from __future__ import annotations

import ast
import datetime as dt
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from commscope.workflow import caliper as caliper_builds, paths, stacks as stack_catalog
from commscope.workflow.builds import read_builds
from commscope.workflow.checkouts import missing_message, spack_root
from commscope.workflow.errors import UnknownChoice, WorkflowError, choose
from commscope.workflow.paths import RAMBLE_DIR, SITES_DIR, builds_dir, sites, workspaces_dir
from commscope.workflow.sites import interconnect_catalog
from commscope.workflow.spack_envs import spack_mpi_specs



def modifier_modes(modifier: Path) -> tuple[str, ...]:
    """The modes the Caliper modifier declares (its `mode("NAME", ...)` directives, read from its source), less
    `preload`, which a plan chooses for applications without Caliper rather than the user: the one list."""
    tree = ast.parse(modifier.read_text(), str(modifier))
    return tuple(n.args[0].value for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "mode" and n.args
                 and isinstance(n.args[0], ast.Constant) and n.args[0].value != "preload")


# `off`, or a mode of the Caliper modifier: `counts` is `mpi` plus call counts (region.count), which the barrier
# advisor needs to tell debugging barriers from others.
CALIPER_MODES = ("off", *modifier_modes(RAMBLE_DIR / "modifiers" / "caliper" / "modifier.py"))


def _folder(study: str) -> Path:
    """A study's folder: a path as given, or a package study's by name (plan_run has checked either)."""
    return Path(study) if "/" in study else paths.STUDIES_DIR / study


def study_config(study: str) -> dict:
    """What `commscope run` needs for a study besides its ramble.yaml, from the optional `commscope.yaml`
    beside it: `caliper` (its default Caliper mode), `package_manager: null` (a study whose binaries are
    built by hand, e.g. of a Ramble builtin application: Ramble's null package manager only), `prefixes`
    (Ramble variable -> a program, by name on PATH or by path: the variable is set to its install prefix),
    and `stacks` and `interconnects`, what the study runs on when the run names none (those of them the site
    has): a study too long for every stack, such as `reference`, names the ones it needs."""
    f = _folder(study) / "commscope.yaml"
    conf = (yaml.safe_load(f.read_text()) if f.is_file() else None) or {}
    keys = ("caliper", "package_manager", "prefixes", "stacks", "interconnects")
    unknown = sorted(set(conf) - set(keys))
    if unknown:
        raise WorkflowError(f"{f}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(keys)}")
    for key in ("stacks", "interconnects"):
        v = conf.get(key)
        if v is not None and not (isinstance(v, list) and v and all(isinstance(x, str) and x for x in v)):
            example = "debian-openmpi4" if key == "stacks" else "default, tcp"
            raise WorkflowError(f"{f}: {key} must be a list of names, e.g. {key}: [{example}]")
    mode = conf.get("caliper")
    if mode is not None and mode not in CALIPER_MODES:
        raise WorkflowError(f"{f}: caliper: {mode!r} is not a Caliper mode; valid: {', '.join(CALIPER_MODES)} "
                            f"(quote 'off': YAML reads a bare off as false)")
    if conf.get("package_manager") not in (None, "null"):
        raise WorkflowError(f"{f}: package_manager: {conf['package_manager']!r}; only null can be required "
                            f"(a study runs with Spack by default when Spack is there)")
    prefixes = conf.get("prefixes") or {}
    if not isinstance(prefixes, dict) or not all(isinstance(v, str) and v for v in prefixes.values()):
        raise WorkflowError(f"{f}: prefixes must map a Ramble variable to a program's name or path, e.g. "
                            f"intel-mpi-benchmarks_path: IMB-MPI1 (on PATH) or ~/imb/IMB-MPI1")
    return conf


def study_caliper_mode(study: str) -> str | None:
    """The Caliper mode a study needs by default, from its `commscope.yaml` (`caliper: MODE`) beside its
    ramble.yaml (the barriers study: `counts`), or None."""
    return study_config(study).get("caliper")


def install_prefixes(study: str, conf: dict, folder: Path | None = None) -> dict[str, Path]:
    """The study's `prefixes`, each the program it names: a name found on PATH, or a path to the program
    (~ and $VARS expanded; relative to the study's folder). Ramble's `<package>_path` is an install prefix:
    where the program sits in a bin/ folder it is the folder above (prefix_of); anywhere else `commscope run`
    makes one in the workspace (link_prefix)."""
    out = {}
    for var, program in (conf.get("prefixes") or {}).items():
        if "/" not in program and "$" not in program and not program.startswith("~"):
            found = shutil.which(program)
            if found is None:
                raise WorkflowError(f"study {study} needs {program} on PATH (commscope run sets {var} to its "
                                    f"install prefix): put its folder on PATH, or give its path in "
                                    f"commscope.yaml, e.g. prefixes: {{{var}: /path/to/{program}}}")
            out[var] = Path(os.path.abspath(found))
            continue
        path = Path(os.path.expandvars(program)).expanduser()
        path = path if path.is_absolute() else (folder or _folder(study)) / path
        if path.is_dir():
            raise WorkflowError(f"study {study}: prefixes: {var}: {path} is a folder; name the program in it "
                                f"(<prefix>/bin/PROGRAM or <prefix>/PROGRAM)")
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise WorkflowError(f"study {study}: prefixes: {var}: {path} is not an executable file; give the "
                                f"path of the program {var} is the install prefix of")
        out[var] = Path(os.path.abspath(path))
    return out


def prefix_of(program: Path) -> Path | None:
    """The install prefix of a program in a bin/ folder (<prefix>/bin/PROGRAM), else None."""
    return program.parent.parent if program.parent.name == "bin" else None


def new_workspace(study: str) -> Path:
    """A workspace folder no run has taken: <study>-<date>-<time>, with -2, -3, ... when another run of the study
    started in the same second."""
    base = workspaces_dir() / f"{study}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    ws, n = base, 1
    while ws.exists():
        n += 1
        ws = base.with_name(f"{base.name}-{n}")
    return ws


def link_prefix(workspace: Path, var: str) -> Path:
    """Where `commscope run` makes an install prefix for a program outside a bin/ folder: bin/ links to the
    program's folder, and each entry of that folder is linked beside it, so <prefix>/bin/PROGRAM and
    <prefix>/PROGRAM both run it."""
    return workspace / "commscope" / "prefixes" / var


# Run by Ramble's own interpreter (`ramble python`): the modifiers it knows with their modes, and for each of
# APPS the `<package>_path` variables Ramble requires of it without a package manager, each with whether the
# files that define the application (its class and base classes) mention it, and its workload variables whose
# default is made of the rank or node count (IMB's min_collective_ranks: {n_ranks}).
_RAMBLE_QUERY = """
import inspect, json
import ramble.repository as rr
mods, apps = rr.paths[rr.ObjectTypes.modifiers], rr.paths[rr.ObjectTypes.applications]
out = {"modifiers": {n: sorted(getattr(mods.get_obj_class(n), "modes", None) or {}) for n in mods.all_object_names()},
       "applications": {}}
for a in APPS:
    if not apps.exists(a):
        continue
    cls = apps.get_obj_class(a)
    text = ""
    for c in cls.__mro__:   # a repository's object is a module of no file: its repository names the file
        repo = next((rr.paths[t] for t in rr.ObjectTypes if c.__module__.startswith(rr.paths[t].base_namespace + ".")), None)
        try:
            text += open(repo.filename_for_object_name(c.__module__.rsplit(".", 1)[1]) if repo else inspect.getfile(c)).read()
        except (OSError, TypeError):
            pass
    out["applications"][a] = {
        "required": {p + "_path": (p + "_path") in text for p in cls.required_packages},
        "rank_variables": sorted({n for w in cls.workloads.values() for n, v in w.variables.items()
                                  if any(r in str(v.default) for r in ("{n_ranks}", "{n_nodes}", "{processes_per_node}"))})}
print("COMMSCOPE-QUERY " + json.dumps(out))
"""


def ramble_definitions(apps: list[str]) -> dict:
    """What the real Ramble knows (with commscope's modifier repo): {"modifiers": {name: [modes]}, "applications":
    {app: {"required": {"<package>_path": used by the application?}, "rank_variables": [name]}}} for APPS."""
    from commscope.workflow.checkouts import ramble_cmd, ramble_env
    code = _RAMBLE_QUERY.replace("APPS", repr(sorted(apps)))
    cmd = [*ramble_cmd(), "-P", "-c", f"modifier_repos:{json.dumps([str(paths.RAMBLE_DIR)])}", "python", "-c",
           f"exec({code!r})"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ramble_env(), timeout=300)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("COMMSCOPE-QUERY ")), None)
    if p.returncode or line is None:
        raise WorkflowError(f"Ramble could not list its modifiers and applications ({' '.join(cmd[:4])} ... "
                            f"exit {p.returncode}): {(p.stderr or p.stdout).strip()[-500:]}")
    return json.loads(line.split(" ", 1)[1])


def study_modifiers(doc: dict) -> list[tuple[str, object]]:
    """(where, entry) of every modifier a study's ramble.yaml declares: at the workspace, an application, a
    workload or an experiment."""
    r = (doc or {}).get("ramble") or {}
    found = [("ramble", m) for m in r.get("modifiers") or []]
    for app, a in (r.get("applications") or {}).items():
        found += [(app, m) for m in (a or {}).get("modifiers") or []]
        for wl, w in ((a or {}).get("workloads") or {}).items():
            found += [(f"{app}/{wl}", m) for m in (w or {}).get("modifiers") or []]
            for exp, e in ((w or {}).get("experiments") or {}).items():
                found += [(f"{app}/{wl}/{exp}", m) for m in (e or {}).get("modifiers") or []]
    return found


def check_modifiers(where_file: Path, declared: list[tuple[str, object]], known: dict[str, list[str]]) -> None:
    """Each declared modifier is a mapping of name, mode and on_executable (Ramble's schema), names a modifier
    Ramble knows (KNOWN: name -> modes) and one of its modes; `caliper` is commscope run's to add."""
    for where, m in declared:
        if not (isinstance(m, dict) and isinstance(m.get("name"), str)
                and set(m) <= {"name", "mode", "on_executable"}):
            raise WorkflowError(f"{where_file}: {where}: modifier {m!r} is not a mapping of name, mode and "
                                f"on_executable, e.g. - name: lscpu")
        name, mode = m["name"], m.get("mode")
        if name == "caliper":
            raise WorkflowError(f"{where_file}: {where}: the caliper modifier is added by commscope run; remove it "
                                f"and pick its mode with --caliper MODE or `caliper: MODE` in commscope.yaml")
        if name not in known:
            raise WorkflowError(f"{where_file}: {where}: Ramble knows no modifier {name!r}; known: "
                                f"{', '.join(sorted(known))}")
        if mode is not None and mode not in known[name]:
            raise WorkflowError(f"{where_file}: {where}: modifier {name} has no mode {mode!r}; its modes: "
                                f"{', '.join(known[name])}")


def variables_set(doc: dict) -> set[str]:
    """Every variable a study's ramble.yaml sets, at any level."""
    def walk(node) -> set:
        if isinstance(node, dict):
            own = set(node["variables"]) if isinstance(node.get("variables"), dict) else set()
            return own.union(*(walk(v) for v in node.values()))
        return set()
    return walk(doc)


def unused_required(study: str, apps: dict[str, dict], given: set[str]) -> dict[str, str]:
    """Ramble requires `<package>_path` of an application run without a package manager. One the study or its
    prefixes do not give: set to '' when nothing in the application uses it (builtin LULESH runs lulesh2.0
    from PATH), else refused in one line naming where to set it."""
    out = {}
    for app, known in apps.items():
        for var, used in sorted(known["required"].items()):
            if var in given:
                continue
            if used:
                raise WorkflowError(f"study {study}: Ramble's application {app} needs {var}, the install prefix of "
                                    f"its program; name the program in the study's commscope.yaml, e.g. "
                                    f"prefixes: {{{var}: /path/to/PROGRAM}} (or set {var} in its ramble.yaml)")
            out[var] = ""
    return out


@dataclass
class Plan:
    study: str
    site: str
    stacks: list[str]
    interconnects: list[str]
    caliper: str
    where: str | None
    dry_run: bool
    workspace: Path
    site_conf: dict = field(default_factory=dict)
    catalog: dict = field(default_factory=dict)
    pairs: list = field(default_factory=list)     # (stack, interconnect label) that run
    package_manager: str = "null"                 # null | spack
    spack_specs: dict = field(default_factory=dict)  # stack -> its MPI's Spack spec (spack only)
    prefixes: dict = field(default_factory=dict)     # Ramble variable -> the program it is the prefix of
    profiled: dict = field(default_factory=dict)     # stack -> (records profiles?, why), for what the run says
    preload: bool = False                            # the study's applications have no Caliper: preload one
    unused_defaults: dict = field(default_factory=dict)  # required variables no workload uses -> ''
    rank_variables: set = field(default_factory=set)    # variables made of the rank count: not parameters
    study_dir: Path | None = None                    # the folder of ramble.yaml (a package study's by default)

    def __post_init__(self):
        self.study_dir = self.study_dir or paths.STUDIES_DIR / self.study

    @property
    def modifier_mode(self) -> str:
        """The Caliper modifier's mode: the asked one, or `preload` for applications without Caliper."""
        return "preload" if self.preload else self.caliper


def select_interconnects(stacks: list[str], catalog: dict, asked: list[str]) -> list[tuple[str, str]]:
    """The (stack, label) pairs to run. A label (tcp) applies to every stack that has it; a
    catalog name (openmpi4/tcp) to its own stack only. A name no chosen stack has is an error."""
    pairs = []
    for a in asked:
        hits = [(s, lab) for s in stacks for lab, e in catalog[s].items() if a in (lab, e["name"])]
        if not hits:
            valid = sorted({x for s in stacks for lab, e in catalog[s].items() for x in (lab, e["name"])})
            raise UnknownChoice(f"unknown interconnect {a!r} for stacks {', '.join(stacks)}; valid: {', '.join(valid)}")
        pairs += [h for h in hits if h not in pairs]
    return sorted(pairs)


def _study_default(names: list[str] | None, valid: list[str]) -> list[str]:
    """The study's default stacks (commscope.yaml) that the site has, else every one the site has."""
    return [n for n in names or [] if n in valid] or valid


def unannotated_applications(study: str) -> list[str]:
    """The study's Ramble applications that are not commscope's (ramble/applications): they have no Caliper
    annotations, so `commscope run` profiles them by preloading the stack's no-GOTCHA Caliper."""
    doc = yaml.safe_load((_folder(study) / "ramble.yaml").read_text()) or {}
    apps = (doc.get("ramble") or {}).get("applications") or {}
    return sorted(a for a in apps if not (paths.RAMBLE_DIR / "applications" / a).is_dir())


PRELOAD_TAG = "caliper-preload"


def preloaded_commscope_applications(study: str) -> list[str]:
    """The study's commscope applications without Caliper annotations (tagged `caliper-preload` in their
    application.py, as the Fortran fjacobi is): profiled by preloading, like applications that are not commscope's."""
    doc = yaml.safe_load((_folder(study) / "ramble.yaml").read_text()) or {}
    apps = (doc.get("ramble") or {}).get("applications") or {}
    files = {a: paths.RAMBLE_DIR / "applications" / a / "application.py" for a in apps}
    return sorted(a for a, f in files.items() if f.is_file() and f'"{PRELOAD_TAG}"' in f.read_text())


def plan_run(study: str, site: str = "local", stacks: list[str] | None = None,
             interconnects: list[str] | None = None, caliper: str | None = None,
             where: str | None = None, dry_run: bool = False, workspace: Path | None = None,
             spack: bool | None = None) -> Plan:
    """Validates every choice before anything is created. spack: True/False picks Ramble's
    spack/null package manager; None picks spack when a Spack checkout is there."""
    folder = paths.study_dir(study)
    study = folder.name
    choose("site", [site], sites())
    site_conf = yaml.safe_load((SITES_DIR / site / "site.yaml").read_text())
    if caliper is not None:
        choose("Caliper mode", [caliper], list(CALIPER_MODES))
    conf = study_config(str(folder))
    if "package_manager" in conf:   # null: the study's binaries are built by hand, never by Spack
        if spack:
            raise WorkflowError(f"study {study} runs with Ramble's null package manager only "
                                f"({folder / 'commscope.yaml'}): drop --spack")
        spack = False
    unannotated = unannotated_applications(str(folder))
    preloaded = unannotated + preloaded_commscope_applications(str(folder))
    if preloaded and caliper not in (None, "off", "mpi"):
        raise UnknownChoice(f"study {study} runs {', '.join(preloaded)}, which has no Caliper annotations: it is "
                            f"profiled by preloading a no-GOTCHA Caliper, which gives --caliper mpi (or off), "
                            f"not {caliper}")
    prefixes = install_prefixes(study, conf, folder)
    doc = yaml.safe_load((folder / "ramble.yaml").read_text()) or {}
    declared = study_modifiers(doc)
    unused: dict = {}
    rank_variables: set = set()
    if declared or unannotated:   # what Ramble itself knows of them (commscope's applications need neither)
        known = ramble_definitions(unannotated)
        check_modifiers(folder / "ramble.yaml", declared, known["modifiers"])
        missing = [a for a in unannotated if a not in known["applications"]]
        if missing:
            raise UnknownChoice(f"{folder / 'ramble.yaml'}: Ramble knows no application {', '.join(missing)} (neither "
                                f"commscope's, {paths.RAMBLE_DIR / 'applications'}, nor its builtin ones)")
        rank_variables = {v for a in known["applications"].values() for v in a["rank_variables"]}
        if spack is False or (spack is None and spack_root() is None):
            unused = unused_required(study, known["applications"], variables_set(doc) | set(prefixes))
    if spack is None:
        spack = spack_root() is not None
    elif spack and spack_root() is None:
        raise WorkflowError(missing_message("spack", "SPACK_ROOT"))
    specs: dict = {}
    if spack:
        specs = spack_mpi_specs(site, site_conf)
        stacks = choose("stack", stacks, sorted(specs)) if stacks else \
            _study_default(conf.get("stacks"), sorted(specs))
        profiled = {s: (True, "Spack builds every workload +caliper") for s in stacks}
    elif site_conf.get("builds") == "local-builds":
        builds = read_builds()
        valid_stacks = sorted(builds)
        if not valid_stacks:
            raise WorkflowError(f"no workload builds under {builds_dir()}; run `commscope setup` first")
        stacks = choose("stack", stacks, valid_stacks) if stacks else \
            _study_default(conf.get("stacks"), valid_stacks)
        profiled = {s: (True, f"Caliper {builds[s].caliper_dir}") if builds[s].caliper else
                    (False, builds[s].note or "no Caliper was found for this MPI at setup")
                    for s in stacks}
        if preloaded:
            profiled = {s: _preloaded(s, builds[s].caliper_prefix) for s in stacks}
    else:
        offered = list(site_conf.get("stacks") or [])
        stacks = choose("stack", stacks, sorted(offered)) if stacks else \
            _study_default(conf.get("stacks"), sorted(offered))
        profiled = {s: (True, f"the site {site}'s builds") for s in stacks}
    catalog = interconnect_catalog(stacks, site)
    if not interconnects:   # the study's own (those some chosen stack has), else each stack's default
        offered = {x for s in stacks for lab, e in catalog[s].items() for x in (lab, e["name"])}
        interconnects = [i for i in conf.get("interconnects") or [] if i in offered] or ["default"]
    pairs = select_interconnects(stacks, catalog, interconnects)
    if caliper is None:
        caliper = (conf.get("caliper") or "mpi") if any(yes for yes, _why in profiled.values()) else "off"
    ws = workspace or new_workspace(study)
    return Plan(study, site, stacks, sorted({i for _, i in pairs}), caliper, where, dry_run, ws, site_conf,
                catalog, pairs, "spack" if spack else "null", {s: specs[s] for s in stacks} if spack else {},
                prefixes, profiled, preload=bool(preloaded) and caliper != "off", study_dir=folder,
                unused_defaults=unused, rank_variables=rank_variables)


def _preloaded(stack: str, named: Path | None) -> tuple[bool, str]:
    """Whether an unannotated application on STACK can be profiled: the stack's no-GOTCHA Caliper, which
    `commscope setup` builds, or the one its workloads were built with (NAMED) when that is built without GOTCHA."""
    prefix = caliper_builds.preload_prefix(stack_catalog.by_name(stack), named)
    if prefix is None:
        return False, ("no no-GOTCHA Caliper for this MPI; `commscope setup` builds one from the pinned sources, "
                       "or pass --caliper-prefix STACK=PREFIX of a Caliper built with -DWITH_GOTCHA=OFF")
    return True, f"preloading the no-GOTCHA Caliper {prefix}"
