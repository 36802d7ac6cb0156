"""Ramble workspaces into the store: the real workspaces in tests/data/ramble
(results.latest.json from real Ramble 0.5 runs, with their profiles), failed
experiments kept, provenance from the site's hardware, and bad input."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from commscope.read.workload_output import parse_output
from commscope.workflow.ingest import Provenance, ingest
from commscope.read.profiles import BadProfile

RAMBLE = Path(__file__).parent / "data" / "ramble"
MPI_WS = RAMBLE / "smoke-openmpi4-mpi"
MATRIX_WS = RAMBLE / "smoke-mpich4-matrix"
CLI = [sys.executable, "-m", "commscope.cli"]


def results(ws: Path) -> dict:
    return json.loads((ws / "results.latest.json").read_text())


def numeric_foms(exp: dict) -> dict:
    out = {}
    for ctx in exp["CONTEXTS"]:
        for f in ctx["foms"]:
            try:
                out[f["name"]] = float(f["value"])
            except ValueError:
                pass
    return out


def counts(conn) -> dict:
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("campaigns", "runs", "nodes", "node_metrics", "foms", "comm_matrix", "systems")}


def test_every_experiment_is_a_run_and_a_failed_one_is_kept(dsn):
    doc = results(MPI_WS)
    with psycopg.connect(dsn) as conn:
        res = ingest(conn, [MPI_WS], Provenance(git_commit="abc123"))
        assert len(res.inserted) == len(doc["experiments"]) == 5
        rows = {r[0]: r[1:] for r in conn.execute(
            "SELECT experiment, status, app, stack, interconnect, variant, ranks, nodes, profile_kind, campaign_kind, "
            "git_commit FROM v_runs")}
        for exp in doc["experiments"]:
            status, app, stack, ic, variant, ranks, nodes, kind, ckind, commit = rows[exp["name"]]
            assert status == ("ok" if exp["RAMBLE_STATUS"] == "SUCCESS" else "failed")
            v = exp["RAMBLE_VARIABLES"]
            assert (app, stack, ic, variant) == (exp["application_name"], v["stack"], v["interconnect_name"], v["variant"])
            assert (ranks, nodes) == (int(exp["n_ranks"]), int(exp["n_nodes"]))
            assert kind == "runtime-profile" and ckind == "ramble" and commit == "abc123"
        failed = [e["name"] for e in doc["experiments"] if e["RAMBLE_STATUS"] == "FAILED"]
        assert failed and all(rows[f][0] == "failed" for f in failed)
        # only ok runs feed the dashboards' fraction view
        assert conn.execute("SELECT count(*) FROM v_mpi_fraction").fetchone()[0] == 4


def test_experiments_without_caliper_are_stored_from_their_output(dsn):
    """A default run here: Open MPI experiments profiled, Intel MPI ones (no Caliper build) not."""
    ws = RAMBLE / "smoke-mixed-caliper"
    doc = results(ws)
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [ws], Provenance()).inserted) == len(doc["experiments"])
        kinds = dict(conn.execute("SELECT stack, array_agg(DISTINCT profile_kind) FROM v_runs GROUP BY stack").fetchall())
        assert kinds == {"debian-openmpi4": ["runtime-profile"], "pypi-impi2021": ["none"]}
        for exp in doc["experiments"]:
            stored = dict(conn.execute("SELECT name, value FROM v_foms WHERE experiment = %s", (exp["name"],)).fetchall())
            assert stored == pytest.approx(numeric_foms(exp))
        walls = conn.execute("SELECT count(*) FROM v_runs WHERE stack = 'pypi-impi2021' AND wall_time > 0").fetchone()[0]
        assert walls == sum(e["RAMBLE_VARIABLES"]["stack"] == "pypi-impi2021" for e in doc["experiments"])


def test_foms_are_ramble_s_and_equal_the_workload_output(dsn):
    doc = results(MPI_WS)
    with psycopg.connect(dsn) as conn:
        ingest(conn, [MPI_WS], Provenance())
        for exp in doc["experiments"]:
            stored = dict(conn.execute("SELECT name, value FROM v_foms WHERE experiment = %s AND repeat = 0",
                                       (exp["name"],)).fetchall())
            assert stored == pytest.approx(numeric_foms(exp))
            if exp["RAMBLE_STATUS"] != "SUCCESS":
                continue
            run_dir = MPI_WS / "experiments" / exp["application_name"] / exp["workload_name"] / exp["experiment_name"]
            out = parse_output((run_dir / f"{exp['experiment_name']}.out").read_text())
            for name, (value, _unit) in out.foms.items():
                assert stored[name] == pytest.approx(value), name


def test_site_hardware_is_the_system_s_provenance(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [MPI_WS], Provenance())
        rows = conn.execute("SELECT DISTINCT system, cpu_model, cores_per_node, system_interconnect FROM v_runs").fetchall()
        hw = conn.execute("SELECT hardware FROM v_hardware_versions").fetchone()[0]
    assert rows == [("local", "AMD EPYC", 2, "shared memory (single node)")]
    assert hw["topology"]["type"] == "single-node" and hw["memory_per_node_gb"] > 0


def test_matrix_mode_gives_the_communication_matrix_of_each_interconnect(dsn):
    doc = results(MATRIX_WS)
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [MATRIX_WS], Provenance()).inserted) == len(doc["experiments"]) == 2
        for exp in doc["experiments"]:
            run_dir = MATRIX_WS / "experiments" / exp["application_name"] / exp["workload_name"] / exp["experiment_name"]
            out = parse_output((run_dir / f"{exp['experiment_name']}.out").read_text())
            sent = {int(r["rank"]): int(r["bytes_sent"]) for r in out.rank_lines}
            cells = conn.execute("SELECT m.src, sum(m.bytes) FROM v_comm_matrix m JOIN v_runs v USING (run_id) "
                                 "WHERE v.experiment = %s GROUP BY m.src", (exp["name"],)).fetchall()
            assert dict(cells) == sent, exp["name"]
        # the catalog names (ci/interconnects.py), not Ramble's short labels
        assert {r[0] for r in conn.execute("SELECT interconnect FROM v_runs")} == {"mpich4/default", "mpich4/tcp"}


def test_reingesting_a_workspace_is_a_no_op(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [MPI_WS], Provenance())
        before = counts(conn)
        again = ingest(conn, [MPI_WS], Provenance())
        assert again.inserted == [] and len(again.skipped) == 5
        assert counts(conn) == before


@pytest.fixture
def ws_copy(tmp_path):
    dst = tmp_path / "ws"
    shutil.copytree(MPI_WS, dst)
    return dst


def edit_results(ws: Path, fn) -> None:
    doc = results(ws)
    fn(doc)
    (ws / "results.latest.json").write_text(json.dumps(doc))


def test_unknown_results_version_names_the_file_and_changes_nothing(dsn, ws_copy):
    edit_results(ws_copy, lambda d: d["experiments"][1].pop("RAMBLE_STATUS"))
    with psycopg.connect(dsn) as conn:
        before = counts(conn)
        with pytest.raises(BadProfile, match=r"results.latest.json: unknown Ramble results version: experiment 1 lacks RAMBLE_STATUS"):
            ingest(conn, [ws_copy], Provenance())
        conn.rollback()
        assert counts(conn) == before
    edit_results(ws_copy, lambda d: d.pop("experiments"))
    with psycopg.connect(dsn) as conn, pytest.raises(BadProfile, match="no 'experiments' list"):
        ingest(conn, [ws_copy], Provenance())
    (ws_copy / "results.latest.json").write_text('{"experiments": [')
    with psycopg.connect(dsn) as conn, pytest.raises(BadProfile, match="results.latest.json: not JSON"):
        ingest(conn, [ws_copy], Provenance())
    (ws_copy / "results.latest.json").unlink()
    with psycopg.connect(dsn) as conn, pytest.raises(BadProfile, match="ramble workspace analyze -f json"):
        ingest(conn, [ws_copy], Provenance())


def cali_of(ws: Path, status: str) -> Path:
    exp = next(e for e in results(ws)["experiments"] if e["RAMBLE_STATUS"] == status)
    return next((ws / "experiments" / exp["application_name"] / exp["workload_name"] / exp["experiment_name"]).glob("*.cali"))


def test_truncated_profile_of_a_successful_experiment_is_bad_input(dsn, ws_copy):
    f = cali_of(ws_copy, "SUCCESS")
    f.write_bytes(f.read_bytes()[:300])
    with psycopg.connect(dsn) as conn:
        before = counts(conn)
        with pytest.raises(BadProfile, match=f"experiment .*{f.name}"):
            ingest(conn, [ws_copy], Provenance())
        conn.rollback()
        assert counts(conn) == before
        res = ingest(conn, [ws_copy], Provenance(), skip_bad=True)
        assert len(res.inserted) == 4 and len(res.bad) == 1 and f.name in res.bad[0]


def test_a_failed_experiment_with_a_broken_profile_is_still_stored_as_failed(dsn, ws_copy):
    f = cali_of(ws_copy, "FAILED")
    f.write_bytes(b"")
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [ws_copy], Provenance()).inserted) == 5
        kind, meta = conn.execute("SELECT profile_kind, metadata FROM runs WHERE status = 'failed'").fetchone()
    assert kind == "none" and "empty file" in meta["profile_error"] and meta["ramble_status"] == "FAILED"


def test_hostile_strings_in_ramble_results_are_stored_as_data_or_refused_by_name(dsn, ws_copy):
    """SQL and a right-to-left override in a Ramble variable are stored verbatim, as data; one with a NUL, or
    longer than the store holds, refuses the workspace naming the variable and the limit, and stores nothing
    (nothing is cut or replaced without a word)."""
    too_much = "x'); DROP TABLE runs; --\x00" + "y" * 10000
    edit_results(ws_copy, lambda d: d["experiments"][0]["RAMBLE_VARIABLES"].update(variant=too_much))
    with psycopg.connect(dsn) as conn:
        with pytest.raises(BadProfile, match="variant"):
            ingest(conn, [ws_copy], Provenance())
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    evil = "x'); DROP TABLE runs; --\u202e"
    edit_results(ws_copy, lambda d: d["experiments"][0]["RAMBLE_VARIABLES"].update(variant=evil))
    with psycopg.connect(dsn) as conn:
        assert len(ingest(conn, [ws_copy], Provenance()).inserted) == 5
        stored = conn.execute("SELECT variant FROM runs WHERE variant LIKE 'x''); DROP%'").fetchone()[0]
        assert stored == evil
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 5


def test_a_workspace_is_its_own_campaign(dsn, tmp_path):
    with psycopg.connect(dsn) as conn, pytest.raises(BadProfile, match="a Ramble workspace is one campaign"):
        ingest(conn, [MPI_WS, MATRIX_WS], Provenance())


def test_cli_ingests_a_workspace_and_a_hardware_file(dsn, tmp_path):
    env = {"COMMSCOPE_DB_URL": dsn}
    import os
    run = lambda *a: subprocess.run([*CLI, *a], capture_output=True, text=True, env={**os.environ, **env})  # noqa: E731
    r = run("ingest", str(MATRIX_WS))
    assert r.returncode == 0, r.stderr
    assert "stored 2 runs" in r.stdout
    hw = tmp_path / "hardware.yaml"
    hw.write_text("cpu_model: Test CPU 9000\ncores_per_node: 128\ninterconnect: HDR InfiniBand, fat tree\n")
    r = run("ingest", "--system", "bigiron", "--hardware", str(hw),
            str(Path(__file__).parent / "data" / "halo3d-overlap-n2.runtime-profile.cali"))
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT cpu_model, cores_per_node, system_interconnect FROM v_runs WHERE system = 'bigiron'"
                            ).fetchone() == ("Test CPU 9000", 128, "HDR InfiniBand, fat tree")
    # A new node type for the same system: the run before keeps the hardware it ran on.
    hw.write_text("cpu_model: Test CPU 9900\ncores_per_node: 192\ninterconnect: NDR InfiniBand, dragonfly\n")
    r = run("ingest", "--system", "bigiron", "--hardware", str(hw),
            str(Path(__file__).parent / "data" / "halo3d-overlap-n4.runtime-profile.cali"))
    assert r.returncode == 0, r.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT ranks, cpu_model, cores_per_node FROM v_runs WHERE system = 'bigiron' ORDER BY ranks"
                            ).fetchall() == [(2, "Test CPU 9000", 128), (4, "Test CPU 9900", 192)]
        assert conn.execute("SELECT count(*) FROM v_hardware_versions WHERE system = 'bigiron'").fetchone()[0] == 2
    hw.write_text("- just\n- a list\n")
    r = run("ingest", "--hardware", str(hw), str(Path(__file__).parent / "data" / "halo3d-overlap-n2.comm-stats.cali"))
    assert r.returncode == 2 and "hardware.yaml: a hardware description must be a mapping" in r.stderr


def test_repeats_are_runs_of_one_experiment_with_their_repeat_index(dsn):
    ws = RAMBLE / "smoke-openmpi4-repeats"
    doc = results(ws)
    repeats = [e for e in doc["experiments"] if e["RAMBLE_VARIABLES"].get("repeat_index") not in (None, "0")
               and e["RAMBLE_STATUS"] != "UNKNOWN"]
    bases = {e["name"] for e in doc["experiments"] if e["N_REPEATS"] > 0}
    assert len(repeats) == 4 and len(bases) == 2
    with psycopg.connect(dsn) as conn:
        res = ingest(conn, [ws], Provenance())
        assert len(res.inserted) == 4  # the base entries only summarise their repeats
        stored = conn.execute("SELECT experiment, repeat, value FROM v_foms WHERE name = 'total_time' "
                              "ORDER BY experiment, repeat").fetchall()
    assert {e for e, _, _ in stored} == bases
    assert sorted((e, r) for e, r, _ in stored) == sorted((b, r) for b in bases for r in (1, 2))
    for e in repeats:
        base = e["name"].rsplit(".", 1)[0]
        value = numeric_foms(e)["total_time"]
        assert (base, int(e["RAMBLE_VARIABLES"]["repeat_index"]), pytest.approx(value)) in stored


SPACK_WS = RAMBLE / "smoke-spack"


def test_spack_package_manager_runs_carry_the_dag_hash_of_their_build(dsn):
    """A workspace run by Ramble's spack package manager (`commscope run --spack`): every run
    stores the hash of the commscope-workloads build it ran, the root of its stack's spack.lock."""
    doc = results(SPACK_WS)
    lock_roots = {}
    for lock in SPACK_WS.glob("software/*/spack.lock"):
        (root,) = json.loads(lock.read_text())["roots"]
        assert root["spec"].startswith("commscope-workloads+caliper ^")
        lock_roots[lock.parent.name] = root["hash"]
    assert len(set(lock_roots.values())) == 2          # one build per stack
    with psycopg.connect(dsn) as conn:
        res = ingest(conn, [SPACK_WS], Provenance())
        assert len(res.inserted) == len(doc["experiments"]) == 24
        rows = dict(conn.execute("SELECT experiment, spack_hash FROM runs"))
    for exp in doc["experiments"]:
        env = exp["RAMBLE_VARIABLES"]["env_name"]
        assert env == f"commscope-{exp['RAMBLE_VARIABLES']['stack']}"
        assert rows[exp["name"]] == lock_roots[env], exp["name"]


