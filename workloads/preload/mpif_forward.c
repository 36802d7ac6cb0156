/* libcommscope-mpif: Fortran MPI calls forwarded to the C MPI_* functions, so that a preloaded PMPI tool (a
 * no-GOTCHA Caliper) sees them. Preload it beside the tool: LD_PRELOAD=libcommscope-mpif.so:libcaliper.so.
 *
 * Why: Open MPI's Fortran bindings (libmpi_mpifh, libmpi_usempif08) and MPICH's mpi_f08 bindings call PMPI_*
 * directly, so a tool that wraps MPI_* never sees a Fortran program's calls (nor its MPI_Init: no profile).
 * Each wrapper converts the Fortran handles (MPI_*_f2c), the Fortran MPI_IN_PLACE/MPI_BOTTOM/MPI_STATUS(ES)_IGNORE
 * sentinels and statuses, and calls the C function.
 *
 * Open MPI: the F77 names (mpi_send_, used by mpif.h and `use mpi`) and the internal ompi_<call>_f that the
 * mpi_f08 bindings call through the PLT. MPICH: its mpif.h and `use mpi` bindings already call MPI_*; its mpi_f08
 * ones (mpi_<call>_f08_, and mpi_<call>_f08ts_ for buffers, which receive gfortran array descriptors) are
 * forwarded. A buffer that is not contiguous goes to the library's own binding (unprofiled, still correct).
 * Intel MPI: its mpif.h and `use mpi` bindings call MPI_* already (libmpifort's mpi_send_ calls MPI_Send through
 * the PLT), and its mpi_f08 bindings, which call PMPI_*, serve Intel's compilers only (the wheel's mpi_f08 module
 * is in their format), whose array descriptors the gfortran forwarding must not read: nothing is forwarded there,
 * and the library is built only so that the preload is the same everywhere.
 * Calls covered: COVERED below. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

const char *commscope_mpif_covered =
    "Init Init_thread Finalize Comm_rank Comm_size Barrier Bcast Reduce Allreduce Gather Gatherv Scatter Allgather "
    "Alltoall Send Recv Isend Irecv Sendrecv Wait Waitall";

#ifndef MPI_F_STATUS_SIZE   /* MPICH 4.0's mpi.h lacks it; unused there (f08_status) */
#define MPI_F_STATUS_SIZE (sizeof(MPI_Status) / sizeof(int))
#endif
#define EXPORT __attribute__((visibility("default")))
#if defined(I_MPI_VERSION)
#pragma GCC diagnostic ignored "-Wunused-function"   /* nothing forwarded on Intel MPI (above) */
#endif
typedef MPI_Fint F;

static void set_ierr(F *ierr, int rc) { if (ierr) *ierr = (F)rc; }
#if defined(MPICH)
static const int f08_status = 1;   /* only mpi_f08 is forwarded there; its TYPE(MPI_Status) is MPI_Status */
#else
static const int f08_status = 0;
#endif

/* ---- sentinels: the addresses of the Fortran MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS(ES)_IGNORE, looked up once ---- */
enum { IN_PLACE, BOTTOM, ST_IGNORE, STS_IGNORE, KINDS };
static const char *const NAMES[KINDS][7] = {
    {"mpi_fortran_in_place_", "mpi_fortran_in_place", "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE",
     "MPIR_F08_MPI_IN_PLACE", "MPIR_F_MPI_IN_PLACE", NULL},
    {"mpi_fortran_bottom_", "mpi_fortran_bottom", "mpi_fortran_bottom__", "MPI_FORTRAN_BOTTOM",
     "MPIR_F08_MPI_BOTTOM", "MPIR_F_MPI_BOTTOM", NULL},
    {"mpi_fortran_status_ignore_", "mpi_fortran_status_ignore", "mpi_fortran_status_ignore__",
     "MPI_FORTRAN_STATUS_IGNORE", "MPIR_F08_MPI_STATUS_IGNORE_OBJ", NULL},
    {"mpi_fortran_statuses_ignore_", "mpi_fortran_statuses_ignore", "mpi_fortran_statuses_ignore__",
     "MPI_FORTRAN_STATUSES_IGNORE", "MPIR_F08_MPI_STATUSES_IGNORE_OBJ", NULL}};
