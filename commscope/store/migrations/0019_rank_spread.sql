-- What is kept of a run's ranks when not every rank is (issue 19): per window, the distribution over
-- ranks of time, MPI time and useful time; per call-path node, of inclusive time. Each is its count,
-- min/mean/max, percentiles (numpy's linear interpolation), a histogram of equal-width bins from min to
-- max, and the slowest ranks by name, largest first. Per-rank rows (rank_metrics) are kept only up to
-- `commscope ingest --rank-rows` ranks (default 1024); these rows are kept for every run.
CREATE TABLE rank_spread (
    run_id      bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    "window"    text,                                   -- run | focus; NULL for a node's row
    node_id     bigint REFERENCES nodes,                -- NULL for a window's row
    quantity    text NOT NULL,                          -- time | mpi | useful (windows), incl_time (nodes)
    ranks       integer NOT NULL,
    min         double precision NOT NULL,
    mean        double precision NOT NULL,
    max         double precision NOT NULL,
    p50         double precision NOT NULL,
    p90         double precision NOT NULL,
    p99         double precision NOT NULL,
    hist_lo     double precision NOT NULL,
    hist_hi     double precision NOT NULL,
    hist_counts integer[] NOT NULL,
    top_ranks   integer[] NOT NULL,
    top_values  double precision[] NOT NULL,
    CHECK (("window" IS NULL) <> (node_id IS NULL))
);
CREATE INDEX rank_spread_run ON rank_spread (run_id);
