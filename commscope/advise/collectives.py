"""The collective tuning advisor (the reservoir study): from a sweep of collsweep over algorithms x message sizes,
the best algorithm per message-size band per collective, per stack and rank count, written as each stack's own
tuning input (docs/advisors.md, "Collective tuning advice", has the formats and what each was checked against).

Input: collsweep runs, from their stdout files or from the store (a campaign of the `collectives` study). A run's
algorithm is what the library was told and echoed (PARAM env.* and mpit.*), never a label: Open MPI's
coll_tuned_<coll>_algorithm number, MPICH's MPIR_CVAR_<COLL>_INTRA_ALGORITHM name, Intel MPI's I_MPI_ADJUST_<COLL>
preset id; no control means `default`. Runs that already used a tuning file are validation runs and left out.

Choice, per size: a non-default algorithm replaces the default only when its slowest run is faster than the
default's fastest by more than `min_gain` (5 %); among those, the one with the smallest best t_avg wins. Below
`min_gain` the difference is noise and the library's own decision stays. Consecutive sizes with the same choice
form a band, from just above the previous band's largest measured size to its own largest one (the last has no
upper end); why slowest against fastest: bench/results/collective_advice.md.

Outputs:
- Open MPI: a coll_tuned dynamic rules file (coll_tuned_dynamic_file.c of v4.1.4 and v5.0.10): a size-0 rule set
  of algorithm 0 (the fixed decision) and the measured communicator size's rules.
- MPICH: a collective selection JSON (MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE, csel.c of v4.0.2): the library's
  own compiled-in tree with the tuned collectives' intra-communicator branch replaced for the measured
  communicator size only; MPIR_CVAR_<COLL>_INTRA_ALGORITHM must stay `auto`.
- Intel MPI: I_MPI_ADJUST_<COLL>="<preset>:<lo>-<hi>@<p>-<q>;..." covering every size (it has no fall-back);
  when a band the default won has no preset within min_gain of it, the collective is left unset and listed in
  `unexpressible`.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from commscope.read import workload_output
from commscope.store import db
from commscope.store.queries import advise as queries

COLLS = ("barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall")
DEFAULT = "default"
MIN_GAIN = 0.05

# ompi/mca/coll/base/coll_base_functions.h, enum COLLTYPE (same in v4.1.4 and v5.0.10).
OMPI_COLL_ID = {"allgather": 0, "allreduce": 2, "alltoall": 3, "barrier": 6, "bcast": 7, "reduce": 11}
# `ompi_info --param coll tuned --level 9` of Open MPI 4.1.4 and 5.0.10 (workloads/README.md).
OMPI_ALGORITHMS = {
    "barrier": ["linear", "double_ring", "recursive_doubling", "bruck", "two_proc", "tree"],
    "bcast": ["basic_linear", "chain", "pipeline", "split_binary_tree", "binary_tree", "binomial", "knomial",
              "scatter_allgather", "scatter_allgather_ring"],
    "reduce": ["linear", "chain", "pipeline", "binary", "binomial", "in-order_binary", "rabenseifner"],
    "allreduce": ["basic_linear", "nonoverlapping", "recursive_doubling", "ring", "segmented_ring", "rabenseifner"],
    "allgather": ["linear", "bruck", "recursive_doubling", "ring", "neighbor", "two_proc", "sparbit"],
    "alltoall": ["linear", "pairwise", "modified_bruck", "linear_sync", "two_proc"],
}
OMPI_FANINOUT, OMPI_SEGSIZE = 4, 0
# Largest message size a rule can name without overflow in any reader.
INF_BYTES = 2**31 - 1


class BadInput(ValueError):
    """Input the advisor cannot use; the message names the input."""


@dataclass
class Point:
    """One measured t_avg of one collective, size and algorithm in one run."""
    family: str      # openmpi | mpich | impi
    stack: str
    ranks: int
    coll: str
    bytes: int
    algorithm: str   # native id: Open MPI number, MPICH name, Intel preset, or 'default'
    t_avg: float     # us
    source: str = ""


@dataclass
class Band:
    lo: int          # bytes, inclusive
    hi: int | None   # bytes, inclusive; None = no upper end
    algorithm: str
    sizes: list = field(default_factory=list)
    default_us: float = 0.0   # sum over the band's measured sizes
    best_us: float = 0.0


@dataclass
class Tuning:
    """The advice for one stack and rank count."""
    family: str
    stack: str
    ranks: int
    bands: dict = field(default_factory=dict)      # coll -> [Band]
    table: dict = field(default_factory=dict)      # coll -> {bytes: {algorithm: best us over repeats}}
    worst: dict = field(default_factory=dict)      # coll -> {bytes: {algorithm: worst us over repeats}}
    sources: list = field(default_factory=list)
    unexpressible: list = field(default_factory=list)   # bands the stack's tuning input cannot name, left default

    def predicted(self) -> dict:
        """Per collective: the measured default and best time summed over the
        sweep's sizes, and their ratio (>1 = the tuning should win)."""
        out = {}
        for coll, bands in self.bands.items():
            d = sum(b.default_us for b in bands)
            b_ = sum(b.best_us for b in bands)
            out[coll] = {"default_us": d, "tuned_us": b_, "speedup": d / b_ if b_ else None}
        return out

    def tuned_bands(self) -> dict:
        return {c: [b for b in bands if b.algorithm != DEFAULT] for c, bands in self.bands.items()}


