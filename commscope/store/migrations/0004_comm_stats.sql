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

CREATE VIEW v_comm_stats AS
SELECT c.run_id, n.path AS region, c.sends, c.recvs, c.bytes_sent, c.bytes_recv, c.max_message, c.dest_ranks,
       c.src_ranks, c.collectives, c.irecv_gap_min, c.irecv_gap_avg, c.irecv_gap_max
FROM comm_stats c JOIN nodes n ON n.id = c.node_id;
