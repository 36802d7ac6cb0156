"""The store back into notebooks: load_thicket / load_graphframe rebuild
Thicket and Hatchet objects from the stored metrics, equal to what Hatchet
reads from the original profiles; the example notebook runs."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest

import commscope
from commscope.read import hatchet_io
from commscope.workflow.ingest import Provenance, ingest
from helpers import CALIPERS_OWN_PATH

DATA = Path(__file__).parent / "data"
NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "halo3d_mpi_time.ipynb"


@pytest.fixture
def store(dsn):
    with psycopg.connect(dsn) as conn:
        ingest(conn, [DATA], Provenance(system="testbox"))
    return dsn


def test_load_thicket_selects_runs_and_carries_their_metadata(store):
    with psycopg.connect(store) as conn:
        expected = conn.execute("SELECT id FROM runs r WHERE app = 'halo3d' AND variant = 'overlap' AND "
                                "EXISTS (SELECT 1 FROM node_metrics m WHERE m.run_id = r.id) ORDER BY id").fetchall()
        tk = commscope.load_thicket(conn, app="halo3d", variant="overlap")
    assert sorted(tk.metadata["run_id"]) == [r[0] for r in expected] and len(expected) >= 2
    assert set(tk.metadata["variant"]) == {"overlap"}
    assert set(tk.metadata["system"]) == {"testbox"}
    assert {"time", "time (inc)", "time (max)", "imbalance"} <= set(tk.dataframe.columns)
    assert len(tk.profile) == len(expected)
    # Adiak metadata comes along: the runtime-profile pair ran with --pml-width 3, the 2-rank comm-stats pair with 32
    assert set(tk.metadata["pml_width"]) == {"3", "32"}


def test_stored_call_tree_equals_hatchet_on_the_original_file(store):
    name = "halo3d-overlap-n4.runtime-profile.cali"
    gf_file = hatchet_io.read_cali(DATA / name)
    gf_file.update_inclusive_columns()
    ranks = 4
    excl, incl = defaultdict(float), defaultdict(float)
    for _, row in gf_file.dataframe.reset_index().iterrows():
        names = tuple(n.frame["name"] for n in row["node"].path())
        if names == CALIPERS_OWN_PATH:   # Caliper's own MPI_Comm_dup (helpers.calipers_own) is not the application's
            continue
        path = "/".join(names)
        excl[path] += float(row["time"]) / ranks
        incl[path] += float(row["time (inc)"]) / ranks
    with psycopg.connect(store) as conn:
        run_id = conn.execute("SELECT id FROM runs WHERE source LIKE %s", (f"%{name}",)).fetchone()[0]
        gf = commscope.load_graphframe(run_id, conn)
    ours = {"/".join(n.frame["name"] for n in node.path()): row for node, row in gf.dataframe.iterrows()}
    assert set(ours) == {p for p in excl}
    for path, row in ours.items():
        assert row["time"] == pytest.approx(excl[path], abs=1e-12), path
        assert row["time (inc)"] == pytest.approx(incl[path], abs=1e-12), path
    assert "halo_exchange" in gf.tree(metric_column="time (inc)")


def test_selection_errors_name_the_problem(store):
    with psycopg.connect(store) as conn:
        with pytest.raises(ValueError, match="cannot select runs by colour"):
            commscope.load_thicket(conn, colour="blue")
        with pytest.raises(LookupError, match="no stored runs match"):
            commscope.load_thicket(conn, app="no-such-app")
        with pytest.raises(LookupError, match="no stored runs match"):
            commscope.load_thicket(conn, app="halo3d", since="2100-01-01")
        with pytest.raises(LookupError, match="no run 999999"):
            commscope.load_graphframe(999999, conn)


def test_example_notebook_runs_against_the_store(store, monkeypatch):
    """Every code cell, in order, in one namespace, as a kernel would run them."""
    monkeypatch.setenv("COMMSCOPE_DB_URL", store)
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4
    ns: dict = {}
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert len(code) >= 4
    for i, cell in enumerate(code):
        exec(compile("".join(cell["source"]), f"{NOTEBOOK.name}[cell {i}]", "exec"), ns)
    assert "overlap" in ns["fraction"].index
    assert ns["fraction"].notna().any().any()
    assert len(ns["worst"]) > 0 and (ns["worst"]["imbalance"] >= 1).all()
    assert len(ns["routines"]) > 0 and ns["routines"]["function"].str.startswith("MPI_").all()
