/* MPICH: mpif.h and `use mpi` already call MPI_*; the mpi_f08 bindings (mpi_<call>_f08_, and mpi_<call>_f08ts_
 * whose choice buffers arrive as gfortran array descriptors) call PMPI_* and are forwarded here. */
typedef struct { ptrdiff_t stride, lbound, ubound; } gfc_dim;
typedef struct {
    void *base; size_t offset;
    struct { size_t elem_len; int version; signed char rank, type; short attribute; } dtype;
    ptrdiff_t span; gfc_dim dim[15];
} gfc_desc;

/* The data of a contiguous buffer (a scalar or a whole array) in *P; 0 for a strided one. */
static int contig(gfc_desc *d, void **p)
{
    ptrdiff_t expect = 1;
    for (int k = 0; k < d->dtype.rank; k++) {
        ptrdiff_t extent = d->dim[k].ubound - d->dim[k].lbound + 1;
        if (extent > 1 && d->dim[k].stride != expect) return 0;
        expect *= extent > 0 ? extent : 1;
    }
    *p = d->base;
    return 1;
}
#define NEXT(name, ...) do { void (*orig)() = (void (*)())dlsym(RTLD_NEXT, #name); orig(__VA_ARGS__); } while (0)
#define ALIAS(name, target) extern __typeof__(target) name __attribute__((alias(#target), visibility("default")));
ALIAS(mpi_init_f08_, f_init) ALIAS(mpi_init_thread_f08_, f_init_thread) ALIAS(mpi_finalize_f08_, f_finalize)
ALIAS(mpi_comm_rank_f08_, f_comm_rank) ALIAS(mpi_comm_size_f08_, f_comm_size) ALIAS(mpi_barrier_f08_, f_barrier)
ALIAS(mpi_wait_f08_, f_wait) ALIAS(mpi_waitall_f08_, f_waitall)

/* One buffer, then the rest of the arguments. */
#define BUF1(call, params, args) EXPORT void mpi_##call##_f08ts_(gfc_desc *b, params) { void *p; \
    if (!contig(b, &p)) { NEXT(mpi_##call##_f08ts_, b, args); return; } f_##call(p, args); }
#define P(...) __VA_ARGS__
BUF1(bcast, P(F *n, F *t, F *root, F *c, F *ierr), P(n, t, root, c, ierr))
BUF1(send, P(F *n, F *t, F *d, F *tag, F *c, F *ierr), P(n, t, d, tag, c, ierr))
BUF1(recv, P(F *n, F *t, F *s, F *tag, F *c, F *st, F *ierr), P(n, t, s, tag, c, st, ierr))
BUF1(isend, P(F *n, F *t, F *d, F *tag, F *c, F *rq, F *ierr), P(n, t, d, tag, c, rq, ierr))
BUF1(irecv, P(F *n, F *t, F *s, F *tag, F *c, F *rq, F *ierr), P(n, t, s, tag, c, rq, ierr))

/* Two buffers: (send, receive) reductions, and (send, count, type, receive, ...) gathers. */
#define RED(call, params, args) EXPORT void mpi_##call##_f08ts_(gfc_desc *s, gfc_desc *r, params) { void *a, *b; \
    if (!contig(s, &a) || !contig(r, &b)) { NEXT(mpi_##call##_f08ts_, s, r, args); return; } f_##call(a, b, args); }
RED(reduce, P(F *n, F *t, F *op, F *root, F *c, F *ierr), P(n, t, op, root, c, ierr))
RED(allreduce, P(F *n, F *t, F *op, F *c, F *ierr), P(n, t, op, c, ierr))
#define GAT(call, params, args) EXPORT void mpi_##call##_f08ts_(gfc_desc *s, F *sn, F *st, gfc_desc *r, params) { \
    void *a, *b; if (!contig(s, &a) || !contig(r, &b)) { NEXT(mpi_##call##_f08ts_, s, sn, st, r, args); return; } \
    f_##call(a, sn, st, b, args); }
GAT(gather, P(F *rn, F *rt, F *root, F *c, F *ierr), P(rn, rt, root, c, ierr))
GAT(gatherv, P(F *rn, F *disp, F *rt, F *root, F *c, F *ierr), P(rn, disp, rt, root, c, ierr))
GAT(scatter, P(F *rn, F *rt, F *root, F *c, F *ierr), P(rn, rt, root, c, ierr))
GAT(allgather, P(F *rn, F *rt, F *c, F *ierr), P(rn, rt, c, ierr))
GAT(alltoall, P(F *rn, F *rt, F *c, F *ierr), P(rn, rt, c, ierr))
EXPORT void mpi_sendrecv_f08ts_(gfc_desc *s, F *sn, F *st, F *d, F *stag, gfc_desc *r, F *rn, F *rt, F *src,
                                F *rtag, F *c, F *status, F *ierr)
{
    void *a, *b;
    if (!contig(s, &a) || !contig(r, &b)) {
        NEXT(mpi_sendrecv_f08ts_, s, sn, st, d, stag, r, rn, rt, src, rtag, c, status, ierr);
        return;
    }
    f_sendrecv(a, sn, st, d, stag, b, rn, rt, src, rtag, c, status, ierr);
}
