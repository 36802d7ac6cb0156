#include "commscope.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef COMMSCOPE_HAVE_CALIPER
#include <adiak.h>
#endif

int cs_annotations_off = 0;
static int g_rank = 0, g_size = 1;
static const char *g_prog = "workload";
static MPI_Comm g_world;
/* This thread's wait for a core during the timed loop, and the wall time of
 * the window it was read over, summed over cs_loop_begin/cs_loop_end pairs;
 * g_loop_waited < 0: the kernel does not say. The window brackets the two
 * reads of the counter, so a wait inside a read (a short loop's whole wait,
 * at 1 rank once 6x the loop) cannot count without its time. */
static double g_loop_window, g_loop_waited, g_window_start, g_waited_start;

/* Seconds the calling (main) thread has spent runnable but waiting for a
 * core (the second field of Linux's /proc/thread-self/schedstat, in ns);
 * -1 where the kernel does not say. */
static double runqueue_wait(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    unsigned long long on_cpu, waiting;
    int got = f ? fscanf(f, "%llu %llu", &on_cpu, &waiting) : 0;
    if (f) fclose(f);
    return got == 2 ? (double)waiting * 1e-9 : -1.0;
}

int cs_rank(void) { return g_rank; }
int cs_size(void) { return g_size; }

/* The interconnect catalog entry this run was launched with (see
 * ci/interconnects.py), so every result carries the transport it measured. */
const char *cs_interconnect(void)
{
    const char *v = getenv("COMMSCOPE_INTERCONNECT");
    return v && *v ? v : NULL;
}

void cs_meta_str(const char *name, const char *value)
{
#ifdef COMMSCOPE_HAVE_CALIPER
    adiak_namevalue(name, adiak_general, NULL, "%s", value);
#else
    (void)name; (void)value;
#endif
}

void cs_meta_long(const char *name, long value)
{
#ifdef COMMSCOPE_HAVE_CALIPER
    adiak_namevalue(name, adiak_general, NULL, "%ld", value);
#else
    (void)name; (void)value;
#endif
}

#ifdef COMMSCOPE_HAVE_CALIPER
extern char **environ;

/* Run metadata only the launcher knows (Ramble's Caliper modifier sets it: experiment,
 * stack, site, study, git_commit): every COMMSCOPE_META_<name>=<value> in the
 * environment becomes the Adiak value <name>. */
static void cs_meta_from_env(void)
{
    static const char prefix[] = "COMMSCOPE_META_";
    const size_t plen = sizeof prefix - 1;
    char name[128];
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, prefix, plen) != 0) continue;
        size_t klen = (size_t)(eq - *e) - plen;
        if (klen == 0 || klen >= sizeof name || eq[1] == '\0') continue;
        memcpy(name, *e + plen, klen);
        name[klen] = '\0';
        cs_meta_str(name, eq + 1);
    }
}
#endif

void cs_init(int *argc, char ***argv, const char *prog)
{
    MPI_Init(argc, argv);
    g_world = MPI_COMM_WORLD;
    MPI_Comm_rank(g_world, &g_rank);
    MPI_Comm_size(g_world, &g_size);
    g_prog = prog;
#ifdef COMMSCOPE_HAVE_CALIPER
    adiak_init(&g_world);
    adiak_collect_all();
    cs_meta_str("workload", prog);
    cs_meta_long("ranks", g_size);
    cs_meta_str("commscope_version", COMMSCOPE_VERSION);
#if defined(__clang__)
    cs_meta_str("compiler", "clang " __clang_version__);
#elif defined(__GNUC__)
    cs_meta_str("compiler", "gcc " __VERSION__);
#endif
    if (cs_interconnect()) cs_meta_str("interconnect", cs_interconnect());
    cs_meta_from_env();
#endif
    CS_BEGIN("main");
}

double cs_loop_begin(void)
{
    /* The Caliper region of exactly the timed interval: commscope's focus window (docs/measurement-model.md). */
    CS_BEGIN("loop");
    g_window_start = MPI_Wtime();
    g_waited_start = runqueue_wait();
    return MPI_Wtime();
}

double cs_loop_end(double start)
{
    double wall = MPI_Wtime() - start, now = runqueue_wait();
    g_loop_window += MPI_Wtime() - g_window_start;
    if (g_loop_waited >= 0)
        g_loop_waited = now >= 0 && g_waited_start >= 0 ? g_loop_waited + (now - g_waited_start) : -1.0;
    CS_END("loop");
    return wall;
}

