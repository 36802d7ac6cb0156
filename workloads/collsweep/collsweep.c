/* collsweep: latency of MPI_Barrier, Bcast, Reduce, Allreduce, Allgather and
 * Alltoall over a sweep of message sizes, for the reservoir study, which
 * measured the best algorithm per collective per message size.
 *
 * The algorithm is never chosen in this code: one binary sweeps every
 * algorithm through the MPI's own runtime controls (Open MPI
 * OMPI_MCA_coll_tuned_*, MPICH MPIR_CVAR_*_INTRA_ALGORITHM, Intel MPI
 * I_MPI_ADJUST_*). The header echoes the controls found in the environment
 * and reads the library's own value back through MPI_T where the library
 * exposes one, so a result can never be mislabelled.
 *
 * Iteration counts and timing follow IMB-MPI1: at most --iters timed calls,
 * cut to --volume / size for large sizes, after a warm-up of a tenth of them
 * (at least --warmup); each call timed on its own, with a barrier between
 * calls. Every call's result is checked, outside the timed interval: the
 * receive buffer is marked as not received before each call, so a stale
 * buffer cannot pass. */
#include "commscope.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

enum { BARRIER, BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLTOALL, NCOLL };
static const char *COLL[NCOLL] = {"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall"};
#define ALL_COLLS "barrier,bcast,reduce,allreduce,allgather,alltoall"
#define MAX_SIZES 64
#define MAX_BYTES (1L << 30)
/* The root of Bcast and Reduce, fixed as in IMB's default (-root_shift 0):
 * back-to-back calls from one root pipeline, which a rotating root would not. */
#define ROOT 0

/* ---- arguments ------------------------------------------------------------ */

/* "--coll" as a comma list of names (any case); fills want[NCOLL]. */
static void parse_colls(const char *text, int want[NCOLL])
{
    char buf[256];
    if (strlen(text) >= sizeof buf) cs_fail("--coll: value too long");
    strcpy(buf, text);
    memset(want, 0, NCOLL * sizeof(int));
    int any = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        for (char *c = tok; *c; c++) *c = (char)tolower((unsigned char)*c);
        int found = -1;
        for (int c = 0; c < NCOLL; c++)
            if (strcmp(tok, COLL[c]) == 0) found = c;
        if (found < 0) cs_fail("--coll: unknown collective '%s' (expected names from %s)", tok, ALL_COLLS);
        if (want[found]) cs_fail("--coll: '%s' given twice", tok);
        want[found] = any = 1;
    }
    if (!any) cs_fail("--coll: no collective named in '%s'", text);
}

/* One size in bytes, with an optional K or M suffix (powers of 1024). */
static long parse_bytes(const char *s, const char *whole)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s) cs_fail("--sizes: '%s' in '%s' is not a size", s, whole);
    if (*end == 'k' || *end == 'K') v *= 1024, end++;
    else if (*end == 'm' || *end == 'M') v *= 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') cs_fail("--sizes: '%s' in '%s' is not a size (bytes, or with a K or M suffix)", s, whole);
    if (v < 8 || v % 8 != 0)
        cs_fail("--sizes: %ld in '%s' is not a positive multiple of 8 bytes (a whole number of doubles)", v, whole);
    if (v > MAX_BYTES) cs_fail("--sizes: %ld in '%s' is above the limit of %ld bytes", v, whole, MAX_BYTES);
    return v;
}

/* "MIN:MAX" doubles from MIN while <= MAX; otherwise a comma list. */
static int parse_sizes(const char *text, long sizes[MAX_SIZES])
{
    char buf[512];
    int n = 0;
    if (strlen(text) >= sizeof buf) cs_fail("--sizes: value too long");
    strcpy(buf, text);
    char *colon = strchr(buf, ':');
    if (colon) {
        *colon = '\0';
        long lo = parse_bytes(buf, text), hi = parse_bytes(colon + 1, text);
        if (lo > hi) cs_fail("--sizes: range '%s' has MIN above MAX", text);
        for (long s = lo; s <= hi; s *= 2) sizes[n++] = s;
        return n;
    }
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (n == MAX_SIZES) cs_fail("--sizes: more than %d sizes in '%s'", MAX_SIZES, text);
        long v = parse_bytes(tok, text);
        for (int i = 0; i < n; i++)
            if (sizes[i] == v) cs_fail("--sizes: %ld given twice in '%s'", v, text);
        sizes[n++] = v;
    }
    if (!n) cs_fail("--sizes: no size in '%s'", text);
    return n;
}