# ---- reading the sweep -----------------------------------------------------------

def family_of(mpi_library: str) -> str | None:
    lib = mpi_library.lower()
    if "open mpi" in lib:
        return "openmpi"
    if "intel" in lib:
        return "impi"
    if "mpich" in lib:
        return "mpich"
    return None


def _ompi_number(coll: str, value: str) -> str | None:
    """An Open MPI algorithm control value (number or name) as its number."""
    value = value.strip().split()[0] if value.strip() else ""
    if value.isdigit():
        return value
    names = OMPI_ALGORITHMS.get(coll, [])
    return str(names.index(value) + 1) if value in names else None


def algorithm_of(family: str, coll: str, params: dict) -> str | None:
    """The native algorithm a run used for `coll`; None when the run is not a
    sweep point (it already ran with a tuning file, or says nothing usable)."""
    if any(k in params for k in ("env.OMPI_MCA_coll_tuned_dynamic_rules_filename",
                                 "env.MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE")):
        return None
    if family == "openmpi":
        # The library's own read-back first ("6 binomial"), then the environment.
        value = params.get(f"mpit.coll_tuned_{coll}_algorithm") or params.get(f"env.OMPI_MCA_coll_tuned_{coll}_algorithm")
        if not value:
            return DEFAULT
        num = _ompi_number(coll, value)
        return None if num is None else (DEFAULT if num == "0" else num)
    if family == "mpich":
        value = params.get(f"env.MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM", "auto").strip()
        return DEFAULT if value in ("", "auto") else value
    if family == "impi":
        value = params.get(f"env.I_MPI_ADJUST_{coll.upper()}", "").strip()
        if not value or value == "0":
            return DEFAULT
        return value if value.isdigit() else None
    return None


FOM = re.compile(r"^([a-z]+)_(\d+)B_t_avg$")


def points_from_output(text: str, source: str, stack: str | None = None) -> list[Point]:
    """The t_avg points of one collsweep stdout."""
    out = workload_output.parse_output(text)
    if out.workload != "collsweep":
        raise BadInput(f"{source}: not collsweep output (workload {out.workload or 'missing'})")
    family = family_of(out.mpi_library)
    if family is None:
        raise BadInput(f"{source}: unknown MPI library {out.mpi_library!r} (expected Open MPI, MPICH or Intel MPI)")
    if any(status == "FAIL" for status, _ in out.verify.values()):
        raise BadInput(f"{source}: the run failed its verification; its times are not advice")
    points = []
    for name, (value, _unit) in out.foms.items():
        m = FOM.match(name)
        if name == "barrier_t_avg":
            coll, size = "barrier", 0
        elif m and m.group(1) in COLLS:
            coll, size = m.group(1), int(m.group(2))
        else:
            continue
        alg = algorithm_of(family, coll, out.params)
        if alg is None:
            continue
        points.append(Point(family, stack or stack_label(family, out.mpi_library), out.ranks, coll, size, alg,
                            float(value), source))
    return points


