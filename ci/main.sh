#!/usr/bin/env bash
# The main job on one machine: install what it needs (ci/install.sh), put Ramble in place, build Caliper + Adiak
# and the workloads for the first MPI stack, start the embedded store, run the smoke study on that stack with MPI
# profiling and write its report (the first report); then the same for every other installed stack, and a
# report over all of them ($COMMSCOPE_HOME/report.html). Each step prints its time, and the job its total.
#
# Ramble, Caliper and Adiak are in no package registry. On a connected machine `commscope setup` clones the
# versions in versions.yaml; offline it takes them from a source mirror of versions.yaml's archives:
# COMMSCOPE_SOURCE_MIRROR, else ../shared/mirror when it is there. RAMBLE_ROOT (and SPACK_ROOT) still name
# checkouts of one's own. With Spack, the smoke study is built by Ramble's spack package manager (offline:
# COMMSCOPE_SPACK_MIRROR names the Caliper/Adiak Spack mirror, packages/README.md). Without Ramble this says so
# and runs the same workloads through the verification matrix (ci/suite.py) instead.
# COMMSCOPE_FIRST_STACK names the first stack (default debian-openmpi4).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() {   # step NAME COMMAND...: runs it and prints its time and the job's time so far
  local t0=$SECONDS
  echo "[main] $1"
  shift
  "$@"
  echo "[main] ... $((SECONDS - t0)) s (the job so far: $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s)"
}
step "install (apt, the PyPI MPI wheels, .venv)" bash ci/install.sh
export PATH="$PWD/.venv/bin:$PATH"
mirror="${COMMSCOPE_SOURCE_MIRROR:-}"
if [ -z "$mirror" ] && [ -d ../shared/mirror ]; then mirror=../shared/mirror; fi
setup_args=(${mirror:+--source-mirror "$mirror"} ${COMMSCOPE_SPACK_MIRROR:+--spack-source-mirror "$COMMSCOPE_SPACK_MIRROR"})
first="${COMMSCOPE_FIRST_STACK:-debian-openmpi4}"
# the first stack alone, for a first report sooner; its one Caliper serves linked and preloaded profiling
if step "setup for $first: Ramble, Caliper + Adiak, the workloads" \
    commscope setup --stacks "$first" "${setup_args[@]}"
then
  if [ -z "${COMMSCOPE_DB_URL:-}${PGHOST:-}${PGDATABASE:-}" ]; then step "start the store" commscope db start; fi
  step "smoke study on $first (the first report)" commscope run smoke --stacks "$first"
  others=$(python3 -m commscope.workflow.stacks list | awk -v f="$first" '$2 == "ok" && $1 != f {print $1}' | paste -sd,)
  if [ -n "$others" ]; then
    step "setup for $others" commscope setup "${setup_args[@]}"
    step "smoke study on $others" commscope run smoke --stacks "$others"
    report="$(python3 -c 'from commscope.store import db; print(db.home())')/report.html"
    step "the report over every stack: $report" commscope report -o "$report"
  fi
else
  echo "[main] commscope run needs Ramble, which is missing (see above): running the verification matrix instead" >&2
  step "verification matrix" python3 ci/suite.py
fi
echo "[main] done in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
