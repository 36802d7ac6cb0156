/* Shared pieces of the commscope workloads: argument parsing, timing, the
 * output contract (header, FOM, VERIFY, RANK lines; see workloads/README.md)
 * and Caliper/Adiak annotations that compile to nothing without Caliper. */
#ifndef COMMSCOPE_H
#define COMMSCOPE_H

#include <mpi.h>
#include <stdint.h>

#define COMMSCOPE_VERSION "0.1.0"

/* ---- annotations ------------------------------------------------------ */
extern int cs_annotations_off;
#ifdef COMMSCOPE_HAVE_CALIPER
#include <caliper/cali.h>
/* cs_annotations_off silences regions while a workload recomputes its serial
 * reference, so verification never shows up as application time. The braces
 * matter: Caliper 2.3's CALI_MARK_BEGIN expands to two statements. */
#define CS_BEGIN(name) do { if (!cs_annotations_off) { CALI_MARK_BEGIN(name); } } while (0)
#define CS_END(name) do { if (!cs_annotations_off) { CALI_MARK_END(name); } } while (0)
/* comm.stats attributes traffic to regions marked this way. */
#define CS_COMM_BEGIN(name) do { if (!cs_annotations_off) { CALI_MARK_COMM_REGION_BEGIN(name); } } while (0)
#define CS_COMM_END(name) do { if (!cs_annotations_off) { CALI_MARK_COMM_REGION_END(name); } } while (0)
#else
#define CS_BEGIN(name) ((void)(name))
#define CS_END(name) ((void)(name))
#define CS_COMM_BEGIN(name) ((void)(name))
#define CS_COMM_END(name) ((void)(name))
#endif

/* Adiak metadata; no-ops without Caliper. */
void cs_meta_str(const char *name, const char *value);
void cs_meta_long(const char *name, long value);

/* ---- options ------------------------------------------------------------ */
typedef enum { CS_INT, CS_INTS, CS_CHOICE, CS_FLAG, CS_STR } cs_kind;

typedef struct {
    const char *name;    /* "--iters" */
    cs_kind kind;
    const char *def;     /* default, as it would be typed; NULL = unset */
    const char *choices; /* CS_CHOICE: "a|b|c"; CS_INTS: "2" or "3" components */
    const char *help;
    long min;            /* CS_INT, CS_INTS: smallest accepted value */
    /* parsed value */
    int set;             /* given on the command line */
    long ival;           /* CS_INT, CS_FLAG */
    long ints[3];        /* CS_INTS */
    const char *sval;    /* CS_CHOICE, CS_STR, and the text of any option */
} cs_opt;

/* MPI_Init plus rank bookkeeping; begins the "main" region. */
void cs_init(int *argc, char ***argv, const char *prog);
/* Ends "main", flushes Adiak, MPI_Finalize. */
void cs_finalize(void);

/* Parses argv into opts. --help prints the options on rank 0 and exits 0.
 * Errors go through cs_fail. Needs no communication: every rank parses the
 * same argv and reaches the same verdict. */
void cs_parse(int argc, char **argv, cs_opt *opts, int nopts, const char *summary);
/* Position of a CS_CHOICE option's value in its choices list. */
int cs_choice(const cs_opt *o);
/* Bad input: rank 0 prints "<prog>: error: <msg>", every rank exits with 2.
 * Call it only where every rank reaches the same verdict. */
void cs_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

int cs_rank(void);
int cs_size(void);
/* $COMMSCOPE_INTERCONNECT (an interconnect catalog name), or NULL if unset. */
const char *cs_interconnect(void);

/* ---- output contract ---------------------------------------------------- */
/* COMMSCOPE, MPI_LIBRARY, MPI_VERSION, RANKS and one PARAM line per option. */
void cs_header(const char *workload, const cs_opt *opts, int nopts);
void cs_param(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cs_fom(const char *name, double value, const char *unit);
/* Reduces a per-rank value over comm; prints <name>_avg and <name>_max. */
void cs_fom_avg_max(MPI_Comm comm, const char *name, double local, const char *unit);
/* The timed loop: cs_loop_begin() returns MPI_Wtime() and cs_loop_end(start)
 * the seconds since; between them the library also counts how long this rank
 * waited for a core (FOM runqueue_wait_share_max, printed by cs_finalize). */
double cs_loop_begin(void);
double cs_loop_end(double start);
/* status: 1 PASS, 0 FAIL, -1 SKIP (no reference could be computed). */
void cs_verify(const char *name, int status, const char *value_fmt, ...) __attribute__((format(printf, 3, 4)));

/* Gathers every rank's block of doubles onto root, in rank order, for a
 * serial comparison. Returns the blocks end to end on root, with each rank's
 * offset in *displs (caller frees both); NULL elsewhere. */
double *cs_gather_blocks(MPI_Comm comm, int root, const double *mine, long count, int **displs);

/* Order-independent exact checksum of doubles: sum of round(x * 2^40) as
 * unsigned 64-bit integers, so any decomposition gives the same bits. */
static inline uint64_t cs_fixed(double x) { return (uint64_t)(int64_t)__builtin_llround(x * 1099511627776.0); }

#endif