static void *addr[KINDS][7];
static volatile int resolved;

/* Whether P is one of the sentinels of KIND. The first call resolves them all (the Fortran libraries are loaded
 * by then: the program links them); a race only resolves the same addresses twice. */
static int sentinel(const void *p, int kind)
{
    if (!resolved) {
        for (int k = 0; k < KINDS; k++)
            for (int i = 0; NAMES[k][i]; i++) addr[k][i] = dlsym(RTLD_DEFAULT, NAMES[k][i]);
        resolved = 1;
    }
    if (p == NULL) return 0;
    for (int i = 0; NAMES[kind][i]; i++)
        if (addr[kind][i] == p) return 1;
    return 0;
}

static void *cbuf(void *p)
{
    if (sentinel(p, IN_PLACE)) return MPI_IN_PLACE;
    if (sentinel(p, BOTTOM)) return MPI_BOTTOM;
    return p;
}

#define COMM(x) MPI_Comm_f2c(*(x))
#define TYPE(x) MPI_Type_f2c(*(x))
#define OP(x) MPI_Op_f2c(*(x))

/* ---- the forwarding bodies (Fortran integer handles, by reference) -------------------------------------- */
static void f_init(F *ierr) { set_ierr(ierr, MPI_Init(NULL, NULL)); }
static void f_init_thread(F *req, F *prov, F *ierr)
{
    int p = 0, rc = MPI_Init_thread(NULL, NULL, *req, &p);
    *prov = p; set_ierr(ierr, rc);
}
static void f_finalize(F *ierr) { set_ierr(ierr, MPI_Finalize()); }
static void f_barrier(F *c, F *ierr) { set_ierr(ierr, MPI_Barrier(COMM(c))); }
static void f_comm_rank(F *c, F *r, F *ierr) { int v = 0, rc = MPI_Comm_rank(COMM(c), &v); *r = v; set_ierr(ierr, rc); }
static void f_comm_size(F *c, F *n, F *ierr) { int v = 0, rc = MPI_Comm_size(COMM(c), &v); *n = v; set_ierr(ierr, rc); }
static void f_bcast(void *b, F *n, F *t, F *root, F *c, F *ierr)
{ set_ierr(ierr, MPI_Bcast(cbuf(b), *n, TYPE(t), *root, COMM(c))); }
static void f_reduce(void *s, void *r, F *n, F *t, F *op, F *root, F *c, F *ierr)
{ set_ierr(ierr, MPI_Reduce(cbuf(s), cbuf(r), *n, TYPE(t), OP(op), *root, COMM(c))); }
static void f_allreduce(void *s, void *r, F *n, F *t, F *op, F *c, F *ierr)
{ set_ierr(ierr, MPI_Allreduce(cbuf(s), cbuf(r), *n, TYPE(t), OP(op), COMM(c))); }
static void f_gather(void *s, F *sn, F *st, void *r, F *rn, F *rt, F *root, F *c, F *ierr)
{ set_ierr(ierr, MPI_Gather(cbuf(s), *sn, TYPE(st), cbuf(r), *rn, TYPE(rt), *root, COMM(c))); }
static void f_gatherv(void *s, F *sn, F *st, void *r, F *rn, F *disp, F *rt, F *root, F *c, F *ierr)
{
    /* the counts and displacements are Fortran INTEGERs, the same width as int here (checked at build) */
    set_ierr(ierr, MPI_Gatherv(cbuf(s), *sn, TYPE(st), cbuf(r), (const int *)rn, (const int *)disp, TYPE(rt),
                               *root, COMM(c)));
}
static void f_scatter(void *s, F *sn, F *st, void *r, F *rn, F *rt, F *root, F *c, F *ierr)
{ set_ierr(ierr, MPI_Scatter(cbuf(s), *sn, TYPE(st), cbuf(r), *rn, TYPE(rt), *root, COMM(c))); }
static void f_allgather(void *s, F *sn, F *st, void *r, F *rn, F *rt, F *c, F *ierr)
{ set_ierr(ierr, MPI_Allgather(cbuf(s), *sn, TYPE(st), cbuf(r), *rn, TYPE(rt), COMM(c))); }
static void f_alltoall(void *s, F *sn, F *st, void *r, F *rn, F *rt, F *c, F *ierr)
{ set_ierr(ierr, MPI_Alltoall(cbuf(s), *sn, TYPE(st), cbuf(r), *rn, TYPE(rt), COMM(c))); }
static void f_send(void *b, F *n, F *t, F *dest, F *tag, F *c, F *ierr)
{ set_ierr(ierr, MPI_Send(cbuf(b), *n, TYPE(t), *dest, *tag, COMM(c))); }
static void f_isend(void *b, F *n, F *t, F *dest, F *tag, F *c, F *req, F *ierr)
{
    MPI_Request r;
    int rc = MPI_Isend(cbuf(b), *n, TYPE(t), *dest, *tag, COMM(c), &r);
    *req = MPI_Request_c2f(r); set_ierr(ierr, rc);
}
static void f_irecv(void *b, F *n, F *t, F *src, F *tag, F *c, F *req, F *ierr)
{
    MPI_Request r;
    int rc = MPI_Irecv(cbuf(b), *n, TYPE(t), *src, *tag, COMM(c), &r);
    *req = MPI_Request_c2f(r); set_ierr(ierr, rc);
}
/* A status back to Fortran: MPICH's f08 TYPE(MPI_Status) is the C struct itself; otherwise MPI_Status_c2f. */
static MPI_Status *cstatus(F *fst, MPI_Status *tmp)
{
    if (sentinel(fst, ST_IGNORE)) return MPI_STATUS_IGNORE;
    return f08_status ? (MPI_Status *)fst : tmp;
}
static void fstatus(F *fst, MPI_Status *c)
{
    if (c != MPI_STATUS_IGNORE && !f08_status) MPI_Status_c2f(c, fst);
}
static void f_recv(void *b, F *n, F *t, F *src, F *tag, F *c, F *fst, F *ierr)
{
    MPI_Status tmp, *st = cstatus(fst, &tmp);
    int rc = MPI_Recv(cbuf(b), *n, TYPE(t), *src, *tag, COMM(c), st);
    fstatus(fst, st); set_ierr(ierr, rc);
}
static void f_sendrecv(void *sb, F *sn, F *stype, F *dest, F *stag, void *rb, F *rn, F *rtype, F *src, F *rtag,
                       F *c, F *fst, F *ierr)
{
    MPI_Status tmp, *st = cstatus(fst, &tmp);
    int rc = MPI_Sendrecv(cbuf(sb), *sn, TYPE(stype), *dest, *stag, cbuf(rb), *rn, TYPE(rtype), *src, *rtag,
                          COMM(c), st);
    fstatus(fst, st); set_ierr(ierr, rc);
}
static void f_wait(F *req, F *fst, F *ierr)
{
    MPI_Status tmp, *st = cstatus(fst, &tmp);
    MPI_Request r = MPI_Request_f2c(*req);
    int rc = MPI_Wait(&r, st);
    *req = MPI_Request_c2f(r); fstatus(fst, st); set_ierr(ierr, rc);
}
static void f_waitall(F *n, F *reqs, F *fsts, F *ierr)
{
    int k, count = *n, ignore = sentinel(fsts, STS_IGNORE), rc;
    MPI_Request *r = malloc(sizeof *r * (count ? count : 1));
    MPI_Status *st = ignore ? MPI_STATUSES_IGNORE :
                     f08_status ? (MPI_Status *)fsts : malloc(sizeof *st * (count ? count : 1));
    for (k = 0; k < count; k++) r[k] = MPI_Request_f2c(reqs[k]);
    rc = MPI_Waitall(count, r, st);
    for (k = 0; k < count; k++) reqs[k] = MPI_Request_c2f(r[k]);
    if (!ignore && !f08_status) {
        for (k = 0; k < count; k++) MPI_Status_c2f(&st[k], fsts + (size_t)k * MPI_F_STATUS_SIZE);
        free(st);
    }
    free(r); set_ierr(ierr, rc);
}

#if defined(OPEN_MPI)
#include "mpif_forward_ompi.h"
#elif defined(MPICH) && !defined(I_MPI_VERSION)
#include "mpif_forward_mpich.h"
#endif
