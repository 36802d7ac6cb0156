/* stencil2d: a 5-point Jacobi heat iteration on an N x M grid, after the
 * coursework study that compared decompositions and send modes.
 *   row-naive   processes in a row (columns split); the column halos are
 *               non-contiguous and sent element by element, as the study did
 *   row-vector  the same halos as one MPI_Type_vector message
 *   col         processes in a column (rows split); halos are contiguous rows
 *   cart        2D MPI_Cart_create; rows contiguous, columns by vector type
 * Send modes: ssend (MPI_Ssend), send (MPI_Send), isend (Isend/Irecv/Waitall).
 * Jacobi's arithmetic per point is fixed, so the grid must equal a serial run
 * bit for bit; rank 0 checks that. */
#include "commscope.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROW_NAIVE, ROW_VECTOR, COL, CART };
enum { SSEND, SEND, ISEND };
static const char *DECOMPS = "row-naive|row-vector|col|cart";
static const char *SENDS = "ssend|send|isend";

/* Fixed global boundary: a hot top edge and a warm left edge. */
static double boundary(long i, long j, long n, long m)
{
    (void)n; (void)m;
    if (i < 0) return 1.0;
    if (j < 0) return 0.5;
    return 0.0;
}

typedef struct {
    int decomp, send;
    long global[2];
    int dims[2], coords[2];
    int nbr[2][2];          /* [axis][side]: axis 0 = rows (up/down), 1 = columns (left/right) */
    long n[2], off[2];      /* owned rows/columns and global offset */
    long pitch;             /* row length including ghosts */
    double *u, *un;
    MPI_Comm comm;
    MPI_Datatype column;    /* one ghost-padded column of owned rows */
    MPI_Request *req;
    double t_comp, t_comm, bytes, msgs;
} grid;

static long block_len(long n, int p, int c) { return n / p + (c < n % p); }
static long block_off(long n, int p, int c) { return c * (n / p) + (c < n % p ? c : n % p); }

#define AT(g, a, i, j) ((a)[((long)(i) + 1) * (g)->pitch + (long)(j) + 1])

