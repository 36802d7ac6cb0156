/* commgraph: a synthetic application whose communication graph is a
 * parameter, for the placement study. Each round every rank posts all its
 * receives and sends, then waits.
 *   pairs          every rank sends --small-bytes to every other rank and
 *                  --large-bytes to one partner half the job away (the
 *                  study's toy: block placement splits every pair)
 *   stencil4d      4D periodic nearest neighbour, like lattice QCD
 *   random-sparse  --degree seeded random destinations per rank
 * --rank-map FILE applies a placement computed elsewhere: world rank w plays
 * application rank map[w] (MPI_Comm_split keyed by the map), so a placement
 * needs no launcher rankfile. */
#include "commscope.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PAIRS, STENCIL4D, RANDOM_SPARSE };
static const char *PATTERNS = "pairs|stencil4d|random-sparse";

typedef struct {
    int pattern, np, degree;
    long small, large;
    uint64_t seed;
    int dims4[4];
} graph;

typedef struct { int peer; long bytes; } edge;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Messages rank r sends each round. out must hold np + 8 edges. Every rank
 * can compute every rank's list, so no graph is ever communicated. */
static int out_edges(const graph *g, int r, edge *out)
{
    int n = 0;
    if (g->pattern == PAIRS) {
        for (int q = 0; q < g->np; q++)
            if (q != r) out[n++] = (edge){q, g->small};
        if (g->np % 2 == 0 && g->np > 1) out[n++] = (edge){(r + g->np / 2) % g->np, g->large};
    } else if (g->pattern == STENCIL4D) {
        int c[4], rem = r;
        for (int d = 3; d >= 0; d--) {
            c[d] = rem % g->dims4[d];
            rem /= g->dims4[d];
        }
        for (int d = 0; d < 4; d++)
            for (int s = -1; s <= 1; s += 2) {
                int cc[4];
                memcpy(cc, c, sizeof cc);
                cc[d] = (c[d] + s + g->dims4[d]) % g->dims4[d];
                int q = 0;
                for (int e = 0; e < 4; e++) q = q * g->dims4[e] + cc[e];
                if (q != r) out[n++] = (edge){q, g->large};
            }
    } else {
        uint64_t s = g->seed * 0x100000001B3ULL + (uint64_t)r;
        int want = g->degree < g->np - 1 ? g->degree : g->np - 1;
        while (n < want) {
            int q = (int)(splitmix(&s) % (uint64_t)g->np), dup = q == r;
            for (int e = 0; e < n; e++) dup |= out[e].peer == q;
            if (!dup) out[n++] = (edge){q, g->large >> (splitmix(&s) % 4)};
        }
    }
    return n;
}

/* Messages rank r receives each round, in the order its peers send them. */
static int in_edges(const graph *g, int r, edge *in, edge *scratch)
{
    if (g->pattern != RANDOM_SPARSE) return out_edges(g, r, in); /* symmetric */
    int n = 0;
    for (int q = 0; q < g->np; q++) {
        int m = out_edges(g, q, scratch);
        for (int e = 0; e < m; e++)
            if (scratch[e].peer == r) in[n++] = (edge){q, scratch[e].bytes};
    }
    return n;
}

/* Payload byte k of the occ-th message from src to dst. */
static unsigned char payload(int src, int dst, int occ, long k)
{
    uint32_t h = (uint32_t)src * 2654435761u ^ (uint32_t)dst * 40503u ^ (uint32_t)occ * 97u;
    return (unsigned char)(h + (uint32_t)k * 31u + (uint32_t)(k >> 8));
}

static int occurrence(const edge *list, int upto, int peer)
{
    int occ = 0;
    for (int e = 0; e < upto; e++) occ += list[e].peer == peer;
    return occ;
}

/* Reads a permutation of 0..np-1, one world rank per entry. Every rank reads
 * it and reaches the same verdict, so errors need no communication. */
static void read_rank_map(const char *path, int np, int *map)
{
    FILE *f = fopen(path, "r");
    if (!f) cs_fail("--rank-map %s: cannot open: %s", path, strerror(errno));
    char *seen = calloc(np, 1);
    int n = 0;
    char tok[64];
    while (fscanf(f, " %63s", tok) == 1) {
        if (tok[0] == '#') {
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n') {}
            continue;
        }
        char *end;
        errno = 0;
        long v = strtol(tok, &end, 10);
        if (errno || *end) cs_fail("--rank-map %s: entry %d, '%s', is not an integer", path, n, tok);
        if (n >= np) cs_fail("--rank-map %s: more than %d entries for %d ranks", path, np, np);
        if (v < 0 || v >= np) cs_fail("--rank-map %s: entry %d is %ld, outside 0..%d", path, n, v, np - 1);
        if (seen[v]) cs_fail("--rank-map %s: rank %ld appears twice; the map must be a permutation", path, v);
        seen[v] = 1;
        map[n++] = (int)v;
    }
    fclose(f);
    free(seen);
    if (n != np) cs_fail("--rank-map %s: %d entries for %d ranks", path, n, np);
}

