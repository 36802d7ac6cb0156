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
apt_progress() {   # reads apt's status lines (APT::Status-Fd): says each quarter of the download and of the
  local phase="" since=$SECONDS told=0 kind pct q spent   # install, with the time left at the pace so far
  while IFS=: read -r kind _ pct _; do
    case $kind in dlstatus) [ "$phase" = download ] || { phase=download; since=$SECONDS; told=0; } ;;
                  pmstatus) [ "$phase" = install ] || { phase=install; since=$SECONDS; told=0; } ;;
                  *) continue ;; esac
    pct=${pct%%.*}; q=$((pct / 25))
    if ((q > told && q < 4)); then
      told=$q; spent=$((SECONDS - since))
      echo "[install] apt $phase $((25 * q)) % in ${spent} s; about $((spent * (100 - pct) / (pct > 0 ? pct : 1))) s left"
    fi
  done
}
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "[install] apt-get install ${#missing[@]} packages (${missing[*]}): 1-3 min"
  $sudo apt-get update -qq
  echo "[install] apt-get update done in $((SECONDS - t0)) s"
  { DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends -o APT::Status-Fd=3 \
      "${missing[@]}" 3>&1 >/dev/null; } | apt_progress
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
# Both byte-compile what they install (uv: --compile-bytecode, pip by default), and the package's own modules are
# compiled below, so no later Python process compiles numpy, scipy, pandas or commscope again: where
# PYTHONDONTWRITEBYTECODE is set, nothing else would keep the compiled modules, and every process would pay again.
echo "[install] uv pip install -e .[$extras] into .venv: 1-3 min when nothing is cached, seconds after"
# uv says what it resolved, downloaded and installed, each with its time
if ! { .venv/bin/pip install -q --disable-pip-version-check uv==0.9.5 &&
       .venv/bin/uv pip install --color never --compile-bytecode --python .venv/bin/python -e ".[$extras]" 2>&1 |
         { grep -E "^(Resolved|Prepared|Installed|Uninstalled|Audited) " || true; } | sed 's/^/[install] uv: /'; }; then
  echo "[install] uv could not install them; pip install -e .[$extras] instead"
  .venv/bin/pip install -q --disable-pip-version-check -e ".[$extras]"
fi
.venv/bin/python -m compileall -q -j 0 commscope > /dev/null
echo "[install] .venv ready in $((SECONDS - t1)) s; install took $((SECONDS - t0)) s"