def stack_label(family: str, mpi_library: str) -> str:
    """A stack name from the library's version line when none is given."""
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", mpi_library)
    return f"{family}-{m.group(1)}" if m else family


def points_from_files(paths: list[Path], stack: str | None = None) -> list[Point]:
    files = []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            raise BadInput(f"{p}: no such file or directory")
    points = []
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError as e:
            raise BadInput(f"{f}: cannot read ({e.strerror})") from None
        if "COMMSCOPE workload=collsweep" not in text:
            continue
        points += points_from_output(text, str(f), stack)
    if not points:
        raise BadInput(f"{', '.join(map(str, paths))}: no collsweep output with t_avg figures "
                       "(expected the stdout of collsweep runs)")
    return points


def points_from_store(conn, campaign: int) -> list[Point]:
    """The t_avg points of a stored campaign's collsweep runs."""
    rows = queries.collsweep_figures(conn, campaign)
    if not rows:
        raise BadInput(f"campaign {campaign}: no collsweep t_avg figures in the store")
    points = []
    for run_id, stack, library, ranks, params, coll, size, value in rows:
        family = family_of(library or "") or family_of(stack or "")
        if family is None:
            raise BadInput(f"campaign {campaign}, run {run_id}: unknown MPI library {library!r}")
        alg = algorithm_of(family, coll, params or {})
        if alg is not None and coll in COLLS:
            points.append(Point(family, stack, ranks, coll, int(size), alg, float(value), f"run {run_id}"))
    return points


# ---- choosing --------------------------------------------------------------------

def choose(points: list[Point], min_gain: float = MIN_GAIN) -> list[Tuning]:
    """One Tuning per (stack, rank count)."""
    groups: dict = {}
    for p in points:
        groups.setdefault((p.family, p.stack, p.ranks), []).append(p)
    tunings = []
    for (family, stack, ranks), pts in sorted(groups.items()):
        t = Tuning(family, stack, ranks, sources=sorted({p.source for p in pts}))
        samples: dict = {}
        for p in pts:
            samples.setdefault(p.coll, {}).setdefault(p.bytes, {}).setdefault(p.algorithm, []).append(p.t_avg)
        for coll, by_size in samples.items():
            table = {s: {a: min(v) for a, v in algs.items()} for s, algs in sorted(by_size.items())}
            worst = {s: {a: max(v) for a, v in algs.items()} for s, algs in sorted(by_size.items())}
            if not any(DEFAULT in algs for algs in table.values()):
                raise BadInput(f"{stack}, {ranks} ranks, {coll}: the sweep has no run with the default algorithm, "
                               "so nothing says what a tuning would gain")
            t.table[coll], t.worst[coll] = table, worst
            choice = []
            for s, algs in table.items():
                if DEFAULT not in algs:
                    continue  # no baseline at this size: no claim about it
                # An algorithm replaces the default only if its slowest run beats the default's fastest by
                # min_gain: on a shared machine one launch can be far slower than the next, and comparing best
                # against best chose presets that lost to the default in validation.
                beats = {a: us for a, us in algs.items()
                         if a != DEFAULT and worst[s][a] < algs[DEFAULT] * (1 - min_gain)}
                if beats:
                    best = min(beats, key=beats.get)
                    choice.append((s, best, algs[DEFAULT], algs[best]))
                else:
                    choice.append((s, DEFAULT, algs[DEFAULT], algs[DEFAULT]))
            bands: list[Band] = []
            for s, alg, d, b in choice:
                if bands and bands[-1].algorithm == alg:
                    band = bands[-1]
                else:
                    band = Band(lo=bands[-1].hi + 1 if bands else 0, hi=None, algorithm=alg)
                    bands.append(band)
                band.hi = s
                band.sizes.append(s)
                band.default_us += d
                band.best_us += b
            bands[-1].hi = None
            t.bands[coll] = bands
        tunings.append(t)
    return tunings


