"""Every reader under a fuzzer (issue 46, item 1). Hypothesis builds structured mutations of real inputs and hands
each to `commscope ingest` itself (click's runner, in this process, against one store per test):

- Caliper .cali (tests/data): a record's value replaced by a hostile one (huge, negative, nan, a long name, control
  characters, a NUL, bytes that are no UTF-8), a record referring to what is not defined, a chain of nested regions
  (up to 1,500 deep: beyond what the store holds) or up to 2,000 siblings appended;
- Caliper JSON (json-split and cali-query's json): any value of the document replaced by one of another type, size
  or depth (up to 200 levels), a key deleted, the text re-encoded (UTF-16, a BOM, Latin-1);
- workload output (.out): contract lines (FOM, RANK, keys) with hostile fields, duplicated, cut or reordered;
- Ramble workspaces (tests/data/ramble): results.latest.json mutated like the JSON above (paths that climb out,
  absolute paths, wrong types), hardware.yaml replaced by hostile YAML (aliases, depth, wrong types, tags, size),
  the layout damaged (a run directory or profile removed, replaced by a FIFO, a directory, a symbolic link out of
  the workspace or to itself);
- ReFrame reports (tests/thirdparty/reframe) mutated like the JSON above, perflogs by fields (a field added,
  removed or replaced by a hostile value, a line cut, the header changed);
- special files where an input is named: a FIFO, a directory named like a profile, a dangling or looping symbolic
  link, an empty file, a file name with control characters.

Each case must end in a correct run (exit 0, the store holding it) or in one line on stderr that names the input (its
folder), without a traceback or commscope's "a bug in commscope's reader" line, with the store's rows unchanged. The
budget is fixed for CI (derandomize=True, database=None, a set max_examples per reader; the module runs in well
under a minute). The older tests/test_fuzz_input.py flips bytes of profiles and outputs through read_group."""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import traceback
from pathlib import Path
from types import SimpleNamespace

import psycopg
from hypothesis import HealthCheck, given, settings, strategies as st
from helpers import positions

DATA = Path(__file__).parent / "data"
RAMBLE = DATA / "ramble"
REFRAME = Path(__file__).parent / "thirdparty" / "reframe"
CALI = DATA / "halo3d-overlap-n2.runtime-profile.cali"
CALI_SPLIT = DATA / "halo3d-nonblocking-n2.comm-stats.cali"
JSON_SPLIT = DATA / "stencil2d-cart-n2.json-split.json"
OUT = DATA / "halo3d-overlap-n2.runtime-profile.out"
WORKSPACES = [RAMBLE / "barriers-openmpi4-counts", RAMBLE / "smoke-mpich4-matrix"]



def fuzz(examples: int) -> settings:
    """The fixed CI budget: EXAMPLES examples, the same ones every run."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None, print_blob=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.large_base_example])

# ---- hostile values ------------------------------------------------------------------------------------------------

HOSTILE_TEXT = ["", " ", "0", "-1", "1e308", "nan", "inf", "-inf", "1_000", "0x10", "99999999999999999999",
                "../../..", "/etc/passwd", "a/../../b", "new\nline", "nul\x00byte", "esc\x1b[31m", "bidi\u202eilac",
                "\ud800", "<script>x</script>", "$__timeFilter(x)", "${var}", "%s%n", "'; DROP TABLE runs; --",
                "x" * 1025, "y" * 5000, "é" * 1300]
hostile_text = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=30))
hostile_scalar = st.one_of(st.none(), st.booleans(), hostile_text,
                           st.sampled_from([0, -1, -2, 2**31, 2**63, 10**30, 1e308, -1e308, 0.5, -0.0]),
                           st.floats(allow_nan=True, allow_infinity=True), st.integers())


def nested(depth: int, leaf=1):
    """A list nested DEPTH deep around LEAF."""
    for _ in range(depth):
        leaf = [leaf]
    return leaf


hostile_json = st.one_of(
    hostile_scalar,
    st.lists(hostile_scalar, max_size=4),
    st.dictionaries(hostile_text, hostile_scalar, max_size=3),
    st.integers(1, 200).map(nested),
    st.integers(1, 200).map(lambda n: {"a": nested(n, {"b": None})}),
    st.integers(1000, 100_000).map(lambda n: list(range(n))))


def _set(doc, path, value, delete=False):
    if not path:
        return value
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@st.composite
def mutated_json(draw, doc):
    """DOC with one to three values replaced by hostile ones, or deleted."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        spots = list(positions(doc))
        # values deep in the document are many; favour the named ones near the top as often
        path, _ = draw(st.one_of(st.sampled_from(spots), st.sampled_from(spots[:60])))
        if path and draw(st.integers(0, 4)) == 0:
            doc = _set(doc, path, None, delete=True)
        else:
            doc = _set(doc, path, draw(hostile_json))
    return doc


