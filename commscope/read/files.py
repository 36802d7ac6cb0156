"""Stage 1 of reading: what the inputs are, and their bytes read safely, handed to the parsers. Stdlib only but for
YAML, imported when a YAML file is read (ci/suite.py uses the workload output's reader before anything is installed).

- BadProfile, the error that names an input which cannot be ingested; open_regular, which refuses what is not a
  regular file (every input is opened there); file_hash, a run's identity from its bytes.
- plan() says what a list of paths is as one campaign, before any is read: a Ramble workspace, ReFrame results (run
  reports and perflogs), or Caliper profiles and workload outputs grouped into one list of files per run (discover),
  Ramble workspaces below a directory set aside; and why a path that does not exist cannot be read. In a Ramble
  workspace, a file whose symbolic link leads outside the workspace is refused. Files are opened there only to
  recognise them (their first bytes; a JSON file that is neither a report nor a profile by its head, whole).
- What the parsers take, read here: a Ramble workspace's documents (load_workspace), ReFrame reports and perflogs one
  at a time (load_reports, read_perflogs), one run's files (load_run: its identity; a workload output's lines; a
  profile's output beside it, a JSON profile's document, each .cali file opened in turn).
- JSON and YAML from a user's files are read within limits, so that a hostile or broken file is one refusal naming
  it, never a hang, a memory blow-up or a traceback:
  - size: a file larger than its limit (JSON_LIMIT, YAML_LIMIT) is refused before it is read; so is what is no
    regular file (a FIFO, a device);
  - depth: a document nested deeper than MAX_DEPTH lists and mappings is refused;
  - YAML aliases: a document whose aliases would expand to more than MAX_YAML_NODES nodes (billion laughs), or
    that holds itself, is refused; anchors that only shorten a file pass. YAML goes through the safe loader.
  Every refusal is a BadProfile whose message names the file, what is wrong and what to do; one for a limit is an
  Exceeded."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator


class BadProfile(ValueError):
    """A profile that cannot be ingested; the message names the file."""


def open_regular(path, mode: str = "rb", **kwargs):
    """PATH opened for reading, if it is a regular file. A FIFO, a device, a socket or a directory is refused with
    an OSError ("not a regular file") at once: opened without O_NONBLOCK, a FIFO with no writer would block the
    reader for ever, and a device would be read without end. Every reader opens the files it is given here."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a folder); give the file itself",
                          str(path))
        os.set_blocking(fd, True)
        return open(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def file_hash(paths: list[Path]) -> str:
    """The run's identity: its bytes. Names count only in a per-rank set,
    where they carry the rank."""
    h = hashlib.sha256()
    for p in sorted(paths):
        if len(paths) > 1:
            h.update(p.name.encode() + b"\0")
        with open_regular(p) as f:
            h.update(f.read())
    return h.hexdigest()


# ---- one run's files, as the readers take them -----------------------------------------------------------------------

@dataclass
class RunFiles:
    """One run's files as load_run read them: PATHS (sorted) and its identity (file_hash). A workload output read as
    a run of its own (a run without a profile) gives its LINES, read one at a time as they are parsed (an output of
    any length is read in memory of its longest line). A profile gives the workload output kept beside it (OUTPUT:
    its path and text, or None), a JSON profile its DOCUMENT (read within the limits below), .cali files each in turn
    (CALI: (path, the file open in binary), opened when the parser reaches it and closed when it reaches the next)."""
    paths: list[Path]
    content_hash: str
    lines: Iterator[bytes] | None = None
    output: tuple[Path, str] | None = None
    document: object = None
    cali: Iterator = field(default_factory=lambda: iter(()))


def load_run(paths: list[Path]) -> RunFiles:
    """The files of one run (discover's group: a workload output, a profile, or one directory's per-rank files),
    read for the parsers."""
    paths = sorted(paths)
    if len(paths) == 1 and str(paths[0]).endswith(".out"):
        try:
            return RunFiles(paths, file_hash(paths), lines=_output_lines(paths[0]))
        except OSError as e:
            raise _unreadable_output(paths[0], e) from None
    run = RunFiles(paths, file_hash(paths), output=output_beside(paths))
    if paths[0].suffix == ".json":
        run.document = load_json(paths[0])
    else:
        run.cali = _opened(paths)
    return run


def _opened(paths: list[Path]) -> Iterator[tuple[Path, object]]:
    for path in paths:
        try:
            f = open_regular(path)
        except OSError as e:
            raise BadProfile(f"{path}: cannot be read ({e.strerror or e})") from None
        with f:
            yield path, f


def output_beside(paths: list[Path]) -> tuple[Path, str] | None:
    """The workload's stdout kept beside the profile PATHS (same stem, or the one .out in a run directory): its path
    and text."""
    first = paths[0]
    candidates = [first.with_suffix(".out")] if len(paths) == 1 else []
    candidates += sorted(first.parent.glob("*.out")) if len(paths) > 1 else []
    for c in candidates:
        if c.exists():
            try:
                with open_regular(c, "r", errors="replace") as f:
                    return c, f.read()
            except OSError as e:
                raise BadProfile(f"{c}: the workload output beside the profile cannot be read ({e.strerror or e})"
                                 ) from None
    return None


def _output_lines(path: Path) -> Iterator[bytes]:
    try:
        with open_regular(path, "rb") as f:
            yield from f
    except OSError as e:
        raise _unreadable_output(path, e) from None


def _unreadable_output(path: Path, e: OSError) -> BadProfile:
    return BadProfile(f"{path}: unreadable workload output ({e.strerror or e})")


# ---- JSON and YAML within limits -----------------------------------------------------------------------------------

MIB = 1 << 20
JSON_LIMIT = 64 * MIB
YAML_LIMIT = MIB // 4     # a hardware description is a few KiB; pure YAML parsing costs seconds per MiB
MAX_DEPTH = 64
MAX_YAML_NODES = 1_000_000   # more than a YAML file of YAML_LIMIT can write out without aliases


class Exceeded(BadProfile):
    """A file beyond a limit: too large, nested too deep, aliases that expand too far."""


def read_bytes(path: Path, limit: int) -> bytes:
    """PATH's bytes, if it is a regular file of at most LIMIT bytes."""
    try:
        if not path.is_file():
            raise BadProfile(f"{path}: not a regular file; give the file itself")
        with open_regular(path) as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise BadProfile(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) > limit:
        size = f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit >> 10} KiB"
        raise Exceeded(f"{path}: larger than the {size} commscope reads from such a file; "
                       f"check that it is the file meant")
    return data


