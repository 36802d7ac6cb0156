"""Records -> PostgreSQL. One transaction per campaign: every profile is read
and checked before the first write, so bad input leaves the store unchanged,
and a killed ingest leaves nothing behind. Runs are keyed by the content hash
of their files, so re-ingesting is a no-op and concurrent ingests of the same
files insert each run once."""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from . import profiles
from .profiles import BadProfile, Profile


@dataclass
class Provenance:
    """What the profile itself cannot say, given on the command line."""
    system: str | None = None
    stack: str | None = None
    interconnect: str | None = None
    git_commit: str | None = None
    ci_pipeline: str | None = None
    spack_hash: str | None = None
    compiler: str | None = None


@dataclass
class Result:
    inserted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # already in the store
    bad: list[str] = field(default_factory=list)       # with --skip-bad


def read_all(inputs: list[Path], skip_bad: bool, progress=None) -> tuple[list[Profile], list[str]]:
    groups = profiles.discover(inputs)
    if not groups:
        raise BadProfile(f"{', '.join(map(str, inputs))}: no Caliper profiles found")
    good, bad = [], []
    for g in groups:
        try:
            good.append(profiles.read_files(g))
        except BadProfile as e:
            if not skip_bad:
                raise
            bad.append(str(e))
        if progress:
            progress.update(1)
    return good, bad


def _clean(s: str | None, limit: int = 4096) -> str | None:
    """Metadata strings as stored: no NUL (PostgreSQL rejects it), bounded."""
    if s is None:
        return None
    return s.replace("\x00", "\ufffd")[:limit]


def _stack(conn, prof: Profile, prov: Provenance) -> int:
    g = prof.meta
    vendor, version = g.get("mpi_library_vendor", "unknown"), g.get("mpi_library_version", "")
    library = _clean(prof.output.mpi_library if prof.output and prof.output.mpi_library else f"{vendor} {version}".strip())
    name = _clean(prov.stack or f"{vendor} {version}".strip())
    row = conn.execute("INSERT INTO stacks (name, library) VALUES (%s, %s) ON CONFLICT (name, library) DO NOTHING "
                       "RETURNING id", (name, library)).fetchone()
    return row[0] if row else conn.execute("SELECT id FROM stacks WHERE name = %s AND library = %s",
                                           (name, library)).fetchone()[0]


def _system(conn, prof: Profile, prov: Provenance) -> int:
    name = _clean(prov.system or prof.meta.get("cluster") or prof.meta.get("hostname") or "unknown")
    row = conn.execute("INSERT INTO systems (name) VALUES (%s) ON CONFLICT (name) DO NOTHING RETURNING id",
                       (name,)).fetchone()
    return row[0] if row else conn.execute("SELECT id FROM systems WHERE name = %s", (name,)).fetchone()[0]


def _intern_nodes(conn, paths: list[tuple]) -> dict[tuple, int]:
    """Call paths to ids. Sorted inserts keep concurrent ingests in one lock order."""
    keys = sorted({"/".join(p) for p in paths})
    rows = [(k, k.rsplit("/", 1)[-1], k.rsplit("/", 1)[0] if "/" in k else None, k.count("/") + 1,
             k.rsplit("/", 1)[-1].startswith("MPI_")) for k in keys]
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO nodes (path, name, parent_path, depth, is_mpi) VALUES (%s, %s, %s, %s, %s) "
                        "ON CONFLICT (path) DO NOTHING", rows)
        ids = dict(cur.execute("SELECT path, id FROM nodes WHERE path = ANY(%s)", (keys,)).fetchall())
    return {tuple(k.split("/")): ids[k] for k in keys}


def _started_at(prof: Profile) -> dt.datetime:
    for key in ("launchdate", "starttime.sec"):
        if key in prof.meta:
            try:
                return dt.datetime.fromtimestamp(int(prof.meta[key]), dt.timezone.utc)
            except ValueError:
                pass
    return dt.datetime.fromtimestamp(prof.files[0].stat().st_mtime, dt.timezone.utc)


def _int(s) -> int | None:
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


@dataclass
class Names:
    """Ids of the shared names a campaign uses, interned once before its runs."""
    systems: dict = field(default_factory=dict)
    stacks: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)

    @classmethod
    def intern(cls, conn, profs: list[Profile], prov: Provenance) -> "Names":
        names = cls()
        for prof in profs:
            names.systems[id(prof)] = _system(conn, prof, prov)
            names.stacks[id(prof)] = _stack(conn, prof, prov)
        names.nodes = _intern_nodes(conn, sorted({p for prof in profs for p in prof.stats}
                                                 | {p for prof in profs for p, _ in prof.bytes_sent}))
        return names


