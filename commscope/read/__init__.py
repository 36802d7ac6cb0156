"""Stage 1, profile -> records: readers of Caliper profiles (profiles), workload output (contract), Ramble
workspaces (ramble) and ReFrame reports (reframe) into one record shape (records), with the measurement
model's numbers per window (windows). Nothing here touches the store."""