def _too_deep(path: Path) -> Exceeded:
    return Exceeded(f"{path}: nested deeper than {MAX_DEPTH} levels, which no file commscope reads is; "
                    f"check that it is the file meant")


def load_json(path: Path, limit: int = JSON_LIMIT, what: str = "JSON"):
    """The JSON document in PATH (module docstring); WHAT names what it should be in a refusal."""
    data = read_bytes(path, limit)
    try:
        doc = json.loads(data)
    except RecursionError:
        raise _too_deep(path) from None
    except (ValueError, UnicodeDecodeError) as e:   # JSONDecodeError, and integers too long to convert
        raise BadProfile(f"{path}: not {what} ({e})") from None
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > MAX_DEPTH:
                    raise _too_deep(path)
                stack.append((child, depth + 1))
    return doc


def load_yaml(path: Path, limit: int = YAML_LIMIT, what: str = "YAML"):
    """The YAML document in PATH (module docstring), through yaml's safe loader (libyaml's when there); WHAT as for
    load_json. Its events are counted first: libyaml composes by recursion, and would crash on deep nesting."""
    import yaml   # here, not at the top: the workload output's reader opens its files here before yaml is installed
    safe_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's parser: a hundred times faster
    data = read_bytes(path, limit)
    try:
        depth = aliases = 0
        for event in yaml.parse(data, Loader=safe_loader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(path)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
        loader = safe_loader(data)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if aliases:
                _check_expansion(node, path)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        raise BadProfile(f"{path}: not {what} ({' '.join(str(e).split())})") from None


def _check_expansion(root, path: Path) -> None:
    """Refuses a node graph deeper than MAX_DEPTH, holding itself, or whose aliases expand it to more than
    MAX_YAML_NODES nodes. Each node is counted once (an alias shares its anchor's node), without recursion."""
    import yaml
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()   # the nodes on the path being expanded
    stack: list[tuple] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        kids = _children(node, yaml)
        if finished:
            open_.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if depth[key] > MAX_DEPTH + 1:   # + 1: a scalar is a level of nodes, not of nesting
                raise _too_deep(path)
            if size[key] > MAX_YAML_NODES:
                raise Exceeded(f"{path}: its aliases expand to more than {MAX_YAML_NODES:,} values (a billion "
                               f"laughs); write each value out, or refer to it fewer times")
            continue
        if key in size:
            continue
        if key in open_:
            raise Exceeded(f"{path}: an alias that holds itself (its aliases expand without end); "
                           f"write the value out instead")
        open_.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids)


