"""Records -> PostgreSQL, streamed: this module takes a stream of records, never paths
(workflow/ingest.py reads the inputs and hands them over), and writes them, a batch at
a time, inside one transaction per campaign. So memory stays flat however many profiles come in,
a bad file or a kill -9 leaves the store unchanged, and re-ingesting is a
no-op because runs are keyed by the content hash of their files.

Concurrent ingests take one advisory lock for their campaign transaction:
writers queue instead of interleaving, which rules out duplicate runs and
lock-order deadlocks on the shared names (systems, stacks, call paths). The
wait is bounded (db.writer_session): a hung ingest cannot block the others
for ever, and the one that gives up names the session holding the lock."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Iterable

import psycopg
from psycopg._copy_base import format_row_text   # psycopg is pinned (pyproject.toml)
from psycopg.adapt import Transformer
from psycopg.types.json import Jsonb

from commscope.store import db
from commscope.read import caliper, measures
from commscope.read.files import BadProfile
from commscope.read.records import MPI_NOT_RECORDED, ReadOptions, Record, as_int
from commscope.read.storable import Provenance, given_label

BATCH = 64            # runs per round of COPYs
WRITE_LOCK = "commscope.store.ingest"
# runs.model_version: the version of docs/measurement-model.md a run was measured under. 2: runs' legacy
# columns and rank_metrics are the run window (nothing left out by name, time outside regions counted) and
# MPI calls outside every region are kept; v_runs_needing_reingest (store/views.sql) lists the runs
# below it that the later versions measure differently, with the reason (docs/measurement-model.md).
MODEL_VERSION = 5
RUN_COLUMNS = ("content_hash, campaign_id, system_id, stack_id, status, profile_kind, app, workload, variant, "
               "decomposition, interconnect, ranks, nodes, global_size, local_size, iterations, compiler, spack_hash, "
               "caliper_version, kernel, experiment, started_at, wall_time, mpi_time_avg, mpi_time_max, "
               "mpi_fraction_avg, mpi_fraction_slowest, source, metadata, hardware_id, series_id, model_version")


def hardware_digest(hw: dict) -> str:
    """The identity of a hardware description: md5 of its canonical JSON."""
    return hashlib.md5(json.dumps(json.loads(json.dumps(hw, default=str)), sort_keys=True).encode()).hexdigest()


@dataclass
class Result:
    inserted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # already in the store
    bad: list[str] = field(default_factory=list)       # with --skip-bad
    left_out: list[str] = field(default_factory=list)  # Ramble workspaces found inside a directory
    # The campaign that holds this ingest's runs: the new one, or, when every run was already stored, the one
    # campaign they were stored in (a retried job prints the same id); None when there is no single one.
    campaign_id: int | None = None
    already_in: list[int] = field(default_factory=list)  # the campaigns holding the runs already stored
    warnings: list[str] = field(default_factory=list)   # runs stored with a caveat (a Ramble profile missing)


# The tables a run's rows are COPYed into: whether the table carries the run's started_at (the month
# partitions of migration 0022), whether its rows name a node (interned by the writer), the columns after
# run_id [, started_at][, node_id], and a function from a record to its rows as (node path, those columns).
COPY_TABLES = {
    "node_metrics": (True, True, "excl_min, excl_avg, excl_max, incl_min, incl_avg, incl_max, calls, imbalance, "
                     "incl_max_rank, excl_slowest, incl_slowest, slowest_rank",
                     lambda r: [(row[0], row[1:]) for row in r.node_rows]),
    "mpi_metrics": (True, True, "function, time_total, time_max, calls, bytes",
                    lambda r: [(row[0], row[1:]) for row in r.mpi_rows]),
    "comm_stats": (False, True, ", ".join(name for name, _a, _h in caliper.COMM_STATS),
                   lambda r: [(row[0], row[1:]) for row in r.comm_rows]),
    "rank_spread": (True, True, '"window", quantity, ranks, min, mean, max, p50, p90, p99, hist_lo, hist_hi, '
                    "hist_counts, top_ranks, top_values",
                    lambda r: [(row[1], (row[0], *row[2:-3], *map(_array_literal, row[-3:])))
                               for row in r.spread_rows]),
    "rank_metrics": (True, False, "rank, total_time, user_time, mpi_time, mpi_sync_time",
                     lambda r: [(None, row) for row in r.rank_rows]),
    "comm_matrix": (True, False, "src, dst, messages, bytes", lambda r: [(None, row) for row in r.matrix_rows]),
    # a FOM outside every context has context NULL (migration 0015)
    "foms": (False, False, "name, repeat, value, unit, context",
             lambda r: [(None, (*row, None) if len(row) == 4 else row) for row in r.fom_rows]),
    "run_windows": (False, False, ", ".join(f'"{c}"' for c in measures.COLUMNS),
                    lambda r: [(None, row) for row in r.window_rows]),
}
_COPY_TX = Transformer()   # psycopg's global adapters: the same text a cursor's COPY writes


def _copy_field(value) -> bytes:
    """One value in COPY's text format, without the line's end."""
    return bytes(format_row_text((value,), _COPY_TX))[:-1]


def _array_literal(values: list) -> str:
    """A list of numbers as a PostgreSQL array literal, which COPY parses into the column's array type:
    much cheaper than psycopg's per-element array dumping (bench/results/ingest_throughput.md)."""
    if None in values:
        return "{" + ",".join("NULL" if v is None else repr(v) for v in values) + "}"
    return "{" + ",".join(map(repr, values)) + "}"   # ints and floats as Python writes them: exact


