"""Ramble workspaces -> records. `ramble workspace analyze -f json` writes results.latest.json in the workspace root:
one entry per experiment with its status, its key-level names (application_name, workload_name, n_ranks, n_nodes,
...), RAMBLE_VARIABLES and the FOMs per context. Each experiment's run directory holds the profile the Caliper
modifier wrote. A workspace stays inside itself: a run directory, profile or lock file that its results' names or a
symbolic link lead outside it is refused, and so is a field of its results whose type is not the one Ramble writes;
its JSON and YAML are read within the limits on size, depth and aliases of read/files.py.

One experiment is one run, of any application (commscope's own workloads, Ramble's builtin ones such as
intel-mpi-benchmarks, a site's own). A profiled experiment takes its metrics from the profile and its names and FOMs
from Ramble; an experiment without a profile (Caliper off, an application without Caliper, or it failed before
writing one) is stored from its FOMs and status alone. A failed experiment is stored as failed, never dropped.

Every FOM Ramble reports is kept with its name, unit and context (migration
0015): IMB reports "Latency min" once per message size, in contexts such as
"Bytes: 4 (Latency)". Numeric FOMs go to the foms table; text FOMs, which have
no number to store there, to the run's metadata (ramble_text_foms).

The parameters of an application that is not one of commscope's workloads are
its Ramble variables (those that define the experiment: not Ramble's own
bookkeeping keywords, nor paths, nor what `commscope run` added from the site
and its run scope, which name where and how it ran, not what). A
commscope workload declares its parameters itself (its PARAM lines or Adiak
values), which the Ramble variables only repeat. A study names the variables
held per rank or for the whole job in commscope_per_rank and commscope_global."""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import re
import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

from commscope.read import files
from commscope.read.files import RESULTS, BadProfile, WorkspaceFiles
from commscope.read.pipeline import read_record
from commscope.read.records import ReadOptions, Record, clean, parameters_label
from commscope.read.storable import declare_scaling

# The shape this module reads: Ramble 0.5's ExperimentResult.to_dict().
REQUIRED = ("name", "RAMBLE_STATUS", "CONTEXTS", "RAMBLE_VARIABLES", "N_REPEATS")
# Ramble variable names the studies use for the matrix axes (ramble/README.md).
# interconnect_name is the catalog name (openmpi4/tcp); interconnect alone is its short label.
AXES = {"stack": ("stack", "mpi_stack"), "interconnect": ("interconnect_name", "interconnect"), "variant": ("variant",)}
# The file in which `commscope run`'s experiment script (ramble/execute_experiment.tpl) records `uname -r`: the
# kernel release the experiment ran on, a version of its runs.
KERNEL_FILE = "kernel-release"
# The Spack package of the workloads (packages/spack_repo/commscope): its hash is a run's spack_hash.
APP_PACKAGE = "commscope-workloads"
# Ramble's own keywords (ramble/keywords.py of Ramble 0.5) and the variables its pipelines add: names,
# directories, indexes and launch commands of the workspace, never an input of the application. They stay
# in metadata.ramble_variables, but are no parameters. n_ranks and n_nodes are (as ranks and nodes).
RAMBLE_KEYWORDS = {
    "workspace_name", "application_name", "application_run_dir", "application_input_dir", "application_namespace",
    "simplified_application_namespace", "workload_name", "workload_run_dir", "workload_input_dir",
    "workload_namespace", "simplified_workload_namespace", "license_input_dir", "experiments_file",
    "experiment_name", "experiment_run_dir", "experiment_status", "experiment_index", "experiment_namespace",
    "simplified_experiment_namespace", "log_dir", "log_file", "err_file", "env_path", "input_name", "repeat_index",
    "spec_name", "env_name", "n_ranks", "n_nodes", "batch_submit", "mpi_command", "experiment_template_name",
    "unformatted_command", "execute_experiment", "command", "spack_env", "spack_hash"}
# A variable whose raw value (RAMBLE_RAW_VARIABLES) is made of the rank or node count alone, such as IMB's
# min_collective_ranks = '{n_ranks}': the run's ranks again, not an input of its own, so no parameter (a
# parameter that changes with the ranks would part the runs of one experiment across rank counts).
RANK_COUNT_TEMPLATE = re.compile(r"[\s\d+*/()-]*(\{(n_ranks|n_nodes|processes_per_node)\}[\s\d+*/()-]*)+")
# The Caliper modifier's variables (ramble/modifiers/caliper): how the run was measured, which is its
# environment (the profile's Caliper configuration), not an input of the application.
MODIFIER_PREFIX = "caliper_"
# A study's declaration of its parameters' scaling kinds (storable.declare_scaling): comma-separated names of the
# variables held per rank and of those held for the whole job, as `commscope ingest --per-rank/--global` give them.
SCALING_VARIABLES = {"commscope_per_rank": "per_rank", "commscope_global": "global_params"}