def _children(node, yaml) -> list:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


# ---- a Ramble workspace's documents -------------------------------------------------------------------------------

RESULTS = "results.latest.json"   # what `ramble workspace analyze -f json` writes
HARDWARE_FILES = ("hardware.yaml", "configs/hardware.yaml")   # the site's hardware description, the first found
RUN_FILE = "commscope-run.json"   # the study `commscope run` ran, and the variables it added
# The file in which `commscope run` records each stack's MPI library (workflow/mpi_library.py: the first line of
# MPI_Get_library_version, from a probe built and run with that stack): the library of the runs on that stack whose
# profile records none (an application profiled by preloading Caliper, without Adiak).
MPI_LIBRARIES = "mpi-libraries.json"


@dataclass
class WorkspaceFiles:
    """A Ramble workspace's documents, read within the limits above (ramble.workspace checks them): its RESULTS,
    and (path, document) of its hardware description, RUN_FILE and MPI_LIBRARIES, None for a file not there."""
    root: Path
    results: object
    hardware: tuple[Path, object] | None = None
    run: tuple[Path, object] | None = None
    mpi_libraries: tuple[Path, object] | None = None


def load_hardware(path: Path):
    """A site's hardware description (ramble/sites/<site>/hardware.yaml), as YAML within limits."""
    return load_yaml(path, what="a readable hardware description")


def load_workspace(root: Path) -> WorkspaceFiles:
    """The documents of the Ramble workspace ROOT (WorkspaceFiles); BadProfile when it has no RESULTS."""
    path = root / RESULTS
    if not path.exists():
        raise BadProfile(f"{root}: a Ramble workspace without {RESULTS}; run `ramble workspace analyze -f json` first")
    docs = WorkspaceFiles(root, load_json(path))
    hardware = next((f for f in (root / h for h in HARDWARE_FILES) if f.exists()), None)
    if hardware is not None:
        docs.hardware = (hardware, load_hardware(hardware))
    what = "the JSON `commscope run` writes"
    if (run := root / RUN_FILE).exists():
        docs.run = (run, load_json(run, what=what))
    if (libraries := root / MPI_LIBRARIES).exists():
        docs.mpi_libraries = (libraries, load_json(libraries, what=what))
    return docs


# ---- which inputs are what -----------------------------------------------------------------------------------------

RANK_FILE = re.compile(r"rank-(\d+)\.cali$")   # a per-rank profile, its rank in its name
READ = (".cali", ".json", ".out")   # what a run's files can be read as
# What a ReFrame perflog header must name to be read as one, besides `name` or `display_name`: the test case's
# identity and its result.
PERFLOG_FIELDS = ("result", "system", "partition", "environ")
PERFLOG_NAME = re.compile(r"\.log(\.h\d+)?$")
DELIMITERS = "|,;\t"
HEAD_BYTES = 4096


