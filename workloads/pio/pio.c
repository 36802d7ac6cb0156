/* pio: parallel I/O of a global 3D array of doubles in one shared file, for
 * the groundwater study, whose two-phase approach was 25x faster on reads
 * and 3x on writes at scale than every rank writing its own pieces.
 *
 *   independent  each rank writes (reads) the contiguous file runs of its own
 *                block with MPI_File_write_at (read_at)
 *   collective   a subarray file view per rank and MPI_File_write_all/read_all
 *   two-phase    MPI_Comm_split into groups of --group-size consecutive ranks;
 *                the group root gathers the group's blocks, merges their rows
 *                into file order and writes the merged runs alone; on read it
 *                reads the runs and scatters the blocks back
 *
 * The file is written, synced and closed, then opened again and read back;
 * every element is compared with the value its global index prescribes. The
 * file is removed unless --keep. Any I/O error (unwritable directory, disk
 * full) prints the failing call and the MPI error, removes the partial file
 * and exits 2 on every rank. */
#define _XOPEN_SOURCE 700   /* realpath */
#include "commscope.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { INDEPENDENT, COLLECTIVE, TWO_PHASE };
static const char *METHODS = "independent|collective|two-phase";

static long block_len(long n, int p, int c) { return n / p + (c < n % p); }
static long block_off(long n, int p, int c) { return c * (n / p) + (c < n % p ? c : n % p); }

/* The value stored at global index g: exact in a double, different almost
 * everywhere, so a misplaced row cannot pass. */
static inline double value_at(long g) { return (double)(g % 1000003) + 0.25 * (double)(g % 7); }

typedef struct {
    long n[3], off[3]; /* a rank's block of the global array */
} box;

typedef struct {
    long offset, len; /* a run of the file, in elements */
    double *mem;      /* where its data lives in memory */
} run;

typedef struct {
    long global[3];
    int dims[3], method, me, np;
    MPI_Comm world, group;
    int group_rank, group_size;
    const char *dir;
    char path[4096];
    box mine;
    double *data;         /* my block, x slowest, z fastest */
    double t_io, t_comm;  /* file calls; gather/scatter */
    long io_calls;
} pio;

static box box_of(const pio *p, int rank)
{
    int c[3];
    box b;
    /* Row-major rank order, as MPI_Cart_create without reordering uses. */
    c[2] = rank % p->dims[2];
    c[1] = (rank / p->dims[2]) % p->dims[1];
    c[0] = rank / (p->dims[2] * p->dims[1]);
    for (int a = 0; a < 3; a++) {
        b.n[a] = block_len(p->global[a], p->dims[a], c[a]);
        b.off[a] = block_off(p->global[a], p->dims[a], c[a]);
    }
    return b;
}

static long box_points(const box *b) { return b->n[0] * b->n[1] * b->n[2]; }

/* Appends the z-rows of box b (data at mem) to runs, merging runs that are
 * adjacent both in the file and in memory. */
static int add_rows(const pio *p, const box *b, double *mem, run *runs, int nr)
{
    for (long i = 0; i < b->n[0]; i++)
        for (long j = 0; j < b->n[1]; j++) {
            long off = ((b->off[0] + i) * p->global[1] + (b->off[1] + j)) * p->global[2] + b->off[2];
            double *m = mem + (i * b->n[1] + j) * b->n[2];
            run *last = nr ? &runs[nr - 1] : NULL;
            if (last && last->offset + last->len == off && last->mem + last->len == m) last->len += b->n[2];
            else runs[nr++] = (run){off, b->n[2], m};
        }
    return nr;
}

static int by_offset(const void *a, const void *b)
{
    long x = ((const run *)a)->offset, y = ((const run *)b)->offset;
    return x < y ? -1 : x > y;
}

/* ---- errors ------------------------------------------------------------------ */

static char io_error[4096 + 1024];

/* Records the first failing call on this rank; returns 1 if it failed. */
static int failed(int rc, const char *what, const pio *p)
{
    if (rc == MPI_SUCCESS) return 0;
    if (!io_error[0]) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        snprintf(io_error, sizeof io_error, "--dir %s: %s failed: %s", p->dir, what, msg);
    }
    return 1;
}

