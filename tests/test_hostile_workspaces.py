"""Hostile Ramble workspaces (issue 46): no path built from a workspace's files leaves the workspace, and its YAML
and JSON are read with limits on size, depth and aliases. A real workspace from tests/data/ramble is copied and
damaged at test time: a name that climbs out of it, a symbolic link to a profile outside it, wrong types in its
results, a billion-laughs hardware.yaml, JSON nested too deep, files too large. Each is refused by `commscope ingest`
(click's runner, in this process) with one line naming the file, and the store's rows stay as they were."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
from helpers import assert_one_clear_line

RAMBLE = Path(__file__).parent / "data" / "ramble"
WS = RAMBLE / "barriers-openmpi4-counts"   # two profiled experiments and a hardware.yaml
CLI = [sys.executable, "-m", "commscope.cli"]


def ingest(dsn: str, ws: Path):
    """`commscope ingest -q WS` through click's runner, as (returncode, stdout, stderr); an exception that escaped
    the command is a traceback on stderr."""
    from click.testing import CliRunner
    from commscope.cli import main
    r = CliRunner(mix_stderr=False).invoke(main, ["ingest", "-q", str(ws)], env={"COMMSCOPE_DB_URL": dsn})
    stderr = r.stderr
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*r.exc_info))
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=stderr)


def runs(dsn: str) -> int:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT count(*) FROM runs").fetchone()[0]


@pytest.fixture
def ws(tmp_path) -> Path:
    """A copy of the real workspace at tmp_path/site/ws (so ../.. from its experiments is tmp_path)."""
    return Path(shutil.copytree(WS, tmp_path / "site" / "ws"))


def results(ws: Path) -> dict:
    return json.loads((ws / "results.latest.json").read_text())


def write_results(ws: Path, doc) -> None:
    (ws / "results.latest.json").write_text(json.dumps(doc))


def run_dir(ws: Path, exp: dict) -> Path:
    return ws / "experiments" / exp["application_name"] / exp["workload_name"] / exp["experiment_name"]


def refused(dsn: str, ws: Path, *needles: str) -> str:
    """The workspace is refused in one line carrying NEEDLES, and nothing is stored."""
    before = runs(dsn)
    line = assert_one_clear_line(ingest(dsn, ws), *needles, "nothing was stored", code=2)
    assert runs(dsn) == before
    return line


def test_a_real_workspace_still_ingests(dsn, ws):
    r = ingest(dsn, ws)
    assert r.returncode == 0, r.stderr
    assert runs(dsn) == 2


# ---- paths that leave the workspace ------------------------------------------------------------------------------

def _outside_copy(ws: Path, exp: dict, where: Path) -> Path:
    """The experiment's run directory moved to WHERE, outside the workspace: a real profile the old reader stored."""
    where.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(run_dir(ws, exp), where)
    return where


@pytest.mark.parametrize("how", ["application_name", "absolute", "experiment_run_dir"])
def test_a_name_that_climbs_out_of_the_workspace_is_refused(dsn, ws, tmp_path, how):
    doc = results(ws)
    exp = doc["experiments"][0]
    if how == "application_name":   # experiments/../../.. is tmp_path
        _outside_copy(ws, exp, tmp_path / exp["workload_name"] / exp["experiment_name"])
        exp["application_name"], shown = "../../..", "../../.."
    elif how == "absolute":
        _outside_copy(ws, exp, tmp_path / "elsewhere" / exp["workload_name"] / exp["experiment_name"])
        exp["application_name"] = shown = str(tmp_path / "elsewhere")
    else:   # where Ramble said the run directory was, after experiments/
        _outside_copy(ws, exp, tmp_path / "cgsolve" / exp["experiment_name"])
        exp["RAMBLE_VARIABLES"]["experiment_run_dir"] = f"/old/ws/experiments/../../../cgsolve/{exp['experiment_name']}"
        exp["application_name"] = "gone"
        shown = "../../../cgsolve"
    write_results(ws, doc)
    refused(dsn, ws, str(ws / "results.latest.json"), exp["name"], "outside the workspace", shown)


@pytest.mark.parametrize("what", ["profile", "run directory"])
def test_a_symbolic_link_out_of_the_workspace_is_refused(dsn, ws, tmp_path, what):
    exp = results(ws)["experiments"][0]
    d = run_dir(ws, exp)
    if what == "profile":
        cali = next(d.glob("*.cali"))
        outside = tmp_path / "outside" / cali.name
        outside.parent.mkdir()
        shutil.move(cali, outside)
        cali.symlink_to(outside)
        needles = (str(cali), str(outside.resolve()), "outside the workspace")
    else:
        outside = _outside_copy(ws, exp, tmp_path / "outside" / exp["experiment_name"])
        d.symlink_to(outside, target_is_directory=True)
        needles = (str(ws / "results.latest.json"), exp["name"], str(outside.resolve()), "outside the workspace")
    refused(dsn, ws, *needles)


# ---- wrong types in the results ----------------------------------------------------------------------------------

