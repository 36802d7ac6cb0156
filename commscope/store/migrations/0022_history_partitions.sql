-- History partitioned by month (issue 19; collectors/README.md, "History partitions and retention").
--
-- The tables that grow with every run and hold its detail are partitioned by the month (UTC) of their run's
-- started_at, with PostgreSQL's own declarative partitioning: the call-tree rows (node_metrics), the MPI routine
-- rows (mpi_metrics), the distributions over ranks (rank_spread), and the per-rank detail (rank_metrics: a row per
-- rank; comm_matrix: a row per pair of ranks). Each gets a started_at column, equal to its run's: the foreign key
-- (run_id, started_at) -> runs (id, started_at) says so, and ON UPDATE CASCADE moves a run's rows to their new
-- month's partition when its time changes. A month's per-rank partitions can then be dropped whole
-- (`commscope db retain`) while runs, run_windows, rank_spread, the FOMs and the daily rollups stay.
--
-- runs itself is not partitioned: its content_hash must stay unique across all of history (re-ingesting is a
-- no-op), and a partitioned table can only enforce uniqueness within each partition. It is one row per run.
-- foms, run_windows and comm_stats are small per run and summaries; they are not partitioned either.
--
-- Partitions are made per month as runs arrive: a row trigger on runs (before insert, or an update of started_at)
-- makes the month's partitions of every table here when run_months does not list the month. Creating a partition
-- locks its parent table against readers until the transaction ends, so `commscope db retain` also makes the
-- coming months ahead of the ingests that will need them.

-- The tables partitioned by their run's month; per_rank: what `commscope db retain --per-rank-older-than` drops.
CREATE TABLE history_tables (
    table_name    text PRIMARY KEY,
    per_rank      boolean NOT NULL
);
INSERT INTO history_tables VALUES ('node_metrics', false), ('mpi_metrics', false), ('rank_spread', false),
                                  ('rank_metrics', true), ('comm_matrix', true);

-- The months whose partitions exist (the month's start, UTC), and when retention dropped their per-rank ones.
CREATE TABLE run_months (
    month              timestamptz PRIMARY KEY,
    per_rank_dropped_at timestamptz
);

-- Every history table's partition for the month of M (UTC), made where missing. Security definer: a writer role
-- (commscope db grant-writer) may ingest a run of a new month but may not create tables itself.
CREATE FUNCTION run_month_partitions(m timestamptz) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp SET timezone TO 'UTC' AS $$
DECLARE
    lo timestamptz := date_trunc('month', m);
    hi timestamptz := date_trunc('month', m) + interval '1 month';
    t text;
BEGIN
    FOR t IN SELECT table_name FROM history_tables ORDER BY table_name LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                       t || to_char(lo, '"_y"YYYY"m"MM'), t, lo, hi);
    END LOOP;
    INSERT INTO run_months (month) VALUES (lo) ON CONFLICT (month) DO UPDATE SET per_rank_dropped_at = NULL;
END $$;
-- Only the owner and the roles that may write (db grant-writer grants every function) make partitions.
REVOKE EXECUTE ON FUNCTION run_month_partitions(timestamptz) FROM PUBLIC;

CREATE FUNCTION runs_month_partitions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM run_months WHERE month = date_trunc('month', NEW.started_at, 'UTC') AND per_rank_dropped_at IS NULL;
    IF NOT FOUND THEN
        PERFORM run_month_partitions(NEW.started_at);
    END IF;
    RETURN NEW;
END $$;

-- The key the history tables' foreign keys point at.
ALTER TABLE runs ADD CONSTRAINT runs_id_started_at UNIQUE (id, started_at);

-- Each history table is rebuilt partitioned, with every row: the views over it are dropped and made again from
-- their own definitions, its keys get started_at, its other indexes, foreign keys and triggers are made as they were.
DO $$
DECLARE
    t text;
    v record;
    con record;
    view_sql text[] := '{}';
    view_names text[] := '{}';
    later text[] := '{}';
    q text;
    n_old bigint;
    n_new bigint;
    m timestamptz;
