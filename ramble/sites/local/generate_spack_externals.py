#!/usr/bin/env python3
"""Generate the Spack externals of the `local` site: the MPI stacks installed on
this machine plus gcc, cmake, gmake and python, as absolute paths.

Spack does not expand variables in an external's prefix, and a Debian MPI
declared with prefix /usr builds against whatever /usr/bin/mpicc points to.
So every stack gets a prefix of its own:

- Debian Open MPI and MPICH: a folder of symlinks (bin, include, lib) to that
  stack's suffixed wrappers, headers and libraries;
- PyPI Open MPI and MPICH: their venv;
- PyPI Intel MPI: a folder laid out as the intel-oneapi-mpi recipe expects,
  <prefix>/mpi/<X.Y> -> the venv, declared +generic-names ~envmods.

Everything is written under $COMMSCOPE_HOME/spack/local (never into the
repository), as one directory scope that ramble/sites/local/spack/include.yaml
includes:

    packages.yaml     externals, every MPI and tool not buildable
    definitions.yaml  site_mpis: one spec per stack found, the local matrix
    stacks.yaml       the same specs by stack name (commscope/workflow/stacks.py), for
                      `commscope run` with Ramble's spack package manager
    mirrors.yaml      only with --source-mirror: the file:// Caliper/Adiak mirror
    stacks/           the per-stack prefixes

    python3 ramble/sites/local/generate_spack_externals.py [--home DIR] [--source-mirror DIR]

Stdlib only. The stack catalog is commscope/workflow/stacks.py.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


# The stack catalog: commscope/workflow/stacks.py in a checkout; in an installed package this folder is
# commscope/share/ramble/sites/local, and the catalog is commscope/workflow/stacks.py beside share/.
_STACKS = next(p for p in (REPO / "commscope" / "workflow" / "stacks.py", REPO.parent / "workflow" / "stacks.py")
               if p.exists())
mpi_stacks = _load("commscope_mpi_stacks", _STACKS)


def commscope_home() -> Path:
    """The same rule as commscope/store/db.py home(), without importing the
    package (this script runs before the project venv exists)."""
    if os.environ.get("COMMSCOPE_HOME"):
        return Path(os.environ["COMMSCOPE_HOME"]).resolve()
    if os.geteuid() == 0:
        return Path("/var/lib/commscope")
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "commscope"


def output_dir(home: Path) -> Path:
    return home / "spack" / "local"


class GenerateError(RuntimeError):
    pass


def _run(argv: list[str], env: dict | None = None) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    except OSError as exc:
        raise GenerateError(f"cannot run {argv[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise GenerateError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[:300]}")
    return proc.stdout + proc.stderr


def _version(text: str, pattern: str, what: str) -> str:
    m = re.search(pattern, text)
    if not m:
        raise GenerateError(f"no version for {what} in: {text.strip()[:200]!r}")
    return m.group(1)


def _symlink(target: str | Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(str(target), str(link))


# --- MPI stacks --------------------------------------------------------------

def stack_version(stack) -> str:
    """The version the stack reports about itself, never a pinned guess."""
    bindir = Path(stack.mpicc).parent
    if stack.family == "openmpi":
        return _version(_run([stack.mpicc, "--showme:version"]), r"Open MPI (\d+(?:\.\d+)+)", stack.name)
    if stack.family == "mpich":
        return _version(_run([str(bindir / "mpichversion")]), r"MPICH Version:\s*(\d+(?:\.\d+)+)", stack.name)
    # Intel MPI's launcher is its own mpiexec.hydra (stacks.catalog), whatever comes first on PATH
    return _version(_run([stack.mpirun, "--version"], stack.environ()), r"Version (\d+(?:\.\d+)+)", stack.name)


def stack_variants(stack, prefix: Path) -> str:
    """The interconnect build variants the stack really has, from its own
    report: the fabrics/netmod values spack.yaml's matrix names (ucx, ofi)."""
    bindir = prefix / "bin"
    if stack.family == "openmpi":
        info = _run([str(bindir / "ompi_info"), "--parsable"], stack.environ())
        found = [f for f, comp in (("ofi", "mtl:ofi"), ("ucx", "pml:ucx")) if f"mca:{comp}:" in info]
        return f" fabrics={','.join(found)}" if found else ""
    if stack.family == "mpich":
        # "ch4:ucx" or "ch4:ucx ofi": the first netmod is the one MPICH runs by default.
        device = _version(_run([str(bindir / "mpichversion")]), r"MPICH Device:\s*(ch\d:\w+)", stack.name)
        dev, netmod = device.split(":")
        return f" device={dev} netmod={netmod}"
    return ""