def json_bytes(doc, encoding: str) -> bytes:
    text = json.dumps(doc, ensure_ascii=False)
    if encoding == "utf-8-sig":
        return b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")
    return text.encode(encoding, "surrogatepass" if encoding.startswith("utf") else "replace")


encodings = st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-16", "utf-8-sig", "latin-1"])

# ---- running ingest ------------------------------------------------------------------------------------------------


class Hang(BaseException):
    """Raised in a hung ingest: a BaseException, so that no handler of commscope's takes it for an error of the
    file (TimeoutError is an OSError)."""


def ingest(dsn: str, *args) -> SimpleNamespace:
    """`commscope ingest -q ARGS` through click's runner: (returncode, stdout, stderr); an exception that escaped
    the command is a traceback on stderr."""
    from click.testing import CliRunner
    from commscope.cli import main

    def hung(*_):
        raise Hang(f"ingest still running after {HANG_SECONDS} s")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG_SECONDS)
    try:
        r = CliRunner(mix_stderr=False).invoke(main, ["ingest", "-q", *map(str, args)],
                                               env={"COMMSCOPE_DB_URL": dsn})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    stderr = r.stderr
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*r.exc_info))
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=stderr)


HANG_SECONDS = 30   # one ingest of these small inputs takes well under a second
TABLES = ("runs", "campaigns", "series", "nodes", "node_metrics", "foms")


def counts(dsn: str) -> tuple:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in TABLES)).fetchone()


def check_outcome(dsn: str, case: Path, *args, replaces: bool = False) -> SimpleNamespace:
    """Ingests ARGS (CASE, or files in it): a run stored, or one line naming CASE with the store unchanged.
    REPLACES: a Ramble workspace ingested again replaces its campaign (commscope/README.md), so a stored case may
    hold fewer runs than the one before it."""
    before = counts(dsn)
    r = ingest(dsn, *(args or (case,)))
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    assert "a bug in commscope" not in r.stderr, r.stderr
    after = counts(dsn)
    if r.returncode == 0:
        assert replaces or after[0] >= before[0], (before, after)   # stored, or the same bytes stored already
        return r
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(case) in lines[0], (str(case), lines[0])
    assert after == before, (before, after, lines[0])
    return r


def fresh(tmp_path: Path, name: str = "case") -> Path:
    """An empty folder for one example (Hypothesis reuses tmp_path across examples)."""
    d = tmp_path / name
    if d.is_symlink() or d.is_file():
        d.unlink()
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


# ---- Caliper .cali -------------------------------------------------------------------------------------------------

CALI_VALUES = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=20)).map(
    lambda s: s.replace("\n", "\\n"))   # a raw newline ends the record: that is the byte fuzzer's case


