"""The store's query functions: every read and write of the base tables that a later stage needs, one module per
stage that asks (gate, advise, views, cli). Later stages call these, and read the v_* views, never the tables."""
