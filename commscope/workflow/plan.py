"""A run's plan, validated before anything is created: the study's own settings (commscope.yaml), the site,
stacks, interconnects, Caliper mode and package manager."""
from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from commscope.workflow import caliper as caliper_builds, paths, stacks as stack_catalog
from commscope.workflow.builds import read_builds
from commscope.workflow.checkouts import missing_message, spack_root
from commscope.workflow.errors import UnknownChoice, WorkflowError, choose
from commscope.workflow.paths import SITES_DIR, builds_dir, sites, workspaces_dir
from commscope.workflow.sites import interconnect_catalog
from commscope.workflow.spack_envs import spack_mpi_specs

# The Caliper modifier's modes (ramble/modifiers/caliper): `counts` is `mpi` plus call counts (region.count),
# which the barrier advisor needs to tell debugging barriers from others.
CALIPER_MODES = ("off", "time", "mpi", "counts", "comm", "matrix")


def _folder(study: str) -> Path:
    """A study's folder: a path as given, or a package study's by name (plan_run has checked either)."""
    return Path(study) if "/" in study else paths.STUDIES_DIR / study


def study_config(study: str) -> dict:
    """What `commscope run` needs for a study besides its ramble.yaml, from the optional `commscope.yaml`
    beside it: `caliper` (its default Caliper mode), `package_manager: null` (a study whose binaries are
    built by hand, e.g. of a Ramble builtin application: Ramble's null package manager only), `prefixes`
    (Ramble variable -> a program: the variable is set to the install prefix of that program found on PATH),
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
        raise WorkflowError(f"{f}: prefixes must map a Ramble variable to a program's name, e.g. "
                            f"intel-mpi-benchmarks_path: IMB-MPI1")
    return conf


def study_caliper_mode(study: str) -> str | None:
    """The Caliper mode a study needs by default, from its `commscope.yaml` (`caliper: MODE`) beside its
    ramble.yaml (the barriers study: `counts`), or None."""
    return study_config(study).get("caliper")


def install_prefixes(study: str, conf: dict) -> dict[str, str]:
    """The study's `prefixes`, each the install prefix of its program found on PATH (the folder above its
    bin/, as Ramble's `<package>_path` is an install prefix: the application runs <prefix>/bin/<program>)."""
    out = {}
    for var, program in (conf.get("prefixes") or {}).items():
        found = shutil.which(program)
        if found is None:
            raise WorkflowError(f"study {study} needs {program} on PATH (commscope run sets {var} to its install "
                                f"prefix): build it, install it as <prefix>/bin/{program} and put <prefix>/bin on PATH")
        prefix = Path(found).absolute().parent.parent
        if not (prefix / "bin" / program).is_file():
            raise WorkflowError(f"study {study}: {found} is not in a bin/ folder, but {var} is an install prefix "
                                f"and Ramble runs <prefix>/bin/{program}; install it as <prefix>/bin/{program} and "
                                f"put <prefix>/bin on PATH")
        out[var] = str(prefix)
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
    prefixes: dict = field(default_factory=dict)     # Ramble variable -> install prefix found on PATH
    profiled: dict = field(default_factory=dict)     # stack -> (records profiles?, why), for what the run says
    preload: bool = False                            # the study's applications have no Caliper: preload one
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
    if unannotated and caliper not in (None, "off", "mpi"):
        raise UnknownChoice(f"study {study} runs {', '.join(unannotated)}, which has no Caliper annotations: it is "
                            f"profiled by preloading a no-GOTCHA Caliper, which gives --caliper mpi (or off), "
                            f"not {caliper}")
    prefixes = install_prefixes(study, conf)
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
        if unannotated:
            profiled = {s: _preloaded(s) for s in stacks}
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
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    ws = workspace or workspaces_dir() / f"{study}-{stamp}"
    return Plan(study, site, stacks, sorted({i for _, i in pairs}), caliper, where, dry_run, ws, site_conf,
                catalog, pairs, "spack" if spack else "null", {s: specs[s] for s in stacks} if spack else {},
                prefixes, profiled, preload=bool(unannotated) and caliper != "off", study_dir=folder)


def _preloaded(stack: str) -> tuple[bool, str]:
    """Whether an unannotated application on STACK can be profiled: the stack's no-GOTCHA Caliper, which
    `commscope setup` builds."""
    prefix = caliper_builds.installed(stack_catalog.by_name(stack), "preload")
    if prefix is None:
        return False, "no no-GOTCHA Caliper for this MPI; `commscope setup` builds one from the pinned sources"
    return True, f"preloading the no-GOTCHA Caliper {prefix}"