def insert_run(conn, campaign_id: int, prof: Profile, prov: Provenance, names: Names) -> int | None:
    """Inserts one run with all its metrics; None if its content is already stored."""
    g = prof.meta
    summary = profiles.run_summary(prof)
    out = prof.output
    row = conn.execute(
        """INSERT INTO runs (content_hash, campaign_id, system_id, stack_id, status, profile_kind, app, workload,
               variant, decomposition, interconnect, ranks, global_size, local_size, iterations, compiler,
               spack_hash, caliper_version, started_at, wall_time, mpi_time_avg, mpi_time_max, mpi_fraction_avg,
               mpi_fraction_slowest, source, metadata)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
           ON CONFLICT (content_hash) DO NOTHING RETURNING id""",
        (prof.content_hash, campaign_id, names.systems[id(prof)], names.stacks[id(prof)],
         "failed" if out and any(s == "FAIL" for s, _ in out.verify.values()) else "ok",
         prof.kind, _clean(g["workload"]), _clean(g.get("ramble_workload") or g["workload"]),
         _clean(g.get("variant")), _clean(g.get("decomposition")), _clean(prov.interconnect),
         prof.ranks, _clean(g.get("global_size")), _clean(g.get("local_size")), _int(g.get("iterations")),
         _clean(prov.compiler or g.get("compiler")), _clean(prov.spack_hash or g.get("spack_hash")),
         _clean(g.get("cali.caliper.version")), _started_at(prof), summary["wall_time"], summary["mpi_time_avg"],
         summary["mpi_time_max"], summary["mpi_fraction_avg"], summary["mpi_fraction_slowest"],
         _clean(prof.source), Jsonb({k: _clean(v) for k, v in g.items() if k != "libraries"})),
    ).fetchone()
    if row is None:
        return None
    run_id = row[0]
    stats = prof.stats
    ids = names.nodes
    with conn.cursor() as cur:
        with cur.copy("COPY node_metrics (run_id, node_id, excl_min, excl_avg, excl_max, incl_min, incl_avg, "
                      "incl_max, calls, imbalance) FROM STDIN") as cp:
            for p, s in stats.items():
                imb = s.excl_max / s.excl_avg if s.excl_max is not None and s.excl_avg else None
                cp.write_row((run_id, ids[p], s.excl_min, s.excl_avg, s.excl_max, s.incl_min, s.incl_avg,
                              s.incl_max, s.calls, imb))
        # MPI leaves summed over ranks (spot: its across-rank sum; MPI leaves have no children).
        mpi_total: dict = {}
        for (p, _r), t in prof.excl.items():
            if profiles.is_mpi(p) and len(p) > 1:
                mpi_total[p] = mpi_total.get(p, 0.0) + t
        for p, sp in prof.spot.items():
            if profiles.is_mpi(p) and len(p) > 1:
                mpi_total[p] = sp.get("excl_sum", sp["sum"])
        mpi = {p: (t, stats[p].excl_max, stats[p].calls) for p, t in mpi_total.items()}
        bytes_by_path: dict = {}
        for (p, _r), b in prof.bytes_sent.items():
            bytes_by_path[p] = bytes_by_path.get(p, 0) + b
        with cur.copy("COPY mpi_metrics (run_id, node_id, function, time_total, time_max, calls, bytes) "
                      "FROM STDIN") as cp:
            for p, (total, tmax, calls) in mpi.items():
                cp.write_row((run_id, ids[p[:-1]] if p[:-1] in ids else ids[p], p[-1], total, tmax, calls,
                              bytes_by_path.get(p)))
            for p, b in bytes_by_path.items():
                if p not in mpi and profiles.is_mpi(p) and len(p) > 1:
                    cp.write_row((run_id, ids[p[:-1]] if p[:-1] in ids else ids[p], p[-1], 0.0, None, None, b))
        with cur.copy("COPY rank_metrics (run_id, rank, total_time, user_time, mpi_time, mpi_sync_time) "
                      "FROM STDIN") as cp:
            for r, gr in sorted(profiles.rank_groups(prof).items()):
                cp.write_row((run_id, r, gr["total"], gr["user"], gr["mpi"], gr["sync"]))
        with cur.copy("COPY comm_matrix (run_id, src, dst, messages, bytes) FROM STDIN") as cp:
            for (src, dst), (msgs, b) in sorted(prof.matrix.items()):
                cp.write_row((run_id, src, dst, msgs, b))
        if out:
            with cur.copy("COPY foms (run_id, name, repeat, value, unit) FROM STDIN") as cp:
                for name, (value, unit) in out.foms.items():
                    cp.write_row((run_id, _clean(name, 200), 0, value, _clean(unit, 50)))
    return run_id


def ingest(conn: psycopg.Connection, inputs: list[Path], prov: Provenance, skip_bad: bool = False,
           progress=None) -> Result:
    """Reads everything first, then writes one campaign in one transaction."""
    profs, bad = read_all(inputs, skip_bad, progress)
    # One global order, so concurrent ingests wait on each other's runs in the
    # same sequence and cannot deadlock.
    profs.sort(key=lambda p: p.content_hash)
    res = Result(bad=bad)
    # Shared dictionaries (systems, stacks, call paths) are interned and
    # committed first: they are not campaign data, and holding their locks
    # for a whole campaign would let two campaigns wait on each other.
    with conn.transaction():
        names = Names.intern(conn, profs, prov)
    with conn.transaction():
        campaign_id = conn.execute(
            "INSERT INTO campaigns (kind, source, git_commit, ci_pipeline) VALUES ('ingest', %s, %s, %s) RETURNING id",
            (_clean(json.dumps([str(i) for i in inputs])), _clean(prov.git_commit), _clean(prov.ci_pipeline)),
        ).fetchone()[0]
        for prof in profs:
            (res.inserted if insert_run(conn, campaign_id, prof, prov, names) else res.skipped).append(prof.source)
        if not res.inserted:
            conn.execute("DELETE FROM campaigns WHERE id = %s", (campaign_id,))
    return res
