"""pingpong: the half round trip of one message size between world ranks 0 and 1 (workloads/pingpong).

The nightly study runs it on every stack and interconnect as the regression gate's canary: it measures the
transport alone, so when it moves together with the applications of the same system, stack and interconnect in
one campaign, the gate calls the change "platform" (commscope/gate/attribution.py). The FOM regexes are the
output contract of workloads/README.md.
"""
from ramble.appkit import *  # noqa: F403

from ramble.base_app.commscope.commscope_workload import CommscopeWorkload


class Pingpong(CommscopeWorkload):
    """Two-rank ping-pong: the best batch's half round trip (latency) of one message size."""

    name = "pingpong"
    tags("mpi", "latency", "bandwidth", "canary", "commscope")

    executable("pingpong", "pingpong --bytes {bytes} --iters {iters} --batches {batches} --warmup {warmup}",
               use_mpi=True, output_capture=OUTPUT_CAPTURE.ALL)
    workload("pingpong", executable="pingpong")
    # The region commscope's focus window covers (docs/measurement-model.md): the timed loop, cs_loop_begin to
    # cs_loop_end. A study about another region sets commscope_focus in its ramble.yaml.
    workload_variable("commscope_focus", default="loop", description="region of commscope's focus window",
                      workloads=["pingpong"])

    workload_variable("bytes", default="8", description="message size in bytes", workloads=["pingpong"])
    workload_variable("iters", default="2000", description="round trips per batch", workloads=["pingpong"])
    workload_variable("batches", default="5", description="timed batches; the best one is the latency (at most 1000)",
                      workloads=["pingpong"])
    workload_variable("warmup", default="200", description="untimed round trips first (connection setup)",
                      workloads=["pingpong"])
    workload_variable("variant", default="pingpong-{bytes}B", description="the case, for labels",
                      workloads=["pingpong"])

    for fom, unit in [("total_time", "s"), ("time_per_iter", "s"), ("runqueue_wait_share_max", "share"),
                      ("comm_time_avg", "s"), ("comm_time_max", "s"), ("latency", "us"), ("latency_median", "us")]:
        figure_of_merit(fom, fom_regex=rf"^FOM {fom} (?P<value>\S+) {unit}\s*$", group_name="value", units=unit)
