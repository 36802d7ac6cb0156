#!/usr/bin/env bash
# Installs everything the tests need on a Debian 12 machine that reaches only
# the package registries: the main job's install (ci/install.sh) with the test
# dependencies in .venv, the tests' system packages, and the live toolchain
# (Ramble, Caliper + Adiak, IMB, Spack), with the npm and Go checks installing beside it. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# The main job's install (ci/install.sh), plus what the tests use: slurm-wlm + munge, a single-node Slurm cluster;
# chromium, the report tests; GlusterFS, ci/parallel_fs.py's volume for the I/O study (about 10 s); for
# tests/test_pipelines.py, rsync (gitlab-ci-local needs it) and the shell linter actionlint runs.
COMMSCOPE_EXTRA_DEBS="slurm-wlm munge chromium glusterfs-server glusterfs-client rsync shellcheck" \
  bash ci/install.sh test

# The live toolchain (Ramble, Caliper + Adiak, IMB, Spack) from a source mirror of versions.yaml's archives, as an
# offline site has it: ../shared/mirror when it is there, or COMMSCOPE_SOURCE_MIRROR. tests/conftest.py reads the
# variables it writes; without a mirror the file is removed and the live tests skip, saying why.
# The npm and Go checks install meanwhile: they wait mostly on downloads, the toolchain on the compiler.
# tests/test_grafana_data.py: the pinned @grafana/data and @grafana/flamegraph (npm ci); tests/test_pipelines.py:
# gitlab-ci-local (npm ci) and actionlint (go install).
logs=$(mktemp -d)
t0=$SECONDS
bash dashboards/check/install.sh > "$logs/grafana" 2>&1 & grafana=$!
bash ci/pipelines/runner/install.sh > "$logs/runner" 2>&1 & runner=$!
mirror="${COMMSCOPE_SOURCE_MIRROR:-../shared/mirror}"
if [ -d "$mirror" ]; then
  echo "[setup] toolchain from $mirror (cached under \$COMMSCOPE_HOME/cache)"
  .venv/bin/python ci/toolchain.py "$mirror" > .venv/commscope-toolchain.env
  echo "[setup] toolchain ready in $((SECONDS - t0)) s"
else
  rm -f .venv/commscope-toolchain.env
fi
for job in grafana runner; do
  if ! wait "${!job}"; then cat "$logs/$job" >&2; echo "[setup] the $job checks' install failed (above)" >&2; exit 1; fi
  cat "$logs/$job"
done
rm -rf "$logs"
echo "[setup] done in $((SECONDS - t0)) s after the install"
