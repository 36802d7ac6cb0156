"""Caliper profiles -> records. One Profile per run, whatever the file layout:
an aggregated runtime-profile/hatchet-region-profile (.cali with mpi.rank),
per-rank files (rank-N.cali, use.mpi=false), spot, json-split, or a
message-tracing aggregate (rank-N.cali keyed by mpi.rank, mpi.msg.dst).

Any application's profile is read, not only commscope's workloads: regions are
whatever nested attributes the application annotated (caliper-reader resolves
them into `path`), and the rank count comes from the first of Adiak's
`jobsize`, Caliper's `mpi.world.size`, the rank files or the largest
`mpi.rank` + 1, or 1 for a profile without MPI (docs/add-your-application.md).

Reading uses caliper-reader, the fastest of the field's readers; the numbers
are cross-checked against Hatchet in the tests. The file layouts are read by caliper_text (.cali) and
caliper_json; per-rank accumulation and statistics are rank_stats'."""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from commscope.read import files
from commscope.read.caliper_json import json_records
from commscope.read.caliper_text import (TIME_ATTRS, Damaged, check_path_size, damage, record_path,
                                         stream_cali)
from commscope.read.files import RANK_FILE, BadProfile
from commscope.read.rank_stats import PerRank, is_mpi, node_stats
from commscope.read.workload_output import NUMBER, Output, beside

SPOT_PREFIX = "inclusive#sum#time.duration"
SPOT_EXCL = "scale#sum#time.duration.ns"  # spot's exclusive time, in seconds despite the name
MAX_RANKS = 2**31 - 1   # the store's rank columns are PostgreSQL integers


# Caliper's comm.stats option, per comm region and rank: (our name, attribute, how ranks combine).
COMM_STATS = (("sends", "sum#sum#total.send.count", "sum"), ("recvs", "sum#sum#total.recv.count", "sum"),
              ("bytes_sent", "sum#sum#mpi.send.size", "sum"), ("bytes_recv", "sum#sum#mpi.recv.size", "sum"),
              ("max_message", "max#max#mpi.send.size", "max"), ("dest_ranks", "max#max#total.dest.ranks", "max"),
              ("src_ranks", "max#max#total.src.ranks", "max"), ("collectives", "max#max#total.coll.count", "sum"),
              ("irecv_gap_min", "min#cs.irecv_gap.min", "min"), ("irecv_gap_avg", "avg#cs.irecv_gap.avg", "avg"),
              ("irecv_gap_max", "max#cs.irecv_gap.max", "max"))


@dataclass
class Profile:
    """One run as read, with per-rank data held compactly: one float per call path and rank that has
    data (columns in RANK_IDS order), so memory grows with paths x ranks with data at 8 bytes, not with the
    file's records nor with the rank count it claims."""
    kind: str
    files: list[Path]
    content_hash: str
    meta: dict
    ranks: int
    # path tuple -> exclusive seconds per rank with data (column i is rank rank_ids[i]; 0 where it has no record)
    excl: dict = field(default_factory=dict)
    # path tuple -> which ranks (columns, as in excl) have a record there
    present: dict = field(default_factory=dict)
    # path tuple -> calls summed over ranks (region.count), absent when not counted
    calls: dict = field(default_factory=dict)
    # spot only: path -> {min, max, avg, sum} of inclusive time across ranks
    spot: dict = field(default_factory=dict)
    # path tuple -> bytes sent, summed over ranks, from message tracing
    bytes_sent: dict = field(default_factory=dict)
    matrix: dict = field(default_factory=dict)   # (src, dst) -> [messages, bytes]
    # comm region path -> comm.stats counters combined over ranks (see COMM_STATS)
    comm: dict = field(default_factory=dict)
    # seconds outside every region and outside MPI per rank (Caliper's records without a path)
    outside: np.ndarray | None = None
    # spot only: {min, max, avg, sum} across ranks of the time outside every region
    spot_outside: dict | None = None
    # whether Caliper wrapped MPI (profile.mpi): without it MPI time is not measured, not zero
    mpi_profiled: bool = False
    # ranks of the job that have no data (stored only with --allow-partial; the run is then 'partial')
    missing_ranks: list = field(default_factory=list)
    # records missing inside the call tree (_check_tree) or repeated (_check_repeats): stored only with
    # --allow-partial, as a 'partial' run (metadata lost_records says which)
    lost_records: str | None = None
    # Caliper's own MPI calls left out (drop_calipers_own): call path -> seconds summed over ranks
    calipers_own: dict = field(default_factory=dict)
    output: Output | None = None                  # the workload's stdout, when kept beside the profile
    ranks_source: str = ""                        # where the rank count came from (see rank_count)
    measured: np.ndarray | None = None            # which columns' ranks have any record (bool per column)
    # the rank of each column of excl, present, outside and measured: the ranks with data, ascending
    rank_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @functools.cached_property
    def stats(self) -> dict:
        """node_stats(self), computed once: interning and inserting both need it."""
        return node_stats(self)

    @property
    def source(self) -> str:
        return str(self.files[0].parent if len(self.files) > 1 else self.files[0])

    @property
    def measured_ranks(self) -> np.ndarray:
        """The ranks with any record, ascending."""
        return self.rank_ids[self.measured] if self.measured is not None else np.zeros(0, dtype=np.int64)


