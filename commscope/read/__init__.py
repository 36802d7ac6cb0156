"""Stage 1, profile -> records: what the inputs are and their bytes read safely (files), Caliper profiles
(profiles: one run from any layout, read by caliper_text and caliper_json, with per-rank data in rank_stats),
workload output (workload_output), Ramble workspaces (ramble) and ReFrame reports (reframe) into one record shape
(records, versions apart from identity in identity, what the store can hold checked by storable), with the
measurement model's numbers per window (windows); what a list of inputs is as one campaign, read by a pool of reader
processes (inputs). Nothing here touches the store."""
