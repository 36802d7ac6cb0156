/* Open MPI: each body under the F77 name (mpif.h, `use mpi`) and the ompi_<call>_f name the mpi_f08 bindings call. */
#define ALIAS(name, target) extern __typeof__(target) name __attribute__((alias(#target), visibility("default")));
#define BOTH(call) ALIAS(mpi_##call##_, f_##call) ALIAS(ompi_##call##_f, f_##call)
BOTH(init) BOTH(init_thread) BOTH(finalize) BOTH(comm_rank) BOTH(comm_size) BOTH(barrier) BOTH(bcast) BOTH(reduce)
BOTH(allreduce) BOTH(gather) BOTH(gatherv) BOTH(scatter) BOTH(allgather) BOTH(alltoall) BOTH(send) BOTH(recv)
BOTH(isend) BOTH(irecv) BOTH(sendrecv) BOTH(wait) BOTH(waitall)
