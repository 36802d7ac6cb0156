"""Reads ramble/ without Ramble: the application and modifier definitions, the studies, the sites.

Ramble is in no package registry, so CI cannot import it. An application.py is a class made
only of directives, so running it against recording stand-ins for `ramble.appkit` /
`ramble.modkit` gives exactly what Ramble would register: executables, workload variables,
figures of merit and success criteria.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import os
import re
import sys
import types
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
RAMBLE = ROOT / "ramble"

# Variables Ramble itself defines for every experiment (the ones our files use).
RAMBLE_BUILTINS = {"n_ranks", "n_nodes", "processes_per_node", "n_threads", "experiment_run_dir",
                   "experiment_name", "experiment_namespace", "application_name", "workload_name",
                   "log_file", "execute_experiment", "command", "workspace_name", "log_dir", "slurm_experiment"}
# Variables `commscope run` writes into the run scope (workflow.run_scope_files).
RUN_SCOPE = {"stack", "interconnect", "commscope_git_commit", "commscope_study", "commscope_site",
             "commscope_root", "experiment_timeout"}
RUN_ZIPS = {"stack_interconnect"}
# Ramble's builtin applications a study uses (no application.py under ramble/applications): read from
# $RAMBLE_ROOT/var/ramble/repos/builtin when RAMBLE_ROOT is set.
RAMBLE_BUILTIN_APPS = {"intel-mpi-benchmarks"}


@dataclass
class Definition:
    name: str = ""
    executables: dict = field(default_factory=dict)     # name -> template
    workloads: dict = field(default_factory=dict)       # name -> [executables]
    variables: dict = field(default_factory=dict)       # name -> {"default":..., "values": [...]}
    foms: list = field(default_factory=list)            # (name, regex, group, units)
    criteria: dict = field(default_factory=dict)        # name -> kwargs
    modes: list = field(default_factory=list)
    env_mods: list = field(default_factory=list)        # (name, value, method, modes)
    modifier_variables: dict = field(default_factory=dict)


def _kit(defn: Definition) -> types.ModuleType:
    kit = types.ModuleType("kit")

    class _Base:
        pass

    class _Capture:
        ALL = "all"
        STDOUT = "stdout"
        STDERR = "stderr"

    def executable(name, template, **kw):
        defn.executables[name] = template

    def workload(name, executable=None, executables=None, **kw):
        defn.workloads[name] = [executable] if executable else list(executables or [])

    def workload_variable(name, default, description, values=None, workloads=None, **kw):
        defn.variables[name] = {"default": default, "values": values, "description": description}

    def figure_of_merit(name, fom_regex, group_name, units="", **kw):
        defn.foms.append((name, fom_regex, group_name, units))

    def success_criteria(name, mode, **kw):
        defn.criteria[name] = dict(kw, mode=mode)

    def mode(name, description, **kw):
        defn.modes.append(name)

    def env_var_modification(name, modification=None, method="set", mode=None, modes=None, **kw):
        defn.env_mods.append((name, modification, method, modes or [mode]))

    def modifier_variable(name, default, description, mode=None, modes=None, **kw):
        for m in modes or [mode]:
            defn.modifier_variables.setdefault(m, {})[name] = default

    def _noop(*a, **kw):
        return None

    kit.ExecutableApplication = kit.BasicModifier = _Base
    kit.OUTPUT_CAPTURE = _Capture
    for f in (executable, workload, workload_variable, figure_of_merit, success_criteria, mode,
              env_var_modification, modifier_variable):
        setattr(kit, f.__name__, f)
    for name in ("tags", "maintainers", "default_mode", "archive_pattern", "variable_modification",
                 "figure_of_merit_context", "register_builtin", "software_spec", "required_package",
                 "define_compiler", "workload_group"):
        setattr(kit, name, _noop)
    kit.__all__ = [n for n in dir(kit) if not n.startswith("_")]
    return kit


class _BaseApplications(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`from ramble.base_app.commscope.<name> import ...`: ramble/base_applications/<name>/base_application.py,
    run against the same recording stand-ins, so the directives a base class makes count for its application
    (as Ramble's directives are inherited)."""

    PREFIX = "ramble.base_app.commscope."

    def find_spec(self, fullname, path=None, target=None):
        if fullname in ("ramble.base_app", "ramble.base_app.commscope"):
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        if fullname.startswith(self.PREFIX):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__.startswith(self.PREFIX):
            name = module.__name__[len(self.PREFIX):]
            f = next(p for p in (RAMBLE / "base_applications" / name.replace("_", "-"),
                                 RAMBLE / "base_applications" / name) if p.is_dir()) / "base_application.py"
            exec(compile(f.read_text(), str(f), "exec"), module.__dict__)