/* The share of the timed loop that the most-delayed rank spent waiting for a
 * core: on a machine shared with other work, a rank's descheduled time looks
 * like waiting in MPI to its partners, and wall-clock profiles cannot tell it
 * from the transfer or from load imbalance. A rank with a core of its own
 * waits almost never (well under 1%); one sharing its core with another
 * runnable task waits for a third of the loop or more. Only the loop counts:
 * in the milliseconds after MPI_Init the launcher's own processes still run,
 * and short runs measured from there showed 10-24%. The overlap advisor reads
 * it (Adiak runqueue_wait_share_max) before it names a cause. Not printed
 * where the kernel has no schedstat, or where no loop was timed. */
static void cs_runqueue_share(void)
{
    double mine = g_loop_window > 0 && g_loop_waited >= 0 ? g_loop_waited / g_loop_window : -1.0, most, least;
    MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, g_world);
    MPI_Allreduce(&mine, &least, 1, MPI_DOUBLE, MPI_MIN, g_world);
    if (least < 0) return; /* some rank could not tell */
    cs_fom("runqueue_wait_share_max", most, "share");
#ifdef COMMSCOPE_HAVE_CALIPER
    adiak_namevalue("runqueue_wait_share_max", adiak_general, NULL, "%f", most);
#endif
}

void cs_finalize(void)
{
    CS_END("main");
    cs_runqueue_share();
#ifdef COMMSCOPE_HAVE_CALIPER
    adiak_fini();
#endif
    MPI_Finalize();
}

void cs_fail(const char *fmt, ...)
{
    if (g_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: error: ", g_prog);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n%s: run '%s --help' for the options\n", g_prog, g_prog);
        va_end(ap);
        fflush(stderr);
    }
    /* Every rank got here by the same local reasoning, so finalizing is safe
     * and lets every launcher report status 2 instead of an abort. */
    MPI_Finalize();
    exit(2);
}

/* ---- options ------------------------------------------------------------ */

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0') return 0;
    *out = v;
    return 1;
}