def copy_text(rec: Record) -> dict[str, list[tuple[str | None, bytes]]]:
    """The record's rows for each table of COPY_TABLES as (node path or None, the line's text after the
    writer's own columns), formatted by psycopg's COPY formatter. Reader processes format them
    (prepared), so the single writer process, which limits a parallel ingest, only joins bytes."""
    return {table: [(path, bytes(format_row_text(tail, _COPY_TX))) for path, tail in rows(rec)]
            for table, (_month, _node, _cols, rows) in COPY_TABLES.items()}


def prepared(rec: Record) -> Record:
    """A record with its COPY text made: workflow/ingest.py has the reader processes call it
    (read.pipeline.read_records' PREPARE); the row lists it was made from are not sent back to the writer a second
    time."""
    return replace(rec, copy_text=copy_text(rec), node_rows=[], mpi_rows=[], comm_rows=[], spread_rows=[],
                   rank_rows=[], matrix_rows=[], fom_rows=[], window_rows=[])


class LabelConflict(BadProfile):
    """A stored file ingested again with other labels (--app, --param), without --relabel."""


def label_changes(stored_app: str, stored_params: dict | None, rec: Record, given: ReadOptions) -> list[str]:
    """How the labels the user GIVEN (--app, --param) for REC differ from a stored run's, one phrase each.
    Labels not given are not compared: the same bytes read without their workload output beside them (another
    copy) have other parameters, and are still the same run."""
    out = [f"app {stored_app!r} is now {rec.app!r}"] if given.app and stored_app != rec.app else []
    new = json.loads(json.dumps(rec.parameters, default=str))
    for key, _value in given.params:
        old = (stored_params or {}).get(key)
        if old != new.get(key):
            out.append(f"param {key} {json.dumps(old)} is now {json.dumps(new.get(key))}")
    return out


