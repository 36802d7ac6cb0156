-- Caliper's comm.stats counters per communication region (CALI_MARK_COMM_REGION),
-- combined over ranks: message and byte counts, the largest message, peers,
-- collectives, and the Irecv gap (time from posting a receive to its data: the
-- seismic study's measure of how early receives are posted).

CREATE TABLE comm_stats (
    run_id        bigint NOT NULL REFERENCES runs ON DELETE CASCADE,
    node_id       bigint NOT NULL REFERENCES nodes,
    sends         double precision,   -- summed over ranks
    recvs         double precision,
    bytes_sent    double precision,
    bytes_recv    double precision,
    max_message   double precision,   -- largest single send, bytes
    dest_ranks    double precision,   -- most destinations of one rank
    src_ranks     double precision,
    collectives   double precision,
    irecv_gap_min double precision,   -- seconds
    irecv_gap_avg double precision,   -- mean over ranks of each rank's average
    irecv_gap_max double precision,
    PRIMARY KEY (run_id, node_id)
);