@st.composite
def mutated_cali(draw):
    seed = draw(st.sampled_from([CALI, CALI_SPLIT]))
    lines = seed.read_text().splitlines()
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["value", "value", "reference", "deep", "wide", "globals", "attr-type",
                                   "escape"]))
        i = draw(st.integers(0, len(lines) - 1))
        if op == "value":   # one data= value of a record replaced
            head, sep, data = lines[i].partition("data=")
            if sep:
                parts = data.split("=")
                j = draw(st.integers(0, len(parts) - 1))
                parts[j] = draw(CALI_VALUES).replace("=", "\\=").replace(",", "\\,")
                lines[i] = head + sep + "=".join(parts)
        elif op == "reference":   # a parent, ref or attr that points at nothing or at itself
            field = draw(st.sampled_from(["parent=", "ref=", "attr="]))
            if field in lines[i]:
                head, _, tail = lines[i].partition(field)
                rest = tail.split(",", 1)
                lines[i] = head + field + str(draw(st.sampled_from([0, 1, 999999, -1, 2**40]))) + (
                    "," + rest[1] if len(rest) > 1 else "")
        elif op in ("deep", "wide"):   # regions nested or side by side under main (node 41 of both seeds)
            n = draw(st.integers(1, 1500 if op == "deep" else 2000))
            g = next((k for k, ln in enumerate(lines) if ln.startswith("__rec=globals")), len(lines))
            name = draw(st.sampled_from(["r", "region", "é", "x" * 40]))
            extra, parent = [], 41
            for k in range(n):
                nid = 900_000 + k
                extra.append(f"__rec=node,id={nid},attr=40,data={name}{k % 7},parent={parent}")
                extra += [f"__rec=ctx,ref={nid},attr=22=35=51=38,data={rank}=1e-06=1=0" for rank in (0, 1)]
                parent = nid if op == "deep" else 41
            lines[g:g] = extra
        elif op == "globals":   # a global written twice, or dropped
            g = [k for k, ln in enumerate(lines) if ln.startswith("__rec=globals")]
            if g and draw(st.booleans()):
                lines.append(lines[g[0]])
            elif g:
                del lines[g[0]]
        elif op == "attr-type":   # an attribute's type node changed (string <-> double <-> int)
            typed = [k for k, ln in enumerate(lines) if ",attr=9," in ln]
            if typed:
                k = draw(st.sampled_from(typed))
                head, _, tail = lines[k].partition("data=")
                lines[k] = head + "data=" + draw(st.sampled_from(["string", "double", "int", "uint", "bool",
                                                                  "usr", "bogus"])) + tail[tail.find(","):]
        else:   # Caliper's own escapes, dangling or doubled
            lines[i] = lines[i] + draw(st.sampled_from(["\\", "\\\\", "\\=", "=\\,", ",,", "="]))
    return seed, "\n".join(lines) + "\n"


@fuzz(25)
@given(case=mutated_cali())
def test_fuzz_cali(dsn, tmp_path, case):
    seed, text = case
    d = fresh(tmp_path)
    path = d / seed.name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    check_outcome(dsn, d, path)


# ---- Caliper JSON --------------------------------------------------------------------------------------------------

def _cali_query_json() -> list:
    """The seed json-split profile as cali-query's plain `format json` writes it: a list of records with
    '/'-joined paths."""
    doc = json.loads(JSON_SPLIT.read_text())
    labels = [n["label"] for n in doc["nodes"]]
    parents = [n.get("parent") for n in doc["nodes"]]

    def path(i):
        out = []
        while i is not None:
            out.append(labels[i])
            i = parents[i]
        return "/".join(reversed(out))
    cols = doc["columns"]
    return [{c: (path(v) if c == "path" and v is not None else v) for c, v in zip(cols, row)} for row in doc["data"]]


JSON_SEEDS = {"json-split": json.loads(JSON_SPLIT.read_text()), "cali-query": _cali_query_json()}


@st.composite
def mutated_json_profile(draw):
    kind = draw(st.sampled_from(sorted(JSON_SEEDS)))
    doc = draw(mutated_json(JSON_SEEDS[kind]))
    return kind, json_bytes(doc, draw(encodings))


@fuzz(25)
@given(case=mutated_json_profile())
def test_fuzz_caliper_json(dsn, tmp_path, case):
    kind, data = case
    d = fresh(tmp_path)
    path = d / f"{kind}-n2.json"
    path.write_bytes(data)
    check_outcome(dsn, d, path)


# ---- workload output -----------------------------------------------------------------------------------------------

