/* pingpong: the latency signature of a transport, for the interconnect
 * catalog (ci/interconnects.py). World ranks 0 and 1 bounce one --bytes
 * message back and forth; any further ranks only wait. The loop runs as
 * --batches batches of --iters round trips, and the FOM `latency` is the
 * best batch's mean half round trip: on a shared 2-core machine a busy
 * neighbour inflates some batches, but rarely all of them, and shared
 * memory (well under 2 us) must stay distinguishable from TCP (5-15 us). */
#include "commscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Byte k of the message rank 0 sends in round trip `it`. */
static unsigned char pattern(long it, long k) { return (unsigned char)(it * 131 + k * 7 + 1); }

enum { O_ITERS, O_BATCHES, O_WARMUP, O_BYTES, NOPT };

int main(int argc, char **argv)
{
    cs_opt o[NOPT] = {
        [O_ITERS] = {"--iters", CS_INT, "2000", NULL, "round trips per batch", 1},
        [O_BATCHES] = {"--batches", CS_INT, "5", NULL, "timed batches; the best one is the latency", 1},
        [O_WARMUP] = {"--warmup", CS_INT, "200", NULL, "untimed round trips first (connection setup)", 0},
        [O_BYTES] = {"--bytes", CS_INT, "8", NULL, "message size", 0},
    };
    cs_init(&argc, &argv, "pingpong");
    CS_BEGIN("setup");
    cs_parse(argc, argv, o, NOPT, "Two-rank ping-pong: half round-trip latency of one message size.");
    int np = cs_size(), me = cs_rank();
    long iters = o[O_ITERS].ival, batches = o[O_BATCHES].ival, warmup = o[O_WARMUP].ival, bytes = o[O_BYTES].ival;
    if (np < 2) cs_fail("pingpong needs at least 2 ranks, got %d", np);
    if (bytes > (1L << 30)) cs_fail("--bytes %ld: above the 1 GiB message limit", bytes);
    if (batches > 1000) cs_fail("--batches %ld: above the maximum 1000", batches);

    unsigned char *buf = calloc(bytes ? bytes : 1, 1);
    double *batch_lat = calloc(batches, sizeof(double));
    int peer = me == 0 ? 1 : 0, active = me < 2;

    cs_header("pingpong", o, NOPT);
    cs_meta_str("variant", "pingpong");
    cs_meta_long("iterations", iters * batches);
    cs_meta_long("message_bytes", bytes);
    CS_END("setup");

    /* Rank 0 stamps byte 0 with the round trip number and checks that the
     * echo carries it back: a cheap proof the message really went round.
     * The whole payload is checked once, on the last round trip. */
    long bad = 0, total_trips = warmup + iters * batches;
    double t_comm = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = cs_loop_begin(), tb = t0;
    for (long it = 0; active && it < total_trips; it++) {
        int last = it == total_trips - 1;
        if (it == warmup) t0 = tb = MPI_Wtime();
        CS_COMM_BEGIN("pingpong");
        if (me == 0) {
            if (last) for (long k = 0; k < bytes; k++) buf[k] = pattern(it, k);
            else if (bytes) buf[0] = pattern(it, 0);
            MPI_Send(buf, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (last) for (long k = 0; k < bytes; k++) bad += buf[k] != pattern(it, k);
            else if (bytes) bad += buf[0] != pattern(it, 0);
        } else {
            MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        }
        CS_COMM_END("pingpong");
        long done = it + 1 - warmup;
        if (it >= warmup && done % iters == 0) {
            double now = MPI_Wtime();
            batch_lat[done / iters - 1] = (now - tb) / (2.0 * iters);
            tb = now;
        }
    }
    double wall = cs_loop_end(t0), total;
    t_comm = active ? wall : 0;
    MPI_Allreduce(&wall, &total, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long long bad_total = 0, bl = bad;
    MPI_Allreduce(&bl, &bad_total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    double best = batch_lat[0];
    for (long b = 1; b < batches; b++)
        if (batch_lat[b] < best) best = batch_lat[b];
    qsort(batch_lat, batches, sizeof(double), cmp_double);
    double median = batch_lat[batches / 2];

    cs_fom("total_time", total, "s");
    cs_fom("time_per_iter", total / (double)(iters * batches), "s");
    cs_fom_avg_max(MPI_COMM_WORLD, "comm_time", t_comm, "s");
    cs_fom("latency", best * 1e6, "us");
    cs_fom("latency_median", median * 1e6, "us");
    cs_verify("payload", bad_total == 0, "%lld", bad_total);

    free(buf);
    free(batch_lat);
    cs_finalize();
    return 0;
}
