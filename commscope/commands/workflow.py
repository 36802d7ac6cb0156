"""`commscope setup` and `commscope run`: the main job through Ramble (commscope/workflow/)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from commscope.commands.common import fail
from commscope.workflow.errors import WorkflowError
from commscope.workflow.plan import CALIPER_MODES, plan_run
from commscope.workflow.run import run
from commscope.workflow.setup import setup
from commscope.workflow.spack_envs import spack_install


def _split(s: str | None) -> list[str] | None:
    return [x for x in s.split(",") if x] if s else None


@click.command("setup")
@click.option("--stacks", help="comma-separated MPI stacks to build (default: every one installed)")
@click.option("--caliper-prefix", "caliper_prefixes", multiple=True, metavar="STACK=PREFIX",
              help="Caliper+Adiak install(s) built with STACK (':'-separated); else CMake's own search, else one "
                   "Caliper (PMPI wrappers: linked and preloaded) built from the pinned sources into "
                   "$COMMSCOPE_HOME/cache")
@click.option("--source-mirror", "sources", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="a folder with versions.yaml's source archives (checked against their sha256): Ramble, "
                   "Caliper, Adiak and IMB come from it instead of clones, for offline sites")
@click.option("--imb", is_flag=True, help="also build Intel MPI Benchmarks (IMB-MPI1) per stack, for the imb study")
@click.option("--no-build", is_flag=True, help="only write the local site from existing builds")
@click.option("--spack-source-mirror", type=click.Path(path_type=Path), default=None,
              help="a Spack source mirror with Caliper and Adiak, for offline sites (packages/README.md)")
@click.option("--spack-install", "spack_install_site", metavar="SITE", default=None,
              help="also install spack.yaml per stack of SITE with Spack, as `commscope run --spack` will use it")
def setup_cmd(stacks, caliper_prefixes, sources, imb, no_build, spack_source_mirror,
              spack_install_site):
    """Put Ramble/Spack in place, build the workloads per MPI stack, generate the local site."""
    prefixes = {}
    for cp in caliper_prefixes:
        stack, sep, prefix = cp.partition("=")
        if not sep or not prefix:
            fail(f"--caliper-prefix {cp!r}: expected STACK=PREFIX", 2)
        prefixes[stack] = prefix
    if sources is not None and not sources.is_dir():
        fail(f"--source-mirror {sources}: not a folder; give the folder that holds versions.yaml's archives", 2)
    try:
        res = setup(_split(stacks), prefixes, build=not no_build, log=click.echo, spack_mirror=spack_source_mirror,
                    sources=sources, imb=imb)
    except (WorkflowError, KeyError) as e:
        fail(str(e).strip('"'), 1)
    for m in res["missing"]:
        click.echo(f"missing: {m}", err=True)
    if spack_install_site:
        try:
            spack_install(spack_install_site, _split(stacks), log=click.echo)
        except WorkflowError as e:
            fail(str(e), e.exit_code)
    if res["ramble"] is None:
        sys.exit(1)


@click.command("run")
@click.argument("study")
@click.option("--site", default="local", show_default=True, help="a folder of ramble/sites/")
@click.option("--stacks", help="comma-separated MPI stacks (default: the study's own in its commscope.yaml, else "
                                "every stack the site has)")
@click.option("--interconnects", help="comma-separated interconnect selections (default: the study's own, else "
                                      "default)")
@click.option("--where", help="Ramble filter on experiments, e.g. '{n_ranks} == 2'")
@click.option("--caliper", type=click.Choice(CALIPER_MODES), default=None,
              help="Caliper modifier mode; counts is mpi plus call counts (default: the study's own, counts for "
                   "barriers, else mpi, when the workloads were built with Caliper)")
@click.option("--spack/--no-spack", "spack", default=None,
              help="Ramble's spack package manager, building spack.yaml per stack (the default when Spack is "
                   "there), or its null one with the builds of `commscope setup` (the default without Spack)")
@click.option("--dry-run", is_flag=True, help="render the workspace and its scripts without running them")
@click.option("--no-ingest", is_flag=True, help="leave the results on disk only")
@click.option("--allow-unprofiled", is_flag=True,
              help="exit 0 even when experiments that asked for a Caliper profile wrote none (each is still named "
                   "with its likely cause); without it such a run exits 3")
def run_cmd(study, site, stacks, interconnects, where, caliper, spack, dry_run, no_ingest, allow_unprofiled):
    """Run a study: Ramble workspace setup, on, analyze, then ingest into the store.

    STUDY is one of the package's studies by name, or the path of any folder holding a ramble.yaml (and
    optionally a commscope.yaml)."""
    try:
        plan = plan_run(study, site, _split(stacks), _split(interconnects), caliper, where, dry_run, spack=spack)
        run(plan, echo=click.echo, ingest=not no_ingest, allow_unprofiled=allow_unprofiled)
    except WorkflowError as e:
        fail(str(e), e.exit_code)