@st.composite
def mutated_output(draw):
    lines = OUT.read_text().splitlines()
    contract = [k for k, ln in enumerate(lines) if ln.split(" ", 1)[0].isupper()] or [0]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["field", "field", "add", "duplicate", "delete", "swap"]))
        k = draw(st.sampled_from(contract))
        if k >= len(lines):
            continue
        if op == "field":
            fields = lines[k].split(" ")
            j = draw(st.integers(0, len(fields) - 1))
            fields[j] = draw(CALI_VALUES).replace("\\n", "\n" if draw(st.booleans()) else " ")
            lines[k] = " ".join(fields)
        elif op == "add":
            key = draw(st.sampled_from(["FOM", "RANK", "RANKS", "WORKLOAD", "APP", "MPI_LIBRARY", "PARAM", "ITERS"]))
            fields = draw(st.lists(CALI_VALUES, min_size=0, max_size=4))
            lines.insert(k, " ".join([key, *fields]))
        elif op == "duplicate":
            lines.insert(k, lines[k])
        elif op == "delete":
            del lines[k]
        else:
            j = draw(st.sampled_from(contract))
            if j < len(lines):
                lines[k], lines[j] = lines[j], lines[k]
    return "\n".join(lines) + "\n"


@fuzz(20)
@given(text=mutated_output())
def test_fuzz_workload_output(dsn, tmp_path, text):
    d = fresh(tmp_path)
    path = d / OUT.name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    check_outcome(dsn, d, path)


# ---- Ramble workspaces and hardware.yaml ---------------------------------------------------------------------------

HOSTILE_YAML = [
    "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                                                     for p, c in zip("abcdefgh", "bcdefghi")),
    "a: &a [*a]\n", "[" * 500 + "]" * 500, "- " * 300 + "x\n", "cpu: !!python/object/apply:os.system ['true']\n",
    "cpu: 12\ncores_per_node: -1\nnodes: 1e308\n", "hardware: [1, 2, 3]\n", "hardware: null\n", "'unterminated\n",
    "nodes: " + "9" * 5000 + "\n", "cpu:\n  model: " + "x" * 300_000 + "\n", "\x00\x01\x02", "\ufeffnodes: 2\n",
    "interconnect: {name: \"$__timeFilter(x)\", technology: \"<script>\"}\n", "key: !!binary AAAA\n",
    "a: 2001-01-01\nnodes: 2001-01-01\n", "? [a, b]\n: c\n"]


@st.composite
def hostile_yaml(draw):
    base = (RAMBLE / "barriers-openmpi4-counts" / "hardware.yaml").read_text()
    how = draw(st.sampled_from(["fixed", "fixed", "value"]))
    if how == "fixed":
        return draw(st.sampled_from(HOSTILE_YAML))
    key = draw(st.sampled_from(["cores_per_node", "model", "nodes", "memory_per_node_gb", "technology", "site"]))
    value = json.dumps(draw(hostile_json), ensure_ascii=False, allow_nan=True)   # JSON is YAML (flow style)
    return "\n".join(ln if not ln.strip().startswith(key + ":") else ln.split(":")[0] + ": " + value
                     for ln in base.splitlines()) + "\n"


LAYOUT_DAMAGE = ["none", "remove-run-dir", "profile-fifo", "profile-dir", "profile-link-out", "profile-link-loop",
                 "run-dir-link-out", "experiments-file", "results-fifo", "results-dir", "hardware-fifo",
                 "hardware-link-out", "out-removed", "empty-profile"]


@st.composite
def mutated_workspace(draw):
    ws = draw(st.sampled_from(WORKSPACES))
    doc = json.loads((ws / "results.latest.json").read_text())
    part = draw(st.sampled_from(["results", "results", "hardware", "layout", "layout"]))
    results = draw(mutated_json(doc)) if part == "results" else doc
    hardware = draw(hostile_yaml()) if part == "hardware" else None
    damage = draw(st.sampled_from(LAYOUT_DAMAGE)) if part == "layout" else "none"
    exp = draw(st.integers(0, 10))
    return ws, results, hardware, damage, exp


