"""Caliper profiles for commscope experiments (no Caliper modifier ships with Ramble 0.5.0).

The workloads are built with Caliper and Adiak (workloads/README.md), so profiling is only
environment: CALI_CONFIG for the built-in configs, or the aggregate/recorder services for the
rank-to-rank matrix, which no built-in config gives. Every profile lands in the experiment's
run directory beside the experiment's log, <experiment_name>.out, which the collectors read as
the profile's sidecar. COMMSCOPE_META_<name> variables become Adiak values <name> in the
workload (workloads/common/commscope.c), so each profile says which experiment, stack,
interconnect and commit made it.

Mode `preload` profiles an application that has neither Caliper nor annotations (Ramble's builtin
intel-mpi-benchmarks, say): it preloads (LD_PRELOAD) the libcaliper.so of a Caliper built with
-DWITH_GOTCHA=OFF against the application's MPI. Such a Caliper wraps MPI through PMPI, and its
MPI_Init/MPI_Init_thread wrapper starts Caliper, which then reads CALI_CONFIG: every MPI function is
profiled per rank, and the time outside MPI is the profile's record without a path. A default
(GOTCHA) Caliper preloaded does nothing: its wrappers are installed only once Caliper is started,
and an unannotated program never starts it (no profile is written, and nothing says so). Set
caliper_preload_prefix to the no-GOTCHA install. A Fortran application also needs caliper_preload_fortran
(libcommscope-mpif.so): its MPI bindings bypass the C MPI_* functions Caliper wraps.
"""
from ramble.modkit import *  # noqa: F403

# The modes for commscope's workloads (built with Caliper and Adiak), and `preload` for any other MPI application.
ALL_MODES = ["time", "mpi", "counts", "comm", "matrix"]
PROFILE_MODES = ["time", "mpi", "counts", "comm", "preload"]


