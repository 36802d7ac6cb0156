"""stencil2d: 5-point Jacobi with row, column and Cartesian decompositions (workloads/stencil2d).

The FOM regexes are the output contract of workloads/README.md.
"""
from ramble.appkit import *  # noqa: F403

from ramble.base_app.commscope.commscope_workload import CommscopeWorkload


class Stencil2d(CommscopeWorkload):
    """2D Jacobi stencil: decomposition (row-naive, row-vector, col, cart) x send mode (ssend, send, isend)."""

    name = "stencil2d"
    tags("mpi", "halo-exchange", "decomposition", "commscope")

    executable("stencil2d",
               "stencil2d {grid_args} --iters {iters} --decomp {decomp} --send {send}"
               " --verify-max-points {verify_max_points}",
               use_mpi=True, output_capture=OUTPUT_CAPTURE.ALL)
    workload("stencil2d", executable="stencil2d")
    # The region commscope's focus window covers (docs/measurement-model.md): the timed loop, cs_loop_begin to
    # cs_loop_end. A study about another region sets commscope_focus in its ramble.yaml.
    workload_variable("commscope_focus", default="loop", description="region of commscope's focus window",
                      workloads=["stencil2d"])

    workload_variable("n", default="512,512", description="global grid rows,columns (strong scaling)",
                      workloads=["stencil2d"])
    workload_variable("local", default="128,128", description="block per rank rows,columns (weak scaling)",
                      workloads=["stencil2d"])
    workload_variable("grid_args", default="--n {n}", values=["--n {n}", "--local {local}"],
                      description="strong (--n) or weak (--local) scaling", workloads=["stencil2d"])
    workload_variable("iters", default="100", description="Jacobi sweeps", workloads=["stencil2d"])
    workload_variable("decomp", default="cart", values=["row-naive", "row-vector", "col", "cart"],
                      description="decomposition", workloads=["stencil2d"])
    workload_variable("send", default="isend", values=["ssend", "send", "isend"],
                      description="send mode of the halo exchange", workloads=["stencil2d"])
    workload_variable("variant", default="{decomp}-{send}", description="the case, for labels",
                      workloads=["stencil2d"])
    workload_variable("verify_max_points", default="16777216",
                      description="largest grid rank 0 verifies serially; raise it for large grids, "
                                  "because every VERIFY must PASS", workloads=["stencil2d"])

    for fom, unit in [("total_time", "s"), ("time_per_iter", "s"), ("runqueue_wait_share_max", "share"),
                      ("comm_time_avg", "s"), ("comm_time_max", "s"),
                      ("compute_time_avg", "s"), ("compute_time_max", "s"),
                      ("halo_bytes_per_iter_avg", "B"), ("halo_bytes_per_iter_max", "B"),
                      ("messages_per_iter_avg", "count"), ("messages_per_iter_max", "count")]:
        figure_of_merit(fom, fom_regex=rf"^FOM {fom} (?P<value>\S+) {unit}\s*$", group_name="value", units=unit)
