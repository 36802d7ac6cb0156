"""The output contract every commscope workload keeps (workloads/README.md), once for all of them.

Rank 0 prints `MPI_LIBRARY <version string>`, `RANKS <world size>`, `FOM <name> <value> <unit>` and
`VERIFY <name> PASS|FAIL|SKIP <value>`. The figures of merit of the header and of the VERIFY lines, and the
success criteria, are the same for every workload; each application.py adds its own executable, workload,
variables and FOMs. Ramble finds this class through `base_application_repos` (commscope run adds ramble/).
"""
from ramble.appkit import *  # noqa: F403


class CommscopeWorkload(ExecutableApplication):
    """A commscope workload: the header and VERIFY figures of merit, and every VERIFY must PASS at the world
    size the experiment asked for."""

    name = "commscope-workload"
    tags("mpi", "commscope")

    # Header: the MPI library and the world size the run really had.
    figure_of_merit("mpi_library", fom_regex=r"^MPI_LIBRARY (?P<value>.+?)\s*$", group_name="value", units="")
    figure_of_merit("ranks", fom_regex=r"^RANKS (?P<value>\d+)\s*$", group_name="value", units="")

    figure_of_merit("verify_{check}", fom_regex=r"^VERIFY (?P<check>\S+) (?P<status>PASS|FAIL|SKIP) \S+\s*$",
                    group_name="status", units="")
    figure_of_merit("verify_{check}_value", fom_regex=r"^VERIFY (?P<check>\S+) (?:PASS|FAIL|SKIP) (?P<value>\S+)\s*$",
                    group_name="value", units="")

    # Every VERIFY must PASS: at least one PASS, and no line with another status.
    success_criteria("verify_passed", mode="string", match=r"^VERIFY \S+ PASS \S+")
    success_criteria("verify_none_failed", mode="string", anti_match=r"^VERIFY \S+ (?!PASS )")
    # MPICH under the wrong PMI runs as P one-rank copies and exits 0: check the world size.
    success_criteria("world_size", mode="fom_comparison", fom_name="ranks", formula="{value} == {n_ranks}")