def _damage_layout(root: Path, outside: Path, damage: str, exp: int) -> None:
    profiles = sorted(root.glob("experiments/*/*/*/*.cali"))
    cali = profiles[exp % len(profiles)]
    run_dir = cali.parent
    outside.mkdir(exist_ok=True)
    if damage == "remove-run-dir":
        shutil.rmtree(run_dir)
    elif damage in ("profile-fifo", "profile-dir", "profile-link-out", "profile-link-loop", "empty-profile"):
        moved = outside / cali.name
        shutil.move(cali, moved)
        if damage == "profile-fifo":
            os.mkfifo(cali)
        elif damage == "profile-dir":
            cali.mkdir()
        elif damage == "profile-link-out":
            cali.symlink_to(moved)
        elif damage == "profile-link-loop":
            cali.symlink_to(cali.name)
        else:
            cali.touch()
    elif damage == "run-dir-link-out":
        shutil.move(run_dir, outside / run_dir.name)
        run_dir.symlink_to(outside / run_dir.name, target_is_directory=True)
    elif damage == "experiments-file":
        shutil.rmtree(root / "experiments")
        (root / "experiments").write_text("not a folder\n")
    elif damage in ("results-fifo", "results-dir"):
        (root / "results.latest.json").unlink()
        (os.mkfifo if damage == "results-fifo" else os.mkdir)(root / "results.latest.json")
    elif damage in ("hardware-fifo", "hardware-link-out"):
        hw = root / "hardware.yaml"
        shutil.move(hw, outside / "hardware.yaml")
        if damage == "hardware-fifo":
            os.mkfifo(hw)
        else:
            hw.symlink_to(outside / "hardware.yaml")
    elif damage == "out-removed":
        for out in run_dir.glob("*.out"):
            out.unlink()


@fuzz(30)
@given(case=mutated_workspace())
def test_fuzz_ramble_workspace(dsn, tmp_path, case):
    ws, results, hardware, damage, exp = case
    top = fresh(tmp_path)
    root = Path(shutil.copytree(ws, top / "site" / "ws"))
    (root / "results.latest.json").write_text(json.dumps(results, ensure_ascii=False), errors="surrogatepass")
    if hardware is not None:
        (root / "hardware.yaml").write_text(hardware, errors="surrogatepass")
    _damage_layout(root, top / "outside", damage, exp)
    r = check_outcome(dsn, root, replaces=True)
    if damage in ("profile-link-out", "run-dir-link-out", "hardware-link-out"):
        assert r.returncode == 2 and "outside the workspace" in r.stderr, r.stderr


# ---- ReFrame reports and perflogs ----------------------------------------------------------------------------------

REPORT_SEED = json.loads((REFRAME / "report.json").read_text())
PERFLOG = REFRAME / "perflogs" / "local" / "mpirun" / "PingPong.log.h0"


@st.composite
def mutated_report(draw):
    return json_bytes(draw(mutated_json(REPORT_SEED)), draw(encodings))


@fuzz(20)
@given(data=mutated_report())
def test_fuzz_reframe_report(dsn, tmp_path, data):
    top = fresh(tmp_path)
    for sub in ("s1", "s2"):   # the report's stage and output folders (tests/thirdparty/reframe/README.md)
        shutil.copytree(REFRAME / sub, top / sub)
    path = top / "report.json"
    path.write_bytes(data)
    check_outcome(dsn, top, path)


@st.composite
def mutated_perflog(draw):
    lines = PERFLOG.read_text().splitlines()
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(0, len(lines) - 1))
        fields = lines[k].split("|")
        op = draw(st.sampled_from(["field", "field", "add", "remove", "cut", "duplicate", "header"]))
        if op == "field":
            j = draw(st.integers(0, len(fields) - 1))
            fields[j] = draw(CALI_VALUES).replace("\\n", "\n" if draw(st.booleans()) else "")
        elif op == "add":
            fields.insert(draw(st.integers(0, len(fields))), draw(CALI_VALUES))
        elif op == "remove" and len(fields) > 1:
            del fields[draw(st.integers(0, len(fields) - 1))]
        elif op == "cut":
            fields = "|".join(fields)[:draw(st.integers(0, len(lines[k])))].split("|")
        elif op == "duplicate":
            lines.insert(k, lines[k])
        else:
            k, fields = 0, lines[0].replace(draw(st.sampled_from(["perf_value", "result", "num_tasks", "system",
                                                                  "perf_var", "|"])), draw(CALI_VALUES)).split("|")
        lines[k] = "|".join(fields)
    return "\n".join(lines) + "\n"


