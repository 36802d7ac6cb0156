"""Stage 2, records -> store: the PostgreSQL store (db: embedded server, connections, roles, migrations/),
the streamed writer (ingest) and the retention of per-rank detail (retention). Later stages read the views
the migrations create, never the tables."""