def test_a_spack_lock_that_is_not_json_is_bad_input(dsn, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(SPACK_WS, ws)
    (ws / "software" / "commscope-debian-mpich4" / "spack.lock").write_text("{not json")
    with psycopg.connect(dsn) as conn:
        before = counts(conn)
        with pytest.raises(BadProfile, match=r"commscope-debian-mpich4/spack.lock: not a Spack lock file"):
            ingest(conn, [ws], Provenance())
        conn.rollback()
        assert counts(conn) == before


def test_a_ramble_experiment_declares_its_focus_region(dsn, tmp_path):
    """The Ramble applications declare commscope_focus (the workloads' loop by default); a study that sets it to
    another region gets that region's focus window. Here the halo3d experiment's variable names halo_exchange, as
    a ramble.yaml setting it would record it; the window's per-rank times are summed here from the profile's
    records with caliper-reader (helpers.reference), not by commscope's reader."""
    from helpers import reference
    ws = tmp_path / "ws"
    shutil.copytree(MPI_WS, ws)
    doc = results(ws)
    name = "halo3d.halo3d.halo3d-blocking-debian-openmpi4-default-n2"
    (exp,) = [e for e in doc["experiments"] if e["name"] == name]
    exp["RAMBLE_VARIABLES"]["commscope_focus"] = "halo_exchange"
    (ws / "results.latest.json").write_text(json.dumps(doc))
    with psycopg.connect(dsn) as conn:
        ingest(conn, [ws], Provenance())
        rows = dict(conn.execute(
            "SELECT r.experiment, row(w.focus_region, w.time_s, w.mpi_time_avg_s) FROM run_windows w "
            "JOIN runs r ON r.id = w.run_id WHERE w.\"window\" = 'focus'").fetchall())
    region, time_s, mpi_avg = rows[name]
    profile = next((ws / "experiments" / "halo3d" / "halo3d" / "halo3d-blocking-debian-openmpi4-default-n2").glob("*.cali"))
    per_rank = reference(str(profile), focus="halo_exchange")["focus"]
    assert region == "halo_exchange"
    assert float(time_s) == pytest.approx(max(v[0] for v in per_rank.values()), rel=1e-9)
    assert float(mpi_avg) == pytest.approx(sum(v[1] + v[2] for v in per_rank.values()) / len(per_rank), rel=1e-9)
    # the other experiments keep the workloads' own focus, their timed loop: these profiles have no `loop` region
    # (made before it), so it is the workload's own timers, total_time as Ramble read it from the experiment's log
    other = name.replace("blocking", "overlap")
    (other_exp,) = [e for e in doc["experiments"] if e["name"] == other]
    assert rows[other][0] == "loop"
    assert float(rows[other][1]) == numeric_foms(other_exp)["total_time"]