def _debian_openmpi_prefix(stack, prefix: Path) -> None:
    """bin/ holds the .openmpi-suffixed tools under their plain names; include
    and lib are the directories the wrapper itself reports."""
    usr_bin = Path(stack.mpicc).parent
    for name in ("mpicc", "mpicxx", "mpic++", "mpiCC", "mpifort", "mpif90", "mpif77", "mpirun", "mpiexec"):
        real = usr_bin / f"{name}.openmpi"
        if real.exists():
            _symlink(real, prefix / "bin" / name)
    if (usr_bin / "ompi_info").exists():  # Debian ships it unsuffixed; only Open MPI has it
        _symlink(usr_bin / "ompi_info", prefix / "bin" / "ompi_info")
    incdirs = _run([stack.mpicc, "--showme:incdirs"]).split()
    libdirs = _run([stack.mpicc, "--showme:libdirs"]).split()
    if not incdirs or not libdirs:
        raise GenerateError(f"{stack.mpicc} --showme reported no include or lib directory")
    _symlink(incdirs[0], prefix / "include")
    _symlink(libdirs[0], prefix / "lib")


def _debian_mpich_prefix(stack, prefix: Path) -> None:
    """MPICH shares /usr/lib/<triplet> with every other library, so lib/ is a
    real folder holding only MPICH's libraries (libmpi.so -> libmpich)."""
    usr_bin = Path(stack.mpicc).parent
    for name in ("mpicc", "mpicxx", "mpifort", "mpif90", "mpif77", "mpirun", "mpiexec"):
        real = usr_bin / f"{name}.mpich"
        if real.exists():
            _symlink(real, prefix / "bin" / name)
    # hydra starts hydra_pmi_proxy from the folder of the mpirun it was called as.
    for name in ("mpichversion", "mpivars", "mpiexec.hydra", "hydra_pmi_proxy", "hydra_nameserver", "hydra_persist"):
        if (usr_bin / name).exists():
            _symlink(usr_bin / name, prefix / "bin" / name)
    show = _run([stack.mpicc, "-show"]).split()
    incdirs = [a[2:] for a in show if a.startswith("-I")]
    libdirs = [a[2:] for a in show if a.startswith("-L")]
    if not incdirs or not libdirs:
        raise GenerateError(f"{stack.mpicc} -show reported no -I or -L: {' '.join(show)}")
    _symlink(incdirs[0], prefix / "include")
    libs = sorted(Path(libdirs[0]).glob("libmpich*.so*"))
    if not libs:
        raise GenerateError(f"no libmpich*.so in {libdirs[0]} (from {stack.mpicc} -show)")
    for lib in libs:
        _symlink(lib, prefix / "lib" / lib.name)
    _symlink(Path(libdirs[0]) / "libmpich.so", prefix / "lib" / "libmpi.so")


def mpi_external(stack, stacks_out: Path) -> tuple[str, dict]:
    """(package name, external entry) for one stack, creating its prefix if needed."""
    version = stack_version(stack)
    if stack.family in ("openmpi", "mpich"):
        prefix = Path(stack.prefix)
        if stack.name.startswith("debian-"):
            prefix = stacks_out / stack.name
            (_debian_openmpi_prefix if stack.family == "openmpi" else _debian_mpich_prefix)(stack, prefix)
        spec = f"{stack.family}@{version}{stack_variants(stack, prefix)}"
        return stack.family, {"spec": spec, "prefix": str(prefix)}
    # intel-oneapi-mpi: component_prefix is <prefix>/mpi/<X.Y> from 2021.11 on.
    prefix = stacks_out / stack.name
    x_y = ".".join(version.split(".")[:2])
    _symlink(stack.prefix, prefix / "mpi" / x_y)
    # ~envmods: there is no setvars.sh to source; +generic-names: the wheel's
    # wrappers are mpicc/mpicxx, not mpiicx/mpiicpx.
    return "intel-oneapi-mpi", {"spec": f"intel-oneapi-mpi@{version} +generic-names ~envmods", "prefix": str(prefix)}


# --- tools ---------------------------------------------------------------------

def _tool(name: str) -> Path:
    found = shutil.which(name)
    if not found:
        raise GenerateError(f"{name} is not on PATH; install it (Debian: build-essential cmake)")
    return Path(found)


