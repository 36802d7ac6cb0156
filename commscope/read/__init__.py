"""Stage 1, profile -> records, as a pipeline whose stages run one after the other, each handing its product to the
next: the inputs planned and their bytes read safely (files); parsed per format, into plain data (workload_output;
caliper, a run's Caliper records from any layout added per call path and rank, and profiles, the run's Profile made
of them; ramble; reframe); measured (measures: the measurement model's numbers per call path, rank and window);
assembled into one record shape with its identity and versions (records); checked for what the store can hold and
finished with what is given at ingest (storable). pipeline runs one run's files through them; inputs reads a list
of inputs as one campaign, with a pool of reader processes. Nothing here touches the store."""