@fuzz(20)
@given(text=mutated_perflog())
def test_fuzz_reframe_perflog(dsn, tmp_path, text):
    top = fresh(tmp_path)
    log = top / "perflogs" / "local" / "mpirun" / "PingPong.log"
    log.parent.mkdir(parents=True)
    log.write_text(text, errors="surrogatepass")
    check_outcome(dsn, top, top / "perflogs")


# ---- special files where an input is named -------------------------------------------------------------------------

SPECIAL = ["fifo", "directory", "dangling-link", "looping-link", "empty", "control-name", "link-to-fifo",
           "fifo-in-folder", "unreadable-name", "nested-deep"]


def test_special_files_where_an_input_is_named(dsn, tmp_path):
    """Every kind of SPECIAL file, named as a .cali, a .json or a .out, in one store (a store per case costs more
    than its ingest)."""
    for kind in SPECIAL:
        for suffix in (".cali", ".json", ".out"):
            _special_case(dsn, fresh(tmp_path), kind, suffix)


def _special_case(dsn: str, d: Path, kind: str, suffix: str) -> None:
    path, named = d / f"p-n2{suffix}", None
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling-link":
        path.symlink_to(d / "gone")
    elif kind == "looping-link":
        path.symlink_to(path.name)
    elif kind == "empty":
        path.touch()
    elif kind == "control-name":
        path = d / f"a\nb\x1b[31m\u202e{suffix}"
        shutil.copy({".cali": CALI, ".json": JSON_SPLIT, ".out": OUT}[suffix], path)
    elif kind == "link-to-fifo":
        os.mkfifo(d / "fifo")
        path.symlink_to("fifo")
    elif kind == "fifo-in-folder":
        shutil.copy({".cali": CALI, ".json": JSON_SPLIT, ".out": OUT}[suffix], path)
        os.mkfifo(d / f"q-n2{suffix}")
        named = d
    elif kind == "unreadable-name":
        path = Path(os.fsdecode(bytes(d) + b"/\xff\xfe" + suffix.encode()))
        shutil.copy({".cali": CALI, ".json": JSON_SPLIT, ".out": OUT}[suffix], path)
        named = d
    else:   # a folder nested deeper than any tree of inputs
        deep = d.joinpath(*["n"] * 200)
        deep.mkdir(parents=True)
        shutil.copy({".cali": CALI, ".json": JSON_SPLIT, ".out": OUT}[suffix], deep / path.name)
        named = d
    check_outcome(dsn, d, named or path)


# ---- a JSON profile is read within read/limited's limits -----------------------------------------------------------

def test_a_json_profile_is_read_within_the_limits_of_size_and_depth(tmp_path):
    """A JSON profile is loaded by files.load_json within the limits every JSON commscope reads keeps: a profile
    nested 100,000 deep (json's recursion limit) or 65 deep (files.MAX_DEPTH) is one line naming the file, not a
    RecursionError caught by the reader's safety net."""
    from commscope.read import files as limited
    from commscope.read.pipeline import read_group
    from commscope.read.profiles import BadProfile
    from commscope.read.records import ReadOptions
    from commscope.store.ingest import prepared
    for depth in (100_000, limited.MAX_DEPTH + 1):
        doc = json.loads(JSON_SPLIT.read_text())
        doc["data"][0][0] = "PLACEHOLDER"   # a data row's time, 3 deep (document, data, row)
        path = fresh(tmp_path) / "deep-n2.json"
        path.write_text(json.dumps(doc).replace('"PLACEHOLDER"', "[" * (depth - 3) + "1" + "]" * (depth - 3)))
        out = read_group([path], ReadOptions(), prepared)
        assert isinstance(out, BadProfile) and str(out).startswith(str(path)), out
        assert "nested deeper than 64" in str(out) and "bug in commscope" not in str(out), out