def _time(rec) -> float | None:
    for a in TIME_ATTRS:
        if a in rec:
            return seconds(rec, a)
    return None


def seconds(rec: dict, attr: str) -> float:
    """REC's ATTR as a time: a finite number of seconds, not below zero, as Caliper writes it; anything
    else (nan, inf, a negative or a '1_000') means the record is damaged."""
    raw = rec[attr]
    text = raw.strip() if isinstance(raw, str) else None
    value = float(raw) if text is None or NUMBER.fullmatch(text) else math.nan
    if not math.isfinite(value) or value < 0:
        raise Damaged(f"{attr} is {raw!r}, not a time (a finite number of seconds, not below 0)")
    return value


def _int_meta(path: Path, g: dict, key: str) -> int | None:
    """An integer metadata value, None when absent; a value that is not an integer is refused."""
    if key not in g:
        return None
    try:
        n = int(g[key])
    except (TypeError, ValueError):
        raise BadProfile(f"{path}: {key} {g[key]!r} is not an integer; give the rank count with --ranks N") from None
    if not 1 <= n <= MAX_RANKS:
        raise BadProfile(f"{path}: {key} {n} is not a rank count (1 to {MAX_RANKS}); give the rank count with "
                         f"--ranks N")
    return n


def rank_count(path: Path, g: dict, ranks_seen: set, mpi_seen: bool, given: int | None = None,
               file_ranks: set = frozenset()) -> tuple[int, str]:
    """The job's rank count and where it came from, first found: --ranks; Adiak's jobsize; Caliper's
    mpi.world.size; the largest rank with data + 1, named by the rank files (FILE_RANKS, from rank-N.cali) or
    by mpi.rank (RANKS_SEEN); 1 for a profile without MPI."""
    if given:
        return given, "--ranks"
    for key in ("jobsize", "mpi.world.size"):
        n = _int_meta(path, g, key)
        if n is not None:
            return n, key
    if ranks_seen or file_ranks:
        n = max(set(ranks_seen) | set(file_ranks)) + 1
        return n, "rank files" if file_ranks and max(file_ranks) + 1 == n else "largest mpi.rank + 1"
    if not mpi_seen:
        return 1, "no MPI in the profile"
    raise BadProfile(f"{path}: the rank count is not recorded (no Adiak jobsize, no mpi.world.size, no mpi.rank); "
                     f"give it with --ranks N")




_AGGREGATE = re.compile(r"^(count$|scount$|(sum|min|max|avg|inclusive|scale|ratio)#)")   # Caliper's aggregate results