class Writer:
    """Writes records into one campaign; interns shared names as it meets them. A file stored before with
    other labels is refused (LabelConflict), or with RELABEL stored again with the new ones (its old run
    and its rows go, the rollups follow)."""

    def __init__(self, conn: psycopg.Connection, campaign_id: int, prov: Provenance, relabel: bool = False,
                 given: ReadOptions = ReadOptions()):
        self.conn, self.campaign_id, self.prov, self.relabel, self.given = conn, campaign_id, prov, relabel, given
        self.node_ids: dict[str, int] = {}
        self.system_ids: dict[str, int] = {}
        self.stack_ids: dict[tuple, int] = {}
        self.hardware_ids: dict[int, int] = {}
        self.series_ids: dict[str, int] = {}
        self.staged = False   # the campaign's temporary runs_in table exists

    def _system(self, name: str) -> int:
        if name not in self.system_ids:
            row = self.conn.execute("INSERT INTO systems (name) VALUES (%s) ON CONFLICT (name) DO NOTHING "
                                    "RETURNING id", (name,)).fetchone()
            row = row or self.conn.execute("SELECT id FROM systems WHERE name = %s", (name,)).fetchone()
            self.system_ids[name] = row[0]
        return self.system_ids[name]

    def _intern_series(self, batch: list[Record]) -> list[int]:
        """The batch's series ids in batch order, interned by the store's series_key (migration 0038) with one
        INSERT and one SELECT for all that are new to this writer, not a round trip each (a parameter sweep makes
        a series per run)."""
        keys = [rec.series_key for rec in batch]
        new = {}
        for key, rec in zip(keys, batch):
            if key not in self.series_ids and key not in new:
                new[key] = (rec.app, json.dumps(rec.parameters, default=str), json.dumps(rec.environment, default=str))
        if new:
            apps, params, envs = (list(col) for col in zip(*new.values()))
            with self.conn.cursor() as cur:
                cur.execute("INSERT INTO series (key, app, parameters, environment) "
                            "SELECT series_key(a, p, e), a, p, e "
                            "FROM unnest(%s::text[], %s::jsonb[], %s::jsonb[]) AS u(a, p, e) "
                            "ON CONFLICT (key) DO NOTHING", (apps, params, envs))
                self.series_ids.update(cur.execute(
                    "SELECT u.k, s.id FROM unnest(%s::text[], %s::text[], %s::jsonb[], %s::jsonb[]) AS u(k, a, p, e) "
                    "JOIN series s ON s.key = series_key(u.a, u.p, u.e)", (list(new), apps, params, envs)).fetchall())
        return [self.series_ids[key] for key in keys]

    def _hardware(self, system_id: int) -> int | None:
        """The campaign's hardware description as a version of SYSTEM_ID's (migration 0011): a
        description seen before is the same version; a new one leaves the runs before it as they were."""
        hw = self.prov.hardware
        if not hw:
            return None
        if system_id not in self.hardware_ids:
            doc = json.loads(json.dumps(hw, default=str))
            digest = hardware_digest(hw)
            row = self.conn.execute(
                "INSERT INTO hardware_versions (system_id, digest, cpu_model, cores_per_node, interconnect, hardware) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (system_id, digest) DO NOTHING RETURNING id",
                (system_id, digest, *hardware_columns(hw), Jsonb(doc))).fetchone()
            row = row or self.conn.execute("SELECT id FROM hardware_versions WHERE system_id = %s AND digest = %s",
                                           (system_id, digest)).fetchone()
            self.hardware_ids[system_id] = row[0]
        return self.hardware_ids[system_id]

    def _stack(self, name: str, library: str) -> int:
        key = (name, library)
        if key not in self.stack_ids:
            row = self.conn.execute("INSERT INTO stacks (name, library) VALUES (%s, %s) ON CONFLICT (name, library) "
                                    "DO NOTHING RETURNING id", key).fetchone()
            row = row or self.conn.execute("SELECT id FROM stacks WHERE name = %s AND library = %s", key).fetchone()
            self.stack_ids[key] = row[0]
        return self.stack_ids[key]

    def _intern_nodes(self, paths: Iterable[str]) -> None:
        new = sorted(set(paths) - self.node_ids.keys())
        if not new:
            return
        rows = [(k, k.rsplit("/", 1)[-1], k.rsplit("/", 1)[0] if "/" in k else None, k.count("/") + 1,
                 k.rsplit("/", 1)[-1].startswith("MPI_")) for k in new]
        with self.conn.cursor() as cur:
            cur.execute("INSERT INTO nodes (path, name, parent_path, depth, is_mpi) "
                        "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::bool[]) "
                        "ON CONFLICT (path) DO NOTHING", [list(col) for col in zip(*rows)])
            self.node_ids.update(cur.execute("SELECT path, id FROM nodes WHERE path = ANY(%s)", (new,)).fetchall())

    def _relabelled(self, cur, batch: list[Record]) -> list[int]:
        """The stored runs of BATCH's files whose labels differ, to be stored again (--relabel); without
        --relabel the first one is refused, naming each difference."""
        if not (self.given.app or self.given.params):
            return []
        by_hash = {r.content_hash: r for r in batch}
        stored = cur.execute("SELECT r.content_hash, r.id, r.app, s.parameters FROM runs r "
                             "LEFT JOIN series s ON s.id = r.series_id WHERE r.content_hash = ANY(%s)",
                             (list(by_hash),)).fetchall()
        out = []
        for content_hash, run_id, app, params in stored:
            rec = by_hash[content_hash]
            changes = label_changes(app, params, rec, self.given)
            if changes and not self.relabel:
                raise LabelConflict(f"{rec.source}: already stored as run {run_id} with other labels: "
                                    f"{'; '.join(changes)}; give --relabel to store the new labels")
            if changes:
                out.append(run_id)
        return out

    def write(self, batch: list[Record]) -> set[str]:
        """Inserts a batch; returns the content hashes that were new."""
        conn = self.conn
        text = {r.content_hash: r.copy_text or copy_text(r) for r in batch}
        self._intern_nodes(p for t in text.values() for table in t.values() for p, _tail in table if p is not None)
        series = self._intern_series(batch)
        rows = [(r.content_hash, self.campaign_id, self._system(r.system), self._stack(r.stack, r.mpi_library),
                 r.status, r.profile_kind, r.app, r.workload, r.variant, r.decomposition, r.interconnect, r.ranks,
                 r.nodes, r.global_size, r.local_size, r.iterations, r.compiler, r.spack_hash, r.caliper_version,
                 r.kernel, r.experiment, r.started_at, r.summary["wall_time"], r.summary["mpi_time_avg"],
                 r.summary["mpi_time_max"], r.summary["mpi_fraction_avg"], r.summary["mpi_fraction_slowest"],
                 r.source, Jsonb(r.metadata), self._hardware(self._system(r.system)), series_id,
                 MODEL_VERSION) for r, series_id in zip(batch, series)]
        ids: dict[str, int] = {}
        with conn.cursor() as cur:
            # A run stored before the measurement model (model_version NULL) or under an older version of it is
            # measured again: the new record replaces it (its rows go with it, and the rollups follow the delete).
            cur.execute("DELETE FROM runs WHERE (model_version IS NULL OR model_version < %s) "
                        "AND content_hash = ANY(%s)", (MODEL_VERSION, [r.content_hash for r in batch]))
            relabelled = self._relabelled(cur, batch)
            if relabelled:
                cur.execute("DELETE FROM runs WHERE id = ANY(%s)", (relabelled,))
            # A Ramble experiment stored without its profile is replaced by the profile once it is there.
            profiled = [(r.metadata.get("ramble_workspace") or "", r.metadata["ramble_experiment"]) for r in batch
                        if r.profile_kind != "none" and r.metadata.get("ramble_experiment")]
            if profiled:
                cur.execute("DELETE FROM runs r USING unnest(%s::text[], %s::text[]) AS p(ws, exp) "
                            "WHERE r.metadata ? 'profile_missing' "
                            "AND coalesce(r.metadata->>'ramble_workspace', '') = p.ws "
                            "AND r.metadata->>'ramble_experiment' = p.exp AND r.content_hash <> ALL(%s)",
                            ([w for w, _e in profiled], [e for _w, e in profiled],
                             [r.content_hash for r in batch]))
            # One INSERT per batch, not per run: the statement-level rollup triggers (migration 0010) then
            # add the batch to its (series, day) groups once, so ingest stays as fast as a series fills.
            # The staging table lives until the commit: an earlier ingest in the caller's own transaction
            # may have made it already.
            if not self.staged:
                cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS runs_in ON COMMIT DROP AS SELECT {RUN_COLUMNS} "
                            "FROM runs WITH NO DATA")
                self.staged = True
            cur.execute("TRUNCATE runs_in")
            with cur.copy(f"COPY runs_in ({RUN_COLUMNS}) FROM STDIN") as cp:
                for row in rows:
                    cp.write_row(row)
            cur.execute(f"INSERT INTO runs ({RUN_COLUMNS}) SELECT {RUN_COLUMNS} FROM runs_in "
                        "ON CONFLICT (content_hash) DO NOTHING RETURNING id, content_hash, started_at")
            returned = cur.fetchall()
            ids.update((h, run_id) for run_id, h, _t in returned)
            # The tables partitioned by their run's month (migration 0022) carry the run's started_at as stored.
            started = {run_id: t for run_id, _h, t in returned}
            new = [(ids[r.content_hash], r) for r in batch if r.content_hash in ids]
            # each run's leading columns, with and without its started_at, formatted once for every table
            heads = {run_id: (b"%d\t%s" % (run_id, _copy_field(started[run_id])), b"%d" % run_id)
                     for run_id, _r in new}
            for table, (month, node, cols, _rows) in COPY_TABLES.items():
                lines = []
                for run_id, r in new:
                    head = heads[run_id][0 if month else 1]
                    for path, tail in text[r.content_hash][table]:
                        if node:
                            lines += (head, b"\t\\N\t" if path is None else b"\t%d\t" % self.node_ids[path], tail)
                        else:
                            lines += (head, b"\t", tail)
                if lines:
                    lead = "run_id, " + ("started_at, " if month else "") + ("node_id, " if node else "")
                    with cur.copy(f"COPY {table} ({lead}{cols}) FROM STDIN") as cp:
                        cp.write(b"".join(lines))
        return set(ids)