/* ---- algorithm controls ------------------------------------------------- */

static int is_control(const char *name)
{
    return strncmp(name, "OMPI_MCA_coll", 13) == 0 ||
           (strncmp(name, "MPIR_CVAR_", 10) == 0 && (strstr(name, "ALGORITHM") || strstr(name, "COLL"))) ||
           strncmp(name, "I_MPI_ADJUST_", 13) == 0 || strncmp(name, "I_MPI_COLL", 10) == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* PARAM env.<NAME> <value> for every algorithm control in the environment. */
static void echo_env_controls(void)
{
    int n = 0;
    for (char **e = environ; *e; e++) n++;
    char **found = malloc((n ? n : 1) * sizeof(char *));
    int m = 0;
    for (char **e = environ; *e; e++) {
        char name[256];
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (len >= sizeof name) continue;
        memcpy(name, *e, len);
        name[len] = '\0';
        if (is_control(name)) found[m++] = *e;
    }
    qsort(found, m, sizeof(char *), cmp_str);
    for (int i = 0; i < m; i++) {
        const char *eq = strchr(found[i], '=');
        char key[300];
        snprintf(key, sizeof key, "env.%.*s", (int)(eq - found[i]), found[i]);
        cs_param(key, "%s", eq + 1);
    }
    cs_param("algorithm_controls", "%d", m);
    free(found);
}

/* The library's own value of a control variable, read through MPI_T, as
 * text; 0 if this library has no such variable. */
static int read_cvar(const char *want, char *out, size_t outlen)
{
    int n = 0;
    MPI_T_cvar_get_num(&n);
    for (int i = 0; i < n; i++) {
        char name[256], desc[8];
        int nl = sizeof name, dl = sizeof desc, verb, bind, scope, count, size = 0;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_cvar_get_info(i, name, &nl, &verb, &dt, &en, desc, &dl, &bind, &scope) != MPI_SUCCESS) continue;
        if (strcmp(name, want) != 0) continue;
        if (bind != MPI_T_BIND_NO_OBJECT) return 0;
        MPI_T_cvar_handle h;
        if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS) return 0;
        union { char c[512]; long long ll; int i; unsigned char b; } v;
        memset(&v, 0, sizeof v);
        MPI_Type_size(dt, &size);
        if ((long)size * count > (long)sizeof v.c - 1) {
            MPI_T_cvar_handle_free(&h);
            return 0;
        }
        MPI_T_cvar_read(h, &v);
        MPI_T_cvar_handle_free(&h);
        long long val;
        if (dt == MPI_CHAR) {
            snprintf(out, outlen, "%.200s", v.c[0] ? v.c : "(empty)");
            return 1;
        }
        val = size == 1 ? v.b : size == 4 ? v.i : v.ll;
        int len = snprintf(out, outlen, "%lld", val);
        /* Open MPI names its enum values; MPICH leaves them unnamed. */
        int items = 0;
        char ename[64], item[128];
        int enl = sizeof ename;
        if (en != MPI_T_ENUM_NULL && MPI_T_enum_get_info(en, &items, ename, &enl) == MPI_SUCCESS)
            for (int k = 0; k < items; k++) {
                int iv, il = sizeof item;
                if (MPI_T_enum_get_item(en, k, &iv, item, &il) == MPI_SUCCESS && iv == val)
                    snprintf(out + len, outlen - len, " %s", item);
            }
        return 1;
    }
    return 0;
}

/* PARAM mpit.<control> <value as the library holds it>: proof that the
 * library parsed the control, not only that the variable was set. */
static void echo_library_controls(void)
{
    int provided, shown = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        cs_param("mpit", "unavailable");
        return;
    }
    char name[128], key[160], value[256];
    if (read_cvar("coll_tuned_use_dynamic_rules", value, sizeof value)) {
        cs_param("mpit.coll_tuned_use_dynamic_rules", "%s", value);
        shown++;
    }
    for (int c = 0; c < NCOLL; c++) {
        char upper[32];
        for (int k = 0; (upper[k] = (char)toupper((unsigned char)COLL[c][k])); k++) {}
        snprintf(name, sizeof name, "coll_tuned_%s_algorithm", COLL[c]);
        if (read_cvar(name, value, sizeof value)) {
            snprintf(key, sizeof key, "mpit.%s", name);
            cs_param(key, "%s", value);
            shown++;
        }
        snprintf(name, sizeof name, "MPIR_CVAR_%s_INTRA_ALGORITHM", upper);
        if (read_cvar(name, value, sizeof value)) {
            snprintf(key, sizeof key, "mpit.%s", name);
            cs_param(key, "%s", value);
            shown++;
        }
    }
    if (!shown) cs_param("mpit", "none: this library exposes no collective algorithm control through MPI_T");
    /* MPI_T stays open until the end: MPICH 5.0 frees control-variable
     * strings its collective selection still reads when MPI_T_finalize
     * drops the last reference, and the next MPI_Barrier crashes. */
}