class _Reader:
    """Accumulates one run's records as they stream in, whatever the file layout."""

    def __init__(self, prof: Profile):
        self.prof = prof
        self.columns: dict[int, int] = {}   # rank -> column of the per-rank arrays (PerRank)
        self.excl = PerRank(self.columns)
        self.outside = PerRank(self.columns)
        self.ranked: set[int] = set()   # ranks named by mpi.rank or a rank file
        self.unranked = False           # records that name no rank: a one-process profile, else refused
        self.spot = False
        self.any_msg = False
        self.comm_acc: dict = {}        # path -> {name: [sum, count, min, max]}
        self.spot_unsummed = False      # spot format 1 (Caliper 2.3-2.4): no across-rank sum, refused
        self.repeats = 0                # records read already (_check_repeats)
        self.first_repeat: tuple | None = None
        self.untimed_keys: set[int] = set()   # hashes of untimed records' keys (message trace, comm.stats)

    def record(self, rec: dict, file_rank: int | None) -> None:
        prof = self.prof
        if "mpi.rank" in rec:
            rank = int(rec["mpi.rank"])
            self.ranked.add(rank)
        elif file_rank is not None:
            rank = file_rank
        else:
            rank, self.unranked = 0, True
        p = record_path(rec)
        check_path_size(prof.source, p)
        if f"max#{SPOT_PREFIX}" in rec or "spot.channel" in rec:
            self.spot = True
            if f"max#{SPOT_PREFIX}" in rec and f"sum#{SPOT_PREFIX}" not in rec:
                self.spot_unsummed = True
                return
            if rec.get("spot.channel", "regionprofile") != "regionprofile":
                return   # spot's timeseries channel: not stored (docs/add-your-application.md)
            if not p and f"max#{SPOT_PREFIX}" in rec and "mpi.msg.dst" not in rec:
                prof.spot_outside = {k: seconds(rec, f"{k}#{SPOT_PREFIX}") for k in ("min", "max", "avg", "sum")}
            if p and f"max#{SPOT_PREFIX}" in rec:
                prof.spot[p] = {k: seconds(rec, f"{k}#{SPOT_PREFIX}") for k in ("min", "max", "avg", "sum")}
                if f"avg#{SPOT_EXCL}" in rec:
                    prof.spot[p].update({f"excl_{k}": seconds(rec, f"{k}#{SPOT_EXCL}")
                                         for k in ("min", "max", "avg", "sum")})
                if "sum#sum#rc.count" in rec:
                    prof.calls[p] = int(rec["sum#sum#rc.count"])
            return
        t = _time(rec)
        if t is None or "mpi.msg.dst" in rec or "mpi.msg.src" in rec:
            # Caliper aggregates into one record per key (every attribute that is not an aggregate): an untimed
            # record whose key was read already is a repeat, whose counts and bytes would be summed twice
            key = hash((rank, tuple(sorted((k, str(v)) for k, v in rec.items() if not _AGGREGATE.match(k)))))
            if key in self.untimed_keys:
                self.repeats += 1
                self.first_repeat = self.first_repeat or (p, rank)
                return
            self.untimed_keys.add(key)
        if "mpi.msg.dst" in rec or "mpi.msg.src" in rec:
            self.any_msg = True
        if "mpi.msg.dst" in rec:
            dst = int(rec["mpi.msg.dst"])
            if dst >= 0:  # MPI_PROC_NULL (-2) moves nothing
                nbytes = int(float(rec.get("sum#mpi.msg.size", 0)))
                cell = prof.matrix.setdefault((rank, dst), [0, 0])
                cell[0] += int(rec.get("count", 0))
                cell[1] += nbytes
                if p:
                    prof.bytes_sent[p] = prof.bytes_sent.get(p, 0) + nbytes
            return
        if t is not None and (self.excl if p else self.outside).has(p, rank):
            # Caliper's aggregation writes one record per call path and rank: a second is a repeat, not more time
            self.repeats += 1
            self.first_repeat = self.first_repeat or (p, rank)
            return
        if p and "sum#sum#total.send.count" in rec:
            acc = self.comm_acc.setdefault(p, {})
            for name, attr, _how in COMM_STATS:
                if attr in rec:
                    v = float(rec[attr])
                    a = acc.get(name)
                    if a is None:
                        acc[name] = [v, 1, v, v]
                    else:
                        a[0] += v
                        a[1] += 1
                        a[2] = min(a[2], v)
                        a[3] = max(a[3], v)
        if t is None:
            return  # a record without timing
        if not p:   # time outside every region
            self.outside.add((), rank, t)
            return
        self.excl.add(p, rank, t)
        if "sum#rc.count" in rec:
            prof.calls[p] = prof.calls.get(p, 0) + int(float(rec["sum#rc.count"]))

    def comm(self) -> dict:
        """comm.stats per comm region, combined over ranks (sums of counts and bytes, largest message
        and peer counts, the Irecv gap's min/mean/max)."""
        out = {}
        for p, acc in self.comm_acc.items():
            row = {}
            for name, _attr, how in COMM_STATS:
                if name in acc:
                    total, n, lo, hi = acc[name]
                    row[name] = {"sum": total, "max": hi, "min": lo, "avg": total / n}[how]
            out[p] = row
        return out


