"""collsweep: latency of six collectives over a sweep of message sizes (workloads/collsweep).

The algorithm is chosen through the MPI's own runtime controls, passed in `coll_env`
(Open MPI OMPI_MCA_coll_tuned_*, MPICH MPIR_CVAR_<COLL>_INTRA_ALGORITHM, Intel MPI
I_MPI_ADJUST_<COLL>); the workload echoes them as `PARAM env.<NAME>` and reads the library's
value back through MPI_T, so a result cannot be mislabelled. The FOM regexes are the output
contract of workloads/README.md.
"""
from ramble.appkit import *  # noqa: F403

from ramble.base_app.commscope.commscope_workload import CommscopeWorkload


class Collsweep(CommscopeWorkload):
    """Barrier, Bcast, Reduce, Allreduce, Allgather and Alltoall over message sizes, IMB-style."""

    name = "collsweep"
    tags("mpi", "collectives", "reservoir", "commscope")

    executable("collsweep",
               "env {coll_env} collsweep --coll {coll} --sizes {sizes} --iters {iters} --warmup {warmup}"
               " --volume {volume}",
               use_mpi=True, output_capture=OUTPUT_CAPTURE.ALL)
    workload("collsweep", executable="collsweep")
    # The region commscope's focus window covers (docs/measurement-model.md): the timed loop, cs_loop_begin to
    # cs_loop_end. A study about another region sets commscope_focus in its ramble.yaml.
    workload_variable("commscope_focus", default="loop", description="region of commscope's focus window",
                      workloads=["collsweep"])

    workload_variable("coll", default="barrier,bcast,reduce,allreduce,allgather,alltoall",
                      description="collectives to sweep, comma-separated", workloads=["collsweep"])
    workload_variable("sizes", default="8:4M", description="message sizes: MIN:MAX (doubling) or a list; K/M suffixes",
                      workloads=["collsweep"])
    workload_variable("iters", default="1000", description="timed calls per size before the --volume cut",
                      workloads=["collsweep"])
    workload_variable("warmup", default="10", description="least untimed warm-up calls per size",
                      workloads=["collsweep"])
    workload_variable("volume", default="41943040", description="timed calls per size are cut to volume/size",
                      workloads=["collsweep"])
    workload_variable("coll_env", default="", description="NAME=value algorithm controls of the MPI stack",
                      workloads=["collsweep"])
    workload_variable("variant", default="{coll}", description="the case, for labels", workloads=["collsweep"])

    # One FOM per collective, size and statistic: allreduce_8B_t_avg (us), allreduce_8B_busbw (MB/s).
    figure_of_merit("{coll}_{size}_{stat}",
                    fom_regex=r"^FOM (?P<coll>[a-z]+)_(?P<size>\d+[KMG]?B)_(?P<stat>t_min|t_avg|t_max) (?P<value>\S+) us\s*$",
                    group_name="value", units="us")
    figure_of_merit("{coll}_{size}_busbw",
                    fom_regex=r"^FOM (?P<coll>[a-z]+)_(?P<size>\d+[KMG]?B)_busbw (?P<value>\S+) MB/s\s*$",
                    group_name="value", units="MB/s")
    for fom, unit in [("total_time", "s"), ("time_per_iter", "s"), ("runqueue_wait_share_max", "share"), ("comm_time_avg", "s"), ("comm_time_max", "s")]:
        figure_of_merit(fom, fom_regex=rf"^FOM {fom} (?P<value>\S+) {unit}\s*$", group_name="value", units=unit)

    # The algorithm controls the run really had, as the workload echoed them.
    figure_of_merit("env.{control}", fom_regex=r"^PARAM env\.(?P<control>\S+) (?P<value>\S+)\s*$",
                    group_name="value", units="")

    # ... and the library's own value of each control, read back through MPI_T ("6 rabenseifner").
    figure_of_merit("mpit.{control}", fom_regex=r"^PARAM mpit\.(?P<control>\S+) (?P<value>.+?)\s*$",
                    group_name="value", units="")