def hardware_columns(hw: dict) -> tuple:
    """(cpu model, cores per node, interconnect) from a site's hardware
    description, flat (cpu_model: ...) or nested as ramble/sites/*/hardware.yaml
    writes it (cpu: {model, cores_per_node}, interconnect: {name, ...})."""
    cpu = hw.get("cpu") if isinstance(hw.get("cpu"), dict) else {}
    ic = hw.get("interconnect")
    if isinstance(ic, dict):
        ic = ic.get("name") or ic.get("technology")
    return (given_label(hw.get("cpu_model") or cpu.get("model")),
            as_int(hw.get("cores_per_node") or cpu.get("cores_per_node")), given_label(ic))


class Unlabelled:
    """The runs stored without what tells their series apart or names them, for one warning each per ingest:
    no parameters (no command line, no Adiak values, no --param: every problem size is one series), no system
    named (taken as the ingesting host) and no MPI library recorded."""

    def __init__(self):
        self.no_params: dict[str, int] = {}
        self.hosts: dict[str, int] = {}
        self.no_mpi = self.no_stack = 0

    def add(self, rec: Record, prov: Provenance) -> None:
        if rec.metadata.get("parameters_missing"):
            self.no_params[rec.app] = self.no_params.get(rec.app, 0) + 1
        if rec.metadata.get("system_source") == "ingesting host" and not prov.system:
            self.hosts[rec.system] = self.hosts.get(rec.system, 0) + 1
        if rec.mpi_library == "unknown":
            self.no_mpi += 1
            self.no_stack += rec.stack == MPI_NOT_RECORDED and not prov.stack

    def warnings(self) -> list[str]:
        out = [f"{n} run{'s' * (n > 1)} of {app} record no command line, Adiak values or parameters, so all its "
               f"problem sizes are one series; give --param KEY=VALUE (e.g. --param size=8) with each problem's runs"
               for app, n in sorted(self.no_params.items())]
        out += [f"{n} run{'s' * (n > 1)} name no system (no Adiak cluster or hostname): stored as this host, "
                f"{host}; give --system NAME if they ran elsewhere" for host, n in sorted(self.hosts.items())]
        if self.no_mpi:
            out.append(f"{self.no_mpi} run{'s' * (self.no_mpi > 1)} record no MPI library: " + (
                f"stack {MPI_NOT_RECORDED}; give --stack NAME (e.g. debian-openmpi4)" if self.no_stack else
                "its version is stored as unknown (`commscope run` records it for preloaded runs)"))
        return out