/* Every rank learns whether any rank failed; if one did, it says what,
 * the partial file is removed and every rank exits 2. */
static void agree_or_exit(pio *p, MPI_File *fh)
{
    int bad = io_error[0] != 0, any = 0, first = -1, cand = bad ? p->me : p->np;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, p->world);
    if (!any) return;
    MPI_Allreduce(&cand, &first, 1, MPI_INT, MPI_MIN, p->world);
    if (p->me == first) {
        fprintf(stderr, "pio: error: %s (rank %d, file %s, removed)\n", io_error, p->me, p->path);
        fflush(stderr);
    }
    if (*fh != MPI_FILE_NULL) MPI_File_close(fh);
    MPI_Barrier(p->world);
    if (p->me == 0) MPI_File_delete(p->path, MPI_INFO_NULL); /* no partial file is left behind */
    MPI_Finalize();
    exit(2);
}

/* ---- the three methods -------------------------------------------------------- */

static void open_file(pio *p, MPI_File *fh, int write)
{
    double t0 = MPI_Wtime();
    CS_BEGIN("file_open");
    int amode = write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
    *fh = MPI_FILE_NULL;
    if (failed(MPI_File_open(p->world, p->path, amode, MPI_INFO_NULL, fh), write ? "MPI_File_open for writing" : "MPI_File_open for reading", p))
        *fh = MPI_FILE_NULL;
    CS_END("file_open");
    p->t_io += MPI_Wtime() - t0;
    agree_or_exit(p, fh);
}

static void close_file(pio *p, MPI_File *fh, int write)
{
    double t0 = MPI_Wtime();
    CS_BEGIN("file_close");
    if (write) {
        MPI_Offset size = (MPI_Offset)(p->global[0] * p->global[1] * p->global[2] * sizeof(double));
        /* A longer file kept from an earlier run is cut to this one's size. */
        failed(MPI_File_set_size(*fh, size), "MPI_File_set_size", p);
        failed(MPI_File_sync(*fh), "MPI_File_sync", p);
    }
    agree_or_exit(p, fh);
    failed(MPI_File_close(fh), "MPI_File_close", p);
    CS_END("file_close");
    p->t_io += MPI_Wtime() - t0;
    agree_or_exit(p, fh);
}

/* Writes or reads runs with one independent call each. */
static void runs_io(pio *p, MPI_File fh, run *runs, int nr, int write)
{
    for (int k = 0; k < nr && !io_error[0]; k++) {
        MPI_Status st;
        int got = 0;
        MPI_Offset at = (MPI_Offset)(runs[k].offset * sizeof(double));
        int rc = write ? MPI_File_write_at(fh, at, runs[k].mem, (int)runs[k].len, MPI_DOUBLE, &st)
                       : MPI_File_read_at(fh, at, runs[k].mem, (int)runs[k].len, MPI_DOUBLE, &st);
        if (failed(rc, write ? "MPI_File_write_at" : "MPI_File_read_at", p)) break;
        MPI_Get_count(&st, MPI_DOUBLE, &got);
        if (got != runs[k].len) {
            snprintf(io_error, sizeof io_error, "--dir %s: %s moved %d of %ld doubles at offset %lld (disk full?)",
                     p->dir, write ? "MPI_File_write_at" : "MPI_File_read_at", got, runs[k].len, (long long)at);
        }
        p->io_calls++;
    }
}

static void independent(pio *p, MPI_File fh, int write)
{
    run *runs = malloc((p->mine.n[0] * p->mine.n[1] + 1) * sizeof(run));
    int nr = add_rows(p, &p->mine, p->data, runs, 0);
    double t0 = MPI_Wtime();
    runs_io(p, fh, runs, nr, write);
    p->t_io += MPI_Wtime() - t0;
    free(runs);
}

