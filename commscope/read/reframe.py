"""ReFrame results -> records. ReFrame (reframe-hpc) writes two things a store can read:

- the **run report** (`reframe --report-file FILE`, JSON): `session_info` (with `data_version`: reframe-hpc 4.10.4
  writes 4.2; other 4.x versions are read too, older ones refused) and `runs[].testcases[]`, one entry per test case
  (test, system:partition, programming environment), with its `result`, its loggable attributes and `perfvalues`
  (`{"<system>:<partition>:<var>": [value, ref, lower, upper, unit, result]}`);
- **perflogs** from its `filelog` handler: one file per test under `<perflogdir>/<system>/<partition>/`, a header
  line naming the fields, then one line per test case, fields separated by the format's delimiter (`|` by
  default), each performance variable as `<var>_value`, `<var>_unit`, `<var>_ref`, `<var>_lower_thres`,
  `<var>_upper_thres` (a `<var>_value` without its `<var>_unit` is not one). Perflogs with one line per variable
  (`perf_var`, `perf_value`) are refused. Old headers' files (`<test>.log.h<N>`) are read too.

One test case is one run; its performance variables are its FOMs (name, value, unit), the reference and
thresholds kept in the run's metadata (`reframe_perfvars`). `system:partition` is the run's system, the
programming environment its stack. The parameters of its display name (`PingPong %message_bytes=8`) are the run's
parameters, with `ranks` (`num_tasks`) and `nodes` (the job's node list); `--param-keys` adds other loggable
attributes. The application is the test's name without parameters, unless `--app` names it. Fixtures (`fixture:
true`, or a `~` in the display name) are not runs. Status is ReFrame's verdict: `pass` and `xfail` are `ok`;
`fail`, `xpass`, `abort` and `fail_deps` are `failed`; a skipped test did not run and is not stored.

A run's identity is its system, partition, environment, display name and job completion time, so the same case
read from the report and from the perflog is stored once, and a perflog that grew adds only its new lines. A case
whose job never ran (no completion time) is identified by the report's case uuid or by the perflog line itself.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path
from typing import Iterable, Iterator

from commscope.read.files import PERFLOG_FIELDS, BadProfile, perflog_header
from commscope.read.records import ReadOptions, Record, as_int, clean

# The report format this module reads: ReFrame's run report of data version 4.x (reframe-hpc 4.10.4 writes 4.2).
DATA_VERSION_MAJOR = "4"
STATUS = {"pass": "ok", "xfail": "ok", "fail": "failed", "xpass": "failed", "abort": "failed", "fail_deps": "failed"}
NOT_RUN = {"skip"}
PERF_SUFFIXES = ("_value", "_unit", "_ref", "_lower_thres", "_upper_thres", "_result")


# ---- one test case ------------------------------------------------------------------------------

_PARAM = re.compile(r"%([\w.]+)=(\S*)")


def split_display_name(name: str) -> tuple[str, dict]:
    """(test name, parameters) of a display name `Test %p=v %q=w` (ReFrame 4's naming scheme)."""
    return name.split()[0], {k: v for k, v in _PARAM.findall(name)}


def _is_fixture(case: dict) -> bool:
    return bool(case.get("fixture")) or " ~" in str(case.get("display_name") or case.get("name") or "")


def _number(v) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _time(v) -> dt.datetime | None:
    t = _number(v)
    return dt.datetime.fromtimestamp(t, dt.timezone.utc) if t is not None else None


def _identity(case: dict, fallback: str) -> str:
    """The test case's identity, the same from the report and from the perflog (module docstring)."""
    done = _number(case.get("job_completion_time_unix"))
    key = [case.get("system"), case.get("partition"), case.get("environ"),
           case.get("display_name") or case.get("name"), repr(done) if done is not None else fallback]
    return hashlib.sha256(json.dumps(["reframe", *key]).encode()).hexdigest()


def _param_value(v):
    """A loggable attribute as a parameter value: numbers, booleans and text as they are, anything else as JSON."""
    if v is None or isinstance(v, (bool, int, float)):
        return v
    return clean(v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str))


def _reference(ref, lower, upper) -> dict:
    """A performance variable's reference as ReFrame gave it. ReFrame fills (0, None, None) in when a test has
    no reference for the system: that is no reference, not a reference of 0."""
    if _number(ref) == 0 and lower is None and upper is None:
        return {"reference": None, "lower_thres": None, "upper_thres": None}
    return {"reference": _number(ref), "lower_thres": _number(lower), "upper_thres": _number(upper)}


# Report fields that are bulky or say nothing about the run; left out of its metadata.
NOT_METADATA = {"perfvalues", "fail_info", "dependencies_actual", "dependencies_conceptual"}