def read_files(paths: list[Path], allow_partial: bool = False, ranks: int | None = None) -> Profile:
    """One run from one aggregated file or a set of per-rank files: read_run of what files.load_run reads."""
    if sorted(paths)[0].suffix == ".out":
        raise BadProfile(f"{sorted(paths)[0]}: a workload's output, not a profile")  # records.from_output reads these
    return read_run(files.load_run(paths), allow_partial, ranks)


def read_run(run: files.RunFiles, allow_partial: bool = False, ranks: int | None = None) -> Profile:
    """One run from one aggregated file or a set of per-rank files (RUN, as files.load_run read them), its .cali
    files read as a stream. A run some of whose ranks have no data is refused, naming them, unless ALLOW_PARTIAL:
    then it is read with missing_ranks set. RANKS (--ranks) overrides the rank count the profile records."""
    paths = run.paths
    prof = Profile(kind="", files=paths, content_hash=run.content_hash, meta={}, ranks=0, output=beside(run.output))
    reader = _Reader(prof)
    json_kind = None
    g: dict | None = None
    if paths[0].suffix == ".json":
        records, g, json_kind = json_records(paths[0], run.document)
        try:
            for rec in records:
                reader.record(rec, None)
        except BadProfile:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise BadProfile(f"{paths[0]}: damaged JSON profile: {damage(e)} in a record") from None
    else:
        for path, f in run.cali:
            m = RANK_FILE.search(path.name)
            file_rank = int(m.group(1)) if m else None
            globals_ = stream_cali(path, f, lambda rec, fr=file_rank: reader.record(rec, fr))
            g = g if g is not None else dict(globals_)
    prof.meta = g
    if reader.spot_unsummed:
        raise BadProfile(f"{paths[0]}: a spot profile of format {g.get('spot.format.version', 1)} from Caliper "
                         f"{g.get('cali.caliper.version', '(version not recorded)')}, which keeps only the min, max and "
                         f"mean over ranks of each region's inclusive time: without their sum across ranks (spot "
                         f"format 2, Caliper 2.5 and later) or per-rank times the mean rank's time is unknown; record "
                         f"with hatchet-region-profile (per-rank times) or with a newer Caliper's spot")
    prof.comm = reader.comm()
    prof.mpi_profiled = _mpi_profiled(g, prof, reader.excl.values)
    per_rank_files = [int(m.group(1)) for p in paths if (m := RANK_FILE.search(p.name))]
    seen = reader.ranked | set(per_rank_files)
    prof.ranks, prof.ranks_source = rank_count(paths[0], g, reader.ranked, prof.mpi_profiled or "mpi.world.size" in g,
                                               ranks, set(per_rank_files))
    if reader.unranked and prof.ranks > 1 and not reader.spot:
        raise BadProfile(f"{paths[0]}: records carry no mpi.rank and the file name does not say the rank, but the "
                         f"job had {prof.ranks} ranks ({prof.ranks_source}); record with an MPI-enabled Caliper, or "
                         f"one file per rank named rank-N.cali (output=rank-%mpi.rank%.cali)")
    with_data = set(reader.columns) | seen | {src for src, _dst in prof.matrix}
    _check_claim(paths[0], prof, with_data)
    prof.rank_ids = ids = np.array(sorted(with_data), dtype=np.int64)
    prof.excl, prof.present = reader.excl.aligned(ids)
    out_values, out_present = reader.outside.aligned(ids)
    prof.outside = out_values.get((), np.zeros(len(ids)))
    measured = np.zeros(len(ids), dtype=bool)
    for pres in prof.present.values():
        measured |= pres
    if () in out_present:
        measured |= out_present[()]
    measured[np.searchsorted(ids, sorted({src for src, _dst in prof.matrix} | set(per_rank_files)))] = True
    prof.measured = measured
    _check_ranks(prof, allow_partial)
    _check_tree(prof, allow_partial)
    _check_repeats(prof, reader, allow_partial)
    if prof.mpi_profiled and not per_rank_files:
        drop_calipers_own(prof)
    if prof.matrix:
        prof.matrix = _world_matrix(prof)
    prof.kind = ("spot" if reader.spot else "msgtrace" if reader.any_msg and not prof.excl
                 else "per-rank" if len(paths) > 1 or RANK_FILE.search(paths[0].name)
                 else json_kind or g.get("cali.channel", "profile"))
    if not prof.excl and not prof.spot and not prof.matrix:
        if "comm_matrix" in prof.meta:
            raise BadProfile(f"{prof.source}: its communication matrix is {prof.meta['comm_matrix']}; ingest the "
                             f"run directory with the workload's output in it")
        raise BadProfile(f"{prof.source}: no timed regions and no messages: nothing to ingest")
    return prof


