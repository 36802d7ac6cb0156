"""commgraph: synthetic communication graphs for process-placement studies (workloads/commgraph).

The FOM regexes are the output contract of workloads/README.md.
"""
from ramble.appkit import *  # noqa: F403

from ramble.base_app.commscope.commscope_workload import CommscopeWorkload


class Commgraph(CommscopeWorkload):
    """Communication graph (pairs, stencil4d, random-sparse) under a chosen rank placement."""

    name = "commgraph"
    tags("mpi", "placement", "commscope")

    executable("commgraph",
               "commgraph --iters {iters} --pattern {pattern} --small-bytes {small_bytes}"
               " --large-bytes {large_bytes} --degree {degree} --seed {seed} {rank_map_args}",
               use_mpi=True, output_capture=OUTPUT_CAPTURE.ALL)
    workload("commgraph", executable="commgraph")
    # The region commscope's focus window covers (docs/measurement-model.md): the timed loop, cs_loop_begin to
    # cs_loop_end. A study about another region sets commscope_focus in its ramble.yaml.
    workload_variable("commscope_focus", default="loop", description="region of commscope's focus window",
                      workloads=["commgraph"])

    workload_variable("iters", default="20", description="communication rounds", workloads=["commgraph"])
    workload_variable("pattern", default="pairs", values=["pairs", "stencil4d", "random-sparse"],
                      description="communication graph", workloads=["commgraph"])
    workload_variable("small_bytes", default="1024", description="bytes of the all-to-all messages (pairs)",
                      workloads=["commgraph"])
    workload_variable("large_bytes", default="1048576",
                      description="bytes of the partner, face or largest message", workloads=["commgraph"])
    workload_variable("degree", default="4", description="destinations per rank (random-sparse)",
                      workloads=["commgraph"])
    workload_variable("seed", default="1", description="random-sparse graph seed", workloads=["commgraph"])
    workload_variable("rank_map_args", default="",
                      description="--rank-map FILE: the application rank each world rank plays",
                      workloads=["commgraph"])
    workload_variable("variant", default="{pattern}", description="the case, for labels", workloads=["commgraph"])

    for fom, unit in [("total_time", "s"), ("time_per_iter", "s"), ("runqueue_wait_share_max", "share"),
                      ("comm_time_avg", "s"), ("comm_time_max", "s"),
                      ("bytes_sent_per_iter_avg", "B"), ("bytes_sent_per_iter_max", "B"),
                      ("internode_bytes_per_iter", "B"), ("intranode_bytes_per_iter", "B")]:
        figure_of_merit(fom, fom_regex=rf"^FOM {fom} (?P<value>\S+) {unit}\s*$", group_name="value", units=unit)
