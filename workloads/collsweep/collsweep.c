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
 * calls. Every call's result is checked, outside the timed interval. The
 * payload changes with the call, so a stale buffer cannot pass. */
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
        cs_fail("--sizes: %ld in '%s' is not a positive multiple of 8 bytes (payloads are doubles)", v, whole);
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

/* Payload value of element i from source a in call it: small integers, so
 * any reduction order sums them exactly. */
static inline double pattern(long a, long i, long it) { return (double)((a * 131 + i * 7 + it * 13) % 1024); }

/* Only the stamp elements of a payload change from call to call: the first
 * element of every 4 KiB and the last one. IMB sends the same buffer every
 * time, so the sender's data sits clean in the caches; rewriting all of it
 * before each call left it dirty in the sender's core and made large Bcasts
 * up to several times slower than IMB's. Changing one cache line per page
 * still makes every call's payload different, so a stale or missing result
 * fails the check, which reads every element. */
#define STAMP 512
static inline int stamped(long i, long n) { return i % STAMP == 0 || i == n - 1; }
static inline double payload(long a, long i, long n, long it) { return pattern(a, i, stamped(i, n) ? it : 0); }

typedef struct {
    MPI_Comm comm;
    int me, np;
    double *send, *recv, *ref;
    long wrong, calls;
    double t_comm;
} sweep;

/* Writes block[0..n) = add + mul x payload of source a in call it: every
 * element when `full`, else the stamps only (the rest does not depend on the
 * call). */
static void fill(double *block, long a, long n, long it, double add, double mul, int full)
{
    if (full) {
        for (long i = 0; i < n; i++) block[i] = add + mul * payload(a, i, n, it);
        return;
    }
    for (long i = 0; i < n; i += STAMP) block[i] = add + mul * payload(a, i, n, it);
    block[n - 1] = add + mul * payload(a, n - 1, n, it);
}

/* Marks block[0..n) as not received: -1 in every element when `full`, else
 * in the stamps only. Every call's stamps differ, so a call that leaves any
 * 4 KiB of the result unwritten still fails the check; rewriting all of the
 * receive buffer before each call, as this did before, left it dirty in the
 * receiver's core, which IMB's is not (its receive buffer is only written by
 * the previous call), and made large Bcasts 1.2-1.5x slower than IMB's. */
static void poison(double *block, long n, int full)
{
    if (full) {
        for (long i = 0; i < n; i++) block[i] = -1.0;
        return;
    }
    for (long i = 0; i < n; i += STAMP) block[i] = -1.0;
    block[n - 1] = -1.0;
}

/* Prepares the buffers of call `it`: the send payload (all of it the first
 * time, `full`, then its stamps) and the receive buffer marked as not
 * received (poison). Returns the root it uses. */
static int prepare(const sweep *s, double *snd, double *rcv, int coll, long n, long it, int full)
{
    int root = ROOT;
    switch (coll) {
    case BCAST:
        if (s->me == root) fill(snd, root, n, it, 0.0, 1.0, full);
        else poison(snd, n, full);
        break;
    case REDUCE:
    case ALLREDUCE:
        fill(snd, 0, n, it, (double)(s->me + 1), 1.0, full);
        poison(rcv, n, full);
        break;
    case ALLGATHER:
        fill(snd, s->me, n, it, 0.0, 1.0, full);
        for (int r = 0; r < s->np; r++) poison(rcv + r * n, n, full);
        break;
    case ALLTOALL:
        for (int d = 0; d < s->np; d++) fill(snd + d * n, (long)s->me * s->np + d, n, it, 0.0, 1.0, full);
        for (int r = 0; r < s->np; r++) poison(rcv + r * n, n, full);
        break;
    }
    return root;
}

static void call(const sweep *s, double *snd, double *rcv, int coll, long n, int root)
{
    switch (coll) {
    case BARRIER: MPI_Barrier(s->comm); break;
    case BCAST: MPI_Bcast(snd, (int)n, MPI_DOUBLE, root, s->comm); break;
    case REDUCE: MPI_Reduce(snd, rcv, (int)n, MPI_DOUBLE, MPI_SUM, root, s->comm); break;
    case ALLREDUCE: MPI_Allreduce(snd, rcv, (int)n, MPI_DOUBLE, MPI_SUM, s->comm); break;
    case ALLGATHER: MPI_Allgather(snd, (int)n, MPI_DOUBLE, rcv, (int)n, MPI_DOUBLE, s->comm); break;
    case ALLTOALL: MPI_Alltoall(snd, (int)n, MPI_DOUBLE, rcv, (int)n, MPI_DOUBLE, s->comm); break;
    }
}

/* Brings s->ref to the result this rank must hold after call `it` (all of
 * it when `full`, else its stamps); returns how many elements it covers. */
static long expect(const sweep *s, int coll, long n, long it, int root, int full)
{
    double ranksum = (double)s->np * (s->np + 1) / 2;
    switch (coll) {
    case BCAST:
        fill(s->ref, root, n, it, 0.0, 1.0, full);
        return n;
    case REDUCE:
        if (s->me != root) return 0;
        /* fall through */
    case ALLREDUCE:
        fill(s->ref, 0, n, it, ranksum, s->np, full);
        return n;
    case ALLGATHER:
        for (int r = 0; r < s->np; r++) fill(s->ref + r * n, r, n, it, 0.0, 1.0, full);
        return n * s->np;
    case ALLTOALL:
        for (int r = 0; r < s->np; r++) fill(s->ref + r * n, (long)r * s->np + s->me, n, it, 0.0, 1.0, full);
        return n * s->np;
    }
    return 0;
}

