"""Ramble workspaces -> records. `ramble workspace analyze -f json` writes
results.latest.json in the workspace root: one entry per experiment with its
status, its key-level names (application_name, workload_name, n_ranks,
n_nodes, ...), RAMBLE_VARIABLES and the FOMs per context. Each experiment's
run directory holds the profile the Caliper modifier wrote.

One experiment is one run. A profiled experiment takes its metrics from the
profile and its names and FOMs from Ramble; an experiment without a profile
(Caliper off, or it failed before writing one) is stored from its FOMs and
status alone. A failed experiment is stored as failed, never dropped."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

from . import profiles
from .profiles import BadProfile
from .records import ReadOptions, Record, clean, read_record

RESULTS = "results.latest.json"
# The shape this module reads: Ramble 0.5's ExperimentResult.to_dict().
REQUIRED = ("name", "RAMBLE_STATUS", "CONTEXTS", "RAMBLE_VARIABLES", "N_REPEATS")
# Ramble variable names the studies use for the matrix axes (ramble/README.md).
# interconnect_name is the catalog name (openmpi4/tcp); interconnect alone is its short label.
AXES = {"stack": ("stack", "mpi_stack"), "interconnect": ("interconnect_name", "interconnect"), "variant": ("variant",)}
# The Spack package of the workloads (packages/spack_repo/commscope): its hash is a run's spack_hash.
APP_PACKAGE = "commscope-workloads"


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

    def experiments(self) -> list[dict]:
        # A repeated experiment's base entry only summarises its repeats,
        # which are experiments of their own: store the repeats.
        return [e for e in self.results["experiments"] if int(e.get("N_REPEATS") or 0) == 0]

    def records(self, opts: ReadOptions = ReadOptions()) -> Iterator[Record | BadProfile]:
        for exp in self.experiments():
            try:
                yield from self._records(exp, opts)
            except BadProfile as e:
                yield e

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
        own = self.root / "experiments" / exp.get("application_name", "") / exp.get("workload_name", "") / \
            exp.get("experiment_name", exp["name"].rsplit(".", 1)[-1])
        if own.is_dir():
            return own
        d = self._var(exp, "experiment_run_dir")
        if d:
            parts = Path(d).parts
            if "experiments" in parts:
                moved = self.root.joinpath(*parts[len(parts) - parts[::-1].index("experiments") - 1:])
                if moved.is_dir():
                    return moved
            if Path(d).is_dir() and Path(d).resolve().is_relative_to(self.root.resolve()):
                return Path(d)
        return own

    def _records(self, exp: dict, opts: ReadOptions) -> Iterator[Record]:
        name = exp["name"]
        status = "ok" if exp["RAMBLE_STATUS"] == "SUCCESS" else "failed"
        run_dir = self._run_dir(exp)
        groups = profiles.discover([run_dir]) if run_dir.is_dir() else []
        # The focus window's region: --focus at ingest, else what the experiment declares (the Ramble application's
        # commscope_focus variable, or the study's), else the workloads' own.
        opts = replace(opts, focus=opts.focus or clean(self._var(exp, "commscope_focus")) or None)
        recs: list[Record] = []
        profile_error = None
        for g in groups:
            try:
                recs.append(read_record(g, opts))  # a profile, or the workload's output when it ran without Caliper
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
        foms = []
        for ctx in exp["CONTEXTS"]:
            # FOMs outside any FOM context sit in Ramble's "null" context.
            label = None if ctx.get("name") in (None, "null", "") else (ctx.get("display_name") or ctx["name"])
            for f in ctx.get("foms", []):
                value = _number(f.get("value"))
                if value is None:
                    continue  # text FOMs (the MPI library string) are in the run's metadata already
                fname = f"{label}::{f['name']}" if label else f["name"]
                foms.append((clean(fname, 200), repeat, value, clean(f.get("units"), 50)))
        axes = {k: clean(self._var(exp, *names)) for k, names in AXES.items()}
        ranks = int(self._var(exp, "n_ranks", default=recs[0].ranks) or recs[0].ranks)
        nodes = int(self._var(exp, "n_nodes", default=recs[0].nodes or 1) or 1)
        for rec in recs:
            # The experiment's parameters: the workload's own (its PARAM lines or Adiak values), Ramble's
            # workload, ranks and nodes; not its name, repeat index or paths, so repeats are one series.
            params = {**rec.parameters, "ranks": ranks, "nodes": nodes,
                      "ramble_workload": clean(exp.get("workload_name") or rec.workload)}
            meta = dict(rec.metadata)
            meta.update({"ramble_status": exp["RAMBLE_STATUS"], "ramble_workspace": clean(self.results.get("workspace_name")),
                         "ramble_variables": {k: clean(v) for k, v in exp["RAMBLE_VARIABLES"].items()}})
            if profile_error:
                meta["profile_error"] = clean(profile_error)
            yield replace(
                rec, experiment=clean(name), status="failed" if status == "failed" or rec.status == "failed" else "ok",
                app=clean(exp.get("application_name") or rec.app), workload=clean(exp.get("workload_name") or rec.workload),
                ranks=ranks, nodes=nodes, parameters=params,
                stack=axes["stack"] or rec.stack, interconnect=axes["interconnect"] or rec.interconnect,
                variant=axes["variant"] or rec.variant, fom_rows=foms or rec.fom_rows, metadata=meta,
                spack_hash=clean(self._var(exp, "spack_hash")) or self._spack_hash(exp) or rec.spack_hash)

    def _spack_hash(self, exp: dict) -> str | None:
        """With Ramble's spack package manager, the DAG hash of the workloads build the experiment
        ran: the root of its environment's spack.lock (software/<env_name>/)."""
        env = self._var(exp, "env_name")
        if not env or "/" in str(env) or str(env).startswith("."):
            return None
        lock = self.root / "software" / str(env) / "spack.lock"
        if not lock.is_file():
            return None
        try:
            roots = json.loads(lock.read_text()).get("roots") or []
        except (OSError, ValueError) as e:
            raise BadProfile(f"{lock}: not a Spack lock file ({e})") from None
        for r in roots:
            if str(r.get("spec", "")).startswith(f"{APP_PACKAGE}") and r.get("hash"):
                return clean(str(r["hash"]), 64)
        return None

    def _bare(self, exp: dict, run_dir: Path) -> Record:
        """An experiment with no profile: its identity is its result entry."""
        h = hashlib.sha256(json.dumps([self.results.get("workspace_hash"), exp], sort_keys=True).encode()).hexdigest()
        log = run_dir / f"{exp['name']}.out"
        when = log.stat().st_mtime if log.exists() else (self.root / RESULTS).stat().st_mtime
        return Record(content_hash=h, source=clean(str(run_dir)), profile_kind="none",
                      app=clean(exp.get("application_name", "unknown")), workload=clean(exp.get("workload_name", "unknown")),
                      ranks=int(self._var(exp, "n_ranks", default=1)),
                      started_at=dt.datetime.fromtimestamp(when, dt.timezone.utc))