def to_record(case: dict, perfvars: list[tuple], source: str, fallback_id: str, started: dt.datetime | None,
              opts: ReadOptions, origin: str) -> Record:
    """One test case as a run. PERFVARS: (name, value, unit, reference fields, per-variable result)."""
    display = str(case.get("display_name") or case.get("name") or "")
    if not display.strip():
        raise BadProfile(f"{source}: a ReFrame test case without a name")
    test, params = split_display_name(display)
    for k in ("system", "partition", "environ"):
        if not case.get(k):
            raise BadProfile(f"{source}: test case {display!r} has no {k}")
    ranks = opts.ranks or as_int(case.get("num_tasks"))
    if not ranks or ranks < 1:
        raise BadProfile(f"{source}: test case {display!r} has no num_tasks (got {case.get('num_tasks')!r}); "
                         f"give the rank count with --ranks N")
    nodelist = case.get("job_nodelist")
    if isinstance(nodelist, str):
        nodelist = [n for n in nodelist.split(",") if n and n != "null"]
    nodes = len(nodelist) if nodelist else None
    missing = [k for k in opts.param_keys if k not in case]
    if missing:
        raise BadProfile(f"{source}: --param-keys names {', '.join(map(repr, missing))}, which test case {display!r} "
                         f"does not log; give the value with --param KEY=VALUE or leave the key out")
    params.update({k: _param_value(case[k]) for k in opts.param_keys})
    result = str(case.get("result"))
    started_at = (_time(case.get("job_submit_time")) or _time(case.get("job_completion_time_unix")) or started)
    meta = {k: v for k, v in case.items() if k not in NOT_METADATA}
    meta = json.loads(json.dumps(meta, default=str))
    meta.update({
        "reframe_source": origin,
        "reframe_perfvars": {n: {**ref, "result": res} for n, _v, _u, ref, res in perfvars},
        "app_source": "--app" if opts.app else "reframe test name",
        "ranks_source": "--ranks" if opts.ranks else "num_tasks",
    })
    rec = Record(
        content_hash=_identity(case, fallback_id), source=clean(source), profile_kind="reframe",
        app=clean(opts.app or test, 200), workload=clean(test, 200), ranks=ranks, started_at=started_at,
        status=STATUS.get(result, "failed"), nodes=nodes,
        system=clean(f"{case['system']}:{case['partition']}"), stack=clean(case["environ"]),
        metadata=meta,
    )
    rec.fom_rows = [(clean(n, 200), 0, v, clean(u, 50)) for n, v, u, _ref, _res in perfvars if v is not None]
    rec.parameters = {"ranks": ranks, "nodes": nodes, **params, **dict(opts.params)}
    return rec


# ---- the run report -----------------------------------------------------------------------------

