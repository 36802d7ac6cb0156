"""Stage 1, profile -> records: readers of Caliper profiles (profiles), workload output (contract), Ramble
workspaces (ramble) and ReFrame reports (reframe) into one record shape (records), with the measurement
model's numbers per window (windows); what a list of inputs is as one campaign, read by a pool of reader
processes (inputs). Nothing here touches the store."""
