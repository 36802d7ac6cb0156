#!/usr/bin/env bash
# Installs everything commscope needs on a Debian 12 machine that reaches only
# the package registries: the Debian MPI stacks and PostgreSQL server binaries
# (no cluster is created; commscope and the tests start their own), the PyPI
# MPI wheels (one venv each) and the commscope package with its test
# dependencies in .venv. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

# slurm-wlm + munge: a single-node Slurm cluster for the tests; chromium: the report tests;
# patchelf and gfortran: Spack (Caliper's recipe needs a Fortran compiler).
debs=(build-essential cmake libopenmpi-dev openmpi-bin libmpich-dev mpich python3-venv postgresql
      slurm-wlm munge chromium patchelf gfortran)
debs+=(glusterfs-server glusterfs-client)  # ci/parallel_fs.py: the I/O study's GlusterFS volume (about 10 s)
debs+=(rsync shellcheck)  # tests/test_pipelines.py: gitlab-ci-local needs rsync; actionlint runs shellcheck
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "[setup] apt-get install ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's postgresql package may start a system cluster; commscope never uses it.

python3 -m commscope.workflow.stacks install
python3 -m commscope.workflow.stacks list

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install -q --disable-pip-version-check -e ".[test]"

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
