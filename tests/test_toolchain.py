"""`commscope setup` builds Caliper and Adiak itself from the pinned sources (versions.yaml) when CMake finds none:
one build per MPI stack, cached under $COMMSCOPE_HOME/cache, from a source mirror whose archives are checked
against versions.yaml's sha256. What a build links is read with binutils (readelf, nm) and the loader (ldd), not
from commscope's records.

The mirror is COMMSCOPE_SOURCE_MIRROR (ci/setup.sh sets it from ../shared/mirror through ci/toolchain.py); the
tests that need it skip without it."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import private_home, stack_or_skip

MIRROR = os.environ.get("COMMSCOPE_SOURCE_MIRROR", "")
CALIPER = os.environ.get("COMMSCOPE_CALIPER_PREFIX", "")
needs_mirror = pytest.mark.skipif(
    not MIRROR or not Path(MIRROR).is_dir(),
    reason="needs COMMSCOPE_SOURCE_MIRROR, a folder with versions.yaml's source archives (ci/setup.sh sets it "
           "when ../shared/mirror is there); Caliper and Adiak are in no package registry")


def setup(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SPACK_ROOT", "CMAKE_PREFIX_PATH", "RAMBLE_ROOT")}
    env["COMMSCOPE_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "commscope.cli", "setup", *args], env=env, capture_output=True,
                          text=True, timeout=1800)


def needed(binary: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def resolved(binary: Path, soname: str) -> Path:
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    m = re.search(rf"^\s*{re.escape(soname)} => (\S+)", out, re.M)
    assert m, out
    return Path(m.group(1)).resolve()


def defined(lib: Path) -> set[str]:
    """The functions a shared library defines (nm's T entries)."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    return {f[2] for f in (line.split() for line in out.splitlines()) if len(f) == 3 and f[1] == "T"}


@pytest.fixture
def home():
    h = private_home()
    yield h
    shutil.rmtree(h, ignore_errors=True)


@needs_mirror
def test_setup_uses_one_pinned_caliper_for_linking_and_preloading_and_a_second_setup_builds_nothing(home):
    """The toolchain's cache (the one ci/toolchain.py filled through `commscope setup --source-mirror`) shared
    into a fresh home: setup builds no Caliper, links its one Caliper into the workloads and offers the same one
    to the modifier's preload mode. That install loads Debian Open MPI's own libmpi, defines the MPI wrappers
    itself (MPI_Send: PMPI, not GOTCHA's gotcha_wrap), and a workload linked with it writes per-function MPI time
    (read back with caliper-reader). Spack, not asked for, is not mentioned."""
    import caliperreader
    stack = stack_or_skip("debian-openmpi4")
    if not CALIPER:
        pytest.skip("needs COMMSCOPE_CALIPER_PREFIX, which ci/toolchain.py sets with the mirror")
    cache = Path(CALIPER).parents[3]
    assert cache.name == "cache", CALIPER
    (home / "cache").symlink_to(cache)
    r = setup(home, "--source-mirror", MIRROR, "--stacks", "debian-openmpi4")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    assert "building into" not in out, out          # cached: a second setup costs nothing
    assert "spack" not in out.lower(), out
    linked = home / "cache" / Path(CALIPER).relative_to(cache)     # the same install, seen from this home
    assert f"with Caliper {linked}/" in out, out
    halo3d = home / "builds" / "debian-openmpi4" / "halo3d"
    assert "libcaliper.so.2" in needed(halo3d)
    assert resolved(halo3d, "libcaliper.so.2") == (linked / "lib" / "libcaliper.so.2").resolve()
    own_mpi = resolved(halo3d, "libmpi.so.40")
    libdirs = subprocess.run([stack.mpicc, "--showme:libdirs"], capture_output=True, text=True, check=True).stdout
    assert own_mpi in {(Path(d) / "libmpi.so").resolve() for d in libdirs.split()}, (own_mpi, libdirs)
    assert resolved(linked / "lib" / "libcaliper.so", "libmpi.so.40") == own_mpi
    assert (linked / "lib" / "libadiak.so").exists()
    assert "MPI_Send" in defined(linked / "lib" / "libcaliper.so")
    assert "gotcha_wrap" not in defined(linked / "lib" / "libcaliper.so")
    variables = yaml.safe_load((home / "sites" / "local-generated" / "variables.yaml").read_text())["variables"]
    assert variables["caliper_preload_prefix_debian-openmpi4"] == str(linked)
    assert variables["caliper_debian-openmpi4"] == "yes"
    env = stack.environ({"CALI_CONFIG": f"runtime-profile,profile.mpi,output={home / 'linked.cali'}"})
    subprocess.run(stack.launch(2, [str(halo3d), "--iters", "3", "--n", "16,16,16"]), env=env, check=True,
                   capture_output=True, timeout=300)
    records, _ = caliperreader.read_caliper_contents(str(home / "linked.cali"))
    functions = {rec["mpi.function"] for rec in records if "mpi.function" in rec}
    assert {"MPI_Init", "MPI_Sendrecv", "MPI_Allreduce"} <= functions, functions


def test_an_install_stamped_for_other_caliper_options_is_not_taken_as_built(home, monkeypatch):
    """A prefix whose stamp names the same versions and MPI wrappers but not the same Caliper options (an install
    of an earlier layout) is not reused."""
    from commscope.workflow import caliper, stacks
    monkeypatch.setenv("COMMSCOPE_HOME", str(home))
    stack = stacks.Stack("some-mpi", "openmpi", "/usr/bin/mpicc.openmpi", "mpirun", "/usr")
    p = caliper.prefix(stack.name)
    (p / "lib").mkdir(parents=True)
    (p / "lib" / "libcaliper.so").write_bytes(b"")
    stamp = {"release": caliper.release(), "mpicc": stack.mpicc, "mpicxx": caliper.mpicxx(stack)}
    (p / caliper.STAMP).write_text(json.dumps(stamp))
    assert caliper.installed(stack) is None
    (p / caliper.STAMP).write_text(json.dumps({**stamp, "options": list(caliper.OPTIONS)}))
    assert caliper.installed(stack) == p


@needs_mirror
def test_an_archive_that_is_not_the_pinned_one_is_named_and_the_stack_is_built_without_caliper(home, tmp_path):
    """A mirror whose Caliper archive differs from versions.yaml's sha256: setup names the file and both
    checksums in one line, says it goes on without Caliper for the stack, and builds the workloads without it.
    Nothing of the bad archive is extracted."""
    stack_or_skip("debian-openmpi4")
    bad = tmp_path / "mirror"
    bad.mkdir()
    for f in Path(MIRROR).iterdir():
        (bad / f.name).symlink_to(f)
    (bad / "caliper-2.14.0.tar.gz").unlink()
    (bad / "caliper-2.14.0.tar.gz").write_bytes(b"not the pinned archive\n")
    want = yaml.safe_load((Path(__file__).parents[1] / "versions.yaml").read_text())["caliper"]["sha256"]
    r = setup(home, "--source-mirror", str(bad), "--stacks", "debian-openmpi4")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    line = next(x for x in out.splitlines() if "sha256" in x)
    assert str(bad / "caliper-2.14.0.tar.gz") in line and want in line, line
    assert "going on without Caliper for debian-openmpi4" in line, line
    assert not any(n.startswith("libcaliper") for n in needed(home / "builds" / "debian-openmpi4" / "halo3d"))
    assert not list((home / "cache").glob("src/caliper-*")), "a bad archive was extracted"
    record = json.loads((home / "builds" / "debian-openmpi4" / "commscope-build.json").read_text())
    assert record["caliper"] is False


@needs_mirror
def test_a_failed_build_step_is_named_with_its_log_and_leaves_no_install(home, monkeypatch):
    """A stack whose C++ wrapper is missing: Adiak's configure fails; the error names that step and a log that
    holds CMake's own complaint, and no prefix is left for a later setup to take as built."""
    from commscope.workflow import caliper, stacks
    monkeypatch.setenv("COMMSCOPE_HOME", str(home))
    real = stack_or_skip("debian-openmpi4")
    broken = stacks.Stack("broken-mpi", real.family, str(home / "nowhere" / "mpicc"), real.mpirun, real.prefix)
    with pytest.raises(caliper.CaliperBuildError) as e:
        caliper.ensure(broken, Path(MIRROR), log=lambda _msg: None)
    assert e.value.step == "Adiak configure", str(e.value)
    assert str(e.value.log) in str(e.value) and "nowhere" in e.value.log.read_text()
    assert not caliper.prefix("broken-mpi").exists()
    assert caliper.installed(broken) is None


def test_without_a_mirror_or_a_clone_setup_says_in_one_line_how_to_get_caliper(home):
    """Offline and without a mirror: one line names every stack left without Caliper and the two ways to give
    one; the workloads are built all the same."""
    stack_or_skip("debian-openmpi4")
    reach = subprocess.run(["git", "ls-remote", "--heads", "https://github.com/LLNL/Adiak.git"], capture_output=True,
                           env={**os.environ, "GIT_TERMINAL_PROMPT": "0"}, timeout=60)
    if reach.returncode == 0:
        pytest.skip("this machine can clone the pinned sources, so setup would build Caliper instead")
    r = setup(home, "--stacks", "debian-openmpi4")
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    lines = [x for x in out.splitlines() if "no Caliper for" in x]
    assert len(lines) == 1, out
    assert "debian-openmpi4" in lines[0] and "--source-mirror DIR" in lines[0] and "--caliper-prefix" in lines[0]
    assert "built debian-openmpi4" in out and "without Caliper" in out, out
