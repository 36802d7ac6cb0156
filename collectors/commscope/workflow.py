"""`commscope setup` and `commscope run`: the main job through Ramble.

setup puts the pieces in place: Ramble (and Spack) checkouts, the Python packages Ramble
needs, one build of the workloads per MPI stack found (with Caliper when CMake finds it),
and the `local` site's generated files under $COMMSCOPE_HOME/sites/local.

run renders a study (ramble/studies/<study>/ramble.yaml) into a new workspace under
$COMMSCOPE_HOME/workspaces/, with the site folder and a per-run scope included, then
`ramble workspace setup`, `ramble on`, `ramble workspace analyze -f json`, and ingests the
workspace into the store. Data flows one way: study + site -> workspace -> results -> DB.

Two package managers. `null` (--no-spack, and the default when Spack is absent): Ramble
runs the builds `commscope setup` made. `spack` (the default when Spack is present): each
stack gets spack.yaml narrowed to that stack's MPI, which Ramble's spack package manager
copies into the workspace (an external environment), concretizes, installs and activates
for every experiment of that stack.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click
import yaml

from . import db

# What the commands read at run time: studies, Ramble applications, modifier and sites, workload sources, stack
# and interconnect catalogs, the Spack package. In a checkout share/ links to the repository's folders; a wheel
# carries copies (pyproject.toml), so `commscope setup` and `run` work from any directory.
ROOT = Path(__file__).resolve().parent / "share"
# The git checkout this package runs from, if any: its commit is the runs' git_commit.
_ABOVE_PACKAGE = Path(__file__).resolve().parents[2]
CHECKOUT = _ABOVE_PACKAGE if (_ABOVE_PACKAGE / ".git").exists() else None
# Resolved: the paths written into workspaces and Spack environments are the repository's own in a checkout.
RAMBLE_DIR = (ROOT / "ramble").resolve()
STUDIES_DIR = RAMBLE_DIR / "studies"
SITES_DIR = RAMBLE_DIR / "sites"
CI_DIR = (ROOT / "ci").resolve()
VERSIONS = (ROOT / "versions.yaml").resolve()
# The Caliper modifier's modes (ramble/modifiers/caliper): `counts` is `mpi` plus call counts (region.count),
# which the barrier advisor needs to tell debugging barriers from others.
CALIPER_MODES = ("off", "time", "mpi", "counts", "comm", "matrix")
SLURM_WAIT_LIMIT = 6 * 3600  # seconds; a queue that never drains is reported, not waited on forever


class WorkflowError(RuntimeError):
    """A problem with a message meant for the user; the command exits with exit_code."""
    exit_code = 1


class UnknownChoice(WorkflowError):
    """A study, site, stack, interconnect or mode the user named that does not exist: a usage error."""
    exit_code = 2


# ---- where things are --------------------------------------------------------------

def studies() -> list[str]:
    return sorted(p.parent.name for p in STUDIES_DIR.glob("*/ramble.yaml"))


def sites() -> list[str]:
    return sorted(p.parent.name for p in SITES_DIR.glob("*/site.yaml"))


def study_config(study: str) -> dict:
    """What `commscope run` needs for a study besides its ramble.yaml, from the optional `commscope.yaml`
    beside it: `caliper` (its default Caliper mode), `package_manager: null` (a study whose binaries are
    built by hand, e.g. of a Ramble builtin application: Ramble's null package manager only), `prefixes`
    (Ramble variable -> a program: the variable is set to the install prefix of that program found on PATH),
    and `stacks` and `interconnects`, what the study runs on when the run names none (those of them the site
    has): a study too long for every stack, such as `reference`, names the ones it needs."""
    f = STUDIES_DIR / study / "commscope.yaml"
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


def local_site_dir() -> Path:
    """The generated part of the `local` site (absolute paths, detected hardware). Its folder
    name differs from the committed sites/local: Ramble names a directory scope by its basename."""
    return db.home() / "sites" / "local-generated"


def builds_dir() -> Path:
    return db.home() / "builds"


def workspaces_dir() -> Path:
    return db.home() / "workspaces"


def versions() -> dict:
    return yaml.safe_load(VERSIONS.read_text())


def _ci(module: str):
    """A module from ci/ (stdlib-only catalogs shared with CI)."""
    if str(CI_DIR) not in sys.path:
        sys.path.insert(0, str(CI_DIR))
    return __import__(module)


def git_commit() -> str:
    """The commit of the checkout commscope runs from ("-dirty" with uncommitted changes); "unknown" when
    installed from a wheel (not the commit of whatever repository a venv happens to sit in)."""
    if CHECKOUT is None:
        return "unknown"
    p = subprocess.run(["git", "-C", str(CHECKOUT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if p.returncode:
        return "unknown"
    dirty = subprocess.run(["git", "-C", str(CHECKOUT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return p.stdout.strip() + ("-dirty" if dirty else "")


# ---- Ramble and Spack checkouts -----------------------------------------------------

def _checkout(tool: str, env_var: str) -> Path | None:
    """$ENV_VAR if set, else the clone setup made under $COMMSCOPE_HOME/cache; None unless
    it holds bin/<tool>."""
    if env_var in os.environ:
        root = Path(os.environ[env_var]).resolve() if os.environ[env_var] else None
    else:
        root = db.home() / "cache" / tool
    return root if root and (root / "bin" / tool).exists() else None


def ramble_root() -> Path | None:
    return _checkout("ramble", "RAMBLE_ROOT")


def spack_root() -> Path | None:
    return _checkout("spack", "SPACK_ROOT")


def _missing_msg(tool: str, env_var: str) -> str:
    v = versions()[tool]
    ref = v.get("tag") or v.get("branch")
    return (f"{tool} is missing: set {env_var} to a checkout of {v['url']} at {ref} "
            f"(commit {v['commit']}, see versions.yaml). An offline site copies that checkout in "
            f"and points {env_var} at it; on a connected machine `commscope setup` clones it into "
            f"{db.home() / 'cache' / tool}.")


def ramble_cmd() -> list[str]:
    root = ramble_root()
    if root is None:
        raise WorkflowError(_missing_msg("ramble", "RAMBLE_ROOT"))
    # This venv's Python: it has tqdm and deprecation (setup installs them).
    return [sys.executable, str(root / "bin" / "ramble")]


def _clone(tool: str, dest: Path) -> bool:
    """Clones the pinned version; False when the machine cannot reach it."""
    v = versions()[tool]
    ref = v.get("tag") or v.get("branch")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        p = subprocess.run(["git", "clone", "--quiet", "--branch", ref, v["url"], str(dest)],
                           capture_output=True, text=True, timeout=1800, env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
    except subprocess.TimeoutExpired:
        p = subprocess.CompletedProcess([], 1)
    if p.returncode:
        shutil.rmtree(dest, ignore_errors=True)
        return False
    subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", v["commit"]], check=True)
    return True


# ---- stacks, builds and interconnects ------------------------------------------------

@dataclass
class Build:
    stack: str
    path: Path
    caliper: bool
    caliper_dir: str = ""
    note: str = ""


def read_builds() -> dict[str, Build]:
    out = {}
    for f in sorted(builds_dir().glob("*/commscope-build.json")):
        d = json.loads(f.read_text())
        out[d["stack"]] = Build(d["stack"], Path(d["path"]), d["caliper"], d.get("caliper_dir", ""), d.get("note", ""))
    return out


def _mpi_libraries(binary: Path) -> set[str]:
    """The MPI libraries a binary loads, by soname family."""
    p = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    fams = set()
    for line in p.stdout.splitlines():
        name = line.strip().split(" ", 1)[0]
        if name.startswith("libmpi.so"):
            fams.add("openmpi" if ".so.40" in name else "mpich-abi-or-impi")
        elif name.startswith(("libmpich.so", "libmpichcxx")):
            fams.add("mpich")
    return fams


def build_stack(stack, caliper_prefix: str | None = None, log=print) -> Build:
    """Builds the workloads once for one stack under $COMMSCOPE_HOME/builds/<stack>, with
    Caliper when CMake finds it. A Caliper built against another MPI would load two MPI
    libraries into one process, so such a build is redone without Caliper."""
    suite = _ci("suite")
    bdir = builds_dir() / stack.name
    extra = []
    if caliper_prefix:
        extra.append(f"-DCMAKE_PREFIX_PATH={caliper_prefix.replace(':', ';')}")
    # Where CMake may find Caliper this time. A build directory configured with another answer keeps its cached
    # caliper_DIR, so it is started afresh rather than reused.
    request = caliper_prefix or os.environ.get("CMAKE_PREFIX_PATH", "")
    made = bdir / "commscope-build.json"
    if bdir.exists() and (not made.exists() or json.loads(made.read_text()).get("caliper_request") != request):
        log(f"[setup] {stack.name}: the Caliper search changed since {bdir} was configured; building afresh")
        shutil.rmtree(bdir)
    try:
        suite.build(stack, caliper="AUTO", build_dir=bdir, extra=extra)
    except RuntimeError as e:
        with_caliper = bdir.exists() and "COMMSCOPE_HAVE_CALIPER" in _defines(bdir)
        if not with_caliper:
            raise
        # A Caliper linked against another MPI of the same soname (Debian Open MPI 4.1 and the PyPI Open MPI 5
        # share libmpi.so.40) fails at link time rather than loading two libraries.
        return _without_caliper(stack, bdir, f"building with Caliper failed ({str(e).splitlines()[0][:160]}...; "
                                f"a Caliper built against another MPI?)", request)
    cache = (bdir / "CMakeCache.txt").read_text(errors="replace")
    m = re.search(r"^caliper_DIR:PATH=(.*)$", cache, re.M)
    caliper_dir = m.group(1) if m and not m.group(1).endswith("NOTFOUND") else ""
    with_cali = bool(caliper_dir) and "COMMSCOPE_HAVE_CALIPER" in _defines(bdir)
    if with_cali and len(_mpi_libraries(bdir / "halo3d")) > 1:
        return _without_caliper(stack, bdir, f"Caliper at {caliper_dir} was built against another MPI", request)
    return _record_build(stack, bdir, with_cali, caliper_dir, "", request)


def _without_caliper(stack, bdir: Path, why: str, request: str) -> Build:
    """The stack's workloads built afresh without Caliper, saying WHY and what to pass instead."""
    shutil.rmtree(bdir)
    _ci("suite").build(stack, caliper="OFF", build_dir=bdir)
    note = (f"{why}; built without Caliper. Pass --caliper-prefix {stack.name}=<prefix of a Caliper built with "
            f"{stack.name}>")
    return _record_build(stack, bdir, False, "", note, request)


def _record_build(stack, bdir: Path, with_cali: bool, caliper_dir: str, note: str, request: str) -> Build:
    b = Build(stack.name, bdir, with_cali, caliper_dir, note)
    (bdir / "commscope-build.json").write_text(json.dumps(
        {"stack": b.stack, "path": str(b.path), "caliper": b.caliper, "caliper_dir": b.caliper_dir,
         "note": b.note, "mpicc": stack.mpicc, "git_commit": git_commit(), "caliper_request": request},
        indent=2) + "\n")
    return b


def caliper_profile_config(caliper_dir: str) -> str:
    """runtime-profile from Caliper 2.13 on; 2.12 and older only know its old name."""
    query = Path(caliper_dir).parents[2] / "bin" / "cali-query" if caliper_dir else None
    if query and query.exists():
        p = subprocess.run([str(query), "--help", "configs"], capture_output=True, text=True)
        if "runtime-profile" not in p.stdout + p.stderr:
            return "hatchet-region-profile"
    return "runtime-profile"


def _defines(bdir: Path) -> str:
    """The compile definitions CMake generated (flags.make of the common library)."""
    return "\n".join(f.read_text(errors="replace") for f in bdir.rglob("flags.make"))


def interconnect_catalog(stack_names: list[str], site: str | None = None) -> dict[str, dict[str, dict]]:
    """Per stack, its transport selections by label: {stack: {label: {"name", "env"}}}.

    From ci/interconnects.py (built-in entries plus the site's interconnects.yaml). Every
    selection there is environment only, so it works under mpirun and srun alike. Every stack
    also has `default`: the stack's own choice, no settings."""
    ms = _ci("mpi_stacks")
    try:
        ic = _ci("interconnects")
    except ImportError:
        ic = None
    prefix = getattr(ic, "STACK_PREFIX", {})
    cat: dict[str, dict[str, dict]] = {}
    for s in stack_names:
        cat[s] = {"default": {"name": f"{prefix.get(s, s)}/default", "env": {}}}
        if ic is None:
            continue
        has_site = site in ic.sites() if hasattr(ic, "sites") else False
        for e in ic.entries(s, site if has_site else None):
            cat[s][e.label] = {"name": e.name, "env": dict(e.env)}
    return cat


def _env_words(env: dict) -> str:
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
    ms = _ci("mpi_stacks")
    srun_mpi = _ci("slurm_local").SRUN_MPI   # the PMI srun needs per family, as proven by tests/test_slurm.py
    d = local_site_dir()
    d.mkdir(parents=True, exist_ok=True)
    vars_: dict = {}
    # How to launch every stack installed here (a Spack build of it needs that too); where
    # its binaries are only for the stacks built.
    for s in [s for s in ms.catalog() if s.present() or s.name in builds]:
        name = s.name
        vars_[f"mpirun_{name}"] = " ".join([s.mpirun, *s.oversubscribe])
        vars_[f"stack_env_{name}"] = _env_words(s.env)
        vars_[f"family_{name}"] = s.family   # openmpi | mpich | impi: studies key runtime controls on it
        vars_[f"srun_mpi_{name}"] = srun_mpi[s.family]
        if name in builds:
            b = builds[name]
            vars_[f"bin_{name}"] = str(b.path)
            vars_[f"caliper_{name}"] = "yes" if b.caliper else "no"
            vars_[f"caliper_config_{name}"] = caliper_profile_config(b.caliper_dir)
    header = "# Generated by `commscope setup` from ci/mpi_stacks.py and the builds it made. Do not edit.\n"
    (d / "variables.yaml").write_text(header + yaml.safe_dump({"variables": vars_}, sort_keys=True, width=1000))
    (d / "hardware.yaml").write_text("# Detected by `commscope setup`.\n"
                                     + yaml.safe_dump(detect_hardware("local"), sort_keys=False))
    return d


# ---- setup ---------------------------------------------------------------------------

def _pip_install(pkgs: list[str]) -> None:
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *pkgs],
                       capture_output=True, text=True)
    if p.returncode:
        raise WorkflowError(f"pip install {' '.join(pkgs)} into {sys.prefix} failed:\n{p.stderr[-2000:]}")


