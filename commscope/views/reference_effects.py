"""The reference studies' headline effects, declared: the five studies as the report cites them, the Effect
record (the paper's figure, the workload, the contrasted parameter and its two values, the measure) and EFFECTS,
the table reference.compute measures from the store. The paper's figures are the only numbers typed in here."""
from __future__ import annotations

from dataclasses import dataclass

# The studies, as the report cites them.
RESERVOIR = "reservoir simulator study"
WEATHER = "weather codes placement study"
SEISMIC = "seismic code study"
STENCIL = "2D stencil coursework study"
GROUNDWATER = "groundwater code study"
STUDIES = [RESERVOIR, WEATHER, SEISMIC, STENCIL, GROUNDWATER]

RUN_IT = "commscope run reference"


@dataclass(frozen=True)
class Effect:
    key: str
    study: str
    name: str
    paper_text: str                  # the figure as the study states it
    paper: tuple[float, float] | None  # the same as a range in the form `form`; None: the study gives no figure
    form: str                        # change | gain | times | speedup | share
    app: str
    measure: str                     # key of MEASURES
    factor: str = ""                 # the contrasted parameter (a series parameter), empty for a level
    baseline: str = ""               # regular expression on its value
    treatment: str = ""
    follows: tuple[str, ...] = ()    # parameters that change with the factor (derived PARAM lines), not conditions
    own: tuple[str, ...] = ()        # parameters of the treatment alone (its own rows; not asked of the baseline)
    where: str = "TRUE"              # SQL on the run (alias m), e.g. only runs with an absorbing layer
    note: str = ""
    said: str = ""                   # the contrast in words, where the expressions would not read well
    run: str = RUN_IT                # what to run when the store has none
    # What the study's effect needs of the machine, to say when a row's runs lacked it (machine_limits):
    # "nodes": traffic between nodes (placement); "parallel_fs": a parallel file system (I/O methods)
    needs: tuple[str, ...] = ()
    paper_ranks: int | None = None   # the rank count (one per core) the study's figure is at, where it says

    @property
    def contrast(self) -> str:
        if self.said or not self.factor:
            return self.said
        name = self.factor.removeprefix("param.")
        return f"{name}: {plain(self.baseline)} → {plain(self.treatment)}"


def plain(regex: str) -> str:
    return regex.replace("(", "").replace(")", "").replace("|", " or ").replace(".*", "…").replace("^", "")


ADVISED = "placement: identity (no rank map) → the advised map (advi*.map, from commscope advise placement)"

EFFECTS: list[Effect] = [
    Effect("reservoir-mpi-share", RESERVOIR, "MPI share of time", "33–45 % of time in MPI", (33, 45), "share",
           "cgsolve", "mpi_share", where="m.parameters->>'param.debug-barriers' = 'off' "
                                         "AND m.parameters->>'param.allreduce' = 'direct'",
           note="a level: cgsolve direct without debugging barriers, each condition"),
    Effect("reservoir-debug-barriers", RESERVOIR, "removing debugging barriers", "−5…8 % MPI time", (-8, -5),
           "change", "cgsolve", "mpi_time", "param.debug-barriers", "on", "off"),
    Effect("reservoir-best-algorithm", RESERVOIR, "best collective algorithm per message size",
           "+3…6 % total time", (3, 6), "gain", "collsweep", "collective_sum", "algorithm",
           # the library's own choice: no control set, or one that says so (Open MPI 0, MPICH auto, Intel MPI 0)
           "default|tuned 0|auto|I_MPI_ADJUST 0", "best", said="algorithm: the library's default → the best per size",
           run=f"{RUN_IT}, or commscope run collectives (collsweep's algorithm sweep)",
           note="ours is the collective's own time over the sizes swept (collsweep), the study's the "
                "application's total"),
    Effect("weather-advised-time", WEATHER, "advised placement: runtime", "about 1 % runtime", (-1, -1), "change",
           "commgraph", "time", "placement", "identity", "advi.*", said=ADVISED, needs=("nodes",)),
    Effect("weather-advised-mpi", WEATHER, "advised placement: MPI time", "more than 5 % less MPI time",
           (-100, -5), "change", "commgraph", "mpi_time", "placement", "identity", "advi.*", said=ADVISED,
           needs=("nodes",)),
    Effect("weather-random-time", WEATHER, "random placement: runtime", "less than 5 % slower", (0, 5), "change",
           "commgraph", "time", "placement", "identity", "random.*",
           said="placement: identity (no rank map) → a random map (random*.map)", needs=("nodes",)),
    Effect("seismic-overlap", SEISMIC, "halo exchange overlapped with interior compute", "−72 % comm time",
           (-72, -72), "change", "halo3d", "comm_time", "param.variant", "blocking", "overlap"),
    Effect("seismic-rma", SEISMIC, "halo exchange by one-sided RMA, overlapped", "−89 % comm time", (-89, -89),
           "change", "halo3d", "comm_time", "param.variant", "blocking", "rma"),
    Effect("seismic-fusion-skew", SEISMIC, "absorbing layer fused into the main loop", "−39 % skew", (-39, -39),
           "change", "halo3d", "skew", "param.fused", "off", "on",
           where="coalesce(m.parameters->>'param.pml-width', '0') ~ '^[0-9]+$' "
                 "AND (m.parameters->>'param.pml-width')::int > 0",
           note="runs with an absorbing layer (pml-width > 0)"),
    Effect("stencil-row-vs-col", STENCIL, "row (strided halos, sent per element) against col decomposition",
           "12× comm time (16 cores)", (12, 12), "times", "stencil2d", "comm_time", "param.decomp", "col",
           "row-naive", follows=("param.process_grid",), paper_ranks=16),
    Effect("stencil-ssend-vs-send", STENCIL, "MPI_Ssend against MPI_Send", "Ssend → Send 1.15×", (1.15, 1.15),
           "times", "stencil2d", "comm_time", "param.send", "send", "ssend"),
    Effect("stencil-isend", STENCIL, "MPI_Isend against MPI_Send", "little gain (no figure; read as 0 to −10 %)",
           (-10, 0), "change", "stencil2d", "comm_time", "param.send", "send", "isend"),
    Effect("groundwater-two-phase-read", GROUNDWATER, "two-phase I/O against independent: reads", "25× faster reads",
           (25, 25), "speedup", "pio", "read_time", "param.method", "independent", "two-phase",
           follows=("param.variant", "param.writers"), own=("param.group-size",), needs=("parallel_fs",)),
    Effect("groundwater-two-phase-write", GROUNDWATER, "two-phase I/O against independent: writes",
           "3× faster writes", (3, 3), "speedup", "pio", "write_time", "param.method", "independent", "two-phase",
           follows=("param.variant", "param.writers"), own=("param.group-size",), needs=("parallel_fs",)),
    Effect("groundwater-allreduce-hierarchical", GROUNDWATER, "Allreduce methods: hierarchical against direct",
           "compared, no figure given", None, "change", "cgsolve", "mpi_time", "param.allreduce", "direct",
           "hierarchical", follows=("param.variant", "param.allreduce_scheme")),
    Effect("groundwater-allreduce-nonblocking", GROUNDWATER, "Allreduce methods: nonblocking (pipelined CG) "
           "against direct", "compared, no figure given", None, "change", "cgsolve", "mpi_time", "param.allreduce",
           "direct", "nonblocking", follows=("param.variant", "param.allreduce_scheme")),
]