static void collective(pio *p, MPI_File fh, int write)
{
    int sizes[3], sub[3], starts[3];
    for (int a = 0; a < 3; a++) {
        sizes[a] = (int)p->global[a];
        sub[a] = (int)p->mine.n[a];
        starts[a] = (int)p->mine.off[a];
    }
    MPI_Datatype view;
    MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &view);
    MPI_Type_commit(&view);
    double t0 = MPI_Wtime();
    if (!failed(MPI_File_set_view(fh, 0, MPI_DOUBLE, view, "native", MPI_INFO_NULL), "MPI_File_set_view", p)) {
        MPI_Status st;
        int got = 0, want = (int)box_points(&p->mine);
        int rc = write ? MPI_File_write_all(fh, p->data, want, MPI_DOUBLE, &st)
                       : MPI_File_read_all(fh, p->data, want, MPI_DOUBLE, &st);
        if (!failed(rc, write ? "MPI_File_write_all" : "MPI_File_read_all", p)) {
            MPI_Get_count(&st, MPI_DOUBLE, &got);
            if (got != want)
                snprintf(io_error, sizeof io_error, "--dir %s: %s moved %d of %d doubles (disk full?)", p->dir,
                         write ? "MPI_File_write_all" : "MPI_File_read_all", got, want);
        }
        p->io_calls++;
    }
    p->t_io += MPI_Wtime() - t0;
    MPI_Type_free(&view);
}

/* The group root holds the whole group's blocks, one after another, and
 * turns their rows into runs in file order, merged where they touch. */
