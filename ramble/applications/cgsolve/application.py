"""cgsolve: conjugate gradients on a 3D 7-point Poisson problem (workloads/cgsolve).

The FOM regexes are the output contract of workloads/README.md.
"""
from ramble.appkit import *  # noqa: F403

from ramble.base_app.commscope.commscope_workload import CommscopeWorkload


class Cgsolve(CommscopeWorkload):
    """CG with halo exchanges and 8/16-byte Allreduces: direct, hierarchical or nonblocking
    reductions, with or without debug barriers."""

    name = "cgsolve"
    tags("mpi", "allreduce", "solver", "reservoir", "groundwater", "commscope")

    executable("cgsolve",
               "cgsolve --n {n} --dims {dims} --allreduce {allreduce} {debug_barriers_flag} --tol {tol}"
               " --iters {iters}",
               use_mpi=True, output_capture=OUTPUT_CAPTURE.ALL)
    workload("cgsolve", executable="cgsolve")
    # The region commscope's focus window covers (docs/measurement-model.md): the timed loop, cs_loop_begin to
    # cs_loop_end. A study about another region sets commscope_focus in its ramble.yaml.
    workload_variable("commscope_focus", default="loop", description="region of commscope's focus window",
                      workloads=["cgsolve"])

    workload_variable("n", default="32,32,32", description="global grid of unknowns", workloads=["cgsolve"])
    workload_variable("dims", default="0,0,0", description="process grid; 0 lets MPI_Dims_create choose",
                      workloads=["cgsolve"])
    workload_variable("allreduce", default="direct", values=["direct", "hierarchical", "nonblocking"],
                      description="how the dot products are reduced", workloads=["cgsolve"])
    workload_variable("debug_barriers", default="off", values=["off", "on"],
                      description="MPI_Barrier before every collective and after every halo exchange",
                      workloads=["cgsolve"])
    workload_variable("debug_barriers_flag", default="{debug_barriers_flag_{debug_barriers}}",
                      description="--debug-barriers when debug_barriers=on", workloads=["cgsolve"])
    workload_variable("debug_barriers_flag_on", default="--debug-barriers", description="flag for on",
                      workloads=["cgsolve"])
    workload_variable("debug_barriers_flag_off", default="", description="flag for off", workloads=["cgsolve"])
    workload_variable("tol", default="1e-8", description="stop when ||r||/||b|| is at most this",
                      workloads=["cgsolve"])
    workload_variable("iters", default="2000", description="most CG iterations (not converging FAILs)",
                      workloads=["cgsolve"])
    workload_variable("variant", default="{allreduce}-barriers-{debug_barriers}", description="the case, for labels",
                      workloads=["cgsolve"])

    for fom, unit in [("total_time", "s"), ("time_per_iter", "s"), ("runqueue_wait_share_max", "share"),
                      ("comm_time_avg", "s"), ("comm_time_max", "s"),
                      ("compute_time_avg", "s"), ("compute_time_max", "s"),
                      ("halo_time_avg", "s"), ("halo_time_max", "s"),
                      ("allreduce_time_avg", "s"), ("allreduce_time_max", "s"),
                      ("barrier_time_avg", "s"), ("barrier_time_max", "s"),
                      ("allreduces", "calls"), ("allreduce_bytes_per_call", "B")]:
        figure_of_merit(fom, fom_regex=rf"^FOM {fom} (?P<value>\S+) {unit}\s*$", group_name="value", units=unit)