/* ---- the sweep -------------------------------------------------------------- */

/* Payload value of element i from source a: small integers, so any reduction
 * order sums them exactly. */
static inline double pattern(long a, long i) { return (double)((a * 131 + i * 7) % 1024); }

/* The payload is written once per size and then left alone, as IMB leaves its
 * buffers: the sender's data sits clean in the caches. Writing even one
 * element per 4 KiB of the root's Bcast payload before each call left those
 * lines dirty in the root's core, for the receiver to fetch from there, and
 * made Bcasts of 4 KiB and more 1.2x slower than IMB's. What proves that each
 * call delivered its result is the receive side: before each call, every rank
 * marks its receive buffer as not received (-1) at the stamps, the first
 * element of every 4 KiB and the last one, and after the call it compares the
 * stamps with the expected result. Marking them costs the receiver nothing
 * measurable: the lines are its own. */
#define STAMP_BYTES 4096

/* The payload's element type (--datatype): double, or float as IMB-MPI1
 * reduces (MPICH 4.0's small float Allreduces are up to 1.25x slower than
 * double ones of the same bytes). Every value is a small integer, exact in
 * both. The expected result (ref) is kept as doubles. */
typedef struct {
    MPI_Comm comm;
    int me, np;
    int is_float, esize, stamp; /* element type and size; elements per stamp */
    MPI_Datatype type;
    void *send, *recv;
    double *ref;
    long wrong, calls;
    double t_comm;
} sweep;

static inline void put(const sweep *s, void *b, long i, double v)
{
    if (s->is_float) ((float *)b)[i] = (float)v;
    else ((double *)b)[i] = v;
}
static inline double get(const sweep *s, const void *b, long i)
{
    return s->is_float ? ((const float *)b)[i] : ((const double *)b)[i];
}
/* Block b of n elements in buffer `buf`. */
static inline void *block_of(const sweep *s, void *buf, long b, long n) { return (char *)buf + b * n * s->esize; }

/* Writes block[0..n) = add + mul x payload of source a. */
static void fill(const sweep *s, void *block, long a, long n, double add, double mul)
{
    for (long i = 0; i < n; i++) put(s, block, i, add + mul * pattern(a, i));
}
static void fill_ref(double *block, long a, long n, double add, double mul)
{
    for (long i = 0; i < n; i++) block[i] = add + mul * pattern(a, i);
}

/* Marks block[0..n) as not received: -1 in every element when `full`, else
 * in the stamps only. Marking all of a large receive buffer before each call,
 * as this once did, left it dirty in the receiver's core, which IMB's is not
 * (it is only written by the previous call), and made large Bcasts 1.2-1.5x
 * slower than IMB's. */
static void poison(const sweep *s, void *block, long n, int full)
{
    for (long i = 0; i < n; i += full ? 1 : s->stamp) put(s, block, i, -1.0);
    put(s, block, n - 1, -1.0);
}

/* The receive blocks of this rank in `coll`, as (first, count of blocks). */
static void *received(const sweep *s, int coll, int root, int *blocks)
{
    *blocks = coll == ALLGATHER || coll == ALLTOALL ? s->np : 1;
    if (coll == BCAST) return s->me == root ? NULL : s->send;
    if (coll == REDUCE && s->me != root) return NULL;
    return s->recv;
}

/* Writes the payload of every rank's send buffer and the result this rank
 * must receive (s->ref), once per size; returns how many elements the result
 * has on this rank (0 where it receives nothing). */
