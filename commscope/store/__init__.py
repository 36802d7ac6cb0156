"""Stage 2, records -> store: the PostgreSQL store (db: embedded server, connections, roles, migrations/; files:
dump, restore and safe output files), the streamed writer of records (ingest), the retention of per-rank detail
(retention), and the query functions later stages call (queries/). Later stages read the views the migrations create
or call those functions, never the tables."""