def read_workspace(root: Path) -> Workspace:
    """Reads and checks results.latest.json; BadProfile names what is wrong."""
    path = root / RESULTS
    if not path.exists():
        raise BadProfile(f"{root}: a Ramble workspace without {RESULTS}; run `ramble workspace analyze -f json` first")
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadProfile(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("experiments"), list):
        raise BadProfile(f"{path}: unknown Ramble results version: no 'experiments' list "
                         f"(commscope reads the results format of Ramble 0.5)")
    for i, exp in enumerate(doc["experiments"]):
        missing = [k for k in REQUIRED if not isinstance(exp, dict) or k not in exp]
        if missing:
            raise BadProfile(f"{path}: unknown Ramble results version: experiment {i} lacks {', '.join(missing)} "
                             f"(commscope reads the results format of Ramble 0.5)")
        if not isinstance(exp["CONTEXTS"], list) or not isinstance(exp["RAMBLE_VARIABLES"], dict):
            raise BadProfile(f"{path}: experiment {exp.get('name')}: CONTEXTS must be a list and RAMBLE_VARIABLES a mapping")
        if not str(exp.get("n_ranks", exp["RAMBLE_VARIABLES"].get("n_ranks", "1"))).isdigit():
            raise BadProfile(f"{path}: experiment {exp['name']}: n_ranks {exp.get('n_ranks')!r} is not an integer")
    hardware = None
    for hw_file in (root / "hardware.yaml", root / "configs" / "hardware.yaml"):
        if hw_file.exists():
            hardware = read_hardware(hw_file)
            break
    return Workspace(root, doc, hardware)


def read_hardware(path: Path) -> dict:
    """A site's hardware description (ramble/sites/<site>/hardware.yaml)."""
    import yaml
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise BadProfile(f"{path}: unreadable hardware description ({e})") from None
    hw = doc.get("hardware", doc) if isinstance(doc, dict) else None
    if not isinstance(hw, dict):
        raise BadProfile(f"{path}: a hardware description must be a mapping (cpu_model, cores_per_node, ...)")
    return hw
