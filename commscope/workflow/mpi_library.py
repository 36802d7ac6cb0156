"""The MPI library each stack of a run is, as the library itself says: `commscope run` builds a probe with the
stack's own wrapper, runs it on one rank with the stack's launcher, and writes the first line of its
MPI_Get_library_version (the line commscope's workloads print as MPI_LIBRARY) per stack to the workspace's
MPI_LIBRARIES file. The workspace's reader (read/ramble.py) gives it to the runs whose profile recorded no library
(an application profiled by preloading Caliper, without Adiak). A stack whose probe cannot be built or run here is
left out, and its runs' library stays unknown."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from commscope.read.files import MPI_LIBRARIES
from commscope.workflow import stacks

PROBE = r"""#include <mpi.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Init(&argc, &argv);
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
    printf("MPI_LIBRARY %s\n", lib);
    MPI_Finalize();
    return 0;
}
"""


def probe(stack: stacks.Stack, folder: Path) -> tuple[str | None, str]:
    """(the first line of the stack's MPI_Get_library_version, or None; why not), built and run in FOLDER."""
    folder.mkdir(parents=True, exist_ok=True)
    src, exe = folder / "mpi_library.c", folder / f"mpi-library-{stack.name}"
    src.write_text(PROBE)
    env = stack.environ()
    for what, cmd in (("building", [stack.mpicc, "-o", str(exe), str(src)]), ("running", stack.launch(1, [str(exe)]))):
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"{what} {exe.name}: {e}"
        if p.returncode:
            return None, f"{what} {exe.name} failed: {(p.stderr or p.stdout).strip()[-300:]}"
    lines = [x[len("MPI_LIBRARY "):].strip() for x in p.stdout.splitlines() if x.startswith("MPI_LIBRARY ")]
    return (lines[0], "") if lines and lines[0] else (None, f"{exe.name} printed no library")


def record(names: list[str], ws: Path, echo) -> dict[str, str]:
    """Probe each named stack of the catalog present here; write what they say to WS/MPI_LIBRARIES and say it."""
    found = {}
    for name in names:
        try:
            stack = stacks.by_name(name)
        except KeyError:
            continue   # a site's own stack, not in the catalog: its library stays what its runs record
        if not stack.present():
            continue
        library, why = probe(stack, ws / "commscope" / "mpi-library")
        if library:
            found[name] = library
            echo(f"  MPI library on {name}: {library}")
        else:
            echo(f"  MPI library on {name} not recorded ({why}); runs that record none store it as unknown")
    (ws / MPI_LIBRARIES).write_text(json.dumps(found, indent=2) + "\n")
    return found