def ingest_records(conn: psycopg.Connection, records: Iterable[Record | BadProfile], prov: Provenance,
                   source: str, kind: str = "ingest", skip_bad: bool = False, progress=None,
                   relabel: bool = False, given: ReadOptions = ReadOptions()) -> Result:
    """Writes a stream of finished records (read.storable.finished: labelled and checked, or the BadProfile that
    refused one) as one campaign in one transaction (RELABEL and the labels GIVEN: see Writer)."""
    res = Result()
    seen: set[str] = set()
    with conn.transaction():
        db.writer_session(conn)
        db.take_write_lock(conn, WRITE_LOCK)
        campaign_id = conn.execute(
            "INSERT INTO campaigns (kind, source, git_commit, ci_pipeline) VALUES (%s, %s, %s, %s) RETURNING id",
            (kind, source, prov.git_commit, prov.ci_pipeline)).fetchone()[0]
        writer = Writer(conn, campaign_id, prov, relabel, given)
        unlabelled = Unlabelled()
        batch: list[Record] = []
        stored_before: set[str] = set()   # content hashes of runs already in the store

        def flush():
            new = writer.write(batch)
            for r in batch:
                (res.inserted if r.content_hash in new else res.skipped).append(r.source)
            stored_before.update(r.content_hash for r in batch if r.content_hash not in new)
            batch.clear()

        for rec in records:
            if progress:
                progress.update(1)
            if isinstance(rec, BadProfile):
                if not skip_bad:
                    raise rec  # rolls the whole campaign back
                res.bad.append(str(rec))
                continue
            if rec.metadata.get("profile_missing"):
                res.warnings.append(rec.metadata["profile_missing"])
            unlabelled.add(rec, prov)
            if rec.content_hash in seen:  # the same file given twice
                res.skipped.append(rec.source)
                continue
            seen.add(rec.content_hash)
            batch.append(rec)
            if len(batch) >= BATCH:
                flush()
        if batch:
            flush()
        res.warnings += unlabelled.warnings()
        res.already_in = [r[0] for r in conn.execute(
            "SELECT DISTINCT campaign_id FROM runs WHERE content_hash = ANY(%s) AND campaign_id <> %s ORDER BY 1",
            (sorted(stored_before), campaign_id))]
        if not res.inserted:
            conn.execute("DELETE FROM campaigns WHERE id = %s", (campaign_id,))
            res.campaign_id = res.already_in[0] if len(res.already_in) == 1 else None
        else:
            res.campaign_id = campaign_id
    return res

