#!/usr/bin/env bash
# Regenerates the Caliper fixtures in tests/data from a Caliper-enabled build
# of the workloads (built with Debian Open MPI 4.1). It runs the workloads; it
# builds nothing. Usage:
#   bash tests/data/make_fixtures.sh BUILD_DIR [BUILD_DIR_CALIPER_2_12]
# The optional second build, against Caliper 2.12, adds the older
# hatchet-region-profile fixture. ONLY=part2 regenerates only the cgsolve and
# pio fixtures (workloads part 2).
# where BUILD_DIR came from
#   cmake -S workloads -B BUILD_DIR -DMPI_C_COMPILER=/usr/bin/mpicc.openmpi \
#         -DCOMMSCOPE_WITH_CALIPER=ON -DCMAKE_PREFIX_PATH="<caliper prefix>;<adiak prefix>"
# Each fixture's stdout (the FOM/VERIFY contract) is kept beside it as .out.
set -euo pipefail
bdir=$(cd "${1:?usage: make_fixtures.sh BUILD_DIR [BUILD_DIR_CALIPER_2_12]}" && pwd)
out=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
run() {  # name ranks config workload args...
  local name=$1 n=$2 cfg=$3; shift 3
  local over=(); [ "$n" -gt 2 ] && over=(--oversubscribe)
  echo "[fixtures] $name: CALI_CONFIG=$cfg mpirun -n $n ${over[*]} $*"
  (cd "$out" && CALI_CONFIG="$cfg" mpirun.openmpi -n "$n" "${over[@]}" "$bdir/$@" > "$name.out")
  grep -q "VERIFY .* FAIL" "$out/$name.out" && { echo "VERIFY failed in $name" >&2; exit 1; }
  return 0
}
# Rank-to-rank matrix: no built-in config gives one. The aggregate service
# keyed by sender and destination does, once MPI functions are wrapped at all
# (msg_tracing needs a blacklist or whitelist). One .cali per rank.
msgtrace() {  # name ranks workload args...
  local name=$1 n=$2; shift 2
  mkdir -p "$out/$name"
  echo "[fixtures] $name: message-tracing aggregate, $n ranks: $*"
  local over=(); [ "$n" -gt 2 ] && over=(--oversubscribe)
  (cd "$out" && env -u CALI_CONFIG CALI_SERVICES_ENABLE=adiak_import,aggregate,mpi,recorder CALI_MPI_MSG_TRACING=true \
     CALI_MPI_BLACKLIST=MPI_Wtime,MPI_Wtick,MPI_Comm_rank,MPI_Comm_size \
     CALI_AGGREGATE_KEY=mpi.rank,mpi.msg.dst,mpi.msg.src CALI_CHANNEL_CONFIG_CHECK=false \
     CALI_RECORDER_FILENAME="$name/rank-%mpi.rank%.cali" \
     mpirun.openmpi -n "$n" "${over[@]}" "$bdir/$@" > "$name/$1.out")
}
# Part 2 (cgsolve, pio). ONLY=part2 makes just these, leaving the others as committed.
part2() {
  run "cgsolve-direct-n4.mpi-profile" 4 \
    "runtime-profile,profile.mpi,region.count,output=cgsolve-direct-n4.mpi-profile.cali" \
    cgsolve --n 24,24,24 --allreduce direct
  run "cgsolve-direct-barriers-n4.mpi-profile" 4 \
    "runtime-profile,profile.mpi,region.count,output=cgsolve-direct-barriers-n4.mpi-profile.cali" \
    cgsolve --n 24,24,24 --allreduce direct --debug-barriers
  local scratch; scratch=$(mktemp -d)
  run "pio-two-phase-n4.mpi-profile" 4 \
    "runtime-profile,profile.mpi,region.count,output=pio-two-phase-n4.mpi-profile.cali" \
    pio --n 32,32,32 --method two-phase --group-size 2 --iters 2 --dir "$scratch"
  rmdir "$scratch"
  # The file path in the header names the temporary directory; keep it stable.
  sed -i "s|$scratch|SCRATCH|g" "$out/pio-two-phase-n4.mpi-profile.out"
}
# The placement advisor's 16-rank input (4 emulated nodes x 4 ranks,
# collectors/bench/placement_measured.py). ONLY=placement makes just it.
placement16() {
  msgtrace "commgraph-random-sparse-n16.msgtrace" 16 commgraph --pattern random-sparse --iters 3 --large-bytes 65536
}
# A rank-mapped message trace: commgraph's pairs pattern with world rank w playing application rank 3-w, so
# mpi.msg.dst (a rank of the split communicator) differs from the world rank. ONLY=rankmap makes just it.
rankmap() {
  msgtrace "commgraph-pairs-reverse-n4.msgtrace" 4 commgraph --pattern pairs --iters 3 --small-bytes 512 \
    --large-bytes 65536 --rank-map ../../ramble/studies/placement/maps/reverse-4.map
}
# Profiles with the `loop` region (the timed interval, commscope's focus window). ONLY=loop makes just these.
loop() {
  run "halo3d-blocking-loop-n2.mpi-profile" 2 \
    "runtime-profile,profile.mpi,region.count,output=halo3d-blocking-loop-n2.mpi-profile.cali" \
    halo3d --n 24,24,24 --iters 10 --pml-width 3 --variant blocking
  run "cgsolve-direct-loop-n2.spot" 2 "spot(output=cgsolve-direct-loop-n2.spot.cali),profile.mpi" \
    cgsolve --n 16,16,16 --allreduce direct
}
# Edge cases of the measurement model (docs/measurement-model.md). ONLY=edges makes just these.
# - no MPI wrapping: runtime-profile without profile.mpi, so MPI time is not measured (NULL, not 0);
# - nested MPI: pio's collective I/O through ROMIO, whose MPI_File_write_all calls MPI_Type_size_x and others
#   that Caliper's wrappers see inside it.
edges() {
  run "halo3d-blocking-n2.nompi-profile" 2 \
    "runtime-profile,region.count,output=halo3d-blocking-n2.nompi-profile.cali" \
    halo3d --n 24,24,24 --iters 10 --pml-width 3 --variant blocking
  local scratch; scratch=$(mktemp -d)
  OMPI_MCA_io=romio321 run "pio-collective-romio-n2.mpi-profile" 2 \
    "runtime-profile,profile.mpi,region.count,output=pio-collective-romio-n2.mpi-profile.cali" \
    pio --n 32,32,32 --method collective --iters 2 --dir "$scratch"
  rm -rf "$scratch"
  sed -i "s|$scratch|SCRATCH|g" "$out/pio-collective-romio-n2.mpi-profile.out"
}
# The advisors' fixtures (issue 14). ONLY=advisors makes just these.
# - three halo3d variants of one experiment at 2 ranks (one rank per core), recorded with one Caliper
#   configuration, so they are one environment and the overlap advisor compares each with blocking;
# - cgsolve with debug barriers recorded without region.count: the barrier advisor cannot count its calls.
advisors() {
  for v in blocking nonblocking overlap; do
    run "halo3d-$v-loop-n2.comm-stats" 2 \
      "runtime-profile,profile.mpi,region.count,comm.stats,output=halo3d-$v-loop-n2.comm-stats.cali" \
      halo3d --n 64,64,64 --iters 40 --pml-width 3 --variant "$v"
  done
  run "cgsolve-direct-barriers-uncounted-n2.mpi-profile" 2 \
    "runtime-profile,profile.mpi,output=cgsolve-direct-barriers-uncounted-n2.mpi-profile.cali" \
    cgsolve --n 16,16,16 --allreduce direct --debug-barriers
}
# A real `commscope run barriers` workspace (tests/data/ramble/barriers-openmpi4-counts), cut down as the other
# workspaces there. It needs RAMBLE_ROOT and a COMMSCOPE_HOME where `commscope setup --stacks debian-openmpi4
# --caliper-prefix debian-openmpi4=<caliper prefix>` ran. ONLY=barriers-workspace makes just it.
barriers_workspace() {
  local log ws dst="$out/ramble/barriers-openmpi4-counts"
  log=$("${COMMSCOPE:-commscope}" run barriers --stacks debian-openmpi4 --where '{n_ranks} == 2' --no-ingest)
  echo "$log"
  ws=$(echo "$log" | sed -n 's/^workspace: //p')
  rm -rf "$dst"; mkdir -p "$dst/configs"
  cp "$ws/results.latest.json" "$ws/hardware.yaml" "$ws/commscope-run.json" "$dst/"
  cp "$ws/configs/ramble.yaml" "$dst/configs/"
  (cd "$ws" && find experiments \( -name '*.out' -o -name '*.cali' -o -name exit-status -o -name execute_experiment \) \
     -exec cp --parents {} "$dst/" \;)
}
if [ "${ONLY:-}" = advisors ]; then advisors; exit 0; fi
if [ "${ONLY:-}" = barriers-workspace ]; then barriers_workspace; exit 0; fi
if [ "${ONLY:-}" = edges ]; then edges; exit 0; fi
if [ "${ONLY:-}" = part2 ]; then part2; exit 0; fi
if [ "${ONLY:-}" = loop ]; then loop; exit 0; fi
if [ "${ONLY:-}" = rankmap ]; then rankmap; exit 0; fi
if [ "${ONLY:-}" = placement ]; then placement16; exit 0; fi
H=(--n 24,24,24 --iters 10 --pml-width 3)
for n in 2 4; do
  run "halo3d-overlap-n$n.runtime-profile" "$n" \
    "runtime-profile,profile.mpi,region.count,mpi.message.count,mpi.message.size,output=halo3d-overlap-n$n.runtime-profile.cali" \
    halo3d "${H[@]}" --variant overlap
  mkdir -p "$out/halo3d-blocking-n$n.per-rank"
  run "halo3d-blocking-n$n.per-rank/halo3d" "$n" \
    "runtime-profile,profile.mpi,region.count,use.mpi=false,output=halo3d-blocking-n$n.per-rank/rank-%mpi.rank%.cali" \
    halo3d "${H[@]}" --variant blocking
  run "halo3d-nonblocking-n$n.comm-stats" "$n" \
    "runtime-profile,profile.mpi,comm.stats,output=halo3d-nonblocking-n$n.comm-stats.cali" \
    halo3d "${H[@]}" --variant nonblocking
  run "stencil2d-row-naive-n$n.spot" "$n" \
    "spot,profile.mpi,output=stencil2d-row-naive-n$n.spot.cali" \
    stencil2d --n 64,64 --iters 10 --decomp row-naive --send ssend
  run "stencil2d-cart-n$n.json-split" "$n" \
    "runtime-profile,profile.mpi,output.format=json-split,output=stencil2d-cart-n$n.json-split.json" \
    stencil2d --n 64,64 --iters 10 --decomp cart --send isend
  msgtrace "commgraph-random-sparse-n$n.msgtrace" "$n" commgraph --pattern random-sparse --iters 3 --large-bytes 65536
  msgtrace "commgraph-pairs-n$n.msgtrace" "$n" commgraph --pattern pairs --iters 3 --small-bytes 512 --large-bytes 65536
done
# blocking halo3d sends to MPI_PROC_NULL on the global boundary (dst -2)
msgtrace "halo3d-blocking-n4.msgtrace" 4 halo3d "${H[@]}" --variant blocking

part2
placement16

if [ -n "${2:-}" ]; then
  bdir=$(cd "$2" && pwd)
  run "halo3d-nonblocking-n2.caliper-2.12" 2 \
    "hatchet-region-profile,profile.mpi,output=halo3d-nonblocking-n2.caliper-2.12.cali" \
    halo3d "${H[@]}" --variant nonblocking
fi