# What Ramble (and Spack) need in the Python that runs them, pinned.
RAMBLE_PIP = ["tqdm==4.67.1", "deprecation==2.1.0"]
SPACK_PIP = ["clingo==5.8.3"]  # the version Spack v1.1.0 was run with here


def setup(stacks: list[str] | None = None, caliper_prefixes: dict | None = None, build: bool = True,
          log=print, source_mirror: Path | None = None) -> dict:
    """Returns {"ramble": path|None, "spack": path|None, "builds": {...}, "missing": [msgs]}."""
    missing = []
    got = {}
    for tool, env_var in (("ramble", "RAMBLE_ROOT"), ("spack", "SPACK_ROOT")):
        root = _checkout(tool, env_var)
        if root is None and env_var not in os.environ:   # set means "use this one": never clone over it
            dest = db.home() / "cache" / tool
            log(f"[setup] {tool}: {env_var} not set; cloning the pinned version into {dest}")
            if _clone(tool, dest):
                root = dest
                if tool == "spack":
                    _clone("spack-packages", db.home() / "cache" / "spack-packages")
        if root is None:
            missing.append(_missing_msg(tool, env_var))
            log(f"[setup] {tool}: MISSING")
        else:
            log(f"[setup] {tool}: {root}")
        got[tool] = root
    log(f"[setup] pip install {' '.join(RAMBLE_PIP + (SPACK_PIP if got['spack'] else []))} into {sys.prefix}")
    _pip_install(RAMBLE_PIP + (SPACK_PIP if got["spack"] else []))

    ms = _ci("mpi_stacks")
    wanted = [ms.by_name(n) for n in stacks] if stacks else [s for s in ms.catalog() if s.present()]
    absent = [s.name for s in wanted if not s.present()]
    if absent:
        raise WorkflowError(f"MPI stacks not installed: {', '.join(absent)} (bash ci/setup.sh installs them)")
    builds = read_builds()
    failed: dict[str, str] = {}
    if build:
        prefixes = caliper_prefixes or {}
        for s in wanted:
            t0 = time.monotonic()
            try:
                b = build_stack(s, prefixes.get(s.name), log)
            except RuntimeError as e:   # one stack's failure never stops the others
                failed[s.name] = str(e)
                log(f"[setup] skipped {s.name}: its build failed: {str(e).splitlines()[0]}")
                builds.pop(s.name, None)
                continue
            builds[s.name] = b
            log(f"[setup] built {s.name} in {time.monotonic() - t0:.0f} s -> {b.path} "
                f"({'with Caliper ' + b.caliper_dir if b.caliper else 'without Caliper'})")
            if b.note:
                log(f"[setup]   {b.note}")
    d = write_local_site(builds)
    log(f"[setup] local site: {d}")
    spack_scope = _spack_externals(source_mirror)
    log(f"[setup] local site's Spack externals: {spack_scope}")
    if failed:
        raise WorkflowError("the builds of " + ", ".join(failed) + " failed (the other stacks were built and the "
                            "local site written):\n" + "\n".join(f"{k}: {v[-1500:]}" for k, v in failed.items()))
    return {"ramble": got["ramble"], "spack": got["spack"], "builds": builds, "missing": missing}


