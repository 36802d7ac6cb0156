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
are cross-checked against Hatchet in the tests. The file layouts are read, and their records added per call path
and rank, by caliper (accumulate); read_run makes the Profile of that: the rank count, the ranks with data, the
checks of what a run must hold. Its statistics are measures'."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from commscope.read import files
from commscope.read.caliper import Accumulator, PerRank, accumulate
from commscope.read.files import RANK_FILE, BadProfile
from commscope.read.measures import is_mpi, node_stats
from commscope.read.workload_output import Output, beside

MAX_RANKS = 2**31 - 1   # the store's rank columns are PostgreSQL integers


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


def read_files(paths: list[Path], allow_partial: bool = False, ranks: int | None = None) -> Profile:
    """One run from one aggregated file or a set of per-rank files: read_run of what files.load_run reads."""
    if sorted(paths)[0].suffix == ".out":
        raise BadProfile(f"{sorted(paths)[0]}: a workload's output, not a profile")  # records.from_output reads these
    run = files.load_run(paths)
    return read_run(run, beside(run.output), allow_partial, ranks)


def read_run(run: files.RunFiles, output: Output | None = None, allow_partial: bool = False,
             ranks: int | None = None) -> Profile:
    """One run from one aggregated file or a set of per-rank files (RUN, as files.load_run read them), its .cali
    files read as a stream; OUTPUT is the workload's output kept beside it (workload_output.beside). A run some of
    whose ranks have no data is refused, naming them, unless ALLOW_PARTIAL: then it is read with missing_ranks set.
    RANKS (--ranks) overrides the rank count the profile records."""
    paths = run.paths
    prof = Profile(kind="", files=paths, content_hash=run.content_hash, meta={}, ranks=0, output=output)
    reader = accumulate(run, prof.source)
    prof.meta = g = reader.globals
    prof.spot, prof.spot_outside, prof.calls = reader.spot, reader.spot_outside, reader.calls
    prof.matrix, prof.bytes_sent = reader.matrix, reader.bytes_sent
    if reader.spot_unsummed:
        raise BadProfile(f"{paths[0]}: a spot profile of format {g.get('spot.format.version', 1)} from Caliper "
                         f"{g.get('cali.caliper.version', '(version not recorded)')}, which keeps only the min, max and "
                         f"mean over ranks of each region's inclusive time: without their sum across ranks (spot "
                         f"format 2, Caliper 2.5 and later) or per-rank times the mean rank's time is unknown; record "
                         f"with hatchet-region-profile (per-rank times) or with a newer Caliper's spot")
    prof.comm = reader.comm
    prof.mpi_profiled = _mpi_profiled(g, prof, reader.excl.values)
    per_rank_files = [int(m.group(1)) for p in paths if (m := RANK_FILE.search(p.name))]
    seen = reader.ranked | set(per_rank_files)
    prof.ranks, prof.ranks_source = rank_count(paths[0], g, reader.ranked, prof.mpi_profiled or "mpi.world.size" in g,
                                               ranks, set(per_rank_files))
    if reader.unranked and prof.ranks > 1 and not reader.is_spot:
        raise BadProfile(f"{paths[0]}: records carry no mpi.rank and the file name does not say the rank, but the "
                         f"job had {prof.ranks} ranks ({prof.ranks_source}); record with an MPI-enabled Caliper, or "
                         f"one file per rank named rank-N.cali (output=rank-%mpi.rank%.cali)")
    with_data = set(reader.columns) | seen | {src for src, _dst in prof.matrix}
    _check_claim(paths[0], prof, with_data)
    prof.rank_ids = ids = np.array(sorted(with_data), dtype=np.int64)
    prof.excl, prof.present = _in_rank_order(reader.excl, ids)
    out_values, out_present = _in_rank_order(reader.outside, ids)
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
    prof.kind = ("spot" if reader.is_spot else "msgtrace" if reader.any_msg and not prof.excl
                 else "per-rank" if len(paths) > 1 or RANK_FILE.search(paths[0].name)
                 else reader.json_kind or g.get("cali.channel", "profile"))
    if not prof.excl and not prof.spot and not prof.matrix:
        if "comm_matrix" in prof.meta:
            raise BadProfile(f"{prof.source}: its communication matrix is {prof.meta['comm_matrix']}; ingest the "
                             f"run directory with the workload's output in it")
        raise BadProfile(f"{prof.source}: no timed regions and no messages: nothing to ingest")
    return prof


def _in_rank_order(per_rank: PerRank, rank_ids: np.ndarray) -> tuple[dict, dict]:
    """PER_RANK's arrays (values, present), columns in the order ranks first appeared, with one column per rank of
    RANK_IDS instead (ascending, holding every rank PER_RANK has), one array at a time: memory follows the ranks
    with data, never a claimed rank count."""
    ranks = np.full(len(per_rank.columns), -1, dtype=np.int64)
    for rank, col in per_rank.columns.items():
        ranks[col] = rank
    where = np.searchsorted(rank_ids, ranks)
    for d in (per_rank.values, per_rank.present):
        for p, a in d.items():
            out = np.zeros(len(rank_ids), dtype=a.dtype)
            m = min(len(a), len(where))
            out[where[:m]] = a[:m]
            d[p] = out
    return per_rank.values, per_rank.present


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


def _check_repeats(prof: Profile, reader: Accumulator, allow_partial: bool) -> None:
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
