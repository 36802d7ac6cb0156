"""halo3d: 3D halo exchange, two dependent phases per step (workloads/halo3d).

The FOM regexes are the output contract of workloads/README.md: rank 0 prints
`FOM <name> <value> <unit>` and `VERIFY <name> PASS|FAIL|SKIP <value>`.
"""
from ramble.appkit import *  # noqa: F403

from ramble.base_app.commscope.commscope_workload import CommscopeWorkload


class Halo3d(CommscopeWorkload):
    """3D halo exchange with blocking, nonblocking, overlapped and one-sided variants,
    an absorbing layer that unbalances boundary ranks, and loop fusion."""

    name = "halo3d"
    tags("mpi", "halo-exchange", "seismic", "commscope")

    # The binary comes from PATH: the site puts the stack's build there (null package
    # manager), or Spack loads the environment.
    executable("halo3d",
               "halo3d {grid_args} --iters {iters} --dims {dims} --variant {variant} --pml-width {pml_width}"
               " --pml-faces {pml_faces} {fused_flag} {reorder_flag} --verify-max-points {verify_max_points}",
               use_mpi=True, output_capture=OUTPUT_CAPTURE.ALL)
    workload("halo3d", executable="halo3d")
    # The region commscope's focus window covers (docs/measurement-model.md): the timed loop, cs_loop_begin to
    # cs_loop_end. A study about another region sets commscope_focus in its ramble.yaml.
    workload_variable("commscope_focus", default="loop", description="region of commscope's focus window",
                      workloads=["halo3d"])

    workload_variable("n", default="64,64,64", description="global grid X,Y,Z (strong scaling)", workloads=["halo3d"])
    workload_variable("local", default="16,16,16", description="grid per rank X,Y,Z (weak scaling, with grid_args)",
                      workloads=["halo3d"])
    workload_variable("grid_args", default="--n {n}", values=["--n {n}", "--local {local}"],
                      description="strong (--n) or weak (--local) scaling", workloads=["halo3d"])
    workload_variable("iters", default="50", description="time steps", workloads=["halo3d"])
    workload_variable("dims", default="0,0,0", description="process grid; 0 lets MPI_Dims_create choose",
                      workloads=["halo3d"])
    workload_variable("variant", default="blocking", values=["blocking", "nonblocking", "overlap", "rma"],
                      description="halo exchange variant", workloads=["halo3d"])
    workload_variable("pml_width", default="4", description="absorbing-layer planes on each global face",
                      workloads=["halo3d"])
    # A layer on one x face with --dims 2,1,1 (pml_faces: x-) unbalances 2 ranks without oversubscribing 2 cores.
    workload_variable("pml_faces", default="all",
                      description="global faces carrying the absorbing layer: all, or a list of x-,x+,y-,y+,z-,z+",
                      workloads=["halo3d"])
    workload_variable("fused", default="off", values=["off", "on"],
                      description="absorbing-layer work inside the main loop nest", workloads=["halo3d"])
    workload_variable("fused_flag", default="{fused_flag_{fused}}", description="--fused when fused=on",
                      workloads=["halo3d"])
    workload_variable("fused_flag_on", default="--fused", description="flag for fused=on", workloads=["halo3d"])
    workload_variable("fused_flag_off", default="", description="flag for fused=off", workloads=["halo3d"])
    workload_variable("reorder", default="off", values=["off", "on"],
                      description="let MPI_Cart_create reorder ranks", workloads=["halo3d"])
    workload_variable("reorder_flag", default="{reorder_flag_{reorder}}", description="--reorder when reorder=on",
                      workloads=["halo3d"])
    workload_variable("reorder_flag_on", default="--reorder", description="flag for reorder=on", workloads=["halo3d"])
    workload_variable("reorder_flag_off", default="", description="flag for reorder=off", workloads=["halo3d"])
    workload_variable("verify_max_points", default="2097152",
                      description="largest grid rank 0 verifies serially; raise it for large grids, "
                                  "because every VERIFY must PASS", workloads=["halo3d"])

    for fom, unit in [("total_time", "s"), ("time_per_iter", "s"), ("runqueue_wait_share_max", "share"),
                      ("comm_time_avg", "s"), ("comm_time_max", "s"),
                      ("compute_time_avg", "s"), ("compute_time_max", "s"),
                      ("halo_bytes_per_iter_avg", "B"), ("halo_bytes_per_iter_max", "B"),
                      ("halo_bandwidth_avg", "MB/s"), ("halo_bandwidth_max", "MB/s")]:
        figure_of_merit(fom, fom_regex=rf"^FOM {fom} (?P<value>\S+) {unit}\s*$", group_name="value", units=unit)