def _spack_externals(source_mirror: Path | None = None) -> Path:
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


# ---- run -----------------------------------------------------------------------------

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


def _choose(kind: str, asked: list[str], valid: list[str]) -> list[str]:
    bad = [a for a in asked if a not in valid]
    if bad:
        raise UnknownChoice(f"unknown {kind} {', '.join(map(repr, bad))}; valid: {', '.join(valid) or '(none)'}")
    return asked


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


def plan_run(study: str, site: str = "local", stacks: list[str] | None = None,
             interconnects: list[str] | None = None, caliper: str | None = None,
             where: str | None = None, dry_run: bool = False, workspace: Path | None = None,
             spack: bool | None = None) -> Plan:
    """Validates every choice before anything is created. spack: True/False picks Ramble's
    spack/null package manager; None picks spack when a Spack checkout is there."""
    _choose("study", [study], studies())
    _choose("site", [site], sites())
    site_conf = yaml.safe_load((SITES_DIR / site / "site.yaml").read_text())
    if caliper is not None:
        _choose("Caliper mode", [caliper], list(CALIPER_MODES))
    conf = study_config(study)
    if "package_manager" in conf:   # null: the study's binaries are built by hand, never by Spack
        if spack:
            raise WorkflowError(f"study {study} runs with Ramble's null package manager only "
                                f"({STUDIES_DIR / study / 'commscope.yaml'}): drop --spack")
        spack = False
    prefixes = install_prefixes(study, conf)
    if spack is None:
        spack = spack_root() is not None
    elif spack and spack_root() is None:
        raise WorkflowError(_missing_msg("spack", "SPACK_ROOT"))
    specs: dict = {}
    if spack:
        specs = spack_mpi_specs(site, site_conf)
        stacks = _choose("stack", stacks, sorted(specs)) if stacks else \
            _study_default(conf.get("stacks"), sorted(specs))
        profiled = {s: (True, "Spack builds every workload +caliper") for s in stacks}
    elif site_conf.get("builds") == "local-builds":
        builds = read_builds()
        valid_stacks = sorted(builds)
        if not valid_stacks:
            raise WorkflowError(f"no workload builds under {builds_dir()}; run `commscope setup` first")
        stacks = _choose("stack", stacks, valid_stacks) if stacks else \
            _study_default(conf.get("stacks"), valid_stacks)
        profiled = {s: (True, f"Caliper {builds[s].caliper_dir}") if builds[s].caliper else
                    (False, builds[s].note or "no Caliper was found for this MPI at setup")
                    for s in stacks}
    else:
        offered = list(site_conf.get("stacks") or [])
        stacks = _choose("stack", stacks, sorted(offered)) if stacks else \
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
                prefixes, profiled)


