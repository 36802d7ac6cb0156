"""An experiment's identity, apart from what it ran on (docs/measurement-model.md).

A series is one experiment on one system: its application, parameters, system, the MPI stack as the site names it,
the interconnect selection and the profiling configuration (IDENTITY). The versions it ran on (VERSIONS: the MPI
library's version string, compiler, Spack spec hash, Caliper version, hardware description, kernel release) are
attributes of its runs and may change along it, so an upgrade is judged against the history before it. The node
count is a parameter; an unknown one (NULL) is a value of its own, for the gate and the scaling view alike. Where only a
library string names the stack (a direct ingest), the stack is the library's family: `mpi_family`, which migration
0038's SQL function of the same name repeats for stores made before."""
from __future__ import annotations

import re

IDENTITY = ("system", "stack", "interconnect", "caliper")
VERSIONS = ("mpi_library", "compiler", "spack_hash", "caliper_version", "hardware", "kernel")

# (a lower-case part of a library string, its family), first match wins: MVAPICH, Intel MPI and Cray MPICH say
# "MPICH" too.
FAMILIES = (("open mpi", "Open MPI"), ("mvapich", "MVAPICH"), ("intel(r) mpi", "Intel MPI"),
            ("intel mpi", "Intel MPI"), ("cray mpich", "Cray MPICH"), ("mpich", "MPICH"))
_VERSIONED = re.compile(r"[^\s]*[0-9][^\s]*")
_SPACES = re.compile(r"[ \t\n\r\f\v]+")


def mpi_family(library: str) -> str:
    """The MPI library's family from its version string: a known family by name (FAMILIES), else the string
    without its words that hold a digit ("Foo MPI 3.2" -> "Foo MPI"), else the string as given."""
    low = library.lower()
    for part, family in FAMILIES:
        if part in low:
            return family
    bare = _SPACES.sub(" ", _VERSIONED.sub("", library)).strip(" ,:;")
    return bare or library
