#!/usr/bin/env bash
# Installs everything the tests need on a Debian 12 machine that reaches only
# the package registries: the main job's install (ci/install.sh) with the test
# dependencies in .venv, the tests' system packages, and the live toolchain
# (Ramble, Caliper + Adiak, IMB, Spack) and the npm and Go checks. Safe to run again.
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
mirror="${COMMSCOPE_SOURCE_MIRROR:-../shared/mirror}"
if [ -d "$mirror" ]; then
  echo "[setup] toolchain from $mirror (cached under \$COMMSCOPE_HOME/cache)"
  .venv/bin/python ci/toolchain.py "$mirror" > .venv/commscope-toolchain.env
else
  rm -f .venv/commscope-toolchain.env
fi
bash dashboards/check/install.sh  # tests/test_grafana_data.py: the pinned @grafana/data and @grafana/flamegraph (npm ci)
bash ci/pipelines/runner/install.sh  # tests/test_pipelines.py: gitlab-ci-local (npm ci) and actionlint (go install)
echo "[setup] done"