static long load_size(sweep *s, int coll, long n, int root)
{
    double ranksum = (double)s->np * (s->np + 1) / 2;
    switch (coll) {
    case BCAST:
        if (s->me == root) fill(s, s->send, root, n, 0.0, 1.0);
        fill_ref(s->ref, root, n, 0.0, 1.0);
        return s->me == root ? 0 : n;
    case REDUCE:
    case ALLREDUCE:
        fill(s, s->send, 0, n, (double)(s->me + 1), 1.0);
        fill_ref(s->ref, 0, n, ranksum, s->np);
        return coll == REDUCE && s->me != root ? 0 : n;
    case ALLGATHER:
        fill(s, s->send, s->me, n, 0.0, 1.0);
        for (int r = 0; r < s->np; r++) fill_ref(s->ref + r * n, r, n, 0.0, 1.0);
        return n * s->np;
    case ALLTOALL:
        for (int d = 0; d < s->np; d++) fill(s, block_of(s, s->send, d, n), (long)s->me * s->np + d, n, 0.0, 1.0);
        for (int r = 0; r < s->np; r++) fill_ref(s->ref + r * n, (long)r * s->np + s->me, n, 0.0, 1.0);
        return n * s->np;
    }
    return 0;
}

static void call(const sweep *s, void *snd, void *rcv, int coll, long n, int root)
{
    MPI_Datatype t = s->type;
    switch (coll) {
    case BARRIER: MPI_Barrier(s->comm); break;
    case BCAST: MPI_Bcast(snd, (int)n, t, root, s->comm); break;
    case REDUCE: MPI_Reduce(snd, rcv, (int)n, t, MPI_SUM, root, s->comm); break;
    case ALLREDUCE: MPI_Allreduce(snd, rcv, (int)n, t, MPI_SUM, s->comm); break;
    case ALLGATHER: MPI_Allgather(snd, (int)n, t, rcv, (int)n, t, s->comm); break;
    case ALLTOALL: MPI_Alltoall(snd, (int)n, t, rcv, (int)n, t, s->comm); break;
    }
}

/* Counts wrong elements of this rank's result against s->ref: every element
 * when `every`, else the stamps of each block. */
static long check(const sweep *s, const void *got, long m, long n, int every)
{
    long bad = 0;
    if (every)
        for (long i = 0; i < m; i++) bad += get(s, got, i) != s->ref[i];
    else
        for (long b = 0; b < m; b += n) {
            for (long j = 0; j < n; j += s->stamp) bad += get(s, got, b + j) != s->ref[b + j];
            bad += get(s, got, b + n - 1) != s->ref[b + n - 1];
        }
    return bad;
}

/* Per-rank mean time of one timed call, in seconds, over `iters` calls,
 * timed as IMB-MPI1 times its collectives (IMB_allreduce.c, IMB_bcast.c, ...):
 * each call between its own two MPI_Wtime calls, an MPI_Barrier between
 * calls (IMB's default -sync 1) and one send buffer reused by every call
 * (IMB's default, off_cache off). What IMB does not do happens outside the
 * timed interval, before the barrier: the receive buffer is marked at its
 * stamps, and after the call they are checked. The first call of a size
 * (warm-up) and one untimed call after the timed ones mark and check every
 * element. So every call is verified and none of that work is timed. Barrier
 * moves no payload and is timed as IMB times it, back to back. */
static double run_size(sweep *s, int coll, long n, long iters, long warmup)
{
    double t = 0;
    if (coll == BARRIER) {
        for (long k = 0; k < warmup; k++) MPI_Barrier(s->comm);
        MPI_Barrier(s->comm);
        MPI_Barrier(s->comm);
        double t0 = MPI_Wtime();
        for (long k = 0; k < iters; k++) MPI_Barrier(s->comm);
        t = MPI_Wtime() - t0;
        s->calls += warmup + iters;
        s->t_comm += t;
        return t / iters;
    }
    int blocks;
    void *got = received(s, coll, ROOT, &blocks);
    long m = load_size(s, coll, n, ROOT);
    /* warm-up, timed, then one untimed call; the first and the last call
     * mark and check every element */
    long phases[3] = {warmup, iters, 1};
    int first = 1;
    for (int phase = 0; phase < 3; phase++) {
        /* IMB's N_BARR: two barriers before the first call */
        MPI_Barrier(s->comm);
        MPI_Barrier(s->comm);
        for (long k = 0; k < phases[phase]; k++) {
            int every = first || phase == 2;
            first = 0;
            if (got)
                for (int b = 0; b < blocks; b++) poison(s, block_of(s, got, b, n), n, every);
            MPI_Barrier(s->comm);
            double t0 = MPI_Wtime();
            call(s, s->send, s->recv, coll, n, ROOT);
            double dt = MPI_Wtime() - t0;
            if (phase == 1) t += dt;
            if (got) s->wrong += check(s, got, m, n, every);
#ifdef COMMSCOPE_CORRUPT_REDUCTION
            /* Test builds prove the check can fail: one wrong element per call. */
            if (coll == ALLREDUCE) s->wrong++;
#endif
            s->calls++;
        }
    }
    s->t_comm += t;
    return t / iters;
}