def tool_externals() -> dict:
    gcc = _tool("gcc")
    gcc_version = _run([str(gcc), "-dumpfullversion"]).strip()
    compilers = {"c": str(gcc.resolve()), "cxx": str(_tool("g++").resolve())}
    languages = ["c", "c++"]
    gfortran = shutil.which("gfortran")
    if gfortran:  # Caliper's recipe declares a Fortran build dependency
        compilers["fortran"] = str(Path(gfortran).resolve())
        languages.append("fortran")
    cmake = _tool("cmake")
    cmake_version = _version(_run([str(cmake), "--version"]), r"cmake version (\d+(?:\.\d+)+)", "cmake")
    make = _tool("make")
    make_version = _version(_run([str(make), "--version"]), r"GNU Make (\d+(?:\.\d+)+)", "make")
    # The interpreter running this script, without any venv around it.
    py_version = ".".join(str(v) for v in sys.version_info[:3])
    return {
        "gcc": {"buildable": False, "externals": [{
            "spec": f"gcc@{gcc_version} languages:='{','.join(languages)}'",
            "prefix": str(gcc.resolve().parent.parent),
            "extra_attributes": {"compilers": compilers},
        }]},
        "cmake": {"buildable": False, "externals": [{"spec": f"cmake@{cmake_version}", "prefix": str(cmake.parent.parent)}]},
        "gmake": {"buildable": False, "externals": [{"spec": f"gmake@{make_version}", "prefix": str(make.parent.parent)}]},
        "python": {"buildable": False, "externals": [{"spec": f"python@{py_version}", "prefix": sys.base_prefix}]},
    }


# --- YAML (JSON scalars are valid YAML) ----------------------------------------

def to_yaml(data, indent: int = 0) -> str:
    pad = "  " * indent
    lines = []
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, (dict, list)) and value:
                lines.append(f"{pad}{key}:")
                lines.append(to_yaml(value, indent + 1))
            else:
                lines.append(f"{pad}{key}: {json.dumps(value)}")
    else:
        for item in data:
            if isinstance(item, dict) and item:
                first, *rest = to_yaml(item, indent + 1).splitlines()
                lines.append(f"{pad}- {first.lstrip()}")
                lines.extend(rest)
            else:
                lines.append(f"{pad}- {json.dumps(item)}")
    return "\n".join(lines)


HEADER = "# Generated by ramble/sites/local/generate_spack_externals.py; edits are overwritten.\n"


def generate(home: Path | None = None, source_mirror: Path | None = None) -> Path:
    """Write the local site scope under home/spack/local and return its path.
    Built in a temporary sibling and renamed into place: no partial output."""
    out = output_dir(home or commscope_home())
    present = [s for s in mpi_stacks.catalog() if s.present()]
    if not present:
        raise GenerateError("no MPI stack found; install them with ci/setup.sh "
                            "(or: python3 commscope/workflow/stacks.py install)")
    if source_mirror is not None and not Path(source_mirror).is_dir():
        raise GenerateError(f"--source-mirror {source_mirror}: not a directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".local-", dir=out.parent))
    try:
        # Prefixes must name the final location, not the temporary one.
        packages: dict = {"mpi": {"buildable": False}}
        site_mpis = []
        by_stack = {}
        for stack in present:
            pkg, entry = mpi_external(stack, tmp / "stacks")
            entry["prefix"] = entry["prefix"].replace(str(tmp), str(out))
            packages.setdefault(pkg, {"buildable": False, "externals": []})["externals"].append(entry)
            # The version alone tells the stacks apart; a variant would not.
            site_mpis.append(entry["spec"].split()[0].replace("@", "@="))
            by_stack[stack.name] = site_mpis[-1]
        packages.update(tool_externals())
        (tmp / "packages.yaml").write_text(HEADER + to_yaml({"packages": packages}) + "\n")
        (tmp / "definitions.yaml").write_text(
            HEADER + "# One spec per MPI stack found here: spack.yaml crosses the workloads with it.\n"
            + to_yaml({"definitions": [{"site_mpis": site_mpis}]}) + "\n")
        (tmp / "stacks.yaml").write_text(
            HEADER + "# The spec of each stack's external, by the stack's name in commscope/workflow/stacks.py.\n"
            + to_yaml({"stacks": by_stack}) + "\n")
        if source_mirror is not None:
            url = Path(source_mirror).resolve().as_uri()
            (tmp / "mirrors.yaml").write_text(
                HEADER + to_yaml({"mirrors": {"commscope-sources": {"url": url, "signed": False}}}) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, help="commscope home (default: $COMMSCOPE_HOME, as the collectors use)")
    ap.add_argument("--source-mirror", type=Path,
                    help="a Spack source mirror directory holding Caliper and Adiak (see packages/README.md)")
    args = ap.parse_args()
    try:
        out = generate(args.home.resolve() if args.home else None, args.source_mirror)
    except GenerateError as exc:
        print(f"generate_spack_externals: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