class Caliper(BasicModifier):
    """Caliper region, MPI, message-statistics or rank-to-rank profiles in the run directory."""

    name = "caliper"
    tags("profiler", "performance-analysis", "mpi")

    mode("time", description="region profile: runtime-profile")
    mode("mpi", description="region and MPI-function profile: runtime-profile,profile.mpi")
    mode("counts", description="MPI profile plus call counts: runtime-profile,profile.mpi,region.count")
    mode("comm", description="MPI profile plus comm.stats and message counts/sizes per region")
    mode("matrix", description="rank-to-rank message tracing: one aggregate .cali per rank")
    mode("preload", description="an application without Caliper or annotations: a no-GOTCHA Caliper preloaded, "
                                "runtime-profile,profile.mpi")
    default_mode("mpi")

    # runtime-profile is Caliper >= 2.13's name; set caliper_profile_config to
    # hatchet-region-profile for Caliper 2.12 and older.
    modifier_variable("caliper_profile_config", default="runtime-profile", modes=PROFILE_MODES,
                      description="Caliper config that records the region profile")
    modifier_variable("caliper_options", default="", modes=PROFILE_MODES,
                      description="extra comma-separated Caliper config options, e.g. ,region.count")
    modifier_variable("caliper_file", default="{experiment_run_dir}/{experiment_name}.cali", modes=PROFILE_MODES,
                      description="the profile, beside the experiment's log")
    modifier_variable("caliper_rank_files", default="{experiment_run_dir}/{experiment_name}.rank-%mpi.rank%.cali",
                      modes=["matrix"], description="one message-tracing aggregate per rank")

    env_var_modification("CALI_CONFIG", "{caliper_profile_config},output={caliper_file}{caliper_options}",
                         method="set", modes=["time"])
    env_var_modification("CALI_CONFIG", "{caliper_profile_config},profile.mpi,output={caliper_file}{caliper_options}",
                         method="set", modes=["mpi"])
    # Call counts (region.count): the barrier advisor tells debugging barriers by them (the barriers study).
    env_var_modification("CALI_CONFIG",
                         "{caliper_profile_config},profile.mpi,region.count,output={caliper_file}{caliper_options}",
                         method="set", modes=["counts"])
    env_var_modification("CALI_CONFIG",
                         "{caliper_profile_config},profile.mpi,comm.stats,mpi.message.count,mpi.message.size,"
                         "output={caliper_file}{caliper_options}",
                         method="set", modes=["comm"])

    # An application without Caliper: the PMPI wrappers of a no-GOTCHA Caliper, preloaded into every process
    # the experiment starts (the launcher is no MPI program, so Caliper stays idle in it).
    modifier_variable("caliper_preload_prefix", default="/caliper-without-gotcha-is-not-set", modes=["preload"],
                      description="install prefix of a Caliper built with -DWITH_GOTCHA=OFF against the "
                                  "application's MPI")
    # A Fortran application's MPI bindings call PMPI_* directly (Open MPI's all, MPICH's mpi_f08): libcommscope-mpif
    # forwards them to the C MPI_* that Caliper wraps. `commscope setup` builds it beside the Debian stacks' workloads;
    # empty elsewhere (LD_PRELOAD takes spaces between libraries).
    modifier_variable("caliper_preload_fortran", default="", modes=["preload"],
                      description="libcommscope-mpif.so built against the application's MPI, or empty")
    modifier_variable("caliper_preload_lib",
                      default="{caliper_preload_fortran} {caliper_preload_prefix}/lib/libcaliper.so",
                      modes=["preload"], description="the libraries preloaded")
    env_var_modification("LD_PRELOAD", "{caliper_preload_lib}", method="prepend", modes=["preload"])
    env_var_modification("CALI_CONFIG", "{caliper_profile_config},profile.mpi,output={caliper_file}{caliper_options}",
                         method="set", modes=["preload"])

    # No built-in config gives a rank-to-rank matrix: aggregate MPI messages keyed by
    # (rank, destination, source). Message tracing needs some MPI wrap list, hence the blacklist.
    env_var_modification("CALI_CONFIG", method="unset", modes=["matrix"])
    env_var_modification("CALI_SERVICES_ENABLE", "adiak_import,aggregate,mpi,recorder", method="set", modes=["matrix"])
    env_var_modification("CALI_MPI_MSG_TRACING", "true", method="set", modes=["matrix"])
    env_var_modification("CALI_MPI_BLACKLIST", "MPI_Wtime,MPI_Wtick,MPI_Comm_rank,MPI_Comm_size",
                         method="set", modes=["matrix"])
    env_var_modification("CALI_AGGREGATE_KEY", "mpi.rank,mpi.msg.dst,mpi.msg.src", method="set", modes=["matrix"])
    env_var_modification("CALI_CHANNEL_CONFIG_CHECK", "false", method="set", modes=["matrix"])
    env_var_modification("CALI_RECORDER_FILENAME", "{caliper_rank_files}", method="set", modes=["matrix"])

    # Adiak metadata the workloads cannot know, read from COMMSCOPE_META_<name> by
    # workloads/common/commscope.c. The workloads record ranks, variant and (from
    # COMMSCOPE_INTERCONNECT, which every commscope site sets) the interconnect themselves.
    env_var_modification("COMMSCOPE_META_experiment", "{experiment_namespace}", method="set", modes=ALL_MODES)
    env_var_modification("COMMSCOPE_META_stack", "{stack}", method="set", modes=ALL_MODES)
    env_var_modification("COMMSCOPE_META_git_commit", "{commscope_git_commit}", method="set", modes=ALL_MODES)
    env_var_modification("COMMSCOPE_META_site", "{commscope_site}", method="set", modes=ALL_MODES)
    env_var_modification("COMMSCOPE_META_study", "{commscope_study}", method="set", modes=ALL_MODES)
    env_var_modification("COMMSCOPE_META_caliper_mode", "{caliper_mode}", method="set", modes=ALL_MODES)

    modifier_variable("caliper_mode", default="time", mode="time", description="this modifier's mode")
    modifier_variable("caliper_mode", default="mpi", mode="mpi", description="this modifier's mode")
    modifier_variable("caliper_mode", default="counts", mode="counts", description="this modifier's mode")
    modifier_variable("caliper_mode", default="comm", mode="comm", description="this modifier's mode")
    modifier_variable("caliper_mode", default="matrix", mode="matrix", description="this modifier's mode")
    modifier_variable("caliper_mode", default="preload", mode="preload", description="this modifier's mode")

    archive_pattern("*.cali")