def load(path: Path) -> Definition:
    """Runs one application.py or modifier.py against recording stand-ins."""
    defn = Definition()
    kit = _kit(defn)
    names = ("ramble", "ramble.appkit", "ramble.modkit", "ramble.expander")
    saved = {k: sys.modules.get(k) for k in names}
    pkg = types.ModuleType("ramble")
    pkg.__path__ = []
    expander = types.ModuleType("ramble.expander")   # Ramble's builtin applications name their log file with it
    expander.Expander = type("Expander", (), {"expansion_str": staticmethod(lambda name: "{" + name + "}")})
    sys.modules.update({"ramble": pkg, "ramble.appkit": kit, "ramble.modkit": kit, "ramble.expander": expander})
    finder = _BaseApplications()
    sys.meta_path.insert(0, finder)
    try:
        ns: dict = {"__name__": f"ramble_static_{path.parent.name}"}
        exec(compile(path.read_text(), str(path), "exec"), ns)
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if k.startswith("ramble.base_app")]:
            del sys.modules[k]   # run again for the next application, which records into its own Definition
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    classes = [v for v in ns.values() if isinstance(v, type) and hasattr(v, "name") and v.__module__ == ns["__name__"]]
    assert len(classes) == 1, f"{path}: expected one class"
    defn.name = classes[0].name
    return defn


def applications() -> dict[str, Definition]:
    return {p.parent.name: load(p) for p in sorted((RAMBLE / "applications").glob("*/application.py"))}


def builtin_application(name: str) -> Definition | None:
    """One of Ramble's builtin applications from $RAMBLE_ROOT, or None without it."""
    root = os.environ.get("RAMBLE_ROOT")
    f = Path(root) / "var" / "ramble" / "repos" / "builtin" / "applications" / name / "application.py" if root else None
    return load(f) if f and f.is_file() else None


def studies() -> dict[str, dict]:
    return {p.parent.name: yaml.safe_load(p.read_text()) for p in sorted((RAMBLE / "studies").glob("*/ramble.yaml"))}


# ---- Ramble's variable expansion, the part our files use ----------------------------

BRACED = re.compile(r"\{([^{}]*)\}")


def expand(text: str, variables: dict, depth: int = 0) -> str:
    """Innermost braces first, like Ramble: {mpirun_{stack}} -> {mpirun_x} -> value.
    A name that is not defined is left as it is (Ramble does the same)."""
    if depth > 30:
        raise ValueError(f"expansion does not terminate: {text}")
    out, changed = text, False

    def sub(m):
        nonlocal changed
        name = m.group(1)
        if name in variables:
            changed = True
            return str(variables[name])
        return "\0" + name + "\1"      # keep, but stop matching it

    out = BRACED.sub(sub, out)
    out = out.replace("\0", "{").replace("\1", "}") if not changed else out.replace("\0", "{").replace("\1", "}")
    return expand(out, variables, depth + 1) if changed else out


def references(text: str) -> set[str]:
    """Variable names a value refers to. For nested names (allreduce_env_{family_{stack}}_{x})
    the outer name is returned as a regex pattern string prefixed with 're:'."""
    refs = set()
    s = str(text)
    i = 0
    while i < len(s):
        if s[i] == "{":
            depth, j = 1, i + 1
            while j < len(s) and depth:
                depth += {"{": 1, "}": -1}.get(s[j], 0)
                j += 1
            inner = s[i + 1:j - 1]
            if "{" in inner:
                refs.add("re:" + re.sub(r"\\\{.*?\\\}", ".+", re.escape(_flatten(inner))))
                refs |= references(inner)
            elif inner and not re.search(r"[^\w.-]", inner):
                refs.add(inner)
            i = j
        else:
            i += 1
    return refs


def _flatten(inner: str) -> str:
    """allreduce_env_{family_{stack}}_{x} -> allreduce_env_{_}_{_} (one level of placeholders)."""
    out, depth = [], 0
    for ch in inner:
        if ch == "{":
            if depth == 0:
                out.append("{")
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                out.append("_}")
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def experiments(study: dict):
    """(application, workload, name template, variables, matrix) of every experiment of a study."""
    r = study["ramble"]
    for app, a in r["applications"].items():
        for wl, w in a["workloads"].items():
            for name, e in w["experiments"].items():
                yield app, wl, name, dict(e.get("variables") or {}), list(e.get("matrix") or [])


def combos(ws_vars: dict, exp_vars: dict, matrix: list, zips: dict) -> list[dict]:
    """The variable sets the matrix expands to (lists crossed; zips move together)."""
    merged = {**ws_vars, **exp_vars}
    axes = []
    for m in matrix:
        if m in zips:
            names = zips[m]
            axes.append([dict(zip(names, vals)) for vals in zip(*(merged[n] for n in names))])
        else:
            axes.append([{m: v} for v in merged[m]])
    out = []
    for pick in product(*axes):
        d = dict(merged)
        for p in pick:
            d.update(p)
        out.append(d)
    return out