BEGIN
    FOR v IN
        WITH RECURSIVE dep(oid, lvl) AS (
            SELECT to_regclass(h.table_name)::oid, 0 FROM history_tables h
            UNION
            SELECT r.ev_class, d.lvl + 1
            FROM dep d JOIN pg_depend x ON x.refobjid = d.oid AND x.classid = 'pg_rewrite'::regclass
            JOIN pg_rewrite r ON r.oid = x.objid AND r.ev_class <> d.oid)
        SELECT d.oid, max(d.lvl) AS lvl FROM dep d JOIN pg_class pc ON pc.oid = d.oid AND pc.relkind = 'v'
        GROUP BY d.oid ORDER BY 2, 1
    LOOP
        SELECT format('CREATE VIEW %s%s AS %s', v.oid::regclass,
                      CASE WHEN pc.reloptions IS NOT NULL THEN ' WITH (' || array_to_string(pc.reloptions, ', ') || ')' END,
                      pg_get_viewdef(v.oid))
               || coalesce(format('; COMMENT ON VIEW %s IS %L', v.oid::regclass, obj_description(v.oid, 'pg_class')), '')
        INTO q FROM pg_class pc WHERE pc.oid = v.oid;
        view_sql := view_sql || q;
        view_names := view_names || v.oid::regclass::text;
    END LOOP;
    FOR i IN REVERSE coalesce(array_length(view_names, 1), 0) .. 1 LOOP
        EXECUTE format('DROP VIEW %s', view_names[i]);
    END LOOP;

    FOR t IN SELECT table_name FROM history_tables ORDER BY table_name LOOP
        -- keys and unique indexes gain started_at (a partitioned table's unique keys include its partition key)
        FOR con IN SELECT conname, contype, confrelid, pg_get_constraintdef(oid) AS def FROM pg_constraint
                   WHERE conrelid = t::regclass AND contype IN ('p', 'u', 'f') ORDER BY conname LOOP
            later := later || format('ALTER TABLE %I ADD CONSTRAINT %I %s', t, con.conname,
                CASE WHEN con.contype IN ('p', 'u') THEN regexp_replace(con.def, '\)$', ', started_at)')
                     WHEN con.confrelid = 'runs'::regclass
                     THEN 'FOREIGN KEY (run_id, started_at) REFERENCES runs (id, started_at) ON DELETE CASCADE ON UPDATE CASCADE'
                     ELSE con.def END);
        END LOOP;
        FOR q IN SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
                 WHERE i.indrelid = t::regclass
                   AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid) LOOP
            IF q LIKE 'CREATE UNIQUE%' THEN
                RAISE EXCEPTION '%: unique index % is not a constraint; 0022 does not know how to partition it', t, q;
            END IF;
            later := later || q;
        END LOOP;
        FOR q IN SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = t::regclass AND NOT tgisinternal LOOP
            later := later || q;
        END LOOP;
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t, t || '_unpartitioned');
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE '
                       'INCLUDING COMMENTS, started_at timestamptz NOT NULL) PARTITION BY RANGE (started_at)',
                       t, t || '_unpartitioned');
    END LOOP;

    -- the months of every stored run, and this month and the next
    FOR m IN SELECT DISTINCT date_trunc('month', started_at, 'UTC') FROM runs
             UNION SELECT date_trunc('month', now(), 'UTC') UNION SELECT date_trunc('month', now(), 'UTC') + interval '32 days'
    LOOP
        PERFORM run_month_partitions(m);
    END LOOP;

    FOR t IN SELECT table_name FROM history_tables ORDER BY table_name LOOP
        EXECUTE format('SELECT count(*) FROM %I', t || '_unpartitioned') INTO n_old;
        EXECUTE format('INSERT INTO %I SELECT o.*, r.started_at FROM %I o JOIN runs r ON r.id = o.run_id',
                       t, t || '_unpartitioned');
        GET DIAGNOSTICS n_new = ROW_COUNT;
        IF n_new <> n_old THEN
            RAISE EXCEPTION '%: % rows, % of them carried over; nothing was changed', t, n_old, n_new;
        END IF;
        EXECUTE format('DROP TABLE %I', t || '_unpartitioned');
    END LOOP;
    FOREACH q IN ARRAY later LOOP
        EXECUTE q;
    END LOOP;
    FOREACH q IN ARRAY view_sql LOOP
        EXECUTE q;
    END LOOP;
END $$;

CREATE TRIGGER runs_month_partitions BEFORE INSERT OR UPDATE OF started_at ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_month_partitions();

ANALYZE node_metrics, mpi_metrics, rank_spread, rank_metrics, comm_matrix;
