"""The package a user installs (issue 17): the wheel built from this checkout, installed into a fresh venv with
its base dependencies only, used from a directory outside the checkout. The main job's commands (db start, ingest, report, check, advise,
and run when Ramble is there) must work there; the wheel holds the `commscope` package and
nothing else at the top level."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from caliperreader import read_caliper_contents

from helpers import calipers_own

from conftest import private_home

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "tests" / "data" / "halo3d-overlap-n2.runtime-profile.cali"
TRACE = ROOT / "tests" / "data" / "commgraph-pairs-n4.msgtrace"


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert p.returncode == 0, f"{' '.join(map(str, cmd))}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the wheel, the venv's bin directory): base install, no extras. The venv gets the wheel itself and, linked
    from this interpreter's site-packages, exactly the distributions its Requires-Dist names without extras,
    followed to their own requirements (base_distributions); `pip check` in the venv then says whether they
    satisfy it. Nothing is downloaded, so the check does not hang on the registry."""
    tmp = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp / "dist",
         ROOT], cwd=tmp)
    (wheel,) = (tmp / "dist").glob("commscope-*.whl")
    run([sys.executable, "-m", "venv", tmp / "venv"])
    venv_site = Path(run([tmp / "venv" / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
                         ).stdout.strip())
    for dist in base_distributions(wheel):
        link_distribution(dist, venv_site)
    run([tmp / "venv" / "bin" / "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", wheel], cwd=tmp)
    run([tmp / "venv" / "bin" / "pip", "check"])
    return wheel, tmp / "venv" / "bin"


def base_distributions(wheel: Path) -> list:
    """The installed distributions the wheel's METADATA requires without extras, and theirs, transitively."""
    from importlib import metadata
    from packaging.requirements import Requirement

    meta = zipfile.ZipFile(wheel).read(next(n for n in zipfile.ZipFile(wheel).namelist()
                                            if n.endswith(".dist-info/METADATA"))).decode()
    todo = [Requirement(line.split(":", 1)[1].strip()) for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    found: dict[str, metadata.Distribution] = {}
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        dist = metadata.distribution(req.name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in found:
            continue
        found[key] = dist
        # psycopg[binary]: the extra's own requirements come along
        todo += [r for r in map(Requirement, dist.requires or [])
                 if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in req.extras or [""])]
    return list(found.values())


def link_distribution(dist, site: Path) -> None:
    """Symlinks the top-level entries of DIST's installed files (its packages and its .dist-info) into SITE."""
    for top in sorted({f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] != ".."}):
        target = Path(dist.locate_file(top))
        if target.exists() and not (site / top).exists():
            (site / top).symlink_to(target)


def test_the_wheel_holds_the_package_and_its_migrations_only(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"commscope", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}, top
    shipped = {n.rsplit("/", 1)[1] for n in names if n.startswith("commscope/store/migrations/")}
    in_tree = {p.name for p in (ROOT / "commscope" / "store" / "migrations").glob("*.sql")}
    assert shipped == in_tree


def test_the_wheel_carries_what_setup_and_run_read(installed):
    """Every file git tracks under the folders `commscope setup` and `run` read (studies, Ramble applications,
    modifier, sites, workload sources, Spack package, dashboards) is in the
    wheel, byte for byte, and no compiled Python."""
    wheel, _ = installed
    z = zipfile.ZipFile(wheel)
    names = set(z.namelist())
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files", "ramble", "workloads", "packages", "dashboards",
                              "spack.yaml", "versions.yaml"], capture_output=True, text=True, check=True).stdout.split()
    assert len(tracked) > 50
    for f in tracked:
        assert f"commscope/share/{f}" in names, f
        assert z.read(f"commscope/share/{f}") == (ROOT / f).read_bytes(), f
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]
    # and nothing git does not track there: no npm installs, builds or caches a working checkout holds
    untracked = sorted(n for n in names if n.startswith("commscope/share/") and not n.endswith("/")
                       and n.removeprefix("commscope/share/") not in set(tracked))
    assert not untracked, f"{len(untracked)} untracked files, e.g. {untracked[:3]}"


def _outside_env(bin_dir: Path, home: str) -> dict:
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "COMMSCOPE_HOME": home, "HOME": home}


def test_base_install_finds_its_studies_outside_the_checkout(installed):
    """From a directory outside the checkout, `commscope run smoke --dry-run` knows the study and the site,
    and stops at what is truly missing: the workload builds `commscope setup` makes."""
    _, bin_dir = installed
    home = private_home()
    try:
        p = subprocess.run([bin_dir / "commscope", "run", "smoke", "--dry-run", "--no-spack"], cwd=home,
                           env=_outside_env(bin_dir, home), capture_output=True, text=True, timeout=120)
        assert p.returncode != 0 and "unknown study" not in p.stderr, p.stderr
        assert "commscope setup" in p.stderr, p.stderr
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.skipif(not os.environ.get("RAMBLE_ROOT"), reason="needs RAMBLE_ROOT: a Ramble checkout (Ramble is in "
                    "no registry; tests/thirdparty/README.md says how it was fetched)")
