"""The main job around the pipeline: `commscope setup` (checkouts, per-stack builds, the local site) and
`commscope run` (a Ramble workspace from a study, its experiments, then ingest and report: ingest.py, which
`commscope ingest` shares). Importing this package, and its stack and interconnect catalogs, needs only the
standard library: CI runs them with the system Python before any venv exists."""