static void two_phase(pio *p, MPI_File fh, int write)
{
    int *counts = NULL, *displs = NULL, mine = (int)box_points(&p->mine);
    double *all = NULL;
    run *runs = NULL;
    int nr = 0;
    if (p->group_rank == 0) {
        counts = malloc(p->group_size * sizeof(int));
        displs = malloc(p->group_size * sizeof(int));
        long total = 0, rows = 0;
        for (int g = 0; g < p->group_size; g++) {
            box b = box_of(p, p->me + g);
            counts[g] = (int)box_points(&b);
            displs[g] = (int)total;
            total += counts[g];
            rows += b.n[0] * b.n[1];
        }
        all = malloc((total ? total : 1) * sizeof(double));
        runs = malloc((rows + 1) * sizeof(run));
        if (!all || !runs) {
            fprintf(stderr, "pio: out of memory for a group of %d blocks\n", p->group_size);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* One list of runs per member, then merged in file order. */
        for (int g = 0; g < p->group_size; g++) {
            box b = box_of(p, p->me + g);
            nr = add_rows(p, &b, all + displs[g], runs, nr);
        }
        qsort(runs, nr, sizeof(run), by_offset);
    }
    double t0 = MPI_Wtime();
    if (write) {
        CS_BEGIN("gather");
        CS_COMM_BEGIN("two_phase");
        MPI_Gatherv(p->data, mine, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, p->group);
        CS_COMM_END("two_phase");
        CS_END("gather");
    }
    p->t_comm += MPI_Wtime() - t0;
    if (p->group_rank == 0) {
        /* Runs of neighbouring members that touch in the file are staged
         * into one buffer so each becomes a single call. */
        long total = displs[p->group_size - 1] + counts[p->group_size - 1];
        double *stage = malloc((total ? total : 1) * sizeof(double));
        run *merged = malloc((nr + 1) * sizeof(run));
        int nm = 0;
        long used = 0;
        for (int k = 0; k < nr; k++) {
            if (nm && merged[nm - 1].offset + merged[nm - 1].len == runs[k].offset) merged[nm - 1].len += runs[k].len;
            else merged[nm++] = (run){runs[k].offset, runs[k].len, stage + used};
            if (write) memcpy(stage + used, runs[k].mem, runs[k].len * sizeof(double));
            used += runs[k].len;
        }
        double t1 = MPI_Wtime();
        runs_io(p, fh, merged, nm, write);
        p->t_io += MPI_Wtime() - t1;
        if (!write)
            for (int k = 0, u = 0; k < nr; u += (int)runs[k].len, k++)
                memcpy(runs[k].mem, stage + u, runs[k].len * sizeof(double));
        free(stage);
        free(merged);
    }
    if (!write) {
        /* A read error on the root must not scatter garbage: agree first. */
        MPI_File none = fh;
        agree_or_exit(p, &none);
        t0 = MPI_Wtime();
        CS_BEGIN("scatter");
        CS_COMM_BEGIN("two_phase");
        MPI_Scatterv(all, counts, displs, MPI_DOUBLE, p->data, mine, MPI_DOUBLE, 0, p->group);
        CS_COMM_END("two_phase");
        CS_END("scatter");
        p->t_comm += MPI_Wtime() - t0;
    }
    free(all);
    free(runs);
    free(counts);
    free(displs);
}

static void transfer(pio *p, int write)
{
    MPI_File fh;
    open_file(p, &fh, write);
    if (p->method == INDEPENDENT) independent(p, fh, write);
    else if (p->method == COLLECTIVE) collective(p, fh, write);
    else two_phase(p, fh, write);
    agree_or_exit(p, &fh);
    close_file(p, &fh, write);
}

/* ---- main ------------------------------------------------------------------- */

static void fill(pio *p, int truth)
{
    const box *b = &p->mine;
    long m = 0;
    for (long i = 0; i < b->n[0]; i++)
        for (long j = 0; j < b->n[1]; j++)
            for (long k = 0; k < b->n[2]; k++, m++)
                p->data[m] = truth ? value_at(((b->off[0] + i) * p->global[1] + b->off[1] + j) * p->global[2] + b->off[2] + k)
                                   : -1.0;
}

static long wrong_elements(const pio *p, uint64_t *sum)
{
    const box *b = &p->mine;
    long m = 0, bad = 0;
    *sum = 0;
    for (long i = 0; i < b->n[0]; i++)
        for (long j = 0; j < b->n[1]; j++)
            for (long k = 0; k < b->n[2]; k++, m++) {
                long g = ((b->off[0] + i) * p->global[1] + b->off[1] + j) * p->global[2] + b->off[2] + k;
                bad += p->data[m] != value_at(g);
                *sum += cs_fixed(p->data[m]);
            }
    return bad;
}

enum { O_N, O_DIMS, O_METHOD, O_GROUP, O_DIR, O_KEEP, O_ITERS, NOPT };

/* The type of the file system that holds DIR, as the kernel names it in /proc/self/mounts (ext4, xfs, overlay,
 * fuse.glusterfs, lustre...): the last-mounted of the longest mount points above DIR's real path, "unknown" when
 * it cannot be read. Printed as a parameter: the file system is part of what an I/O experiment measures, so runs
 * on two of them are two series. */
static void fs_type(const char *dir, char *out, size_t n)
{
    char real[PATH_MAX], dev[1024], mnt[PATH_MAX], type[256];
    size_t best = 0;
    snprintf(out, n, "unknown");
    if (!realpath(dir, real)) return;
    FILE *f = fopen("/proc/self/mounts", "r");
    if (!f) return;
    while (fscanf(f, "%1023s %4095s %255s%*[^\n]", dev, mnt, type) == 3) {
        /* a mount point's space, tab, newline and backslash are octal escapes (\040) */
        char *r = mnt, *w = mnt;
        while (*r) {
            if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
                *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
                r += 4;
            } else {
                *w++ = *r++;
            }
        }
        *w = '\0';
        size_t len = strlen(mnt);
        int above = strncmp(real, mnt, len) == 0 && (len == 1 || real[len] == '/' || real[len] == '\0');
        if (above && len >= best) {
            best = len;
            snprintf(out, n, "%s", type);
        }
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    cs_opt o[NOPT] = {
        [O_N] = {"--n", CS_INTS, "64,64,64", "3", "global array of doubles", 1},
        [O_DIMS] = {"--dims", CS_INTS, "0,0,0", "3", "process grid, 0 = let MPI_Dims_create choose", 0},
        [O_METHOD] = {"--method", CS_CHOICE, "collective", METHODS, "how ranks reach the shared file", 0},
        [O_GROUP] = {"--group-size", CS_INT, "2", NULL, "ranks per two-phase group (the root does the I/O)", 1},
        [O_DIR] = {"--dir", CS_STR, ".", NULL, "directory for the shared file", 0},
        [O_KEEP] = {"--keep", CS_FLAG, NULL, NULL, "keep the file instead of removing it", 0},
        [O_ITERS] = {"--iters", CS_INT, "3", NULL, "write + read-back rounds", 1},
    };
    cs_init(&argc, &argv, "pio");
    CS_BEGIN("setup");
    cs_parse(argc, argv, o, NOPT, "Parallel write and read-back of a global 3D array in one shared file (groundwater study).");

    pio p;
    memset(&p, 0, sizeof p);
    p.world = MPI_COMM_WORLD;
    p.me = cs_rank();
    p.np = cs_size();
    p.method = cs_choice(&o[O_METHOD]);
    /* Groups of G consecutive ranks; the last may be smaller, and a G
     * above the rank count makes one group of everyone. */
    int g = (int)o[O_GROUP].ival;
    if (g > p.np) g = p.np;
    long dprod = 1;
    for (int a = 0; a < 3; a++) {
        p.dims[a] = (int)o[O_DIMS].ints[a];
        dprod *= p.dims[a] ? p.dims[a] : 1;
        p.global[a] = o[O_N].ints[a];
    }
    if (p.np % dprod != 0) cs_fail("--dims %s does not divide %d ranks", o[O_DIMS].sval, p.np);
    if (MPI_Dims_create(p.np, 3, p.dims) != MPI_SUCCESS || (long)p.dims[0] * p.dims[1] * p.dims[2] != p.np)
        cs_fail("--dims %s does not match %d ranks", o[O_DIMS].sval, p.np);
    for (int a = 0; a < 3; a++)
        if (p.global[a] < p.dims[a])
            cs_fail("--n %s: too many ranks for the array: %d ranks in %c leave a block empty", o[O_N].sval, p.dims[a], "xyz"[a]);
    if ((double)p.global[0] * p.global[1] * p.global[2] > 2147483647.0)
        cs_fail("--n %s: more than 2^31-1 elements", o[O_N].sval);
    /* The directory is checked before any communication; every rank sees
     * the same path. Root ignores permission bits, so access() is asked
     * too, and a path under a regular file fails here for everyone. */
    const char *dir = p.dir = o[O_DIR].sval;
    struct stat st;
    if (stat(dir, &st) != 0)
        cs_fail("--dir %s: %s", dir, errno == ENOTDIR ? "a component of the path is not a directory" : strerror(errno));
    if (!S_ISDIR(st.st_mode)) cs_fail("--dir %s: not a directory", dir);
    if (access(dir, W_OK | X_OK) != 0) cs_fail("--dir %s: not writable: %s", dir, strerror(errno));
    int plen = snprintf(p.path, sizeof p.path, "%s/commscope-pio-%s.dat", dir, o[O_METHOD].sval);
    if (plen >= (int)sizeof p.path) cs_fail("--dir %s: path too long", dir);

    p.mine = box_of(&p, p.me);
    p.data = malloc((box_points(&p.mine) ? box_points(&p.mine) : 1) * sizeof(double));
    if (!p.data) {
        fprintf(stderr, "pio: out of memory for a block of %ld doubles\n", box_points(&p.mine));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Groups of consecutive ranks; for the other methods each rank is its own. */
    int groups = p.method == TWO_PHASE ? g : 1;
    MPI_Comm_split(p.world, p.me / groups, p.me, &p.group);
    MPI_Comm_rank(p.group, &p.group_rank);
    MPI_Comm_size(p.group, &p.group_size);

    cs_header("pio", o, NOPT);
    cs_param("variant", "%s", o[O_METHOD].sval);
    cs_param("global", "%ld,%ld,%ld", p.global[0], p.global[1], p.global[2]);
    cs_param("process_grid", "%d,%d,%d", p.dims[0], p.dims[1], p.dims[2]);
    cs_param("file", "%s", p.path);
    if (p.me == 0) {
        char fs[256];
        fs_type(dir, fs, sizeof fs);
        cs_param("fs", "%s", fs);
    }
    cs_param("writers", "%d", p.method == TWO_PHASE ? (p.np + g - 1) / g : p.np);
    double bytes = (double)p.global[0] * p.global[1] * p.global[2] * sizeof(double);
    cs_param("file_bytes", "%.0f", bytes);
    char buf[96];
    snprintf(buf, sizeof buf, "%ld,%ld,%ld", p.global[0], p.global[1], p.global[2]);
    cs_meta_str("variant", o[O_METHOD].sval);
    cs_meta_str("decomposition", "cart3d");
    cs_meta_str("global_size", buf);
    snprintf(buf, sizeof buf, "%ld,%ld,%ld", p.mine.n[0], p.mine.n[1], p.mine.n[2]);
    cs_meta_str("local_size", buf);
    cs_meta_long("group_size", p.method == TWO_PHASE ? g : 1);
    cs_meta_long("iterations", o[O_ITERS].ival);
    CS_END("setup");

    long iters = o[O_ITERS].ival, bad = 0;
    double t_write = 0, t_read = 0;
    uint64_t sum = 0;
    MPI_Barrier(p.world);
    double start = cs_loop_begin();
    for (long it = 0; it < iters; it++) {
        CS_BEGIN("timestep");
        fill(&p, 1);
        MPI_Barrier(p.world);
        double t0 = MPI_Wtime();
        CS_BEGIN("write");
        transfer(&p, 1);
        CS_END("write");
        double t1 = MPI_Wtime();
        fill(&p, 0);
        MPI_Barrier(p.world);
        double t2 = MPI_Wtime();
        CS_BEGIN("read");
        transfer(&p, 0);
        CS_END("read");
        double t3 = MPI_Wtime();
        t_write += t1 - t0;
        t_read += t3 - t2;
        bad += wrong_elements(&p, &sum);
        CS_END("timestep");
    }
    double wall = cs_loop_end(start), total, tw, tr;
    MPI_Allreduce(&wall, &total, 1, MPI_DOUBLE, MPI_MAX, p.world);
    MPI_Allreduce(&t_write, &tw, 1, MPI_DOUBLE, MPI_MAX, p.world);
    MPI_Allreduce(&t_read, &tr, 1, MPI_DOUBLE, MPI_MAX, p.world);

    cs_fom("total_time", total, "s");
    cs_fom("time_per_iter", total / iters, "s");
    cs_fom("write_time", tw / iters, "s");
    cs_fom("read_time", tr / iters, "s");
    cs_fom("write_bandwidth", bytes * iters / tw / 1e6, "MB/s");
    cs_fom("read_bandwidth", bytes * iters / tr / 1e6, "MB/s");
    cs_fom_avg_max(p.world, "comm_time", p.t_comm, "s");
    cs_fom_avg_max(p.world, "io_time", p.t_io, "s");
    cs_fom_avg_max(p.world, "io_calls_per_iter", (double)p.io_calls / iters, "calls");

    CS_BEGIN("verify");
    long wrong = 0;
    uint64_t total_sum = 0;
    MPI_Allreduce(&bad, &wrong, 1, MPI_LONG, MPI_SUM, p.world);
    MPI_Allreduce(&sum, &total_sum, 1, MPI_UINT64_T, MPI_SUM, p.world);
    /* The checksum the global array must have, from its definition. */
    uint64_t want = 0;
    long points = p.global[0] * p.global[1] * p.global[2];
    for (long gi = 0; gi < points; gi++) want += cs_fixed(value_at(gi));
    long size = -1;
    if (p.me == 0 && stat(p.path, &st) == 0) size = (long)st.st_size;
    cs_verify("readback", wrong == 0, "%ld", wrong);
    cs_verify("checksum", wrong == 0 && total_sum == want, "%016llx", (unsigned long long)total_sum);
    if (p.me == 0) cs_verify("file_size", size == (long)bytes, "%ld", size);
    CS_END("verify");

    MPI_Barrier(p.world);
    if (!o[O_KEEP].ival && p.me == 0) MPI_File_delete(p.path, MPI_INFO_NULL);
    MPI_Comm_free(&p.group);
    free(p.data);
    cs_finalize();
    return 0;
}
