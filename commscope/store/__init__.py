"""Stage 2, records -> store: the PostgreSQL store (db: embedded server, connections, roles, migrations/),
the streamed writer (ingest), the retention of per-rank detail (retention), and the query functions later stages
call (queries/). Later stages read the views the migrations create or call those functions, never the tables."""