def looks_caliper_json(path: Path) -> bool:
    """In a directory, a .json is a profile only if it opens like json-split or cali-query's JSON
    (Ramble's results and other JSON files stay out)."""
    with open_regular(path) as f:
        head = f.read(4096).lstrip()
    if head.startswith(b"{"):
        return b'"data"' in head[:64] or (b'"records"' in head and b'"path"' in head)
    return head.startswith(b"[") and (b'"path"' in head or b'"mpi.rank"' in head)


def is_ramble_workspace(path: Path) -> bool:
    try:
        return path.is_dir() and ((path / RESULTS).exists()
                                  or (path / "configs" / "ramble.yaml").exists())
    except PermissionError:   # a folder that cannot be searched: listing it says so (discover)
        return False


def is_workload_output(path: Path) -> bool:
    """A workload's stdout (workloads/README.md): it opens with the COMMSCOPE header."""
    try:
        with open_regular(path) as f:
            return f.read(20).startswith(b"COMMSCOPE workload=")
    except OSError:
        return False


def _unreadable_folder(e: OSError):
    """A folder below an input that cannot be listed is said, never skipped in silence (os.walk's default)."""
    raise BadProfile(f"{e.filename}: a folder that cannot be read ({e.strerror}); make it readable, or name the "
                     f"inputs without it")