# ---- Ramble's spack package manager --------------------------------------------------

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
    _choose("site", [site], sites())
    root = spack_root()
    if root is None:
        raise WorkflowError(_missing_msg("spack", "SPACK_ROOT"))
    site_conf = yaml.safe_load((SITES_DIR / site / "site.yaml").read_text())
    specs = spack_mpi_specs(site, site_conf)
    stacks = _choose("stack", stacks, sorted(specs)) if stacks else sorted(specs)
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


def render(plan: Plan) -> dict:
    """The study's ramble.yaml with the site, the run scope and the Caliper modifier added."""
    cfg = yaml.safe_load((STUDIES_DIR / plan.study / "ramble.yaml").read_text())
    r = cfg["ramble"]
    run_scope = plan.workspace / "commscope" / "run-scope"
    # Ramble: earlier includes take precedence; the run scope overrides the site.
    r["include"] = [str(run_scope)] + [str(d) for d in site_scopes(plan)]
    r["repos"] = [str(RAMBLE_DIR)]
    if plan.caliper != "off":
        r["modifiers"] = list(r.get("modifiers") or []) + [{"name": "caliper", "mode": plan.caliper}]
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
    where and how the study ran (stack, launcher, provenance), never what. A Ramble application's other
    variables are its parameters (collectors/commscope/ramble.py); these are not."""
    names = set(run_scope["variables.yaml"]["variables"])
    for d in site_scopes(plan):
        f = d / "variables.yaml"
        if f.is_file():
            names |= set((yaml.safe_load(f.read_text()) or {}).get("variables") or {})

    def set_by_study(node) -> set:
        if isinstance(node, dict):
            own = set(node["variables"]) if isinstance(node.get("variables"), dict) else set()
            return own.union(*(set_by_study(v) for v in node.values()))
        return set()
    return sorted(names - set_by_study(yaml.safe_load((STUDIES_DIR / plan.study / "ramble.yaml").read_text())))


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
        "caliper_setting": plan.caliper,
        **plan.prefixes,                  # the study's programs found on PATH (study_config)
    }
    for s, i in plan.pairs:
        e = plan.catalog[s][i]
        v[f"ic_name_{s}_{i}"] = e["name"]
        v[f"ic_env_{s}_{i}"] = _env_words(e["env"])
    if plan.package_manager == "spack":
        # The stack's Spack environment replaces the builds of `commscope setup`: its view's bin
        # goes first on PATH (the sites prepend bin_<stack>), with the Caliper that Spack built.
        v["env_name"] = spack_env_name("{stack}")
        for s in plan.stacks:
            v[f"bin_{s}"] = "{env_path}/.spack-env/view/bin"
            v[f"caliper_{s}"] = "yes"
            v[f"caliper_config_{s}"] = spack_caliper_config()
    return {"variables.yaml": {"variables": v},
            "zips.yaml": {"zips": {"stack_interconnect": ["stack", "interconnect"]}},
            "modifier_repos.yaml": {"modifier_repos": [str(RAMBLE_DIR)]},
            # the applications' shared output contract (ramble/base_applications/commscope-workload)
            "base_application_repos.yaml": {"base_application_repos": [str(RAMBLE_DIR)]}}


def ramble_env() -> dict:
    """Ramble's environment: the repository root for the studies, COMMSCOPE_HOME for the local
    site's Spack scope (include.yaml names it), and Spack's bin on PATH for its package manager."""
    env = dict(os.environ, COMMSCOPE_ROOT=str(ROOT), COMMSCOPE_HOME=str(db.home()))
    root = spack_root()
    if root is not None:
        env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _ramble(ws: Path, *args: str, log_to: Path | None = None, where: str | None = None) -> subprocess.CompletedProcess:
    cmd = [*ramble_cmd(), "-P", "-D", str(ws), *args]
    if where:
        cmd += ["--where", where]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ramble_env())
    if log_to:
        with log_to.open("a") as f:
            f.write(f"$ {shlex.join(cmd)}\n{p.stdout}{p.stderr}\n")
    if p.returncode:
        raise WorkflowError(f"{shlex.join(cmd)} failed (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
    return p


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
    for tpl in [RAMBLE_DIR / "execute_experiment.tpl", *(SITES_DIR / plan.site).glob("*.tpl")]:
        shutil.copy(tpl, ws / "configs" / tpl.name)
    # What the collectors read besides Ramble's results: the site's hardware and the run's provenance.
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
        shown = -1
        while p.poll() is None:
            done = sum(1 for d in dirs if (d / f"{d.name}.out").exists())
            if done != shown and plan.site_conf.get("scheduler") != "slurm":
                echo(f"  running: {done}/{len(dirs)} experiments started")
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
            echo(f"  Slurm: {total - len(left)}/{total} jobs done")
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


def run(plan: Plan, echo=click.echo, ingest: bool = True) -> Path:
    t0 = time.monotonic()
    ws = create_workspace(plan)
    log = ws / "commscope" / "run.log"
    echo(f"workspace: {ws}")
    echo(f"study {plan.study} on site {plan.site}: stacks {', '.join(plan.stacks)}; interconnects "
         f"{', '.join(plan.interconnects)}; Caliper {plan.caliper}; package manager {plan.package_manager}")
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
    echo(f"results: {ws / 'results.latest.json'}")
    echo(f"experiment logs and profiles: {ws / 'experiments'}")
    echo(f"ramble log: {log}")
    # Everything is on disk and said; the exit status still tells CI that the job did not succeed.
    if status.get("FAILED") or not stored:
        raise WorkflowError(f"{len(status.get('FAILED', []))} experiments FAILED" if status.get("FAILED")
                            else f"the results were not stored; retry with: commscope ingest {ws}")
    return ws


def say_profiles(plan: Plan, dirs: list[Path], echo) -> None:
    """Per stack, whether its experiments will record Caliper profiles and why, and how many experiments will
    carry none: a Caliper mode applies only to the stacks whose builds have Caliper."""
    if plan.caliper == "off":
        echo("  profiles: none (Caliper off)")
        return
    for s in plan.stacks:
        yes, why = plan.profiled.get(s, (True, ""))
        echo(f"  profiles on {s}: {'Caliper ' + plan.caliper if yes else 'none'} ({why})")
    bare = [s for s in plan.stacks if not plan.profiled.get(s, (True, ""))[0]]
    unprofiled = [d for d in dirs if any(f"-{s}-" in d.name for s in bare)]
    if unprofiled:
        echo(f"  {len(unprofiled)} of {len(dirs)} experiments will carry no profile (stacks "
             f"{', '.join(bare)} were built without Caliper; `commscope setup --caliper-prefix STACK=PREFIX`)")


def ensure_store(echo=click.echo) -> None:
    """The store a run ingests into, ready before its experiments run: a server named by COMMSCOPE_DB_URL or
    PG* must answer; without one, the embedded store is started and migrated as `commscope db start` does.
    A run used to find out only after its experiments that nothing could store them."""
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
    """The workspace into the store, as `commscope ingest <workspace>` does, then its report."""
    from .ingest import Provenance, ingest
    prov = Provenance(system=plan.site, stack=None, interconnect=None, git_commit=git_commit(), ci_pipeline=None)
    try:
        with db.connect() as conn:
            res = ingest(conn, [ws], prov)
    except Exception as e:  # the results stay on disk; say how to retry
        echo(f"  ingest failed: {e}\n  the workspace is intact; retry with: commscope ingest {ws}")
        return False
    campaign = res.campaign_id   # this ingest's campaign (or the one its runs were already stored in)
    echo(f"  stored {len(res.inserted)} runs, {len(res.skipped)} already stored"
         + (f", campaign {campaign}" if campaign else ""))
    if res.inserted and campaign is not None:   # as `commscope ingest` does
        from . import changepoints
        changepoints.refresh_after_ingest(campaign, lambda m: echo(f"  {m}"))
    cmd = [sys.executable, "-m", "commscope.cli", "report", "-o", str(ws / "report.html")]
    cmd += ["--campaign", str(campaign)] if campaign else []
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 0:
        echo(f"report: {ws / 'report.html'}")
    else:
        echo(f"  no report ({(p.stderr.strip().splitlines() or ['?'])[-1]}); make it with: {shlex.join(cmd[2:])}")
    return True


# ---- commands ------------------------------------------------------------------------

def _split(s: str | None) -> list[str] | None:
    return [x for x in s.split(",") if x] if s else None


def _fail(msg: str, code: int = 2):
    click.echo(f"commscope: error: {msg}", err=True)
    sys.exit(code)


@click.command("setup")
@click.option("--stacks", help="comma-separated MPI stacks to build (default: every one installed)")
@click.option("--caliper-prefix", "caliper_prefixes", multiple=True, metavar="STACK=PREFIX",
              help="Caliper+Adiak install(s) built with STACK (':'-separated); else CMake's own search")
@click.option("--no-build", is_flag=True, help="only write the local site from existing builds")
@click.option("--spack-source-mirror", type=click.Path(path_type=Path), default=None,
              help="a Spack source mirror with Caliper and Adiak, for offline sites (packages/README.md)")
@click.option("--spack-install", "spack_install_site", metavar="SITE", default=None,
              help="also install spack.yaml per stack of SITE with Spack, as `commscope run --spack` will use it")
def setup_cmd(stacks, caliper_prefixes, no_build, spack_source_mirror, spack_install_site):
    """Put Ramble/Spack in place, build the workloads per MPI stack, generate the local site."""
    prefixes = {}
    for cp in caliper_prefixes:
        stack, sep, prefix = cp.partition("=")
        if not sep or not prefix:
            _fail(f"--caliper-prefix {cp!r}: expected STACK=PREFIX")
        prefixes[stack] = prefix
    try:
        res = setup(_split(stacks), prefixes, build=not no_build, log=click.echo, source_mirror=spack_source_mirror)
    except (WorkflowError, KeyError) as e:
        _fail(str(e).strip('"'), 1)
    for m in res["missing"]:
        click.echo(f"missing: {m}", err=True)
    if spack_install_site:
        try:
            spack_install(spack_install_site, _split(stacks), log=click.echo)
        except WorkflowError as e:
            _fail(str(e), e.exit_code)
    if res["ramble"] is None:
        sys.exit(1)


@click.command("run")
@click.argument("study")
@click.option("--site", default="local", show_default=True, help="a folder of ramble/sites/")
@click.option("--stacks", help="comma-separated MPI stacks (default: the study's own in its commscope.yaml, else "
                                "every stack the site has)")
@click.option("--interconnects", help="comma-separated interconnect selections (default: the study's own, else "
                                      "default)")
@click.option("--where", help="Ramble filter on experiments, e.g. '{n_ranks} == 2'")
@click.option("--caliper", type=click.Choice(CALIPER_MODES), default=None,
              help="Caliper modifier mode; counts is mpi plus call counts (default: the study's own, counts for "
                   "barriers, else mpi, when the workloads were built with Caliper)")
@click.option("--spack/--no-spack", "spack", default=None,
              help="Ramble's spack package manager, building spack.yaml per stack (the default when Spack is "
                   "there), or its null one with the builds of `commscope setup` (the default without Spack)")
@click.option("--dry-run", is_flag=True, help="render the workspace and its scripts without running them")
@click.option("--no-ingest", is_flag=True, help="leave the results on disk only")
def run_cmd(study, site, stacks, interconnects, where, caliper, spack, dry_run, no_ingest):
    """Run a study: Ramble workspace setup, on, analyze, then ingest into the store."""
    try:
        plan = plan_run(study, site, _split(stacks), _split(interconnects), caliper, where, dry_run, spack=spack)
        run(plan, ingest=not no_ingest)
    except WorkflowError as e:
        _fail(str(e), e.exit_code)
