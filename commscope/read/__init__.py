"""Stage 1, profile -> records, as a pipeline whose stages run one after the other, each handing its product to the
next: the inputs planned and their bytes read safely (files); parsed per format, into plain data (workload_output;
profiles, one run from any layout, with caliper_text and caliper_json; ramble; reframe); assembled into one record
shape (records, with the measurement model's numbers per window in windows, per-rank data in rank_stats and versions
apart from identity in identity); checked for what the store can hold (storable). pipeline runs one run's files
through them; inputs reads a list of inputs as one campaign, with a pool of reader processes. Nothing here touches
the store."""
