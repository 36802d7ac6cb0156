"""The Spack side: spack.yaml, the commscope package repo, the site scopes and
the `local` externals generator.

Without Spack (CI on a fresh machine) these check that every file parses into
the shape Spack reads, that the recipe's variants are the workloads' build
options, and that the generator's externals name each installed stack's own
wrappers. With SPACK_ROOT set, the environment is concretized for real against
the generated externals (COMMSCOPE_SPACK_INSTALL=1 also installs it, which
needs the Caliper/Adiak source mirror in COMMSCOPE_SPACK_MIRROR; see
packages/README.md).
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import suite
from conftest import ROOT, mpi_stacks
from helpers import FORTRAN_CALLS, fortran_preload, nogotcha, profile_reference

GENERATOR = ROOT / "ramble" / "sites" / "local" / "generate_spack_externals.py"
REPO_DIR = ROOT / "packages" / "spack_repo" / "commscope"
RECIPE = REPO_DIR / "packages" / "commscope_workloads" / "package.py"
# What MPI_Get_library_version starts with, per stack family (as in test_workloads).
LIBRARY_NAME = {"openmpi": "Open MPI", "mpich": "MPICH", "impi": "Intel(R) MPI"}
SITE_SCOPES = sorted((ROOT / "ramble" / "sites").glob("*/spack"))


def load(path: Path) -> dict:
    with open(path) as f:
        data = yaml.safe_load(f)
    assert isinstance(data, dict), f"{path}: top level is not a mapping"
    return data


def spack_env() -> dict:
    return load(ROOT / "spack.yaml")["spack"]


# --- files parse, with the shape Spack reads -----------------------------------

def test_every_spack_yaml_parses():
    files = [ROOT / "spack.yaml", REPO_DIR / "repo.yaml"]
    for scope in SITE_SCOPES:
        files += sorted(scope.glob("*.yaml"))
    assert len(files) >= 5, files
    for path in files:
        data = load(path)
        if path.parent in SITE_SCOPES:
            # A directory scope: each file <section>.yaml holds exactly that section.
            assert list(data) == [path.stem], f"{path}: expected one top-level key {path.stem!r}, got {list(data)}"


def test_environment_shape():
    env = spack_env()
    assert env["concretizer"]["unify"] is False
    assert env["view"] is False  # many builds of one package cannot share a view
    # Relative paths only, and each resolves inside the checkout.
    for repo in env["repos"]:
        assert not os.path.isabs(repo)
        assert (ROOT / repo / "repo.yaml").is_file(), repo
    dev = env["develop"]["commscope-workloads"]
    assert not os.path.isabs(dev["path"]) and (ROOT / dev["path"] / "CMakeLists.txt").is_file()
    assert dev["spec"].startswith("commscope-workloads@")
    # Every include is conditional, and the default (no COMMSCOPE_SITE) selects local.
    includes = env["include"]
    assert all("when" in inc and not os.path.isabs(inc["path"]) for inc in includes)
    chosen = [inc["path"] for inc in includes if eval(inc["when"], {"env": {}})]
    assert chosen == ["ramble/sites/local/spack"]
    other = [inc["path"] for inc in includes if eval(inc["when"], {"env": {"COMMSCOPE_SITE": "slurm-cluster"}})]
    assert [p.replace("$COMMSCOPE_SITE", "slurm-cluster") for p in other] == ["ramble/sites/slurm-cluster/spack"]
    # The matrix: workloads x the site's MPI list.
    names = {k for d in env["definitions"] for k in d if k != "when"}
    assert {"workloads", "openmpi_fabrics", "mpich_netmods", "intel_mpi"} <= names
    matrix = env["specs"][0]["matrix"]
    assert matrix == [["$workloads"], ["$^site_mpis"]]
    workloads = next(d["workloads"] for d in env["definitions"] if "workloads" in d)
    assert workloads == ["commscope-workloads+caliper"]
    fabrics = next(d["openmpi_fabrics"] for d in env["definitions"] if "openmpi_fabrics" in d)
    netmods = next(d["mpich_netmods"] for d in env["definitions"] if "mpich_netmods" in d)
    assert sorted(fabrics) == ["openmpi fabrics=ofi", "openmpi fabrics=ucx"]
    assert sorted(netmods) == ["mpich netmod=ofi", "mpich netmod=ucx"]


def test_every_site_scope_defines_its_mpis_or_generates_them():
    env_names = {k for d in spack_env()["definitions"] for k in d}
    for scope in SITE_SCOPES:
        if (scope / "definitions.yaml").exists():
            defs = load(scope / "definitions.yaml")["definitions"]
            mpis = [spec for d in defs for spec in d.get("site_mpis", [])]
            assert mpis, f"{scope}: definitions.yaml has no site_mpis"
            for spec in mpis:  # a $reference must name a list spack.yaml defines
                if spec.startswith("$"):
                    assert spec[1:] in env_names, f"{scope}: {spec} is not defined in spack.yaml"
            packages = load(scope / "packages.yaml")["packages"]
            assert packages["mpi"]["buildable"] is False
            for pkg in ("openmpi", "mpich", "intel-oneapi-mpi", "gcc"):
                assert packages[pkg]["externals"], f"{scope}: no {pkg} externals"
        else:
            # The local site: its scope comes from the generator, under COMMSCOPE_HOME.
            inc = load(scope / "include.yaml")["include"]
            assert [i["path"] for i in inc] == ["$COMMSCOPE_HOME/spack/local"], scope


def test_repo_yaml_is_api_v2_readable_by_spack_1_0_and_1_1():
    repo = load(REPO_DIR / "repo.yaml")["repo"]
    assert repo["namespace"] == "commscope" == REPO_DIR.name
    m = re.fullmatch(r"v(\d+)\.(\d+)", repo["api"])
    assert m, repo["api"]
    # Spack 1.0 reads package API up to v2.2, Spack 1.1 up to v2.4.
    assert (int(m[1]), int(m[2])) >= (2, 0) and (int(m[1]), int(m[2])) <= (2, 2)
    for pkg_dir in (REPO_DIR / "packages").iterdir():
        assert re.fullmatch(r"[a-z0-9_]+", pkg_dir.name), f"{pkg_dir.name}: API v2 folders use underscores"
        assert (pkg_dir / "package.py").is_file()


# --- the recipe -----------------------------------------------------------------

def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == name]


def _const(node) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def cmake_options() -> dict[str, str]:
    """COMMSCOPE_WITH_<X> build options of workloads/CMakeLists.txt -> x."""
    text = (ROOT / "workloads" / "CMakeLists.txt").read_text()
    names = re.findall(r"(?:set|option)\(\s*(COMMSCOPE_WITH_\w+)\b[^)]*(?:CACHE|\"|BOOL)", text)
    assert names, "no COMMSCOPE_WITH_* options in workloads/CMakeLists.txt"
    return {n: n.removeprefix("COMMSCOPE_WITH_").lower() for n in dict.fromkeys(names)}


def test_recipe_variants_are_the_cmake_options():
    tree = ast.parse(RECIPE.read_text(), filename=str(RECIPE))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert cls.name == "CommscopeWorkloads"  # Spack's name for commscope_workloads/
    assert [getattr(b, "id", None) for b in cls.bases] == ["CMakePackage"]
    variants = {_const(c.args[0]) for c in _calls(cls, "variant")}
    options = cmake_options()
    assert variants == set(options.values()), f"variants {variants} != options {options}"
    # Each variant reaches CMake as its option, through self.define(...).
    defined = {_const(c.args[0]) for c in ast.walk(cls)
               if isinstance(c, ast.Call) and getattr(c.func, "attr", None) == "define"}
    assert set(options) <= defined, f"cmake_args does not define {set(options) - defined}"
    assert "MPI_C_COMPILER" in defined
    # The MPI wrapper comes from the concretized spec, not from PATH.
    src = ast.unparse(next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "cmake_args"))
    assert "self.spec['mpi'].mpicc" in src
    deps = {(_const(c.args[0]), _const(next((k.value for k in c.keywords if k.arg == "when"), None)))
            for c in _calls(cls, "depends_on")}
    assert ("mpi", None) in deps
    # The Fortran workload: a Fortran compiler, and the same MPI's Fortran wrapper where it has one.
    assert ("fortran", None) in deps and "MPI_Fortran_COMPILER" in defined and "'mpifc'" in src
    assert ("caliper+adiak+mpi", "+caliper") in deps and ("adiak+mpi", "+caliper") in deps
    # Nothing to download: no url/git, one develop version.
    assigned = {t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert not assigned & {"url", "git", "list_url"}
    assert [_const(c.args[0]) for c in _calls(cls, "version")] == ["develop"]


# --- the local externals generator ------------------------------------------------

def run_generator(home: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GENERATOR), "--home", str(home), *extra],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    present = [s for s in mpi_stacks.catalog() if s.present()]
    if not present:
        pytest.skip("no MPI stack installed; run bash ci/setup.sh")
    home = tmp_path_factory.mktemp("home")
    proc = run_generator(home)
    assert proc.returncode == 0, proc.stderr
    out = Path(proc.stdout.strip())
    assert out == home / "spack" / "local"
    return out, present


def _show(mpicc: str, family: str, env: dict) -> str:
    flag = "--showme" if family == "openmpi" else "-show"
    proc = subprocess.run([mpicc, flag], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, (mpicc, proc.stderr)
    return proc.stdout.strip()


def test_generated_externals_are_each_stacks_own(generated):
    out, present = generated
    packages = load(out / "packages.yaml")["packages"]
    assert packages["mpi"] == {"buildable": False}
    externals = {}
    for pkg in ("openmpi", "mpich", "intel-oneapi-mpi"):
        for ext in packages.get(pkg, {}).get("externals", []):
            assert packages[pkg]["buildable"] is False
            assert os.path.isabs(ext["prefix"]) and Path(ext["prefix"]).is_dir(), ext
            assert ext["prefix"] != "/usr", "a /usr prefix builds against whatever /usr/bin/mpicc is"
            name, version = re.match(r"([a-z-]+)@([\d.]+)", ext["spec"]).groups()
            assert name == pkg
            externals[(pkg, version)] = ext
    assert len(externals) == len(present)
    for stack in present:
        pkg = {"impi": "intel-oneapi-mpi"}.get(stack.family, stack.family)
        (version,) = [v for (p, v), e in externals.items() if p == pkg and
                      (Path(e["prefix"]).name == stack.name or e["prefix"] == stack.prefix)]
        prefix = Path(externals[(pkg, version)]["prefix"])
        if pkg == "intel-oneapi-mpi":
            assert "+generic-names" in externals[(pkg, version)]["spec"]
            assert "~envmods" in externals[(pkg, version)]["spec"]
            prefix = prefix / "mpi" / ".".join(version.split(".")[:2])  # the recipe's component_prefix
            assert (prefix / "bin" / "mpicc").resolve() == Path(stack.mpicc).resolve()
        else:
            # The wrapper Spack will hand CMake prints the stack's own compile line.
            env = stack.environ()
            assert _show(str(prefix / "bin" / "mpicc"), stack.family, env) == _show(stack.mpicc, stack.family, env)
        assert (prefix / "include" / "mpi.h").is_file(), prefix
        assert list((prefix / "lib").glob("libmpi*.so*")), prefix
        # the launcher commscope starts the stack with (Intel MPI: its own mpiexec.hydra, stacks.catalog)
        mpirun = prefix / "bin" / ("mpiexec.hydra" if stack.family == "impi" else "mpirun")
        assert mpirun.resolve() == Path(stack.mpirun).resolve(), (mpirun, stack.mpirun)
    site_mpis = load(out / "definitions.yaml")["definitions"][0]["site_mpis"]
    assert sorted(site_mpis) == sorted(f"{p}@={v}" for p, v in externals)
    # stacks.yaml: the same specs by stack name, for `commscope run --spack`.
    by_stack = load(out / "stacks.yaml")["stacks"]
    assert set(by_stack) == {s.name for s in present} and sorted(by_stack.values()) == sorted(site_mpis)
    for stack in present:
        pkg = {"impi": "intel-oneapi-mpi"}.get(stack.family, stack.family)
        assert by_stack[stack.name].startswith(f"{pkg}@="), (stack.name, by_stack[stack.name])


def test_generated_debian_mpich_prefix_launches(generated):
    """hydra starts hydra_pmi_proxy from the folder of the mpirun it runs as:
    the symlinked prefix must still launch two real ranks."""
    out, present = generated
    if "debian-mpich4" not in {s.name for s in present}:
        pytest.skip("Debian MPICH is not installed")
    proc = subprocess.run([str(out / "stacks" / "debian-mpich4" / "bin" / "mpirun"), "-n", "2", "hostname"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.split()) == 2


def test_generated_tools_and_shape(generated):
    out, _ = generated
    packages = load(out / "packages.yaml")["packages"]
    for tool in ("gcc", "cmake", "gmake", "python"):
        (ext,) = packages[tool]["externals"]
        assert packages[tool]["buildable"] is False
        assert re.match(rf"{tool}@\d+(\.\d+)+", ext["spec"]), ext
        assert Path(ext["prefix"]).is_dir()
    compilers = packages["gcc"]["externals"][0]["extra_attributes"]["compilers"]
    for lang in ("c", "cxx"):
        assert os.access(compilers[lang], os.X_OK), compilers
    gcc_version = subprocess.run([compilers["c"], "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    assert packages["gcc"]["externals"][0]["spec"].startswith(f"gcc@{gcc_version} ")
    assert not (out / "mirrors.yaml").exists()


def test_generator_mirror_and_bad_input(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    assert run_generator(tmp_path / "a", "--source-mirror", str(mirror)).returncode == 0
    mirrors = load(tmp_path / "a" / "spack" / "local" / "mirrors.yaml")["mirrors"]
    assert mirrors["commscope-sources"]["url"] == mirror.as_uri()
    # A missing mirror: exit 2, named in the message, nothing written.
    proc = run_generator(tmp_path / "b", "--source-mirror", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert str(tmp_path / "nope") in proc.stderr and "not a directory" in proc.stderr
    assert not (tmp_path / "b").exists()


# --- with Spack: concretize (and install) for real ------------------------------------

def spack_or_skip() -> Path:
    root = os.environ.get("SPACK_ROOT")
    if not root:
        pytest.skip("SPACK_ROOT is not set: Spack is in no registry; see packages/README.md for bringing v1.1.0")
    spack = Path(root) / "bin" / "spack"
    assert spack.is_file(), f"SPACK_ROOT={root} has no bin/spack"
    return spack


def env_copy(tmp: Path) -> Path:
    """The environment outside the checkout (Spack writes spack.lock and
    .spack-env/ beside spack.yaml); its relative paths point back in."""
    env_dir = tmp / "env"
    env_dir.mkdir()
    shutil.copy(ROOT / "spack.yaml", env_dir / "spack.yaml")
    for name in ("packages", "ramble", "workloads"):
        (env_dir / name).symlink_to(ROOT / name)
    return env_dir


def concretized_roots(spack: Path, env_dir: Path, environ: dict) -> list[dict]:
    proc = subprocess.run([str(spack), "-e", str(env_dir), "concretize", "-f"],
                          capture_output=True, text=True, env=environ, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lock = json.loads((env_dir / "spack.lock").read_text())
    nodes = lock["concrete_specs"]
    return [dict(nodes[r["hash"]], _nodes=nodes) for r in lock["roots"]]


def _dep(root: dict, name: str) -> dict:
    nodes = root["_nodes"]
    seen, todo = set(), [root]
    while todo:
        node = todo.pop()
        if node["name"] == name:
            return node
        for d in node.get("dependencies", []):
            if d["hash"] not in seen:
                seen.add(d["hash"])
                todo.append(nodes[d["hash"]])
    raise AssertionError(f"{root['name']} has no {name} in its DAG")


MPI_PACKAGES = ("openmpi", "mpich", "intel-oneapi-mpi")


def full_matrix_or_skip():
    if not os.environ.get("COMMSCOPE_SPACK_FULL"):
        pytest.skip("concretizing five roots takes 10 to 15 minutes on 2 cores; CI concretizes one stack's "
                    "environment (test_spack_concretizes_one_stacks_environment). Set COMMSCOPE_SPACK_FULL=1 to run it")


def test_spack_concretizes_one_stacks_environment(tmp_path, generated):
    """The environment Ramble's spack package manager gets for one stack (spack.yaml narrowed to Debian Open MPI
    4.1 by commscope.workflow.spack_envs), concretized by the pinned Spack against the generated externals: one
    root, the workloads +caliper, whose only MPI is that stack's external (nothing built), with Caliper +adiak +mpi
    on the same MPI."""
    from commscope.workflow import spack_envs
    spack = spack_or_skip()
    out, present = generated
    stack = "debian-openmpi4"
    if stack not in {s.name for s in present}:
        pytest.skip(f"{stack} is not installed; run bash ci/setup.sh")
    spec = load(out / "stacks.yaml")["stacks"][stack]
    (own,) = [e["prefix"] for e in load(out / "packages.yaml")["packages"]["openmpi"]["externals"]
              if e["spec"].split()[0] == spec.replace("@=", "@")]
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    spack_envs.write_spack_env(env_dir, stack, spec, "local", "test_spack")
    environ = dict(os.environ, COMMSCOPE_HOME=str(out.parent.parent), COMMSCOPE_SITE="local")
    (root,) = concretized_roots(spack, env_dir, environ)
    assert root["name"] == "commscope-workloads" and root["parameters"]["caliper"] is True
    (mpi,) = [n for n in _walk(root) if n["name"] in MPI_PACKAGES]
    assert mpi["external"]["path"] == own, (mpi["external"], own)
    caliper = _dep(root, "caliper")
    assert caliper["parameters"]["adiak"] and caliper["parameters"]["mpi"]
    assert _dep(dict(caliper, _nodes=root["_nodes"]), "openmpi")["hash"] == mpi["hash"]



@pytest.mark.parametrize("stack_name", mpi_stacks.FORTRAN_STACKS)
def test_spack_builds_the_fortran_workload_that_the_preload_profiles(tmp_path, generated, stack_name):
    """Spack's route for Fortran (packages/): the workloads ~caliper, narrowed to one stack with Fortran bindings,
    concretized and installed by the pinned Spack against the generated externals (only the workloads are built,
    so no Caliper source mirror is needed), give fjacobi and libcommscope-mpif. fjacobi from the install, run under
    its own stack with the documented preload, verifies against its serial run, and caliper-reader finds its
    Fortran MPI calls in the profile. CI takes Debian Open MPI's (about 1.5 min); COMMSCOPE_SPACK_FULL=1 takes
    every Fortran stack."""
    from commscope.read.workload_output import parse_output
    from commscope.workflow import spack_envs
    spack = spack_or_skip()
    if stack_name != mpi_stacks.FORTRAN_STACKS[0] and not os.environ.get("COMMSCOPE_SPACK_FULL"):
        pytest.skip(f"CI installs {mpi_stacks.FORTRAN_STACKS[0]}'s through Spack (about 1.5 min a stack); set "
                    f"COMMSCOPE_SPACK_FULL=1 for {stack_name}'s")
    out, present = generated
    if stack_name not in {s.name for s in present}:
        pytest.skip(f"{stack_name} is not installed; run bash ci/setup.sh")
    caliper_prefix = nogotcha(stack_name)
    cfg = spack_envs.spack_env_for(load(out / "stacks.yaml")["stacks"][stack_name], "local")
    cfg["spack"]["specs"] = [s.replace("+caliper", "~caliper") for s in cfg["spack"]["specs"]]
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / "spack.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False, width=1000))
    environ = dict(os.environ, COMMSCOPE_HOME=str(out.parent.parent), COMMSCOPE_SITE="local")
    (root,) = concretized_roots(spack, env_dir, environ)
    assert root["name"] == "commscope-workloads" and root["parameters"]["caliper"] is False
    proc = subprocess.run([str(spack), "-e", str(env_dir), "install", "-j2"], capture_output=True, text=True,
                          env=environ, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    view = env_dir / ".spack-env" / "view"
    assert (view / "bin" / "fjacobi").is_file() and (view / "lib" / "libcommscope-mpif.so").is_file()
    stack = mpi_stacks.by_name(stack_name)
    cali = tmp_path / "fjacobi-n2.cali"
    run_env = stack.environ({"LD_PRELOAD": fortran_preload(view / "lib", caliper_prefix),
                             "CALI_CONFIG": f"runtime-profile,profile.mpi,output={cali}"})
    p = subprocess.run(stack.launch(2, [str(view / "bin" / "fjacobi"), "--n", "2000", "--iters", "100"]),
                       env=run_env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    verify = parse_output(p.stdout).verify
    assert verify and all(status == "PASS" for status, _v in verify.values()), p.stdout
    _total, _mpi, per_function = profile_reference(cali)
    assert FORTRAN_CALLS <= per_function.keys(), sorted(per_function)

def test_spack_concretizes_the_local_matrix(tmp_path, generated):
    spack = spack_or_skip()
    full_matrix_or_skip()
    out, present = generated
    environ = dict(os.environ, COMMSCOPE_HOME=str(out.parent.parent), COMMSCOPE_SITE="local")
    roots = concretized_roots(spack, env_copy(tmp_path), environ)
    assert len(roots) == len(present)
    prefixes = {e["prefix"] for p in MPI_PACKAGES
                for e in load(out / "packages.yaml")["packages"].get(p, {}).get("externals", [])}
    mpis = set()
    for root in roots:
        assert root["name"] == "commscope-workloads" and root["parameters"]["caliper"] is True
        (mpi,) = [n for n in _walk(root) if n["name"] in MPI_PACKAGES]  # one MPI per DAG
        assert mpi["external"]["path"] in prefixes, mpi["external"]  # a generated external, nothing built
        caliper = _dep(root, "caliper")
        assert caliper["parameters"]["adiak"] and caliper["parameters"]["mpi"]
        mpis.add(mpi["external"]["path"])
    assert mpis == prefixes  # every stack found here is a row of the matrix


def _walk(root: dict):
    nodes = root["_nodes"]
    seen, todo = set(), [root]
    while todo:
        node = todo.pop()
        yield node
        for d in node.get("dependencies", []):
            if d["hash"] not in seen:
                seen.add(d["hash"])
                todo.append(nodes[d["hash"]])


def test_spack_installs_and_the_binaries_run(tmp_path, generated):
    spack = spack_or_skip()
    if not os.environ.get("COMMSCOPE_SPACK_INSTALL"):
        pytest.skip("installing builds Caliper and Adiak once per stack (about 6 min each on 2 cores); "
                    "set COMMSCOPE_SPACK_INSTALL=1 and COMMSCOPE_SPACK_MIRROR to run it")
    mirror = os.environ.get("COMMSCOPE_SPACK_MIRROR")
    assert mirror and Path(mirror).is_dir(), "COMMSCOPE_SPACK_MIRROR must name the Caliper/Adiak source mirror"
    home = tmp_path / "home"
    assert run_generator(home, "--source-mirror", mirror).returncode == 0
    environ = dict(os.environ, COMMSCOPE_HOME=str(home), COMMSCOPE_SITE="local")
    env_dir = env_copy(tmp_path)
    roots = concretized_roots(spack, env_dir, environ)
    proc = subprocess.run([str(spack), "-e", str(env_dir), "install", "-j2"],
                          capture_output=True, text=True, env=environ, timeout=6 * 3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    by_family = {"openmpi": "openmpi", "mpich": "mpich", "intel-oneapi-mpi": "impi"}
    for root in roots:
        mpi = next(n for n in _walk(root) if n["name"] in by_family)
        stack = next(s for s in mpi_stacks.catalog() if s.present() and s.family == by_family[mpi["name"]]
                     and mpi["external"]["path"] in (s.prefix, str(home / "spack" / "local" / "stacks" / s.name)))
        prefix = subprocess.run([str(spack), "-e", str(env_dir), "location", "-i", f"/{root['hash']}"],
                                capture_output=True, text=True, env=environ).stdout.strip()
        workload, case, args = next(m for m in suite.MATRIX if m[0] == "stencil2d")
        r = suite.run(stack, Path(prefix) / "bin", workload, args, 2, case)
        assert not suite.problems(r), (stack.name, suite.problems(r))
        # Built and run by this stack, not by whatever mpicc came first on PATH.
        assert LIBRARY_NAME[stack.family] in r.out.mpi_library, (stack.name, r.out.mpi_library)


def test_spack_concretizes_the_slurm_cluster_template(tmp_path):
    """The template's rows are spack.yaml's interconnect build variants; each
    must land on the one external built with that fabric/netmod."""
    spack = spack_or_skip()
    full_matrix_or_skip()
    environ = dict(os.environ, COMMSCOPE_SITE="slurm-cluster")
    roots = concretized_roots(spack, env_copy(tmp_path), environ)
    externals = load(ROOT / "ramble" / "sites" / "slurm-cluster" / "spack" / "packages.yaml")["packages"]
    got = set()
    for root in roots:
        (mpi,) = [n for n in _walk(root) if n["name"] in MPI_PACKAGES]
        (ext,) = [e for e in externals[mpi["name"]]["externals"] if e["prefix"] == mpi["external"]["path"]]
        params = mpi["parameters"]
        for key in ("fabrics", "netmod"):
            m = re.search(rf"{key}=(\w+)", ext["spec"])
            if m:
                assert params[key] in ([m[1]], m[1]), (ext["spec"], params[key])
        got.add(ext["prefix"])
    # openmpi ucx+ofi, mpich ofi+ucx, intel-oneapi-mpi: five distinct builds.
    assert len(roots) == len(got) == 5, got
