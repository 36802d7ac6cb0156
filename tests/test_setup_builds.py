"""`commscope setup` with one Caliper (issue 17): a Caliper built against Debian Open MPI 4.1 is used only with
that MPI. Given to the PyPI Open MPI 5 stack too (both share the soname libmpi.so.40, so a name check is not
enough), that stack is built without Caliper, never linked against it, and says why; the other stacks are built
all the same. A build configured with Caliper is never reused once the Caliper search changes. Whether a binary has
Caliper is read from its dynamic section with binutils' readelf, not from commscope's records."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import private_home, stack_or_skip

CALIPER = os.environ.get("COMMSCOPE_CALIPER_PREFIX")
pytestmark = pytest.mark.skipif(not CALIPER, reason="needs COMMSCOPE_CALIPER_PREFIX: a Caliper+Adiak built with "
                                "Debian Open MPI 4.1 (no package registry carries Caliper)")


def links_caliper(binary) -> bool:
    out = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    return bool(re.search(r"\(NEEDED\).*libcaliper", out))


def setup(home, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SPACK_ROOT", "CMAKE_PREFIX_PATH")}
    env["COMMSCOPE_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "commscope.cli", "setup", *args], env=env, capture_output=True,
                          text=True, timeout=1200)


@pytest.fixture
def home():
    h = private_home()
    yield h
    shutil.rmtree(h, ignore_errors=True)


def test_a_caliper_of_another_mpi_is_left_out_and_the_other_stacks_are_built(home):
    for name in ("debian-openmpi4", "pypi-openmpi5", "debian-mpich4"):
        stack_or_skip(name)
    r = setup(home, "--stacks", "debian-openmpi4,pypi-openmpi5,debian-mpich4",
              "--caliper-prefix", f"debian-openmpi4={CALIPER}", "--caliper-prefix", f"pypi-openmpi5={CALIPER}")
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    builds = home / "builds"
    assert links_caliper(builds / "debian-openmpi4" / "halo3d")
    assert not links_caliper(builds / "pypi-openmpi5" / "halo3d")
    assert not links_caliper(builds / "debian-mpich4" / "halo3d")
    note = json.loads((builds / "pypi-openmpi5" / "commscope-build.json").read_text())["note"]
    assert "without Caliper" in note and "--caliper-prefix pypi-openmpi5=" in note, note
    assert "pypi-openmpi5" in out and "without Caliper" in out
    assert (home / "sites" / "local-generated").is_dir()
    # named alone (no pinned build here), the Caliper is offered for preloading only when its PMPI wrappers define
    # MPI_Send (nm): a GOTCHA Caliper installs its wrappers when it starts, which no preloaded library makes it do,
    # and the local site says so by an empty prefix
    import yaml
    variables = yaml.safe_load((home / "sites" / "local-generated" / "variables.yaml").read_text())["variables"]
    exported = subprocess.run(["nm", "-D", "--defined-only", str(Path(CALIPER) / "lib" / "libcaliper.so")],
                              capture_output=True, text=True, check=True).stdout
    pmpi = re.search(r" T MPI_Send$", exported, re.M) is not None
    assert variables["caliper_preload_prefix_debian-openmpi4"] == (CALIPER if pmpi else "")


def test_a_build_configured_with_caliper_is_not_reused_once_the_caliper_search_changes(home):
    stack_or_skip("debian-openmpi4")
    r = setup(home, "--stacks", "debian-openmpi4", "--caliper-prefix", f"debian-openmpi4={CALIPER}")
    assert r.returncode in (0, 1), r.stdout + r.stderr   # 1: Spack missing, which setup reports last
    halo3d = home / "builds" / "debian-openmpi4" / "halo3d"
    assert links_caliper(halo3d)
    r = setup(home, "--stacks", "debian-openmpi4")     # no Caliper named any more
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert not links_caliper(halo3d), "the cached caliper_DIR of the first configuration was reused"


def test_a_caliper_of_another_mpi_is_refused_before_anything_links_it(home):
    """The clash is found from the libraries themselves before the build: the note names the libcaliper.so of the
    prefix and the folder of the stack's own MPI library (as CMake's FindMPI found it for the build), instead of
    reporting a failed link after the fact."""
    stack_or_skip("pypi-openmpi5")
    r = setup(home, "--stacks", "pypi-openmpi5", "--caliper-prefix", f"pypi-openmpi5={CALIPER}")
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    bdir = home / "builds" / "pypi-openmpi5"
    assert not links_caliper(bdir / "halo3d")
    cache = (bdir / "CMakeCache.txt").read_text()
    found = re.search(r"^MPI_mpi_LIBRARY:FILEPATH=(.*)$", cache, re.M)
    assert found, "FindMPI recorded no libmpi for the stack"
    stack_libdir = os.path.dirname(found.group(1))
    needed = subprocess.run(["readelf", "-d", f"{CALIPER}/lib/libcaliper.so"], capture_output=True, text=True,
                            check=True).stdout
    assert "libmpi.so.40" in needed   # the soname both Open MPIs share: the reason a name check is not enough
    note = json.loads((bdir / "commscope-build.json").read_text())["note"]
    assert f"{CALIPER}/lib/libcaliper.so" in note and stack_libdir in note, note
    assert "failed" not in note, note


def test_a_build_configured_from_another_checkout_is_built_afresh_with_caliper(home, tmp_path):
    """Two checkouts of commscope set up into one COMMSCOPE_HOME (the facility's nightly clone, then a developer's
    tree): CMake refuses a build directory configured from another source tree, and that refusal once read as "a
    Caliper built against another MPI", leaving the stack without Caliper. The second setup builds afresh and
    links Caliper."""
    stack_or_skip("debian-openmpi4")
    root = Path(__file__).resolve().parents[1]
    other = tmp_path / "other-checkout"
    subprocess.run(["git", "clone", "-q", str(root), str(other)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("SPACK_ROOT", "CMAKE_PREFIX_PATH")}
    env["COMMSCOPE_HOME"] = str(home)
    first = subprocess.run([sys.executable, "-m", "commscope.cli", "setup", "--stacks", "debian-openmpi4",
                            "--caliper-prefix", f"debian-openmpi4={CALIPER}"], cwd=other,
                           env={**env, "PYTHONPATH": str(other)}, capture_output=True, text=True, timeout=1200)
    halo3d = home / "builds" / "debian-openmpi4" / "halo3d"
    assert links_caliper(halo3d), first.stdout + first.stderr
    assert f"CMAKE_HOME_DIRECTORY:INTERNAL={other}/workloads" in (halo3d.parent / "CMakeCache.txt").read_text()
    r = setup(home, "--stacks", "debian-openmpi4", "--caliper-prefix", f"debian-openmpi4={CALIPER}")
    out = r.stdout + r.stderr
    assert "building afresh" in out and "failed" not in out, out
    assert links_caliper(halo3d), out
    assert f"CMAKE_HOME_DIRECTORY:INTERNAL={root}/workloads" in (halo3d.parent / "CMakeCache.txt").read_text()


NOGOTCHA = os.environ.get("COMMSCOPE_CALIPER_NOGOTCHA_PREFIX")


@pytest.mark.skipif(not NOGOTCHA, reason="needs COMMSCOPE_CALIPER_NOGOTCHA_PREFIX: a Caliper built with Debian Open "
                    "MPI 4.1 and -DWITH_GOTCHA=OFF (ci/toolchain.py)")
def test_a_named_caliper_without_gotcha_serves_preloading_too(home, monkeypatch):
    """`--caliper-prefix` naming a Caliper built without GOTCHA: the workloads link it, and it is also the Caliper
    preloaded into unmodified binaries (the local site's caliper_preload_prefix, the plan of a study whose
    application is preloaded), with no pinned build of its own. Whether it lacks GOTCHA is read here from its
    library's exported symbols (binutils' nm: PMPI wrappers define MPI_Send), not from commscope's rule."""
    stack_or_skip("debian-openmpi4")
    exported = subprocess.run(["nm", "-D", "--defined-only", str(Path(NOGOTCHA) / "lib" / "libcaliper.so")],
                              capture_output=True, text=True, check=True).stdout
    assert re.search(r" T MPI_Send$", exported, re.M), "the premise: this Caliper exports its MPI wrappers"
    r = setup(home, "--stacks", "debian-openmpi4", "--caliper-prefix", f"debian-openmpi4={NOGOTCHA}")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert links_caliper(home / "builds" / "debian-openmpi4" / "halo3d")
    import yaml
    variables = yaml.safe_load((home / "sites" / "local-generated" / "variables.yaml").read_text())["variables"]
    assert variables["caliper_preload_prefix_debian-openmpi4"] == NOGOTCHA
    assert not (home / "cache" / "caliper").exists()   # nothing pinned was built
    monkeypatch.setenv("COMMSCOPE_HOME", str(home))
    from commscope.workflow.plan import plan_run
    plan = plan_run("fortran", stacks=["debian-openmpi4"], dry_run=True, spack=False)
    assert plan.preload and plan.profiled["debian-openmpi4"] == (True, f"preloading the no-GOTCHA Caliper {NOGOTCHA}")