static int choice_index(const char *choices, const char *v)
{
    size_t n = strlen(v);
    const char *p = choices;
    for (int i = 0; p && *p; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return i;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

int cs_choice(const cs_opt *o) { return choice_index(o->choices, o->sval); }

static void set_value(cs_opt *o, const char *v)
{
    o->sval = v;
    switch (o->kind) {
    case CS_INT:
        if (!parse_long(v, &o->ival)) cs_fail("%s: '%s' is not an integer", o->name, v);
        if (o->ival < o->min) cs_fail("%s: %ld is below the minimum %ld", o->name, o->ival, o->min);
        break;
    case CS_INTS: {
        int want = atoi(o->choices), got = 0;
        char buf[256];
        if (strlen(v) >= sizeof buf) cs_fail("%s: value too long", o->name);
        strcpy(buf, v);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (got == want || !parse_long(tok, &o->ints[got]))
                cs_fail("%s: '%s' is not %d comma-separated integers", o->name, v, want);
            got++;
        }
        if (got != want) cs_fail("%s: '%s' is not %d comma-separated integers", o->name, v, want);
        for (int i = 0; i < got; i++)
            if (o->ints[i] < o->min) cs_fail("%s: component %ld in '%s' is below the minimum %ld", o->name, o->ints[i], v, o->min);
        break;
    }
    case CS_CHOICE:
        if (choice_index(o->choices, v) < 0)
            cs_fail("%s: unknown value '%s' (expected one of %s)", o->name, v, o->choices);
        break;
    case CS_FLAG:
        o->ival = 1;
        break;
    case CS_STR:
        break;
    }
}

static void print_help(const cs_opt *opts, int nopts, const char *summary)
{
    printf("usage: %s [options]\n\n%s\n\noptions:\n", g_prog, summary);
    printf("  %-22s %s\n", "--help", "print this help and exit");
    for (int i = 0; i < nopts; i++) {
        const cs_opt *o = &opts[i];
        char lhs[64];
        const char *meta = o->kind == CS_INT ? " N" : o->kind == CS_INTS ? (atoi(o->choices) == 3 ? " X,Y,Z" : " X,Y")
                         : o->kind == CS_CHOICE ? " NAME" : o->kind == CS_STR ? " TEXT" : "";
        snprintf(lhs, sizeof lhs, "%s%s", o->name, meta);
        printf("  %-22s %s", lhs, o->help);
        if (o->kind == CS_CHOICE) printf(" {%s}", o->choices);
        if (o->kind == CS_FLAG) printf(" (default: off)\n");
        else printf(" (default: %s)\n", o->def ? o->def : "none");
    }
    fflush(stdout);
}

void cs_parse(int argc, char **argv, cs_opt *opts, int nopts, const char *summary)
{
    for (int i = 0; i < nopts; i++) {
        opts[i].set = 0;
        opts[i].ival = 0;
        opts[i].sval = NULL;
        if (opts[i].def && opts[i].kind != CS_FLAG) set_value(&opts[i], opts[i].def);
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            if (g_rank == 0) print_help(opts, nopts, summary);
            MPI_Finalize();
            exit(0);
        }
        const char *eq = strchr(arg, '=');
        size_t namelen = eq ? (size_t)(eq - arg) : strlen(arg);
        cs_opt *o = NULL;
        for (int i = 0; i < nopts; i++)
            if (strlen(opts[i].name) == namelen && strncmp(opts[i].name, arg, namelen) == 0) o = &opts[i];
        if (!o) cs_fail("unknown option '%s'", arg);
        if (o->set) cs_fail("%s given twice", o->name);
        o->set = 1;
        if (o->kind == CS_FLAG) {
            if (eq) cs_fail("%s takes no value", o->name);
            set_value(o, "on");
            continue;
        }
        const char *v = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
        if (!v) cs_fail("%s needs a value", o->name);
        set_value(o, v);
    }
    /* The name becomes one token of a PARAM line: refuse anything else. */
    const char *ic = cs_interconnect();
    if (ic && strspn(ic, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/+:") != strlen(ic))
        cs_fail("COMMSCOPE_INTERCONNECT: '%s' is not a catalog name (letters, digits and . _ - / + : only)", ic);
}

/* ---- output contract ---------------------------------------------------- */

void cs_param(const char *name, const char *fmt, ...)
{
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    printf("PARAM %s ", name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

void cs_header(const char *workload, const cs_opt *opts, int nopts)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, major = 0, minor = 0;
    MPI_Get_library_version(lib, &len);
    MPI_Get_version(&major, &minor);
    if (g_rank != 0) return;
    /* The library string can span lines; the contract keeps its first line. */
    char *nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
    printf("COMMSCOPE workload=%s version=%s\n", workload, COMMSCOPE_VERSION);
    printf("MPI_LIBRARY %s\n", lib);
    printf("MPI_VERSION %d.%d\n", major, minor);
    printf("RANKS %d\n", g_size);
    for (int i = 0; i < nopts; i++) {
        const cs_opt *o = &opts[i];
        const char *name = o->name + 2; /* drop "--" */
        if (o->kind == CS_FLAG) printf("PARAM %s %s\n", name, o->ival ? "on" : "off");
        else printf("PARAM %s %s\n", name, o->sval ? o->sval : "none");
    }
    if (cs_interconnect()) printf("PARAM interconnect %s\n", cs_interconnect());
    fflush(stdout);
}

void cs_fom(const char *name, double value, const char *unit)
{
    if (g_rank == 0) printf("FOM %s %.9g %s\n", name, value, unit);
}

void cs_fom_avg_max(MPI_Comm comm, const char *name, double local, const char *unit)
{
    double sum = 0, max = 0;
    int n;
    MPI_Comm_size(comm, &n);
    /* Allreduce: comm's rank 0 need not be the world rank 0 that prints. */
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Allreduce(&local, &max, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (g_rank == 0) {
        printf("FOM %s_avg %.9g %s\n", name, sum / n, unit);
        printf("FOM %s_max %.9g %s\n", name, max, unit);
    }
}

void cs_verify(const char *name, int status, const char *value_fmt, ...)
{
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, value_fmt);
    printf("VERIFY %s %s ", name, status > 0 ? "PASS" : status == 0 ? "FAIL" : "SKIP");
    vprintf(value_fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

double *cs_gather_blocks(MPI_Comm comm, int root, const double *mine, long count, int **displs)
{
    int me, np, cnt = (int)count;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &np);
    int *counts = NULL;
    double *all = NULL;
    *displs = NULL;
    if (me == root) {
        counts = malloc(np * sizeof(int));
        *displs = malloc(np * sizeof(int));
    }
    MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, root, comm);
    if (me == root) {
        long total = 0;
        for (int r = 0; r < np; r++) {
            (*displs)[r] = (int)total;
            total += counts[r];
        }
        all = malloc((total ? total : 1) * sizeof(double));
    }
    MPI_Gatherv(mine, cnt, MPI_DOUBLE, all, counts, *displs, MPI_DOUBLE, root, comm);
    free(counts);
    return all;
}
