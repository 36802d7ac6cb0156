"""Never silently unprofiled: an experiment of a `commscope run` that asked for a Caliper profile and wrote none is
named in one line with its likely cause, and the run exits 3 unless --allow-unprofiled. Read from a real Ramble
workspace (tests/data/ramble/smoke-openmpi4-mpi) with one profile taken away; no MPI or Ramble needed."""
from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from commscope.commands import workflow as commands
from commscope.workflow import errors
from commscope.workflow.run import say_unprofiled
from conftest import DATA

WS = DATA / "ramble" / "smoke-openmpi4-mpi"
EXP = "halo3d-blocking-debian-openmpi4-default-n2"


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / WS.name
    shutil.copytree(WS, ws)
    (ws / "experiments" / "halo3d" / "halo3d" / EXP / f"{EXP}.cali").unlink()
    # a failed experiment without a profile is a failure, said as such, never an unprofiled run
    for f in (ws / "experiments" / "halo3d" / "halo3d").glob("halo3d-grid-too-small-*/*.cali"):
        f.unlink()
    return ws


def test_an_experiment_without_its_profile_is_named_once_with_the_likely_cause(workspace):
    said: list[str] = []
    missing = say_unprofiled(SimpleNamespace(caliper="mpi", preload=False), workspace, said.append)
    assert missing == [f"halo3d.halo3d.{EXP}"]
    assert len(said) == 1 and said[0].startswith(f"  NOT PROFILED: halo3d.halo3d.{EXP} wrote no profile in ")
    assert "MPI_Finalize" in said[0]


def test_a_preloaded_run_without_the_fortran_forwarder_names_it(workspace):
    said: list[str] = []
    say_unprofiled(SimpleNamespace(caliper="mpi", preload=True), workspace, said.append)
    assert len(said) == 1 and "libcommscope-mpif.so" in said[0] and "PMPI_" in said[0], said


def test_every_profile_there_or_caliper_off_says_nothing(workspace):
    said: list[str] = []
    assert say_unprofiled(SimpleNamespace(caliper="off", preload=False), workspace, said.append) == []
    assert say_unprofiled(SimpleNamespace(caliper="mpi", preload=False), WS, said.append) == [] and said == []


@pytest.mark.parametrize("allow, code", [(False, 3), (True, 0)])
def test_run_exits_3_for_unprofiled_experiments_unless_allowed(monkeypatch, allow, code):
    def fake_run(plan, echo=print, ingest=True, allow_unprofiled=False):
        if not allow_unprofiled:
            raise errors.Unprofiled("1 experiments asked for a Caliper profile and wrote none")
    monkeypatch.setattr(commands, "plan_run", lambda *a, **k: SimpleNamespace())
    monkeypatch.setattr(commands, "run", fake_run)
    res = CliRunner().invoke(commands.run_cmd, ["smoke", *(["--allow-unprofiled"] if allow else [])])
    assert res.exit_code == code, res.output
    assert "--allow-unprofiled" in CliRunner().invoke(commands.run_cmd, ["--help"]).output