def check_report(path: Path, doc) -> dict:
    """The report DOC (files.load_reports read it from PATH), checked for what this module reads; BadProfile names
    the file and what is wrong."""
    info = doc.get("session_info") if isinstance(doc, dict) else None
    if not isinstance(info, dict) or not isinstance(doc.get("runs"), list):
        raise BadProfile(f"{path}: not a ReFrame run report: expected an object with session_info and runs, "
                         f"as `reframe --report-file FILE` writes")
    version = str(info.get("data_version", ""))
    if version.split(".")[0] != DATA_VERSION_MAJOR:
        raise BadProfile(f"{path}: ReFrame report data version {version or 'missing'} is not read by commscope "
                         f"(it reads data version {DATA_VERSION_MAJOR}.x, written by reframe-hpc 4.10); rerun with "
                         f"a ReFrame 4.x that writes it, or ingest the perflogs instead")
    for i, run in enumerate(doc["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("testcases"), list):
            raise BadProfile(f"{path}: runs[{i}] has no testcases list (unknown ReFrame report layout)")
        for j, case in enumerate(run["testcases"]):
            if not isinstance(case, dict) or not isinstance(case.get("perfvalues", {}), dict):
                raise BadProfile(f"{path}: runs[{i}].testcases[{j}] is not a test case with perfvalues")
    return doc


def _report_perfvars(case: dict, where: str) -> list[tuple]:
    out = []
    for key, val in (case.get("perfvalues") or {}).items():
        if not isinstance(val, list) or len(val) not in (5, 6):
            raise BadProfile(f"{where}: perfvalues[{key!r}] is not [value, ref, lower, upper, unit(, result)]")
        value, ref, lower, upper, unit = val[:5]
        out.append((key.split(":")[-1], _number(value), unit, _reference(ref, lower, upper),
                    val[5] if len(val) == 6 else None))
    return out


def report_records(path: Path, doc, opts: ReadOptions) -> Iterator[Record | BadProfile]:
    doc = check_report(path, doc)
    started = _time(doc["session_info"].get("time_start_unix"))
    session = {k: doc["session_info"].get(k) for k in ("version", "data_version", "uuid", "hostname", "user",
                                                        "cmdline")}
    cases = [(f"runs[{i}].testcases[{j}]", c) for i, run in enumerate(doc["runs"])
             for j, c in enumerate(run["testcases"])]
    cases += [(f"restored_cases[{j}]", c) for j, c in enumerate(doc.get("restored_cases") or [])
              if isinstance(c, dict)]
    for where, case in cases:
        if _is_fixture(case) or case.get("result") in NOT_RUN:
            continue
        source = f"{path}:{where}"
        try:
            rec = to_record(case, _report_perfvars(case, source), source,
                            str(case.get("uuid") or f"{session['uuid']}:{where}"), started, opts, "report")
            rec.metadata["reframe_session"] = json.loads(json.dumps(session, default=str))
            yield rec
        except BadProfile as e:
            yield e


# ---- perflogs -----------------------------------------------------------------------------------

def _field(v: str):
    """A perflog field as ReFrame wrote it: JSON for non-strings (null, true, 5, {}), str() for the perfvars
    (None), text otherwise."""
    if v in ("None", "null", ""):
        return None
    try:
        return json.loads(v)
    except (ValueError, RecursionError):
        return v


def perflog_records(path: Path, lines: list[str], opts: ReadOptions) -> Iterator[Record | BadProfile]:
    """The test cases of the perflog PATH, whose LINES files.read_perflogs read."""
    head = perflog_header(lines[0]) if lines else None
    if head is None:
        yield BadProfile(f"{path}: not a ReFrame perflog: its first line must be the filelog handler's header naming "
                         f"{', '.join(PERFLOG_FIELDS)} and name (ReFrame 4's filelog format)")
        return
    delim, fields = head
    if "perf_var" in fields or "perf_value" in fields:
        yield BadProfile(f"{path}: a perflog with one line per performance variable (perf_var, perf_value: a custom "
                         f"format or perflog_compat) is not read; use ReFrame 4's default filelog format (all "
                         f"variables on one line, %(check_#ALL)s or %(check_perfvalues)s) or ingest the run report")
        return
    # a performance variable is a <var>_value field with its <var>_unit beside it (ReFrame's format_perfvars);
    # a test variable that happens to end in _value is not one
    perf = {f[: -len("_value")] for f in fields
            if f.endswith("_value") and f[: -len("_value")] and f"{f[: -len('_value')]}_unit" in fields}
    perf_cols = {f"{v}{s}" for v in perf for s in PERF_SUFFIXES}
    started = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        source = f"{path}:{lineno}"
        values = line.split(delim)
        if len(values) != len(fields):
            yield BadProfile(f"{source}: {len(values)} fields where the header names {len(fields)} (a field holding "
                             f"the delimiter {delim!r}? set the perflog format's delimiter to one no field contains)")
            continue
        row = dict(zip(fields, values))
        case = {k: _field(v) for k, v in row.items() if k and k not in perf_cols}
        # identity fields stay text, as the report has them
        for k in ("system", "partition", "environ", "name", "display_name", "result", "jobid"):
            if k in row:
                case[k] = row[k] or None
        if _is_fixture(case):
            continue
        if case.get("result") in NOT_RUN:
            continue
        try:
            yield to_record(case, _perflog_perfvars(row, perf, fields, source), source,
                            hashlib.sha256(f"{path.name}:{line}".encode()).hexdigest(), started, opts, "perflog")
        except BadProfile as e:
            yield e


def _perflog_perfvars(row: dict, perf: set, fields: list, source: str) -> list[tuple]:
    """The performance variables of one perflog line, in the header's order. An empty value is a variable the
    case never measured (it failed before its performance stage): left out, not 0."""
    out = []
    for var in sorted(perf, key=lambda v: fields.index(f"{v}_value")):
        raw = row[f"{var}_value"]
        if raw in ("", "None", "null"):
            continue
        value = _number(raw)
        if value is None:
            raise BadProfile(f"{source}: {var}_value {raw!r} is not a number")
        ref = _reference(*(_field(row.get(f"{var}{s}", "None")) for s in ("_ref", "_lower_thres", "_upper_thres")))
        out.append((var, value, row.get(f"{var}_unit") or None, ref, row.get(f"{var}_result") or None))
    return out


def records(reports: Iterable[tuple[Path, object]], perflogs: Iterable[tuple[Path, object]],
            opts: ReadOptions = ReadOptions()) -> Iterator[Record | BadProfile]:
    """Every test case in REPORTS and PERFLOGS (files.plan finds them among the inputs; files.load_reports and
    files.read_perflogs read them, one at a time: each is its path and its document or lines, or the BadProfile
    saying why it could not be read)."""
    for path, doc in reports:
        if isinstance(doc, BadProfile):
            yield doc
            continue
        try:
            yield from report_records(path, doc, opts)
        except BadProfile as e:
            yield e
    for path, lines in perflogs:
        if isinstance(lines, BadProfile):
            yield lines
            continue
        yield from perflog_records(path, lines, opts)