def not_found(path: Path) -> BadProfile:
    """Why PATH, which does not exist, cannot be read: a symbolic link loop, a dangling link, or no file."""
    if path.is_symlink():
        try:
            path.stat()
        except OSError as e:
            if e.errno == errno.ELOOP:
                return BadProfile(f"{path}: a symbolic link loop; point it at the profile")
        return BadProfile(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist")
    return BadProfile(f"{path}: no such file or directory")


def outside(path: Path, within: Path) -> BadProfile | None:
    """Why PATH, a file found in the directory WITHIN (resolved), may not be read: it leads outside WITHIN (a
    link that leads nowhere, a loop, is not_found's)."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    if real.is_relative_to(within):
        return None
    return BadProfile(f"{path}: a symbolic link to {real}, outside the workspace {within}; copy the file into the "
                      f"workspace, or ingest it on its own")


def discover(inputs: list[Path], nested_workspaces: list | None = None,
             within: Path | None = None) -> list[list[Path]]:
    """Groups input files into runs: per-rank files of one directory form one
    run; every other .cali or json-split .json file is a run of its own, and so
    is a workload's stdout (.out) with no profile beside it (a run without
    Caliper), or named without that profile. A .out named together with its
    profile (x.cali x.out, as a shell's x.* gives) is the profile's sidecar, not
    a second run. Ramble workspaces below a given directory are left out (each is
    one campaign of its own) and listed in nested_workspaces. WITHIN (a resolved directory, a Ramble workspace's):
    a profile or output whose symbolic link leads outside it is refused, not read."""
    groups: list[list[Path]] = []
    named = {p.resolve() for p in inputs if p.is_file()}
    for inp in inputs:
        if not inp.exists():
            raise not_found(inp)
        if inp.is_dir():
            files = []
            for d, subdirs, names in os.walk(inp, onerror=_unreadable_folder):
                d = Path(d)
                keep = []
                for sd in sorted(subdirs):
                    if is_ramble_workspace(d / sd):
                        if nested_workspaces is not None:
                            nested_workspaces.append(d / sd)
                    else:
                        keep.append(sd)
                subdirs[:] = keep
                files += [d / n for n in names]
            files.sort()
        else:
            files = [inp]
        per_dir: dict = defaultdict(list)
        outs = []
        for f in files:
            if within is not None and (f.suffix in READ or RANK_FILE.search(f.name)) and (why := outside(f, within)):
                raise why
            if not f.is_file():
                if f.suffix in READ and f.is_symlink() and not f.exists():
                    raise not_found(f)   # a profile's name that leads nowhere is not dropped in silence
                continue
            if RANK_FILE.search(f.name):
                per_dir[f.parent].append(f)
            elif f.suffix == ".out":
                outs.append(f)
            elif f.suffix == ".cali" or inp.is_file() or (f.suffix == ".json" and looks_caliper_json(f)):
                groups.append([f])
        for f in outs:
            beside = f.with_suffix(".cali").exists() or f.with_suffix(".json").exists() or f.parent in per_dir
            its_profile_named = any(f.with_suffix(x).resolve() in named for x in (".cali", ".json"))
            if (inp.is_file() and not its_profile_named) or (not beside and is_workload_output(f)):
                groups.append([f])
        groups.extend(per_dir[d] for d in sorted(per_dir))
    return groups


def is_report(path: Path) -> bool:
    """A JSON file that opens like ReFrame's run report (its first key is session_info)."""
    if not path.is_file() or path.suffix != ".json":
        return False
    try:
        with open_regular(path) as f:
            head = f.read(HEAD_BYTES).lstrip()
    except OSError:
        return False
    return head.startswith(b"{") and b'"session_info"' in head[:200]


def perflog_header(line: str) -> tuple[str, list[str]] | None:
    """(delimiter, fields) of a perflog header line, or None when the line is not one."""
    line = line.rstrip("\r\n")
    counts = {d: line.count(d) for d in DELIMITERS}
    delim = max(counts, key=counts.get)
    if not counts[delim]:
        return None
    fields = line.split(delim)
    if not all(f in fields for f in PERFLOG_FIELDS) or not ({"name", "display_name"} & set(fields)):
        return None
    return delim, fields


def is_perflog(path: Path) -> bool:
    """A file written by ReFrame's filelog handler: `<test>.log` (or `.log.h<N>`) whose first line is a header
    naming the test case's fields."""
    if not path.is_file() or not PERFLOG_NAME.search(path.name):
        return False
    try:
        with open_regular(path, "r", errors="replace") as f:
            return perflog_header(f.readline(HEAD_BYTES)) is not None
    except OSError:
        return False


def load_reports(reports: list[Path]) -> Iterator[tuple[Path, object]]:
    """Each ReFrame run report's JSON document, read within limits when it is reached: (path, document), or (path,
    the BadProfile saying why it cannot be read)."""
    for path in reports:
        try:
            yield path, load_json(path, what="a readable ReFrame run report")
        except BadProfile as e:
            yield path, e


def read_perflogs(perflogs: list[Path]) -> Iterator[tuple[Path, object]]:
    """Each ReFrame perflog's lines (UTF-8), read when it is reached: (path, lines), or (path, the BadProfile saying
    why it cannot be read)."""
    for path in perflogs:
        try:
            with open_regular(path, "r", errors="strict") as f:
                yield path, f.read().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            yield path, BadProfile(f"{path}: unreadable ReFrame perflog ({e})")


def find(inputs: list[Path], caliper: list | None = None) -> tuple[list[Path], list[Path]]:
    """(reports, perflogs) among INPUTS and inside the directories among them, in path order. Caliper profiles met
    on the way are appended to CALIPER (ReFrame's own job outputs, even a workload's stdout, are not runs here)."""
    reports, perflogs = [], []
    for inp in inputs:
        files = [inp] if inp.is_file() else sorted(Path(d) / n for d, _, names in os.walk(inp) for n in names)
        for f in files:
            if is_report(f) or (f == inp and f.suffix == ".json" and classify(f) == "reframe"):
                reports.append(f)
            elif is_perflog(f):
                perflogs.append(f)
            elif caliper is not None and (f.suffix == ".cali" or (f.suffix == ".json" and _caliper_json(f))):
                caliper.append(f)
    return reports, perflogs


def _caliper_json(path: Path) -> bool:
    """A JSON file that opens like a Caliper profile (discover's own test); an unreadable one is left to the
    profile reader, which names the error."""
    try:
        return looks_caliper_json(path)
    except OSError:
        return True


def classify(path: Path) -> str:
    """'reframe' for a ReFrame report or perflog, or a directory holding one; 'neither' for a JSON file given by
    name that is neither a ReFrame report nor a Caliper JSON profile; 'other' for the rest (Caliper profiles,
    workload outputs, Ramble workspaces), which discover groups."""
    if path.is_dir():
        caliper: list[Path] = []
        reports, perflogs = find([path], caliper)
        if (reports or perflogs) and caliper:
            raise BadProfile(f"{path}: holds both ReFrame results ({(reports or perflogs)[0]}) and Caliper profiles "
                             f"({caliper[0]}); ingest them separately")
        return "reframe" if reports or perflogs else "other"
    if is_report(path) or is_perflog(path):
        return "reframe"
    if path.is_file() and path.suffix == ".json" and not _caliper_json(path):
        try:
            doc = load_json(path)
        except Exceeded:
            raise
        except BadProfile:
            return "neither"
        return "reframe" if isinstance(doc, dict) and "session_info" in doc else "neither"
    return "other"


NEITHER = ("{path}: neither a ReFrame run report (an object with session_info and runs, as `reframe --report-file` "
           "writes) nor a Caliper JSON profile (json-split: nodes, columns, data; cali-query: a list of records); "
           "give a report, a perflog, a profile or a directory holding them")


@dataclass
class Plan:
    """What a list of inputs is, as one campaign (plan): its KIND, "ramble" (WORKSPACE), "reframe" (REPORTS and
    PERFLOGS, in path order) or "ingest" (GROUPS: the files of each run; NESTED: the Ramble workspaces left out)."""
    kind: str
    workspace: Path | None = None
    reports: list[Path] = field(default_factory=list)
    perflogs: list[Path] = field(default_factory=list)
    groups: list[list[Path]] = field(default_factory=list)
    nested: list[Path] = field(default_factory=list)


def plan(inputs: list[Path], skip_bad: bool = False) -> Plan:
    """The campaign INPUTS make: a Ramble workspace alone; ReFrame reports and perflogs on their own; else Caliper
    profiles and workload outputs grouped into runs (discover), the Ramble workspaces nested in a directory left
    out. An input that does not exist, or that is neither (without SKIP_BAD), is refused (BadProfile)."""
    for i in inputs:
        if not i.exists():
            raise not_found(i)
    workspaces = [i for i in inputs if is_ramble_workspace(i)]
    if workspaces and len(inputs) > 1:
        raise BadProfile(f"{workspaces[0]}: a Ramble workspace is one campaign; ingest it on its own")
    if workspaces:
        return Plan("ramble", workspace=workspaces[0])
    kinds = {i: classify(i) for i in inputs}
    neither = [i for i, k in kinds.items() if k == "neither"]
    if neither and not skip_bad:
        raise BadProfile(NEITHER.format(path=neither[0]))
    if "reframe" in kinds.values():
        other = [i for i, k in kinds.items() if k != "reframe"]
        if other:
            raise BadProfile(f"{other[0]}: not ReFrame results, given with ReFrame results; ingest ReFrame reports "
                             f"and perflogs on their own")
        reports, perflogs = find(inputs)
        return Plan("reframe", reports=reports, perflogs=perflogs)
    nested: list[Path] = []
    groups = discover(inputs, nested)
    if not groups:
        raise BadProfile(f"{', '.join(map(str, inputs))}: no Caliper profiles or workload outputs found"
                         + (f" (only Ramble workspaces, ingest each on its own: {', '.join(map(str, nested))})"
                            if nested else ""))
    return Plan("ingest", groups=groups, nested=nested)