/* ---- main ------------------------------------------------------------------- */

enum { O_COLL, O_SIZES, O_ITERS, O_WARMUP, O_VOLUME, O_DATATYPE, O_ALLOC, NOPT };
enum { DATATYPE_DOUBLE, DATATYPE_FLOAT };   /* --datatype double|float */
enum { ALLOC_MALLOC, ALLOC_MPI };           /* --alloc malloc|mpi */

/* --alloc: where the send and receive buffers come from. IMB-MPI1 takes its
 * buffers from MPI_Alloc_mem; with Open MPI 4.1, Allreduces of 16-64 KiB on
 * such memory take about 2x as long as on malloc'd memory here. */
static void *buffer(int mpi, long bytes)
{
    void *p = NULL;
    if (!mpi) return malloc(bytes);
    return MPI_Alloc_mem(bytes, MPI_INFO_NULL, &p) == MPI_SUCCESS ? p : NULL;
}
static void release(int mpi, void *p)
{
    if (mpi) MPI_Free_mem(p);
    else free(p);
}

int main(int argc, char **argv)
{
    cs_opt o[NOPT] = {
        [O_COLL] = {"--coll", CS_STR, ALL_COLLS, NULL, "collectives to sweep, comma-separated", 0},
        [O_SIZES] = {"--sizes", CS_STR, "8:4M", NULL,
                     "message sizes in bytes: MIN:MAX (doubling) or a comma list; K and M suffixes", 0},
        [O_ITERS] = {"--iters", CS_INT, "1000", NULL, "timed calls per size, before the --volume cut", 1},
        [O_WARMUP] = {"--warmup", CS_INT, "10", NULL, "least untimed warm-up calls per size; a tenth of the timed calls when more, never more than the timed calls", 0},
        [O_VOLUME] = {"--volume", CS_INT, "41943040", NULL, "timed calls per size are cut to volume/size (IMB: 40 MiB)", 1},
        [O_DATATYPE] = {"--datatype", CS_CHOICE, "double", "double|float",
                        "payload element type (IMB-MPI1 reduces floats)", 0},
        [O_ALLOC] = {"--alloc", CS_CHOICE, "malloc", "malloc|mpi",
                     "send and receive buffers from malloc, or from MPI_Alloc_mem as IMB-MPI1's", 0},
    };
    cs_init(&argc, &argv, "collsweep");
    CS_BEGIN("setup");
    cs_parse(argc, argv, o, NOPT, "Latency of six collectives over a sweep of message sizes (reservoir study).");
    int want[NCOLL];
    long sizes[MAX_SIZES];
    parse_colls(o[O_COLL].sval, want);
    int nsizes = parse_sizes(o[O_SIZES].sval, sizes);

    sweep s = {.comm = MPI_COMM_WORLD};
    s.me = cs_rank();
    s.np = cs_size();
    s.is_float = cs_choice(&o[O_DATATYPE]) == DATATYPE_FLOAT;
    s.type = s.is_float ? MPI_FLOAT : MPI_DOUBLE;
    s.esize = s.is_float ? (int)sizeof(float) : (int)sizeof(double);
    s.stamp = STAMP_BYTES / s.esize;
    int mpi_alloc = cs_choice(&o[O_ALLOC]) == ALLOC_MPI;
    long maxn = sizes[0];
    for (int k = 1; k < nsizes; k++)
        if (sizes[k] > maxn) maxn = sizes[k];
    maxn /= s.esize;
    /* Allgather and Alltoall need size x ranks on both sides. */
    long elems = maxn * s.np > 0 ? maxn * s.np : 1;
    s.send = buffer(mpi_alloc, elems * s.esize);
    s.recv = buffer(mpi_alloc, elems * s.esize);
    s.ref = malloc(elems * sizeof(double));
    if (!s.send || !s.recv || !s.ref) {
        fprintf(stderr, "collsweep: out of memory for buffers of %ld bytes\n", elems * s.esize);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    cs_header("collsweep", o, NOPT);
    cs_param("variant", "%s", o[O_COLL].sval);
    echo_env_controls();
    echo_library_controls();
    if (s.me == 0) fflush(stdout);
    cs_meta_str("variant", o[O_COLL].sval);
    cs_meta_str("sizes", o[O_SIZES].sval);
    cs_meta_long("iterations", o[O_ITERS].ival);
    cs_meta_str("datatype", o[O_DATATYPE].sval);
    cs_meta_str("alloc", o[O_ALLOC].sval);
    CS_END("setup");

    MPI_Barrier(s.comm);
    double start = cs_loop_begin();
    long timed = 0;
    for (int c = 0; c < NCOLL; c++) {
        if (!want[c]) continue;
        /* Barrier moves no payload: it is timed once, not per size. */
        int nk = c == BARRIER ? 1 : nsizes;
        for (int k = 0; k < nk; k++) {
            long bytes = c == BARRIER ? 0 : sizes[k], n = bytes / s.esize;
            long iters = bytes ? o[O_VOLUME].ival / bytes : o[O_ITERS].ival;
            if (iters > o[O_ITERS].ival) iters = o[O_ITERS].ival;
            if (iters < 1) iters = 1;
            /* IMB_warm_up.c: a tenth of the timed calls, at least --warmup
             * (IMB: 10) but never more than the timed calls */
            long warmup = iters / 10;
            if (warmup < o[O_WARMUP].ival) warmup = o[O_WARMUP].ival < iters ? o[O_WARMUP].ival : iters;
            CS_BEGIN(COLL[c]);
            CS_COMM_BEGIN("collective");
            MPI_Barrier(s.comm);
            double mean = run_size(&s, c, n, iters, warmup);
            CS_COMM_END("collective");
            CS_END(COLL[c]);
            timed += iters;
            double lo, sum, hi;
            MPI_Reduce(&mean, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, s.comm);
            MPI_Reduce(&mean, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, s.comm);
            MPI_Reduce(&mean, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, s.comm);
            char name[96];
            if (c == BARRIER) snprintf(name, sizeof name, "barrier");
            else snprintf(name, sizeof name, "%s_%ldB", COLL[c], bytes);
            char key[128];
            snprintf(key, sizeof key, "%s_t_min", name);
            cs_fom(key, lo * 1e6, "us");
            snprintf(key, sizeof key, "%s_t_avg", name);
            cs_fom(key, sum / s.np * 1e6, "us");
            snprintf(key, sizeof key, "%s_t_max", name);
            cs_fom(key, hi * 1e6, "us");
            /* Bus bandwidth as nccl-tests defines it: the data one rank moves
             * over the busiest link, so algorithms and sizes compare. */
            double factor = c == ALLREDUCE ? 2.0 * (s.np - 1) / s.np
                          : c == ALLGATHER || c == ALLTOALL ? (double)(s.np - 1) / s.np : 1.0;
            double data = c == ALLGATHER || c == ALLTOALL ? (double)bytes * s.np : (double)bytes;
            if (c != BARRIER && s.np > 1) {
                snprintf(key, sizeof key, "%s_busbw", name);
                cs_fom(key, data * factor / (sum / s.np) / 1e6, "MB/s");
            }
            snprintf(key, sizeof key, "iterations.%s", name);
            cs_param(key, "%ld timed, %ld warm-up", iters, warmup);
        }
    }
    double wall = cs_loop_end(start), total;
    MPI_Allreduce(&wall, &total, 1, MPI_DOUBLE, MPI_MAX, s.comm);
    cs_fom("total_time", total, "s");
    cs_fom("time_per_iter", timed ? total / timed : 0, "s");
    cs_fom_avg_max(s.comm, "comm_time", s.t_comm, "s");

    CS_BEGIN("verify");
    long wrong = 0, calls = 0;
    MPI_Allreduce(&s.wrong, &wrong, 1, MPI_LONG, MPI_SUM, s.comm);
    MPI_Allreduce(&s.calls, &calls, 1, MPI_LONG, MPI_SUM, s.comm);
    cs_verify("wrong_elements", wrong == 0 && calls > 0, "%ld", wrong);
    cs_verify("checked_calls", calls > 0, "%ld", calls / s.np);
    CS_END("verify");

    release(mpi_alloc, s.send);
    release(mpi_alloc, s.recv);
    free(s.ref);
    MPI_T_finalize();
    cs_finalize();
    return 0;
}