# A rank count is believed only up to twice the ranks that have data plus this many: per-rank arrays are
# sized by it, so memory stays bounded by the data whatever a file or --ranks claims.
CLAIM_SLACK = 1024


def claim_limit(with_data: int) -> int:
    """The largest rank count believed for a run with WITH_DATA ranks that have records."""
    return 2 * with_data + CLAIM_SLACK


def _check_claim(path: Path, prof: Profile, with_data: set) -> None:
    """Refuses a rank count, or a rank named by a record or file, far beyond the ranks with data."""
    if not with_data:
        return   # spot and one-process profiles keep no per-rank arrays
    if min(with_data) < 0:
        raise BadProfile(f"{path}: a record names rank {min(with_data)}, which is no rank; the file is damaged")
    limit = claim_limit(len(with_data))
    top = max(with_data)
    dst = max((d for _src, d in prof.matrix), default=0)
    if dst >= limit:
        raise BadProfile(f"{path}: messages to rank {dst}, but only {len(with_data)} ranks have data; the file is "
                         f"damaged")
    if top >= limit:
        raise BadProfile(f"{path}: its records name rank {top}, but only {len(with_data)} ranks have data; the file "
                         f"is damaged (at most {limit} ranks are believed for {len(with_data)} with data)")
    if prof.ranks > limit:
        raise BadProfile(f"{path}: {prof.ranks} ranks claimed ({prof.ranks_source}), but only {len(with_data)} ranks "
                         f"have data (at most {limit} are believed); give the job's real rank count with --ranks N")
    if top >= prof.ranks:
        raise BadProfile(f"{path}: records of rank {top}, but the job had {prof.ranks} ranks ({prof.ranks_source}); "
                         f"the file is damaged, or give the job's real rank count with --ranks N")


# Caliper's own MPI call: writing a profile merged across ranks (runtime-profile, spot, hatchet-region-profile,
# mpi-report), it duplicates MPI_COMM_WORLD with MPI_Comm_dup inside the application's MPI_Finalize, outside
# every region (src/caliper/OutputCommMpi.cpp, src/services/mpireport/MpiReport.cpp).
CALIPERS_OWN = (("MPI_Comm_dup",),)


def drop_calipers_own(prof: Profile) -> None:
    """Leave out the MPI calls Caliper makes itself, so MPI time and run time are the application's: in a
    profile merged across ranks with MPI wrapped, the record of MPI_Comm_dup outside every region (CALIPERS_OWN)
    is Caliper's one call per rank, made after the application's last region, while it writes the profile. It
    is kept whole where its call count (region.count) says a rank called it there more than once: then the
    application did too, and its calls and Caliper's cannot be told apart. Per-rank files (use.mpi=false)
    merge nothing and have no such call."""
    for p in CALIPERS_OWN:
        calls = prof.calls.get(p)
        if p in prof.excl:
            if calls is not None and calls > int(prof.present[p].sum()):
                continue
            prof.calipers_own[p] = float(prof.excl.pop(p).sum())
            del prof.present[p]
        elif p in prof.spot:
            if calls is not None and calls > prof.ranks:
                continue
            node = prof.spot.pop(p)
            prof.calipers_own[p] = node.get("excl_sum", node["sum"])   # a leaf: inclusive is exclusive
        else:
            continue
        prof.calls.pop(p, None)