def _number(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


@dataclass
class Workspace:
    root: Path
    results: dict
    hardware: dict | None = None
    # Variables `commscope run` added from the site and its run scope (commscope-run.json): not parameters.
    run_variables: frozenset = frozenset()
    mpi_libraries: dict = dataclasses.field(default_factory=dict)   # stack -> its library (MPI_LIBRARIES)

    def experiments(self) -> list[dict]:
        # A repeated experiment's base entry only summarises its repeats,
        # which are experiments of their own: store the repeats.
        return [e for e in self.results["experiments"] if int(e.get("N_REPEATS") or 0) == 0]

    @functools.cached_property
    def real_root(self) -> Path:
        return self.root.resolve()

    def records(self, opts: ReadOptions = ReadOptions()) -> Iterator[Record | BadProfile]:
        for exp in self.experiments():
            try:
                yield from self._records(exp, opts)
            except BadProfile as e:
                yield e
            except OSError as e:
                yield BadProfile(f"{e.filename or self.root / RESULTS}: cannot be read ({e.strerror or e})")
            except Exception as e:   # a reader's bug must not end an ingest in a traceback: one line naming the input
                yield BadProfile(f"{self.root / RESULTS}: experiment {exp['name']}: cannot be read: "
                                 f"{type(e).__name__}: {e} (a bug in commscope's reader; report it with the workspace)")

    def _inside(self, path: Path) -> bool:
        """Whether PATH, which exists, leads to a file inside the workspace."""
        try:
            return path.resolve().is_relative_to(self.real_root)
        except (OSError, RuntimeError):
            return False

    def _keep_inside(self, exp: dict, path: Path, named: Path) -> None:
        """Refuses PATH, which the experiment's entry NAMED, when it leads outside the workspace (a name that
        climbs out, an absolute name, a symbolic link)."""
        try:
            real = path.resolve()
        except (OSError, RuntimeError):   # a symbolic link loop: no directory, read as none
            return
        if not real.is_relative_to(self.real_root):
            raise BadProfile(f"{self.root / RESULTS}: experiment {exp['name']} names a path outside the workspace, "
                             f"{named} (it leads to {real}); a run directory must be under "
                             f"{self.root / 'experiments'}: copy the run into the workspace or correct its names")

    def _var(self, exp: dict, *names, default=None):
        for n in names:
            for src in (exp, exp["RAMBLE_VARIABLES"]):
                if n in src and src[n] not in (None, ""):
                    return src[n]
        return default

    def _run_dir(self, exp: dict) -> Path:
        """The experiment's directory inside this workspace. Ramble records
        absolute paths; a workspace copied or moved elsewhere must still read
        its own files, never those left at the old path."""
        named = Path("experiments", exp.get("application_name", ""), exp.get("workload_name", ""),
                     exp.get("experiment_name", exp["name"].rsplit(".", 1)[-1]))
        own = self.root / named
        self._keep_inside(exp, own, named)
        if own.is_dir():
            return own
        d = self._var(exp, "experiment_run_dir")
        if d:
            parts = Path(d).parts
            if "experiments" in parts:
                named = Path(*parts[len(parts) - parts[::-1].index("experiments") - 1:])
                moved = self.root / named
                self._keep_inside(exp, moved, named)
                if moved.is_dir():
                    return moved
            if Path(d).is_dir() and Path(d).resolve().is_relative_to(self.real_root):
                return Path(d)
        return own

    def _records(self, exp: dict, opts: ReadOptions) -> Iterator[Record]:
        name = exp["name"]
        status = "ok" if exp["RAMBLE_STATUS"] == "SUCCESS" else "failed"
        run_dir = self._run_dir(exp)
        groups = files.discover([run_dir], within=self.real_root) if run_dir.is_dir() else []
        # The focus window's region: --focus at ingest, else what the experiment declares (the Ramble application's
        # commscope_focus variable, or the study's), else the workloads' own. The application's name, for a
        # profile that records none (an application without Adiak, profiled by the Caliper modifier's preload
        # mode): Ramble's, unless --app says otherwise.
        app, given_app = clean(exp.get("application_name")), opts.app
        opts = replace(opts, focus=opts.focus or clean(self._var(exp, "commscope_focus")) or None,
                       app=given_app or app or None)
        recs: list[Record] = []
        profile_error = None
        for g in groups:
            try:
                rec = read_record(g, opts)  # a profile, or the workload's output when it ran without Caliper
                if rec.metadata.get("app_source") == "--app" and not given_app:
                    # named by Ramble, not by --app; a workload's Adiak name (equal to Ramble's) comes first
                    rec.metadata["app_source"] = "workload" if rec.metadata.get("workload") else "ramble"
                recs.append(rec)
            except BadProfile as e:
                if status == "ok":
                    raise BadProfile(f"{self.root / RESULTS}: experiment {name}: {e}") from None
                profile_error = str(e)  # a failed run often leaves a broken profile; the failure is the record
        if not recs:
            recs = [self._bare(exp, run_dir)]
        repeat = int(self._var(exp, "repeat_index", default=0) or 0)
        # The repeats of one experiment share its name, so views can group them; FOMs carry the repeat index.
        if repeat and name.endswith(f".{repeat}"):
            name = name[: -len(f".{repeat}")]
        foms, text_foms = fom_rows(exp, repeat)
        axes = {k: clean(self._var(exp, *names)) for k, names in AXES.items()}
        ranks = int(self._var(exp, "n_ranks", default=recs[0].ranks) or recs[0].ranks)
        nodes = self._var(exp, "n_nodes", default=recs[0].nodes)   # unknown stays None, never 1
        nodes = int(nodes) if nodes is not None else None
        for rec in recs:
            # The experiment's parameters: the workload's own (its PARAM lines or Adiak values), or, for any
            # other application, its Ramble variables; Ramble's workload, ranks and nodes; not its name,
            # repeat index or paths, so repeats are one series.
            own = {} if is_commscope_workload(rec) else experiment_variables(exp, self.run_variables)
            params = {**rec.parameters, **own, "ranks": ranks, "nodes": nodes,
                      "ramble_workload": clean(exp.get("workload_name") or rec.workload)}
            meta = dict(rec.metadata)
            if own:   # Ramble's variables say what the profile could not
                meta.pop("parameters_missing", None)
            meta.update({"ramble_status": exp["RAMBLE_STATUS"], "ramble_workspace": clean(self.results.get("workspace_name")),
                         "ramble_variables": {k: clean(v) for k, v in exp["RAMBLE_VARIABLES"].items()}})
            if text_foms:
                meta["ramble_text_foms"] = text_foms
            stack = axes["stack"] or rec.stack
            library = rec.mpi_library
            if library == "unknown" and self.mpi_libraries.get(stack):
                library = self.mpi_libraries[stack]
                meta["mpi_library_source"] = "commscope run probe"
            if profile_error:
                meta["profile_error"] = clean(profile_error)
            meta["ramble_experiment"] = clean(exp["name"])   # with its repeat index: one run per entry
            if rec.profile_kind == "none" and status == "ok" and self._profile_expected(exp):
                meta["profile_missing"] = (f"experiment {clean(exp['name'])}: Caliper was on, but no profile is in "
                                           f"{run_dir}; stored as not profiled (MPI time unknown); ingest the "
                                           f"workspace again once the profile is there and it replaces this run")
            declared = {field: tuple(n.strip() for n in str(self._var(exp, var, default="")).split(",") if n.strip())
                        for var, field in SCALING_VARIABLES.items()}
            # A failed experiment is failed whatever its profile says; otherwise the record's own status stands:
            # ok, failed (a VERIFY line failed) or partial (ranks missing, stored on --allow-partial).
            yield declare_scaling(replace(
                rec, experiment=clean(name), status="failed" if status == "failed" else rec.status,
                app=clean(exp.get("application_name") or rec.app), workload=clean(exp.get("workload_name") or rec.workload),
                ranks=ranks, nodes=nodes, parameters=params, mpi_library=library,
                stack=stack, interconnect=axes["interconnect"] or rec.interconnect,
                variant=axes["variant"] or (parameters_label(own) if own else rec.variant), fom_rows=foms or rec.fom_rows, metadata=meta,
                spack_hash=clean(self._var(exp, "spack_hash")) or self._spack_hash(exp) or rec.spack_hash,
                kernel=self._kernel(run_dir) or rec.kernel),
                ReadOptions(**declared))

    def profiles_missing(self) -> list[tuple[str, Path]]:
        """(experiment name, run directory) of each experiment that did not fail, was to write a profile
        (_profile_expected) and holds no .cali file."""
        return [(exp["name"], d) for exp in self.experiments()
                if exp.get("RAMBLE_STATUS") != "FAILED" and self._profile_expected(exp)
                and not any((d := self._run_dir(exp)).glob("*.cali"))]

    def _profile_expected(self, exp: dict) -> bool:
        """Whether the Caliper modifier was to write a profile: it set caliper_file, and the study did not say
        Caliper is missing for the experiment's stack (caliper_<stack> = no)."""
        v = exp["RAMBLE_VARIABLES"]
        stack = v.get("stack")
        return bool(v.get("caliper_file")) and str(v.get(f"caliper_{stack}", "yes")).lower() not in ("no", "false")

    def _kernel(self, run_dir: Path) -> str | None:
        """The kernel release the experiment's script recorded in its run directory (KERNEL_FILE); None where
        it recorded none."""
        f = run_dir / KERNEL_FILE
        if not f.exists():
            return None
        if not self._inside(f):
            raise BadProfile(f"{f}: leads outside the workspace (to {f.resolve()}); copy the file into the "
                             f"experiment's directory or remove the link")
        text = files.read_bytes(f, 256).decode("utf-8", "replace").strip()
        if "\n" in text or not text.isprintable():
            raise BadProfile(f"{f}: not a kernel release (one line, as `uname -r` prints it); remove the file or "
                             f"write the release the experiment ran on")
        return clean(text) or None

    def _spack_hash(self, exp: dict) -> str | None:
        """With Ramble's spack package manager, the DAG hash of the workloads build the experiment
        ran: the root of its environment's spack.lock (software/<env_name>/)."""
        env = self._var(exp, "env_name")
        if not env or "/" in str(env) or str(env).startswith("."):
            return None
        lock = self.root / "software" / str(env) / "spack.lock"
        if not lock.is_file():
            return None
        if not self._inside(lock):
            raise BadProfile(f"{lock}: leads outside the workspace (to {lock.resolve()}); copy the Spack "
                             f"environment into the workspace or remove the link")
        doc = files.load_json(lock, what="a Spack lock file")
        roots = doc.get("roots") if isinstance(doc, dict) else None
        if not isinstance(roots or [], list) or not all(isinstance(r, dict) for r in roots or []):
            raise BadProfile(f"{lock}: not a Spack lock file (its roots are no list of specs); remove it or "
                             f"concretize the environment again")
        for r in roots or []:
            if str(r.get("spec", "")).startswith(f"{APP_PACKAGE}") and r.get("hash"):
                return clean(str(r["hash"]), 64)
        return None

    def _bare(self, exp: dict, run_dir: Path) -> Record:
        """An experiment with no profile: its identity is its result entry."""
        h = hashlib.sha256(json.dumps([self.results.get("workspace_hash"), exp], sort_keys=True).encode()).hexdigest()
        # Ramble's log of the experiment (the application's output): {experiment_run_dir}/{experiment_name}.out
        log = run_dir / f"{exp.get('experiment_name') or exp['name'].rsplit('.', 1)[-1]}.out"
        seen = log.exists() and self._inside(log)
        when = log.stat().st_mtime if seen else (self.root / RESULTS).stat().st_mtime
        return Record(content_hash=h, source=clean(str(run_dir)), profile_kind="none",
                      app=clean(exp.get("application_name", "unknown")), workload=clean(exp.get("workload_name", "unknown")),
                      ranks=int(self._var(exp, "n_ranks", default=1)),
                      started_at=dt.datetime.fromtimestamp(when, dt.timezone.utc))


def fom_rows(exp: dict, repeat: int) -> tuple[list[tuple], list[dict]]:
    """The experiment's FOMs as (name, repeat, value, unit, context) rows, every context Ramble reports,
    and its text FOMs (no number) as dicts for the metadata. Ramble's "null" context is context NULL."""
    rows, text = [], []
    for ctx in exp["CONTEXTS"]:
        context = None if ctx.get("name") in (None, "null", "") else clean(ctx["name"], 200)
        for f in ctx.get("foms", []):
            value = _number(f.get("value"))
            if value is None:
                text.append({"name": clean(f.get("name"), 200), "context": context, "value": clean(f.get("value")),
                             "unit": clean(f.get("units"), 50)})
                continue
            rows.append((clean(f["name"], 200), repeat, value, clean(f.get("units"), 50), context))
    return rows, text


def is_commscope_workload(rec: Record) -> bool:
    """Whether the record is of one of commscope's workloads, which declare their parameters themselves:
    read from their own output (from_output keeps its VERIFY lines) or from a profile that names its
    workload in Adiak."""
    return "verify" in rec.metadata or rec.metadata.get("app_source") == "workload"


def experiment_variables(exp: dict, run_variables: frozenset = frozenset()) -> dict:
    """The Ramble variables that define an experiment of any application: RAMBLE_VARIABLES less Ramble's
    own keywords, the Caliper modifier's variables, absolute paths, variables made of the rank or node count
    alone (RANK_COUNT_TEMPLATE) and, in a workspace of `commscope run`, the variables its site and run scope
    added (where and how it ran, not what), plus the thread count. Values as strings, as Ramble reports them."""
    raw = exp.get("RAMBLE_RAW_VARIABLES") or {}
    out = {k: clean(v) for k, v in exp["RAMBLE_VARIABLES"].items()
           if k not in RAMBLE_KEYWORDS and k not in run_variables and not k.startswith(MODIFIER_PREFIX)
           and k not in SCALING_VARIABLES
           and not RANK_COUNT_TEMPLATE.fullmatch(str(raw.get(k, "")))
           and not str(v).startswith("/")}
    if exp.get("n_threads") not in (None, ""):
        out["n_threads"] = clean(exp["n_threads"])
    return out


def read_workspace(root: Path) -> Workspace:
    """The workspace at ROOT: its documents read (files.load_workspace), then checked (workspace)."""
    return workspace(files.load_workspace(root))


def workspace(docs: WorkspaceFiles) -> Workspace:
    """The workspace whose documents files.load_workspace read: results.latest.json checked, its hardware
    description, run variables and MPI libraries taken; BadProfile names what is wrong."""
    path, doc = docs.root / RESULTS, docs.results
    if not isinstance(doc, dict) or not isinstance(doc.get("experiments"), list):
        raise BadProfile(f"{path}: unknown Ramble results version: no 'experiments' list "
                         f"(commscope reads the results format of Ramble 0.5)")
    for key in ("workspace_name", "workspace_hash"):
        if not isinstance(doc.get(key, ""), (str, type(None))):
            raise BadProfile(f"{path}: {key} is {_shown(doc[key])}, where Ramble writes a string; {AGAIN}")
    for i, exp in enumerate(doc["experiments"]):
        missing = [k for k in REQUIRED if not isinstance(exp, dict) or k not in exp]
        if missing:
            raise BadProfile(f"{path}: unknown Ramble results version: experiment {i} lacks {', '.join(missing)} "
                             f"(commscope reads the results format of Ramble 0.5)")
        check_experiment(path, i, exp)
    hardware = hardware_description(*docs.hardware) if docs.hardware else None
    return Workspace(docs.root, doc, hardware, run_variables(docs.run),
                     mpi_libraries(docs.mpi_libraries))


AGAIN = "run `ramble workspace analyze -f json` again, or correct the file"
NAMES = ("application_name", "workload_name", "experiment_name")   # strings: they name the run directory
PATHS = ("experiment_run_dir", "env_name")                         # strings, at its level or in its variables
COUNTS = ("n_ranks", "n_nodes", "repeat_index")                    # whole numbers, at its level or in its variables
SCALAR = (str, int, float, bool, type(None))


def _shown(value) -> str:
    """A wrong value in a refusal: its kind and its start."""
    kind = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")
    return f"{kind} ({clean(repr(value), 40)})"


def _whole(value) -> bool:
    """Whether VALUE is absent or a whole number as Ramble writes one (digits, or a number of JSON)."""
    if value is None or value == "":
        return True
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    return isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 18


def check_experiment(path: Path, i: int, exp: dict) -> None:
    """Refuses, in one line naming the file, the experiment and the field, an entry whose fields this module reads
    are not of the types Ramble writes (the rest of its variables are kept as text, whatever they hold)."""
    name = exp["name"]
    if not isinstance(name, str) or not name:
        raise BadProfile(f"{path}: experiment {i}: name is {_shown(name)}, where Ramble writes a string; {AGAIN}")

    def wrong(field: str, value, expected: str) -> BadProfile:
        return BadProfile(f"{path}: experiment {name}: {field} is {_shown(value)}, where Ramble writes {expected}; "
                          f"{AGAIN}")

    if not isinstance(exp["RAMBLE_STATUS"], str):
        raise wrong("RAMBLE_STATUS", exp["RAMBLE_STATUS"], "a string such as SUCCESS")
    if not _whole(exp["N_REPEATS"]):
        raise wrong("N_REPEATS", exp["N_REPEATS"], "a whole number")
    variables = exp["RAMBLE_VARIABLES"]
    if not isinstance(variables, dict):
        raise wrong("RAMBLE_VARIABLES", variables, "a mapping")
    if not isinstance(exp.get("RAMBLE_RAW_VARIABLES") or {}, dict):
        raise wrong("RAMBLE_RAW_VARIABLES", exp["RAMBLE_RAW_VARIABLES"], "a mapping")
    for field in NAMES:
        if field in exp and (not isinstance(exp[field], str) or "\x00" in exp[field]):
            raise wrong(field, exp[field], "a string (without NUL)")
    for src, where in ((exp, ""), (variables, "RAMBLE_VARIABLES.")):
        for field in PATHS:
            if src.get(field) is not None and (not isinstance(src[field], str) or "\x00" in src[field]):
                raise wrong(where + field, src[field], "a string (without NUL)")
        for field in COUNTS:
            if not _whole(src.get(field)):
                raise wrong(where + field, src[field], "a whole number")
    contexts = exp["CONTEXTS"]
    if not isinstance(contexts, list):
        raise wrong("CONTEXTS", contexts, "a list")
    for c, ctx in enumerate(contexts):
        if not isinstance(ctx, dict):
            raise wrong(f"CONTEXTS[{c}]", ctx, "a mapping with name and foms")
        if not isinstance(ctx.get("name"), SCALAR):
            raise wrong(f"CONTEXTS[{c}].name", ctx["name"], "a string")
        foms = ctx.get("foms", [])
        if not isinstance(foms, list):
            raise wrong(f"CONTEXTS[{c}].foms", foms, "a list")
        for j, fom in enumerate(foms):
            at = f"CONTEXTS[{c}].foms[{j}]"
            if not isinstance(fom, dict):
                raise wrong(at, fom, "a mapping with name, value and units")
            if fom.get("name") in (None, "") or not isinstance(fom.get("name"), SCALAR):
                raise wrong(f"{at}.name", fom.get("name"), "a string")
            for field in ("value", "units"):
                if not isinstance(fom.get(field), SCALAR):
                    raise wrong(f"{at}.{field}", fom[field], "a string")


def mpi_libraries(loaded: tuple[Path, object] | None) -> dict[str, str]:
    """Each stack's MPI library as `commscope run` recorded it (MPI_LIBRARIES, LOADED as its path and document);
    none for a workspace made otherwise."""
    if loaded is None:
        return {}
    path, doc = loaded
    if not isinstance(doc, dict) or not all(isinstance(k, str) and isinstance(v, str) and v.strip()
                                            for k, v in doc.items()):
        raise BadProfile(f"{path}: not the MPI libraries `commscope run` writes (a mapping of stack to library "
                         f"string); remove it or run the study again")
    return {k: clean(v.strip()) for k, v in doc.items()}


def run_variables(loaded: tuple[Path, object] | None) -> frozenset:
    """The variables `commscope run` added to the workspace from the site and its run scope, as its
    commscope-run.json lists them (LOADED as its path and document); none for a workspace made otherwise."""
    if loaded is None:
        return frozenset()
    path, doc = loaded
    if not isinstance(doc, dict):
        raise BadProfile(f"{path}: not the JSON `commscope run` writes (not a mapping); remove it or run the study "
                         f"again")
    names = doc.get("run_variables") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise BadProfile(f"{path}: run_variables must be a list of variable names")
    return frozenset(names)


def read_hardware(path: Path) -> dict:
    """A site's hardware description (ramble/sites/<site>/hardware.yaml), read within the limits of read/files.py."""
    return hardware_description(Path(path), files.load_hardware(Path(path)))


def hardware_description(path: Path, doc) -> dict:
    """The hardware description DOC, read from PATH: a mapping, whose system and site are strings."""
    hw = doc.get("hardware", doc) if isinstance(doc, dict) else None
    if not isinstance(hw, dict):
        raise BadProfile(f"{path}: a hardware description must be a mapping (cpu_model, cores_per_node, ...)")
    for key in ("system", "site"):   # the system's name when no --system is given
        if not isinstance(hw.get(key), (str, type(None))):
            raise BadProfile(f"{path}: {key} is {_shown(hw[key])}; a system's name is a string")
    return hw