/* Counts wrong elements of this rank's result of call `it`, against the
 * expected result kept in s->ref: every element when `every`, else the stamps
 * of each block, which are what changes from call to call. Reading all of a
 * large result and of s->ref after every call evicted the message buffers from
 * the caches that IMB leaves warm between its calls (large Bcasts 1.1-1.3x
 * slower than IMB's); run_size reads every element on the first and the last
 * timed call of each size. */
static long check(sweep *s, const double *snd, const double *rcv, int coll, long n, long it, int root, int full,
                  int every)
{
    long m = expect(s, coll, n, it, root, full), bad = 0;
    const double *got = coll == BCAST ? snd : rcv;
    if (every)
        for (long i = 0; i < m; i++) bad += got[i] != s->ref[i];
    else
        for (long b = 0; b < m; b += n) {
            for (long j = 0; j < n; j += STAMP) bad += got[b + j] != s->ref[b + j];
            bad += got[b + n - 1] != s->ref[b + n - 1];
        }
#ifdef COMMSCOPE_CORRUPT_REDUCTION
    /* Test builds prove the check can fail: one wrong element per call. */
    if (coll == ALLREDUCE) bad++;
#endif
    return bad;
}

/* Per-rank mean time of one timed call, in seconds, over `iters` calls,
 * timed as IMB-MPI1 times its collectives (IMB_allreduce.c, IMB_bcast.c, ...):
 * each call between its own two MPI_Wtime calls, an MPI_Barrier between
 * calls (IMB's default -sync 1) and one buffer reused by every call (IMB's
 * default, off_cache off). What IMB does not do happens outside the timed
 * interval, before the barrier: this call's payload is stamped into the
 * buffers (prepare), and after the call its result is checked. So every call is
 * verified and none of that work is timed. Barrier moves no payload and is
 * timed as IMB times it, back to back. */
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
    } else {
        long first_call = s->calls;
        for (int timed = 0; timed < 2; timed++) {
            long total = timed ? iters : warmup;
            /* IMB's N_BARR: two barriers before the first call */
            MPI_Barrier(s->comm);
            MPI_Barrier(s->comm);
            for (long k = 0; k < total; k++) {
                /* warm-up payloads differ from the timed ones */
                long it = timed ? k : iters + k;
                prepare(s, s->send, s->recv, coll, n, it, s->calls == first_call);
                MPI_Barrier(s->comm);
                double t0 = MPI_Wtime();
                call(s, s->send, s->recv, coll, n, ROOT);
                double dt = MPI_Wtime() - t0;
                if (timed) t += dt;
                int full = s->calls == first_call;
                s->wrong += check(s, s->send, s->recv, coll, n, it, ROOT, full,
                                  full || (timed && k == total - 1));
                s->calls++;
            }
        }
    }
    s->t_comm += t;
    return t / iters;
}

/* ---- main ------------------------------------------------------------------- */

enum { O_COLL, O_SIZES, O_ITERS, O_WARMUP, O_VOLUME, NOPT };

int main(int argc, char **argv)
{
    cs_opt o[NOPT] = {
        [O_COLL] = {"--coll", CS_STR, ALL_COLLS, NULL, "collectives to sweep, comma-separated", 0},
        [O_SIZES] = {"--sizes", CS_STR, "8:4M", NULL,
                     "message sizes in bytes: MIN:MAX (doubling) or a comma list; K and M suffixes", 0},
        [O_ITERS] = {"--iters", CS_INT, "1000", NULL, "timed calls per size, before the --volume cut", 1},
        [O_WARMUP] = {"--warmup", CS_INT, "10", NULL, "least untimed warm-up calls per size; a tenth of the timed calls when more, never more than the timed calls", 0},
        [O_VOLUME] = {"--volume", CS_INT, "41943040", NULL, "timed calls per size are cut to volume/size (IMB: 40 MiB)", 1},
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
    long maxn = sizes[0];
    for (int k = 1; k < nsizes; k++)
        if (sizes[k] > maxn) maxn = sizes[k];
    maxn /= 8;
    /* Allgather and Alltoall need size x ranks on both sides. */
    long elems = maxn * s.np > 0 ? maxn * s.np : 1;
    s.send = malloc(elems * sizeof(double));
    s.recv = malloc(elems * sizeof(double));
    s.ref = malloc(elems * sizeof(double));
    if (!s.send || !s.recv || !s.ref) {
        fprintf(stderr, "collsweep: out of memory for three buffers of %ld bytes\n", elems * 8);
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
    CS_END("setup");

    MPI_Barrier(s.comm);
    double start = MPI_Wtime();
    long timed = 0;
    for (int c = 0; c < NCOLL; c++) {
        if (!want[c]) continue;
        /* Barrier moves no payload: it is timed once, not per size. */
        int nk = c == BARRIER ? 1 : nsizes;
        for (int k = 0; k < nk; k++) {
            long bytes = c == BARRIER ? 0 : sizes[k], n = bytes / 8;
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
    double wall = MPI_Wtime() - start, total;
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

    free(s.send);
    free(s.recv);
    free(s.ref);
    MPI_T_finalize();
    cs_finalize();
    return 0;
}