def _check_tree(prof: Profile, allow_partial: bool) -> None:
    """Caliper writes a record for every region a rank entered (its exclusive time), so a rank with records
    under a region but none for the region itself has lost records: the file was cut or edited. Refused, or
    with ALLOW_PARTIAL read with lost_records set."""
    for p, present in prof.present.items():
        # a rank present at every path's parent is present at every prefix (by induction), so one look at the
        # parent per path finds every loss: linear in the paths' total length, not cubic in a path's depth
        parent = prof.present.get(p[:-1]) if len(p) > 1 else None
        if len(p) < 2 or (parent is not None and not (present & ~parent).any()):
            continue
        for i in range(1, len(p)):   # the shallowest region the ranks lost, named once
            parent = prof.present.get(p[:i])
            lost = present & ~parent if parent is not None else present
            if lost.any():
                ranks = prof.rank_ids[lost]
                what = (f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks[:5]))}"
                        f"{' and more' if len(ranks) > 5 else ''} have records under region {'/'.join(p[:i])} but "
                        f"none for it: context records are missing")
                if not allow_partial:
                    raise BadProfile(f"{prof.source}: {what}, so the file is cut or damaged; record or copy it "
                                     f"again, or give --allow-partial to store it as a partial run")
                prof.lost_records = what
                return


def _check_repeats(prof: Profile, reader: _Reader, allow_partial: bool) -> None:
    """Caliper writes one record per key: a call path and rank for timed records, every attribute that is not an
    aggregate for message-trace and comm.stats records. caliper-reader hands a repeated record over again, and
    summing it would count its time or bytes twice, so a repeat means the file was copied or joined wrongly.
    Refused, or with ALLOW_PARTIAL read without the repeats, as a partial run."""
    if not reader.repeats:
        return
    path, rank = reader.first_repeat
    what = (f"{reader.repeats} context record{'s' if reader.repeats > 1 else ''} repeat a record read already "
            f"(first: rank {rank}, {'/'.join(path) if path else 'outside every region'}): records are "
            f"duplicated")
    if not allow_partial:
        raise BadProfile(f"{prof.source}: {what}, so their times or bytes would count twice; record or copy it "
                         f"again, or give --allow-partial to store it as a partial run without the repeats")
    prof.lost_records = "; ".join(filter(None, [prof.lost_records, what]))


def _check_ranks(prof: Profile, allow_partial: bool) -> None:
    """Every rank of the job must have data; spot keeps no ranks, so it cannot be checked."""
    if not prof.measured.any() or prof.spot:
        return
    missing = np.setdiff1d(np.arange(prof.ranks), prof.measured_ranks).tolist()
    if not missing:
        return
    if not allow_partial:
        shown = ", ".join(map(str, missing[:20])) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
        raise BadProfile(f"{prof.source}: rank{'s' if len(missing) > 1 else ''} {shown} of the {prof.ranks} "
                         f"({prof.ranks_source}) have no data, so the run is incomplete; find the missing rank files, or "
                         f"give --allow-partial to store it as a partial run, kept out of series statistics")
    prof.missing_ranks = missing


def _world_matrix(prof: Profile) -> dict:
    """The matrix with every rank in MPI_COMM_WORLD. Caliper keys a message's sender by its world rank
    (mpi.rank) but its destination by the rank in the communicator used (mpi.msg.dst). Where the
    workload prints which world rank each communicator rank is (`RANK r world=w`), destinations are
    translated; where the run says it renumbered ranks (Adiak decomposition=rank-map) and names no
    mapping, no matrix is kept rather than a wrong one, and the metadata says why."""
    out = prof.output
    lines = out.rank_lines if out else []
    if lines and all("world" in ln for ln in lines):
        to_world = {int(ln["rank"]): int(ln["world"]) for ln in lines}
        world: dict = {}
        for (src, dst), (msgs, nbytes) in prof.matrix.items():
            if dst not in to_world:
                raise BadProfile(f"{prof.source}: messages to rank {dst}, which the workload's RANK lines "
                                 f"do not map to a world rank")
            cell = world.setdefault((src, to_world[dst]), [0, 0])
            cell[0] += msgs
            cell[1] += nbytes
        return world
    if prof.meta.get("decomposition") == "rank-map":
        prof.meta["comm_matrix"] = ("not stored: its destinations are ranks of a renumbered communicator and the "
                                    "run's output, which names each rank's world rank, is not beside the profile")
        return {}
    return prof.matrix


def _mpi_profiled(g: dict, prof: Profile, paths) -> bool:
    """Caliper says whether it wrapped MPI: runtime-profile and friends as opts:profile.mpi, spot in
    spot.options. Older files say neither; MPI functions among the nodes then show it was on."""
    if g.get("opts:profile.mpi") == "true" or "profile.mpi" in g.get("spot.options", "").split(","):
        return True
    return any(is_mpi(p) for p in paths) or any(is_mpi(p) for p in prof.spot)