def _set(path: tuple, value):
    """An edit of experiment 0: the value at PATH (keys and indexes below the experiment) set to VALUE, or removed
    when VALUE is REMOVE."""
    def edit(exp):
        *parents, last = path
        for p in parents:
            exp = exp[p]
        if value is REMOVE:
            del exp[last]
        else:
            exp[last] = value
    return edit


REMOVE = object()
WRONG_TYPES = {   # id: (edit of experiment 0, the field the refusal names)
    "context-a-string": (_set(("CONTEXTS", 0), "null"), "CONTEXTS[0]"),
    "foms-a-string": (_set(("CONTEXTS", 0, "foms"), "total_time"), "CONTEXTS[0].foms"),
    "fom-without-name": (_set(("CONTEXTS", 0, "foms", 0, "name"), REMOVE), "CONTEXTS[0].foms[0].name"),
    "fom-value-a-mapping": (_set(("CONTEXTS", 0, "foms", 0, "value"), {"a": 1}), "CONTEXTS[0].foms[0].value"),
    "n_nodes-a-word": (_set(("n_nodes",), "two"), "n_nodes"),
    "N_REPEATS-a-mapping": (_set(("N_REPEATS",), {"a": 1}), "N_REPEATS"),
    "application_name-a-number": (_set(("application_name",), 5), "application_name"),
    "name-a-number": (_set(("name",), 7), "name"),
    "repeat_index-a-word": (_set(("RAMBLE_VARIABLES", "repeat_index"), "first"), "repeat_index"),
    "raw-variables-a-string": (_set(("RAMBLE_RAW_VARIABLES",), "x"), "RAMBLE_RAW_VARIABLES"),
    "run-dir-a-number": (_set(("RAMBLE_VARIABLES", "experiment_run_dir"), 12), "experiment_run_dir"),
}


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_a_wrong_type_in_the_results_is_one_line_naming_the_field(dsn, ws, case):
    edit, field = WRONG_TYPES[case]
    doc = results(ws)
    edit(doc["experiments"][0])
    write_results(ws, doc)
    refused(dsn, ws, str(ws / "results.latest.json"), field)


# ---- limits on what is read --------------------------------------------------------------------------------------

BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(c)}: &{chr(c)} [{', '.join([f'*{chr(c - 1)}'] * 9)}]\n" for c in range(ord("b"), ord("j") + 1))


def test_a_billion_laughs_hardware_yaml_is_refused_at_once(dsn, ws):
    """In a process of its own, bounded in time and memory: the reader before this refusal expanded the aliases
    (9**10 strings) until the machine ran out of memory."""
    (ws / "hardware.yaml").write_text(BILLION_LAUGHS)
    before = runs(dsn)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([*CLI, "ingest", "-q", str(ws)], capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if not k.startswith("PG")} | {"COMMSCOPE_DB_URL": dsn},
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time, not wall-clock time: the bound holds however busy the machine is
    took = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    assert_one_clear_line(r, str(ws / "hardware.yaml"), "aliases", "nothing was stored", code=2)
    assert runs(dsn) == before
    from commscope.read import files as limited
    t0 = time.thread_time()
    with pytest.raises(limited.BadProfile, match="aliases"):
        limited.load_yaml(ws / "hardware.yaml")
    assert time.thread_time() - t0 < 0.5 and took < 20


@pytest.mark.parametrize("levels", [100, 200_000])
def test_results_nested_too_deep_are_refused(dsn, ws, levels):
    doc = results(ws)
    doc["experiments"][0]["RAMBLE_VARIABLES"]["deep"] = "@"
    text = json.dumps(doc).replace('"@"', "[" * levels + "]" * levels)
    (ws / "results.latest.json").write_text(text)
    refused(dsn, ws, str(ws / "results.latest.json"), "nested deeper than 64")


def test_a_hardware_yaml_nested_too_deep_is_refused(dsn, ws):
    (ws / "hardware.yaml").write_text((ws / "hardware.yaml").read_text() + "deep: " + "[" * 5000 + "]" * 5000 + "\n")
    refused(dsn, ws, str(ws / "hardware.yaml"), "nested deeper than 64")


@pytest.mark.parametrize("name, limit, shown, pad", [("results.latest.json", 64 << 20, "64 MiB", " "),
                                                     ("hardware.yaml", 256 << 10, "256 KiB", "#\n")])
def test_a_file_over_its_size_limit_is_refused_unread(dsn, ws, name, limit, shown, pad):
    """A valid file padded past its limit (whitespace, comments): the old reader stored it."""
    f = ws / name
    with f.open("a") as out:
        out.write(pad * (limit // len(pad) + 1))
    refused(dsn, ws, str(f), shown)


def test_a_billion_laughs_topology_is_refused_at_once(tmp_path):
    """`commscope advise placement --topology` reads its YAML through the same limits (in a process of its own,
    bounded in memory: yaml.safe_load expanded the aliases until the memory cap)."""
    topo = tmp_path / "topology.yaml"
    topo.write_text(BILLION_LAUGHS)
    trace = Path(__file__).parent / "data" / "commgraph-pairs-n4.msgtrace"
    r = subprocess.run([*CLI, "advise", "placement", str(trace), "--topology", str(topo), "--no-store"],
                       capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)))
    assert_one_clear_line(r, str(topo), "aliases", code=2)
