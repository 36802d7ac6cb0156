#!/usr/bin/env bash
# The main job on one machine: install everything, put Ramble (and Spack) in
# place, build the workloads once per MPI stack (with Caliper where CMake finds
# it), start the embedded store, run the smoke study through Ramble, ingest it
# and write its report.
#
# Ramble and Spack are in no package registry. Point RAMBLE_ROOT (and
# SPACK_ROOT) at checkouts of the versions in versions.yaml; on a connected
# machine `commscope setup` clones them itself. With Spack, the smoke study is
# built by Ramble's spack package manager (offline: COMMSCOPE_SPACK_MIRROR names
# the Caliper/Adiak source mirror, packages/README.md). Without Ramble this says so
# and runs the same workloads through the verification matrix (ci/suite.py)
# instead, so a fresh offline machine still runs every workload on every stack.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
if commscope setup ${COMMSCOPE_SPACK_MIRROR:+--spack-source-mirror "$COMMSCOPE_SPACK_MIRROR"}; then
  if [ -z "${COMMSCOPE_DB_URL:-}${PGHOST:-}${PGDATABASE:-}" ]; then commscope db start; fi
  commscope run smoke
else
  echo "[main] commscope run needs Ramble, which is missing (see above): running the verification matrix instead" >&2
  python3 ci/suite.py
fi
