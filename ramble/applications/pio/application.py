"""pio: parallel write and read-back of a global 3D array in one shared file (workloads/pio).

The FOM regexes are the output contract of workloads/README.md.
"""
from ramble.appkit import *  # noqa: F403

from ramble.base_app.commscope.commscope_workload import CommscopeWorkload


class Pio(CommscopeWorkload):
    """Independent, collective (file view + _all) and two-phase (group roots do the I/O) MPI-IO."""

    name = "pio"
    tags("mpi", "mpi-io", "groundwater", "commscope")

    executable("pio",
               "pio --n {n} --dims {dims} --method {method} --group-size {group_size} --dir {io_dir}"
               " --iters {iters}",
               use_mpi=True, output_capture=OUTPUT_CAPTURE.ALL)
    workload("pio", executable="pio")
    # The region commscope's focus window covers (docs/measurement-model.md): the timed loop, cs_loop_begin to
    # cs_loop_end. A study about another region sets commscope_focus in its ramble.yaml.
    workload_variable("commscope_focus", default="loop", description="region of commscope's focus window",
                      workloads=["pio"])

    workload_variable("n", default="64,64,64", description="global array of doubles", workloads=["pio"])
    workload_variable("dims", default="0,0,0", description="process grid; 0 lets MPI_Dims_create choose",
                      workloads=["pio"])
    workload_variable("method", default="collective", values=["independent", "collective", "two-phase"],
                      description="how ranks reach the shared file", workloads=["pio"])
    workload_variable("group_size", default="2", description="ranks per two-phase group", workloads=["pio"])
    # The shared file's folder: $COMMSCOPE_IO_DIR when it is set where the experiment runs (the parallel file system
    # under test, e.g. the GlusterFS mount ci/parallel_fs.py prints), else the experiment's run directory. One folder
    # for every experiment and repeat, as pio records --dir as a parameter; experiments sharing it run one at a time
    # (the file is named by method). Shell rather than ${...}: Ramble reads braces as its own variables.
    workload_variable("io_dir",
                      default='$(if [ -n "$COMMSCOPE_IO_DIR" ]; then echo "$COMMSCOPE_IO_DIR"; '
                              'else echo "{experiment_run_dir}"; fi)',
                      description="directory for the shared file: $COMMSCOPE_IO_DIR, else the run directory",
                      workloads=["pio"])
    workload_variable("iters", default="3", description="write + read-back rounds", workloads=["pio"])
    workload_variable("variant", default="{method}-g{group_size}", description="the case, for labels",
                      workloads=["pio"])

    for fom, unit in [("total_time", "s"), ("time_per_iter", "s"), ("runqueue_wait_share_max", "share"),
                      ("write_time", "s"), ("read_time", "s"),
                      ("write_bandwidth", "MB/s"), ("read_bandwidth", "MB/s"),
                      ("comm_time_avg", "s"), ("comm_time_max", "s"),
                      ("io_time_avg", "s"), ("io_time_max", "s"),
                      ("io_calls_per_iter_avg", "calls"), ("io_calls_per_iter_max", "calls")]:
        figure_of_merit(fom, fom_regex=rf"^FOM {fom} (?P<value>\S+) {unit}\s*$", group_name="value", units=unit)
