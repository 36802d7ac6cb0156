#!/usr/bin/env bash
# Makes the regression gate's history (tests/test_regressions.py): repeated real runs of halo3d blocking at
# 2 ranks (4 for the per-rank series), one file set per run and night, from a Caliper-enabled build of the workloads (Debian Open MPI 4.1;
# see tests/data/README.md for the build). It runs the workloads; it builds nothing. Usage:
#   bash tests/gate-history/make_history.sh BUILD_DIR
# Series (equal application, parameters and environment, docs/measurement-model.md):
#   24-mpi      --n 24,24,24, CALI_CONFIG runtime-profile,profile.mpi,region.count   nights 1-5
#   48-mpi      --n 48,48,48, the same Caliper configuration                           nights 2-5
#   24-nompi    --n 24,24,24, runtime-profile,region.count (no MPI wrapping)          nights 1-3, 5
#   24-per-rank --n 24,24,24 at 4 ranks, ...,use.mpi=false, one file per rank         nights 1-5
# Night 5 of 24-mpi and night 4 of 24-per-rank ran beside two busy-looping `yes` processes (one per core), so
# their loop is slower: a real regression for the gate to find, and a slow run for the test to make partial.
set -euo pipefail
bdir=$(cd "${1:?usage: make_history.sh BUILD_DIR}" && pwd)
out=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
H=(--iters 100 --pml-width 3 --variant blocking)
MPI=runtime-profile,profile.mpi,region.count
run() {  # name config loaded n [ranks]
  local name=$1 cfg=$2 loaded=$3 n=$4 ranks=${5:-2} hogs=() over=()
  [ "$ranks" -gt 2 ] && over=(--oversubscribe)
  if [ "$loaded" = loaded ]; then yes >/dev/null & hogs+=($!); yes >/dev/null & hogs+=($!); fi
  echo "[history] $name: CALI_CONFIG=$cfg ($loaded) mpirun -n $ranks ${over[*]} halo3d --n $n,$n,$n ${H[*]}"
  (cd "$out" && CALI_CONFIG="$cfg" mpirun.openmpi -n "$ranks" "${over[@]}" "$bdir/halo3d" --n "$n,$n,$n" "${H[@]}" > "$name.out")
  [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}"
  grep -q "VERIFY .* FAIL" "$out/$name.out" && { echo "VERIFY failed in $name" >&2; exit 1; }
  return 0
}
for night in 1 2 3 4 5; do
  load=idle; [ $night = 5 ] && load=loaded
  run "halo3d-blocking-24-n2.mpi.night$night" "$MPI,output=halo3d-blocking-24-n2.mpi.night$night.cali" $load 24
  [ $night = 1 ] || run "halo3d-blocking-48-n2.mpi.night$night" "$MPI,output=halo3d-blocking-48-n2.mpi.night$night.cali" idle 48
  [ $night = 4 ] || run "halo3d-blocking-24-n2.nompi.night$night" \
    "runtime-profile,region.count,output=halo3d-blocking-24-n2.nompi.night$night.cali" idle 24
  d="halo3d-blocking-24-n4.per-rank.night$night"
  mkdir -p "$out/$d"
  load=idle; [ $night = 4 ] && load=loaded
  run "$d/halo3d" "$MPI,use.mpi=false,output=$d/rank-%mpi.rank%.cali" $load 24 4
done
