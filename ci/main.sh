#!/usr/bin/env bash
# The main job on one machine: install everything, put Ramble in place, build Caliper + Adiak and the workloads
# once per MPI stack, start the embedded store, run the smoke study through Ramble with MPI profiling on every
# stack that has a Caliper, ingest it and write its report.
#
# Ramble, Caliper and Adiak are in no package registry. On a connected machine `commscope setup` clones the
# versions in versions.yaml; offline it takes them from a source mirror of versions.yaml's archives:
# COMMSCOPE_SOURCE_MIRROR, else ../shared/mirror when it is there. RAMBLE_ROOT (and SPACK_ROOT) still name
# checkouts of one's own. With Spack, the smoke study is built by Ramble's spack package manager (offline:
# COMMSCOPE_SPACK_MIRROR names the Caliper/Adiak Spack mirror, packages/README.md). Without Ramble this says so
# and runs the same workloads through the verification matrix (ci/suite.py) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
mirror="${COMMSCOPE_SOURCE_MIRROR:-}"
if [ -z "$mirror" ] && [ -d ../shared/mirror ]; then mirror=../shared/mirror; fi
if commscope setup ${mirror:+--source-mirror "$mirror"} \
    ${COMMSCOPE_SPACK_MIRROR:+--spack-source-mirror "$COMMSCOPE_SPACK_MIRROR"}; then
  if [ -z "${COMMSCOPE_DB_URL:-}${PGHOST:-}${PGDATABASE:-}" ]; then commscope db start; fi
  commscope run smoke
else
  echo "[main] commscope run needs Ramble, which is missing (see above): running the verification matrix instead" >&2
  python3 ci/suite.py
fi