# ---- writing each stack's input ----------------------------------------------------

def ompi_rules(t: Tuning) -> str:
    """The coll_tuned dynamic rules file (classic format, Open MPI 4.1 and 5.0)."""
    colls = [c for c in COLLS if c in t.bands and c in OMPI_COLL_ID]
    lines = [f"# commscope advise collectives: {t.stack}, {t.ranks} ranks; sizes in bytes as coll/tuned counts them",
             f"{len(colls)}  # collectives"]
    for c in colls:
        scale = t.ranks if c in ("allgather", "alltoall") else 1
        bands = t.bands[c]
        # Two communicator sizes: from 0 the fixed decision, from the measured
        # size up the measured choice (the rule with the largest size <= the
        # communicator's applies).
        lines += [f"{OMPI_COLL_ID[c]}  # {c}", "2  # communicator sizes",
                  "0  # communicator size 0 and up", "1  # message size rules", "0 0 0 0  # fixed decision",
                  f"{t.ranks}  # communicator size {t.ranks} and up", f"{len(bands)}  # message size rules"]
        for b in bands:
            alg = 0 if b.algorithm == DEFAULT else int(b.algorithm)
            name = "fixed decision" if alg == 0 else OMPI_ALGORITHMS[c][alg - 1]
            lines.append(f"{b.lo * scale} {alg} {OMPI_FANINOUT} {OMPI_SEGSIZE}  # {name}")
    return "\n".join(lines) + "\n"


def parse_ompi_rules(text: str) -> dict:
    """Reads a classic rules file back the way coll_tuned_dynamic_file.c does
    (numbers in order, '#' to the end of a line is a comment):
    {coll id: {comm size: [(msg size, alg, faninout, segsize)]}}."""
    nums = [int(tok) for line in text.splitlines() for tok in line.split("#", 1)[0].split()]
    it = iter(nums)
    rules: dict = {}
    try:
        for _ in range(next(it)):
            cid = next(it)
            rules[cid] = {}
            for _ in range(next(it)):
                cs = next(it)
                msgs = [(next(it), next(it), next(it), next(it)) for _ in range(next(it))]
                if not msgs or msgs[0][0] != 0:
                    raise BadInput("the first message rule must be for size 0")
                rules[cid][cs] = msgs
    except StopIteration:
        raise BadInput("rules file ends early") from None
    return rules