@pytest.mark.skipif(not shutil.which("mpicc.openmpi"), reason="needs Debian's Open MPI (ci/setup.sh installs it)")
def test_base_install_sets_up_and_renders_a_study_outside_the_checkout(installed, tmp_path):
    """The wheel's `commscope setup` builds the workloads from the sources it carries, and its `commscope run
    smoke --dry-run` renders the same experiments as the checkout's own install does."""
    _, bin_dir = installed
    rendered = {}
    for name, exe in (("wheel", bin_dir / "commscope"), ("checkout", Path(sys.executable).parent / "commscope")):
        home = private_home()
        env = {**_outside_env(exe.parent, home), "RAMBLE_ROOT": os.environ["RAMBLE_ROOT"]}
        try:
            run([exe, "setup", "--stacks", "debian-openmpi4"], cwd=home, env=env)
            out = run([exe, "run", "smoke", "--stacks", "debian-openmpi4", "--dry-run", "--no-spack"], cwd=home,
                      env=env).stdout
            ws = Path(next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("workspace: ")))
            rendered[name] = sorted(p.name for p in (ws / "experiments").glob("*/*/*") if p.is_dir())
        finally:
            shutil.rmtree(home, ignore_errors=True)
    assert rendered["wheel"] and rendered["wheel"] == rendered["checkout"], rendered


def test_base_install_starts_the_store_ingests_and_reports_outside_the_checkout(installed):
    _, bin_dir = installed
    home = private_home()
    work = Path(home) / "elsewhere"
    work.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "COMMSCOPE_HOME": str(home), "HOME": str(home)}
    try:
        run([bin_dir / "commscope", "db", "start"], cwd=work, env=env)
        out = run([bin_dir / "commscope", "ingest", PROFILE], cwd=work, env=env).stdout
        assert "stored 1 runs" in out, out
        # the stored run-window time is the slowest rank's sum of the file's records (caliper-reader), Caliper's own
        # MPI_Comm_dup left out (helpers.calipers_own)
        recs, _globals = read_caliper_contents(str(PROFILE))
        per_rank: dict = {}
        for r in recs:
            t = r.get("sum#sum#time.duration", r.get("sum#time.duration"))
            if t is not None and "mpi.rank" in r and not calipers_own(r):
                per_rank[r["mpi.rank"]] = per_rank.get(r["mpi.rank"], 0.0) + float(t)
        assert len(per_rank) == 2, sorted(recs[0])
        got = run([bin_dir / "python", "-c",
                   "from commscope.store import db\n"
                   "with db.connect() as c:\n"
                   "    print(c.execute(\"SELECT time_s FROM v_run_metrics WHERE \\\"window\\\"='run'\").fetchone()[0])"],
                  cwd=work, env=env).stdout
        assert float(got) == pytest.approx(max(per_rank.values()), rel=1e-6)
        report = work / "report.html"
        run([bin_dir / "commscope", "report", "-o", report], cwd=work, env=env)
        assert report.stat().st_size > 10_000 and "halo3d" in report.read_text()
        # the gate and an advisor, from the same base install: the campaign ingest printed on its last line
        campaign = out.strip().splitlines()[-1]
        verdicts = json.loads(run([bin_dir / "commscope", "check", "--campaign", campaign, "--format", "json"],
                                  cwd=work, env=env).stdout)
        assert [s["app"] for s in verdicts["series"]] == ["halo3d"], verdicts
        (work / "topology.yaml").write_text("nodes: [hostA, hostB]\nranks_per_node: 2\nnetwork: {type: flat}\n")
        run([bin_dir / "commscope", "advise", "placement", TRACE, "--topology", "topology.yaml", "-o", "advice",
             "--no-store"], cwd=work, env=env)
        assert len((work / "advice" / "rankfile").read_text().split("\n")) >= 4   # one line per rank of the n4 trace
    finally:
        subprocess.run([bin_dir / "commscope", "db", "stop"], cwd=work, env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def test_package_code_edits_no_sys_path():
    """The package finds its parts by import, never by putting folders on sys.path (issue 17)."""
    edits = subprocess.run(["git", "-C", ROOT, "grep", "-n", "sys.path", "--", "commscope/*.py", "commscope/**/*.py"],
                           capture_output=True, text=True).stdout
    assert edits == "", edits


def test_the_stack_and_interconnect_catalogs_import_with_the_standard_library_alone():
    """ci/setup.sh runs `python3 -m commscope.workflow.stacks install` before any venv exists: the catalogs and the
    packages above them import under a Python without site-packages (-S), and list the same stacks and entries as
    the venv's commscope does."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from commscope.workflow import stacks, interconnects; "
            "print(' '.join(s.name for s in stacks.catalog())); print(' '.join(e.name for e in interconnects.catalog()))")
    bare = subprocess.run(["/usr/bin/python3", "-S", "-c", code, ROOT], capture_output=True, text=True)
    assert bare.returncode == 0, bare.stderr
    venv = subprocess.run([sys.executable, "-c", code, ROOT], capture_output=True, text=True, check=True)
    assert bare.stdout == venv.stdout and len(bare.stdout.split()) >= 10, (bare.stdout, venv.stdout)
    listed = subprocess.run(["/usr/bin/python3", "-S", "-m", "commscope.workflow.stacks", "list"], cwd=ROOT,
                            capture_output=True, text=True)
    assert listed.returncode == 0 and "debian-openmpi4" in listed.stdout, listed.stderr