enum { O_ITERS, O_PATTERN, O_SMALL, O_LARGE, O_DEGREE, O_SEED, O_MAP, NOPT };

int main(int argc, char **argv)
{
    cs_opt o[NOPT] = {
        [O_ITERS] = {"--iters", CS_INT, "20", NULL, "communication rounds", 1},
        [O_PATTERN] = {"--pattern", CS_CHOICE, "pairs", PATTERNS, "communication graph", 0},
        [O_SMALL] = {"--small-bytes", CS_INT, "1024", NULL, "bytes of the all-to-all messages (pairs)", 0},
        [O_LARGE] = {"--large-bytes", CS_INT, "1048576", NULL,
                     "bytes of the partner (pairs), face (stencil4d) or largest (random-sparse) message", 1},
        [O_DEGREE] = {"--degree", CS_INT, "4", NULL, "destinations per rank (random-sparse)", 1},
        [O_SEED] = {"--seed", CS_INT, "1", NULL, "random-sparse graph seed", 0},
        [O_MAP] = {"--rank-map", CS_STR, NULL, NULL, "file of application ranks, one per world rank", 0},
    };
    cs_init(&argc, &argv, "commgraph");
    CS_BEGIN("setup");
    cs_parse(argc, argv, o, NOPT, "Synthetic communication graph for process-placement studies.");
    int np = cs_size(), wrank = cs_rank(), iters = (int)o[O_ITERS].ival;
    if (o[O_LARGE].ival > (1L << 30)) cs_fail("--large-bytes %ld: above the 1 GiB message limit", o[O_LARGE].ival);
    if (o[O_SMALL].ival > (1L << 30)) cs_fail("--small-bytes %ld: above the 1 GiB message limit", o[O_SMALL].ival);

    graph g = {cs_choice(&o[O_PATTERN]), np, (int)o[O_DEGREE].ival, o[O_SMALL].ival, o[O_LARGE].ival,
               (uint64_t)o[O_SEED].ival, {0, 0, 0, 0}};
    MPI_Dims_create(np, 4, g.dims4);

    int *map = malloc(np * sizeof(int));
    for (int r = 0; r < np; r++) map[r] = r;
    if (o[O_MAP].set) read_rank_map(o[O_MAP].sval, np, map);
    MPI_Comm app;
    MPI_Comm_split(MPI_COMM_WORLD, 0, map[wrank], &app);
    int me;
    MPI_Comm_rank(app, &me);

    edge *out = malloc((np + 8) * sizeof(edge)), *in = malloc((np + 8) * sizeof(edge)),
         *scratch = malloc((np + 8) * sizeof(edge));
    int nout = out_edges(&g, me, out), nin = in_edges(&g, me, in, scratch);
    unsigned char **sbuf = malloc((nout + 1) * sizeof(*sbuf)), **rbuf = malloc((nin + 1) * sizeof(*rbuf));
    long sent = 0, recvd = 0;
    for (int e = 0; e < nout; e++) {
        sbuf[e] = malloc(out[e].bytes ? out[e].bytes : 1);
        int occ = occurrence(out, e, out[e].peer);
        for (long k = 0; k < out[e].bytes; k++) sbuf[e][k] = payload(me, out[e].peer, occ, k);
        sent += out[e].bytes;
    }
    for (int e = 0; e < nin; e++) {
        rbuf[e] = malloc(in[e].bytes ? in[e].bytes : 1);
        recvd += in[e].bytes;
    }
    MPI_Request *req = malloc((nout + nin + 1) * sizeof(MPI_Request));

    cs_header("commgraph", o, NOPT);
    cs_param("dims4", "%d,%d,%d,%d", g.dims4[0], g.dims4[1], g.dims4[2], g.dims4[3]);
    cs_meta_str("variant", o[O_PATTERN].sval);
    cs_meta_str("decomposition", o[O_MAP].set ? "rank-map" : "identity");
    cs_meta_long("iterations", iters);
    cs_meta_long("large_bytes", g.large);
    cs_meta_long("small_bytes", g.small);
    CS_END("setup");

    long bad = 0;
    double t_comm = 0;
    MPI_Barrier(app);
    double t0 = cs_loop_begin();
    for (int it = 0; it < iters; it++) {
        CS_BEGIN("timestep");
        for (int e = 0; e < nin; e++) memset(rbuf[e], 0, in[e].bytes);
        double tc = MPI_Wtime();
        CS_BEGIN("exchange");
        CS_COMM_BEGIN("commgraph");
        int k = 0;
        for (int e = 0; e < nin; e++)
            MPI_Irecv(rbuf[e], (int)in[e].bytes, MPI_BYTE, in[e].peer, 0, app, &req[k++]);
        for (int e = 0; e < nout; e++)
            MPI_Isend(sbuf[e], (int)out[e].bytes, MPI_BYTE, out[e].peer, 0, app, &req[k++]);
        MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
        CS_COMM_END("commgraph");
        CS_END("exchange");
        t_comm += MPI_Wtime() - tc;
        CS_BEGIN("check");
        for (int e = 0; e < nin; e++) {
            int occ = occurrence(in, e, in[e].peer);
            for (long b = 0; b < in[e].bytes; b++) bad += rbuf[e][b] != payload(in[e].peer, me, occ, b);
        }
        CS_END("check");
        CS_END("timestep");
    }
    double wall = cs_loop_end(t0), total;
    MPI_Allreduce(&wall, &total, 1, MPI_DOUBLE, MPI_MAX, app);

    /* Per-rank report, indexed by application rank, plus the split of the
     * traffic between and within hosts under this placement. */
    char host[MPI_MAX_PROCESSOR_NAME] = {0};
    int hl;
    MPI_Get_processor_name(host, &hl);
    char *hosts = NULL;
    double mine[4] = {t_comm, (double)sent * iters, (double)recvd * iters, (double)nout * iters}, *all = NULL;
    int *worlds = NULL;
    int root = map[0]; /* application rank of world rank 0 */
    if (me == root) {
        hosts = malloc((size_t)np * MPI_MAX_PROCESSOR_NAME);
        all = malloc(np * sizeof(mine));
        worlds = malloc(np * sizeof(int));
    }
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, root, app);
    MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, root, app);
    MPI_Gather(&wrank, 1, MPI_INT, worlds, 1, MPI_INT, root, app);
    long long inter = 0, intra = 0, expect_total = 0;
    if (me == root) {
        for (int r = 0; r < np; r++) {
            int m = out_edges(&g, r, scratch);
            for (int e = 0; e < m; e++) {
                int same = strcmp(hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME,
                                  hosts + (size_t)scratch[e].peer * MPI_MAX_PROCESSOR_NAME) == 0;
                if (same) intra += scratch[e].bytes;
                else inter += scratch[e].bytes;
                expect_total += scratch[e].bytes;
            }
        }
    }
    long long recvd_total = 0, rl = recvd, bad_total = 0, bl = bad;
    MPI_Allreduce(&rl, &recvd_total, 1, MPI_LONG_LONG, MPI_SUM, app);
    MPI_Allreduce(&bl, &bad_total, 1, MPI_LONG_LONG, MPI_SUM, app);

    cs_fom("total_time", total, "s");
    cs_fom("time_per_iter", total / iters, "s");
    cs_fom_avg_max(app, "comm_time", t_comm, "s");
    cs_fom_avg_max(app, "bytes_sent_per_iter", (double)sent, "B");
    if (me == root) {
        cs_fom("internode_bytes_per_iter", (double)inter, "B");
        cs_fom("intranode_bytes_per_iter", (double)intra, "B");
        for (int r = 0; r < np; r++)
            printf("RANK %d world=%d host=%s comm_time=%.9g bytes_sent=%.0f bytes_recv=%.0f msgs_sent=%.0f\n", r,
                   worlds[r], hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME, all[4 * r], all[4 * r + 1],
                   all[4 * r + 2], all[4 * r + 3]);
        /* Every rank's received bytes must add up to what the graph says. */
        cs_verify("traffic", recvd_total == expect_total, "%lld", expect_total * iters);
        fflush(stdout);
    }
    cs_verify("payload", bad_total == 0, "%lld", bad_total);

    for (int e = 0; e < nout; e++) free(sbuf[e]);
    for (int e = 0; e < nin; e++) free(rbuf[e]);
    free(sbuf); free(rbuf); free(req); free(out); free(in); free(scratch); free(map);
    free(hosts); free(all); free(worlds);
    MPI_Comm_free(&app);
    cs_finalize();
    return 0;
}