def ompi_env(rules_path: Path) -> dict:
    return {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
            "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(rules_path)}


def mpich_function(coll: str, name: str) -> str:
    cap = coll.capitalize()
    return f"MPIR_{cap}_allcomm_nb" if name == "nb" else f"MPIR_{cap}_intra_{name}"


def mpich_default_tree(library: Path) -> dict:
    """The MPIR-level selection tree compiled into an MPICH library (the JSON
    its build generated from maint/tuning/coll/mpir/generic.json)."""
    try:
        data = library.read_bytes()
    except OSError as e:
        raise BadInput(f"{library}: cannot read the MPICH library ({e.strerror})") from None
    for m in re.finditer(rb'\{"collective=', data):
        end = data.find(b"\0", m.start())
        blob = data[m.start():end]
        if b'"algorithm=MPIR_' in blob:
            return json.loads(blob)
    raise BadInput(f"{library}: no MPIR collective selection tree inside (not an MPICH 4 or later library?)")


# The parameters an algorithm container takes in MPICH's selection JSON
# (src/mpi/coll/src/csel_container.c, parse_container_param), at the values of
# their CVARs' defaults (MPIR_CVAR_<COLL>_TREE_KVAL=2, _RECEXCH_KVAL=2,
# _TREE_TYPE=kary (MPIR_TREE_TYPE_KARY = 0), chunk sizes 0, or 8192 for the
# pipelined Bcast tree). MPICH allocates a container with malloc and sets only
# the parameters the file names, so an algorithm written as `{}` runs with
# whatever the heap held (k = 0 is a division by zero: SIGFPE). The Bcast
# tree's parser stores `is_non_blocking=` into k (atoi of the text after
# "k="), so k comes last.
MPICH_PARAMS = {
    "MPIR_Allreduce_intra_tree": {"tree_type": 0, "k": 2, "chunk_size": 0, "buffer_per_child": 0},
    "MPIR_Allreduce_intra_recexch": {"k": 2, "single_phase_recv": 0},
    "MPIR_Allreduce_intra_k_reduce_scatter_allgather": {"k": 2, "single_phase_recv": 0},
    "MPIR_Bcast_intra_tree": {"tree_type": 0, "is_non_blocking": 1, "k": 2},
    "MPIR_Bcast_intra_pipelined_tree": {"tree_type": 0, "is_non_blocking": 1, "chunk_size": 8192,
                                        "recv_pre_posted": 0, "k": 2},
    "MPIR_Barrier_intra_k_dissemination": {"k": 2},
    "MPIR_Barrier_intra_recexch": {"k": 2},
    "MPIR_Allgather_intra_k_brucks": {"k": 2},
    "MPIR_Alltoall_intra_k_brucks": {"k": 2},
}


def mpich_algorithm(coll: str, name: str) -> dict:
    """One algorithm container of the selection JSON, with its parameters."""
    fn = mpich_function(coll, name)
    return {f"algorithm={fn}": {f"{k}={v}": {} for k, v in MPICH_PARAMS.get(fn, {}).items()}}


def mpich_known_algorithms(library: Path) -> set[str]:
    """The algorithm containers an MPICH library's selection JSON can name
    (the keys its csel_container.c recognises, as strings in the library).
    MPICH 4.0 can be forced through its CVAR to algorithms its JSON parser
    does not know (Allreduce tree, recexch, ring), and stops at MPI_Init
    ("unrecognized key") on a file that names one."""
    try:
        data = library.read_bytes()
    except OSError as e:
        raise BadInput(f"{library}: cannot read the MPICH library ({e.strerror})") from None
    return {m.decode() for m in re.findall(rb"algorithm=(MPIR_\w+)\0", data)}


def mpich_express(t: Tuning, known: set[str]) -> None:
    """Bands whose best algorithm this MPICH's JSON cannot name go back to the
    library's default, and are listed in t.unexpressible (reported, not hidden)."""
    for coll, bands in t.bands.items():
        for b in bands:
            if b.algorithm != DEFAULT and mpich_function(coll, b.algorithm) not in known:
                t.unexpressible.append(f"{coll} {b.lo}-{'inf' if b.hi is None else b.hi} B: {b.algorithm} "
                                       f"({mpich_function(coll, b.algorithm)} is not in this MPICH's selection "
                                       "JSON; the band keeps the library's default)")
                b.algorithm, b.best_us = DEFAULT, b.default_us


def mpich_json(t: Tuning, default_tree: dict) -> dict:
    tree = json.loads(json.dumps(default_tree))  # a copy
    for coll, bands in t.tuned_bands().items():
        if not bands:
            continue
        key = f"collective={coll}"
        if key not in tree or "comm_type=intra" not in tree[key]:
            raise BadInput(f"the library's selection tree has no intra-communicator branch for {coll}")
        default_intra = tree[key]["comm_type=intra"]
        measure = "total_msg_size" if coll == "allgather" else "avg_msg_size"
        scale = t.ranks if coll == "allgather" else 1
        sized: dict = {}
        for b in t.bands[coll]:
            cond = f"{measure}=any" if b.hi is None else f"{measure}<={b.hi * scale}"
            sized[cond] = (json.loads(json.dumps(default_intra)) if b.algorithm == DEFAULT
                           else mpich_algorithm(coll, b.algorithm))
        branch = {}
        if t.ranks > 1:
            branch[f"comm_size<={t.ranks - 1}"] = json.loads(json.dumps(default_intra))
        branch[f"comm_size<={t.ranks}"] = sized
        branch["comm_size=any"] = default_intra
        tree[key]["comm_type=intra"] = branch
    return tree


def mpich_env(json_path: Path, t: Tuning) -> dict:
    env = {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(json_path)}
    for coll in t.tuned_bands():
        env[f"MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM"] = "auto"
    return env


def impi_preset_for_default(t: Tuning, coll: str, band: Band) -> str | None:
    """The preset measured fastest over a default band's sizes (None when no
    preset was measured at all of them)."""
    table = t.table.get(coll, {})
    totals: dict = {}
    for s in band.sizes:
        for alg, us in table.get(s, {}).items():
            if alg != DEFAULT:
                totals.setdefault(alg, []).append(us)
    full = {a: sum(v) for a, v in totals.items() if len(v) == len(band.sizes)}
    return min(full, key=full.get) if full else None


def impi_express(t: Tuning, min_gain: float = MIN_GAIN) -> None:
    """Intel MPI has no fall-back (impi_env): once I_MPI_ADJUST_<COLL> is set,
    the default's bands run a preset too, the one measured fastest over their
    sizes, at that preset's measured cost. A tuning must not make any band
    slower than the default: when a default band's best preset is slower there
    by more than min_gain, the collective is left unset and listed in
    t.unexpressible (reported, not hidden): a string that replaces a
    default which beats every preset slows every call in that band
    (bench/results/collective_advice.md has the case that showed it)."""
    for coll, bands in t.tuned_bands().items():
        if not bands:
            continue
        chosen, worse = [], []
        for b in t.bands[coll]:
            if b.algorithm != DEFAULT:
                continue
            preset = impi_preset_for_default(t, coll, b)
            if preset is None:
                continue
            cost = sum(t.table[coll][s][preset] for s in b.sizes)
            chosen.append((b, preset, cost))
            if cost > b.default_us * (1 + min_gain):
                worse.append(f"{b.lo}-{'inf' if b.hi is None else b.hi} B (preset {preset}: {cost:.3g} us against "
                             f"the default's {b.default_us:.3g} us)")
        if worse:
            t.unexpressible.append(
                f"{coll}: I_MPI_ADJUST_{coll.upper()} would also replace the default where it won, and no preset "
                f"matches it at {'; '.join(worse)}; left unset")
            for b in t.bands[coll]:
                b.algorithm, b.best_us = DEFAULT, b.default_us
            continue
        for b, preset, cost in chosen:
            b.algorithm, b.best_us = preset, cost


def impi_env(t: Tuning) -> dict:
    """I_MPI_ADJUST_<COLL> strings that cover every size. Intel MPI 2021 does
    not fall back to its own choice for a size no rule names (a size left out
    runs far slower: bench/results/collective_advice.md), so a band where the
    default won gets the preset measured fastest over its sizes."""
    env = {}
    for coll, bands in t.tuned_bands().items():
        if not bands:
            continue
        rules = []
        for b in t.bands[coll]:
            preset = b.algorithm if b.algorithm != DEFAULT else impi_preset_for_default(t, coll, b)
            if preset is not None:
                rules.append(f"{preset}:{b.lo}-{INF_BYTES if b.hi is None else b.hi}@{t.ranks}-{t.ranks}")
        env[f"I_MPI_ADJUST_{coll.upper()}"] = ";".join(rules)
    return env


IMPI_RULE = re.compile(r"^(\d+):(\d+)-(\d+)@(\d+)-(\d+)$")


def parse_impi(value: str) -> list[tuple]:
    """(preset, lo, hi, p, q) of each rule of an I_MPI_ADJUST_<COLL> string."""
    out = []
    for rule in value.split(";"):
        m = IMPI_RULE.match(rule)
        if not m:
            raise BadInput(f"I_MPI_ADJUST rule {rule!r} is not <preset>:<lo>-<hi>@<p>-<q>")
        out.append(tuple(int(x) for x in m.groups()))
    return out


def render(t: Tuning, outdir: Path, mpich_library: Path | None = None) -> dict:
    """The stack's tuning input, not yet written: {"files": {path: text},
    "env": the environment that enables it}. Everything that can fail on bad
    input fails here, before any file is written."""
    base = outdir / f"{t.stack}-n{t.ranks}"
    files: dict = {}
    if t.family == "openmpi":
        path = base.with_suffix(".rules")
        files[path] = ompi_rules(t)
        env = ompi_env(path.resolve())
    elif t.family == "mpich":
        if mpich_library is None:
            raise BadInput(f"{t.stack}: the MPICH tuning file needs the library's own tree: pass --mpich-library")
        path = base.with_suffix(".json")
        default_tree = mpich_default_tree(mpich_library)
        mpich_express(t, mpich_known_algorithms(mpich_library))
        files[path] = json.dumps(mpich_json(t, default_tree), indent=1) + "\n"
        env = mpich_env(path.resolve(), t)
    else:
        impi_express(t)
        env = impi_env(t)
    files[base.with_suffix(".env")] = "".join(f"{k}='{v}'\n" for k, v in env.items())
    return {"files": files, "env": env}


def write(rendered: list[dict], outdir: Path) -> list[dict]:
    """Writes rendered tuning inputs; returns them with file names as strings."""
    outdir.mkdir(parents=True, exist_ok=True)
    out = []
    for r in rendered:
        for path, text in r["files"].items():
            path.write_text(text)
        out.append({"files": [str(p) for p in r["files"]], "env": r["env"]})
    return out


def describe(t: Tuning) -> list[str]:
    lines = [f"{t.stack}, {t.ranks} ranks ({t.family})"]
    pred = t.predicted()
    for coll, bands in t.bands.items():
        p = pred[coll]
        lines.append(f"  {coll}: predicted {p['default_us']:.1f} us -> {p['tuned_us']:.1f} us over the swept sizes "
                     f"({p['speedup']:.2f}x)")
        for b in bands:
            hi = "inf" if b.hi is None else str(b.hi)
            gain = b.default_us / b.best_us if b.best_us else 1.0
            lines.append(f"    {b.lo:>9}-{hi:<9} B  {b.algorithm:<28} {gain:5.2f}x  (sizes {b.sizes[0]}..{b.sizes[-1]})")
    lines += [f"  not expressible: {u}" for u in t.unexpressible]
    return lines


def summary(t: Tuning, written: dict | None = None, measured: dict | None = None) -> dict:
    return {"family": t.family, "stack": t.stack, "ranks": t.ranks,
            "bands": {c: [{"lo": b.lo, "hi": b.hi, "algorithm": b.algorithm, "sizes": b.sizes,
                           "default_us": b.default_us, "best_us": b.best_us} for b in bands]
                      for c, bands in t.bands.items()},
            "predicted": t.predicted(), "measured": measured or {},
            "env": (written or {}).get("env", {}), "files": (written or {}).get("files", []),
            "sources": t.sources[:50], "unexpressible": t.unexpressible}


def advice_text(t: Tuning, measured: dict | None = None) -> str:
    tuned = {c: b for c, b in t.tuned_bands().items() if b}
    if not tuned:
        text = f"{t.stack} at {t.ranks} ranks: no algorithm beats the default by more than {MIN_GAIN:.0%}; keep the defaults."
    else:
        parts = [f"{c} " + ", ".join(f"{b.algorithm} for {b.lo}-{'inf' if b.hi is None else b.hi} B" for b in bands)
                 for c, bands in tuned.items()]
        pred = t.predicted()
        text = (f"{t.stack} at {t.ranks} ranks: use " + "; ".join(parts) + ". Predicted over the swept sizes: "
                + ", ".join(f"{c} {pred[c]['speedup']:.2f}x" for c in tuned) + ".")
    for name, m in (measured or {}).items():
        # "verdict": the regression gate's test over the validation runs; older records have the ratio only
        if "verdict" in m:
            verdict = {"wins": "wins", "LOSES": "LOSES to the default"}.get(m["verdict"],
                                                                            "shows no measurable difference")
        else:
            verdict = "wins" if m["speedup"] > 1 else "LOSES to the default"
        text += f" Measured {name}: {m['speedup']:.2f}x, the tuning {verdict}."
    return text


def store(conn, t: Tuning, source: str, written: dict | None = None, measured: dict | None = None,
          run_id: int | None = None) -> int:
    return db.insert_advice(conn, "collectives", run_id, source, summary(t, written, measured), advice_text(t, measured))
