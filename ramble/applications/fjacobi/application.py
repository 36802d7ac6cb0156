"""fjacobi: the Fortran 2008 mini-app (workloads/fjacobi): 1D Jacobi smoothing with a halo exchange and a residual
Allreduce through mpi_f08 (`use mpi` where gfortran cannot read the stack's mpi_f08), its verification gather through
mpif.h. It has no Caliper annotations: `commscope run` profiles it by preloading the stack's no-GOTCHA Caliper with
libcommscope-mpif, which forwards its Fortran MPI calls to the C ones Caliper wraps where the bindings bypass them
(the tag `caliper-preload` says so to commscope/workflow/plan.py).
"""
from ramble.appkit import *  # noqa: F403

from ramble.base_app.commscope.commscope_workload import CommscopeWorkload


class Fjacobi(CommscopeWorkload):
    """Fortran 1D Jacobi: halo exchange (Irecv/Isend/Waitall), residual Allreduce, verified against a serial run."""

    name = "fjacobi"
    tags("mpi", "fortran", "halo", "commscope", "caliper-preload")

    executable("fjacobi", "fjacobi --n {n} --iters {iters} --check-every {check_every}",
               use_mpi=True, output_capture=OUTPUT_CAPTURE.ALL)
    workload("fjacobi", executable="fjacobi")
    workload_variable("n", default="100000", description="global points (at least 2 per rank)", workloads=["fjacobi"])
    workload_variable("iters", default="200", description="Jacobi sweeps", workloads=["fjacobi"])
    workload_variable("check_every", default="10", description="sweeps between residual Allreduces",
                      workloads=["fjacobi"])
    workload_variable("variant", default="{fortran_binding_{stack}}",
                      description="the binding, for labels: f08 or mpi (the site's fortran_binding_<stack>)",
                      workloads=["fjacobi"])

    for fom, unit in [("total_time", "s"), ("time_per_iter", "s"), ("comm_time_avg", "s"), ("comm_time_max", "s"),
                      ("compute_time_avg", "s"), ("compute_time_max", "s"), ("residual", "sum")]:
        figure_of_merit(fom, fom_regex=rf"^FOM {fom} (?P<value>\S+) {unit}\s*$", group_name="value", units=unit)