static void grid_alloc(grid *g)
{
    g->pitch = g->n[1] + 2;
    long total = (g->n[0] + 2) * g->pitch;
    g->u = calloc(total, sizeof(double));
    g->un = calloc(total, sizeof(double));
    if (!g->u || !g->un) {
        fprintf(stderr, "stencil2d: out of memory for a %ldx%ld block\n", g->n[0], g->n[1]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Ghosts on the global boundary hold the boundary values in both arrays. */
    for (int pass = 0; pass < 2; pass++) {
        double *a = pass ? g->un : g->u;
        for (long i = -1; i <= g->n[0]; i++)
            for (long j = -1; j <= g->n[1]; j++) {
                long gi = g->off[0] + i, gj = g->off[1] + j;
                if (gi < 0 || gj < 0 || gi >= g->global[0] || gj >= g->global[1])
                    AT(g, a, i, j) = boundary(gi, gj, g->global[0], g->global[1]);
            }
    }
}

/* One Jacobi sweep over the owned block; the addition order is fixed. */
static void sweep(grid *g)
{
    for (long i = 0; i < g->n[0]; i++)
        for (long j = 0; j < g->n[1]; j++)
            AT(g, g->un, i, j) = 0.25 * ((AT(g, g->u, i - 1, j) + AT(g, g->u, i + 1, j)) +
                                         (AT(g, g->u, i, j - 1) + AT(g, g->u, i, j + 1)));
    double *t = g->u;
    g->u = g->un;
    g->un = t;
}

/* ---- halo exchange -------------------------------------------------------- */

/* A halo line: an owned or ghost row (contiguous) or column (strided). */
typedef struct { double *base; int count; long stride; } line;

static line halo_line(grid *g, int axis, int side, int ghost)
{
    line l;
    if (axis == 0) {
        long i = side == 0 ? (ghost ? -1 : 0) : (ghost ? g->n[0] : g->n[0] - 1);
        l.base = &AT(g, g->u, i, 0);
        l.count = (int)g->n[1];
        l.stride = 1;
    } else {
        long j = side == 0 ? (ghost ? -1 : 0) : (ghost ? g->n[1] : g->n[1] - 1);
        l.base = &AT(g, g->u, 0, j);
        l.count = (int)g->n[0];
        l.stride = g->pitch;
    }
    return l;
}

static int naive(const grid *g, int axis) { return axis == 1 && g->decomp == ROW_NAIVE; }

static void send_line(grid *g, int axis, line l, int dest, int tag)
{
    if (naive(g, axis)) {
        for (int e = 0; e < l.count; e++) {
            if (g->send == SSEND) MPI_Ssend(l.base + e * l.stride, 1, MPI_DOUBLE, dest, tag, g->comm);
            else MPI_Send(l.base + e * l.stride, 1, MPI_DOUBLE, dest, tag, g->comm);
        }
        g->msgs += l.count;
    } else {
        MPI_Datatype t = axis == 0 ? MPI_DOUBLE : g->column;
        int c = axis == 0 ? l.count : 1;
        if (g->send == SSEND) MPI_Ssend(l.base, c, t, dest, tag, g->comm);
        else MPI_Send(l.base, c, t, dest, tag, g->comm);
        g->msgs += 1;
    }
    g->bytes += (double)l.count * sizeof(double);
}

static void recv_line(grid *g, int axis, line l, int src, int tag)
{
    if (naive(g, axis)) {
        for (int e = 0; e < l.count; e++)
            MPI_Recv(l.base + e * l.stride, 1, MPI_DOUBLE, src, tag, g->comm, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(l.base, axis == 0 ? l.count : 1, axis == 0 ? MPI_DOUBLE : g->column, src, tag, g->comm,
                 MPI_STATUS_IGNORE);
    }
}

/* Nonblocking: post everything, then wait. Returns requests used. */
static int post_line(grid *g, int axis, line l, int peer, int tag, int is_send, MPI_Request *r)
{
    int k = 0;
    if (naive(g, axis)) {
        for (int e = 0; e < l.count; e++, k++) {
            if (is_send) MPI_Isend(l.base + e * l.stride, 1, MPI_DOUBLE, peer, tag, g->comm, &r[k]);
            else MPI_Irecv(l.base + e * l.stride, 1, MPI_DOUBLE, peer, tag, g->comm, &r[k]);
        }
    } else {
        MPI_Datatype t = axis == 0 ? MPI_DOUBLE : g->column;
        int c = axis == 0 ? l.count : 1;
        if (is_send) MPI_Isend(l.base, c, t, peer, tag, g->comm, &r[k++]);
        else MPI_Irecv(l.base, c, t, peer, tag, g->comm, &r[k++]);
    }
    if (is_send) {
        g->msgs += k;
        g->bytes += (double)l.count * sizeof(double);
    }
    return k;
}

static void exchange(grid *g)
{
    double t0 = MPI_Wtime();
    CS_BEGIN("halo_exchange");
    CS_COMM_BEGIN("halo");
    for (int axis = 0; axis < 2; axis++) {
        int lo = g->nbr[axis][0], hi = g->nbr[axis][1];
        if (lo == MPI_PROC_NULL && hi == MPI_PROC_NULL) continue;
        if (g->send == ISEND) {
            int k = 0;
            for (int s = 0; s < 2; s++)
                if (g->nbr[axis][s] != MPI_PROC_NULL)
                    k += post_line(g, axis, halo_line(g, axis, s, 1), g->nbr[axis][s], 1 - s, 0, &g->req[k]);
            for (int s = 0; s < 2; s++)
                if (g->nbr[axis][s] != MPI_PROC_NULL)
                    k += post_line(g, axis, halo_line(g, axis, s, 0), g->nbr[axis][s], s, 1, &g->req[k]);
            MPI_Waitall(k, g->req, MPI_STATUSES_IGNORE);
            continue;
        }
        /* Blocking sends are ordered by coordinate parity so that a chain of
         * synchronous sends cannot deadlock. */
        int even = g->coords[axis] % 2 == 0;
        for (int s = 0; s < 2; s++) {
            int to = g->nbr[axis][s], from = g->nbr[axis][1 - s];
            line out = halo_line(g, axis, s, 0), in = halo_line(g, axis, 1 - s, 1);
            if (even) {
                if (to != MPI_PROC_NULL) send_line(g, axis, out, to, s);
                if (from != MPI_PROC_NULL) recv_line(g, axis, in, from, s);
            } else {
                if (from != MPI_PROC_NULL) recv_line(g, axis, in, from, s);
                if (to != MPI_PROC_NULL) send_line(g, axis, out, to, s);
            }
        }
    }
#ifdef COMMSCOPE_DROP_HALO_FACE
    /* Test builds lose the lower ghost row to prove verification catches it. */
    if (g->nbr[0][1] != MPI_PROC_NULL) memset(&AT(g, g->u, g->n[0], 0), 0, g->n[1] * sizeof(double));
#endif
    CS_COMM_END("halo");
    CS_END("halo_exchange");
    g->t_comm += MPI_Wtime() - t0;
}

static void run(grid *g, int iters)
{
    for (int it = 0; it < iters; it++) {
        CS_BEGIN("timestep");
        exchange(g);
        double t0 = MPI_Wtime();
        CS_BEGIN("compute");
        sweep(g);
        CS_END("compute");
        g->t_comp += MPI_Wtime() - t0;
        CS_END("timestep");
    }
}

/* ---- verification ------------------------------------------------------- */

static long compare_with_serial(grid *g, int iters, int root)
{
    int me, np;
    MPI_Comm_rank(g->comm, &me);
    MPI_Comm_size(g->comm, &np);
    long mine = g->n[0] * g->n[1];
    double *buf = malloc((mine ? mine : 1) * sizeof(double));
    for (long i = 0; i < g->n[0]; i++) memcpy(buf + i * g->n[1], &AT(g, g->u, i, 0), g->n[1] * sizeof(double));
    int *displs;
    double *all = cs_gather_blocks(g->comm, root, buf, mine, &displs);
    free(buf);
    long bad = 0;
    if (me == root) {
        grid s;
        memset(&s, 0, sizeof s);
        s.global[0] = s.n[0] = g->global[0];
        s.global[1] = s.n[1] = g->global[1];
        grid_alloc(&s);
        for (int it = 0; it < iters; it++) sweep(&s);
        for (int r = 0; r < np; r++) {
            int c[2];
            if (g->decomp == CART) MPI_Cart_coords(g->comm, r, 2, c);
            else {
                c[0] = g->dims[0] > 1 ? r : 0;
                c[1] = g->dims[1] > 1 ? r : 0;
            }
            long n0 = block_len(g->global[0], g->dims[0], c[0]), o0 = block_off(g->global[0], g->dims[0], c[0]);
            long n1 = block_len(g->global[1], g->dims[1], c[1]), o1 = block_off(g->global[1], g->dims[1], c[1]);
            const double *blk = all + displs[r];
            for (long i = 0; i < n0; i++)
                for (long j = 0; j < n1; j++)
                    if (memcmp(&blk[i * n1 + j], &AT(&s, s.u, o0 + i, o1 + j), sizeof(double)) != 0) bad++;
        }
        free(s.u);
        free(s.un);
        free(displs);
        free(all);
    }
    MPI_Bcast(&bad, 1, MPI_LONG, root, g->comm);
    return bad;
}

enum { O_ITERS, O_N, O_LOCAL, O_DECOMP, O_SEND, O_VMAX, NOPT };

int main(int argc, char **argv)
{
    cs_opt o[NOPT] = {
        [O_ITERS] = {"--iters", CS_INT, "100", NULL, "Jacobi sweeps", 1},
        [O_N] = {"--n", CS_INTS, "512,512", "2", "global grid, rows,columns (strong scaling)", 1},
        [O_LOCAL] = {"--local", CS_INTS, NULL, "2", "block per rank, rows,columns (weak scaling); replaces --n", 1},
        [O_DECOMP] = {"--decomp", CS_CHOICE, "cart", DECOMPS, "decomposition", 0},
        [O_SEND] = {"--send", CS_CHOICE, "isend", SENDS, "send mode of the halo exchange", 0},
        [O_VMAX] = {"--verify-max-points", CS_INT, "16777216", NULL,
                    "largest global grid rank 0 recomputes serially to verify (0 = never)", 0},
    };
    cs_init(&argc, &argv, "stencil2d");
    CS_BEGIN("setup");
    cs_parse(argc, argv, o, NOPT, "5-point Jacobi with row/column/Cartesian decompositions (coursework study).");
    if (o[O_N].set && o[O_LOCAL].set) cs_fail("--n and --local are exclusive: give the global or the per-rank grid");

    grid g;
    memset(&g, 0, sizeof g);
    int np = cs_size(), me = cs_rank(), iters = (int)o[O_ITERS].ival;
    g.decomp = cs_choice(&o[O_DECOMP]);
    g.send = cs_choice(&o[O_SEND]);
    g.dims[0] = g.decomp == COL ? np : g.decomp == CART ? 0 : 1;
    g.dims[1] = g.decomp == COL ? 1 : g.decomp == CART ? 0 : np;
    MPI_Dims_create(np, 2, g.dims);
    const char *axis[2] = {"rows", "columns"};
    for (int a = 0; a < 2; a++) {
        g.global[a] = o[O_LOCAL].set ? o[O_LOCAL].ints[a] * g.dims[a] : o[O_N].ints[a];
        if (g.global[a] / g.dims[a] < 1)
            cs_fail("--n %s: too many ranks for the grid: %d ranks across %s leave empty blocks (decomposition %s)",
                    o[O_N].sval, g.dims[a], axis[a], o[O_DECOMP].sval);
        if (g.global[a] > 2147483647L / (g.global[1 - a] ? g.global[1 - a] : 1) / 2)
            cs_fail("--n %s: the grid is too large for int message counts", o[O_N].sval);
    }

    if (g.decomp == CART) {
        int periods[2] = {0, 0};
        MPI_Cart_create(MPI_COMM_WORLD, 2, g.dims, periods, 0, &g.comm);
        MPI_Cart_coords(g.comm, me, 2, g.coords);
        for (int a = 0; a < 2; a++) MPI_Cart_shift(g.comm, a, 1, &g.nbr[a][0], &g.nbr[a][1]);
    } else {
        /* The study's plain rank arithmetic: neighbours are rank -/+ 1. */
        MPI_Comm_dup(MPI_COMM_WORLD, &g.comm);
        int split = g.decomp == COL ? 0 : 1;
        g.coords[split] = me;
        g.nbr[split][0] = me > 0 ? me - 1 : MPI_PROC_NULL;
        g.nbr[split][1] = me < np - 1 ? me + 1 : MPI_PROC_NULL;
        g.nbr[1 - split][0] = g.nbr[1 - split][1] = MPI_PROC_NULL;
    }
    for (int a = 0; a < 2; a++) {
        g.n[a] = block_len(g.global[a], g.dims[a], g.coords[a]);
        g.off[a] = block_off(g.global[a], g.dims[a], g.coords[a]);
    }
    grid_alloc(&g);
    MPI_Type_vector((int)g.n[0], 1, (int)g.pitch, MPI_DOUBLE, &g.column);
    MPI_Type_commit(&g.column);
    long maxreq = 4 * (g.n[0] > g.n[1] ? g.n[0] : g.n[1]) + 4;
    g.req = malloc(maxreq * sizeof(MPI_Request));

    cs_header("stencil2d", o, NOPT);
    cs_param("global", "%ld,%ld", g.global[0], g.global[1]);
    cs_param("process_grid", "%d,%d", g.dims[0], g.dims[1]);
    char buf[64];
    snprintf(buf, sizeof buf, "%ld,%ld", g.global[0], g.global[1]);
    cs_meta_str("global_size", buf);
    snprintf(buf, sizeof buf, "%ld,%ld", g.global[0] / g.dims[0], g.global[1] / g.dims[1]);
    cs_meta_str("local_size", buf);
    cs_meta_str("decomposition", o[O_DECOMP].sval);
    cs_meta_str("variant", o[O_SEND].sval);
    cs_meta_long("iterations", iters);
    CS_END("setup");

    MPI_Barrier(g.comm);
    double t0 = cs_loop_begin();
    run(&g, iters);
    double wall = cs_loop_end(t0), total;
    MPI_Allreduce(&wall, &total, 1, MPI_DOUBLE, MPI_MAX, g.comm);

    cs_fom("total_time", total, "s");
    cs_fom("time_per_iter", total / iters, "s");
    cs_fom_avg_max(g.comm, "compute_time", g.t_comp, "s");
    cs_fom_avg_max(g.comm, "comm_time", g.t_comm, "s");
    cs_fom_avg_max(g.comm, "halo_bytes_per_iter", g.bytes / iters, "B");
    cs_fom_avg_max(g.comm, "messages_per_iter", g.msgs / iters, "count");

    CS_BEGIN("verify");
    uint64_t local = 0, sum;
    for (long i = 0; i < g.n[0]; i++)
        for (long j = 0; j < g.n[1]; j++) local += cs_fixed(AT(&g, g.u, i, j));
    MPI_Allreduce(&local, &sum, 1, MPI_UINT64_T, MPI_SUM, g.comm);
    int root = 0; /* rank 0 of g.comm is world rank 0: no reordering */
    long bad = -1;
    int status = -1;
    if (o[O_VMAX].ival > 0 && g.global[0] * g.global[1] <= o[O_VMAX].ival) {
        bad = compare_with_serial(&g, iters, root);
        status = bad == 0;
    }
    cs_verify("grid_vs_serial", status, "%ld", bad);
    cs_verify("checksum", status, "%016llx", (unsigned long long)sum);
    CS_END("verify");

    MPI_Type_free(&g.column);
    free(g.req);
    free(g.u);
    free(g.un);
    MPI_Comm_free(&g.comm);
    cs_finalize();
    return 0;
}
