#!/usr/bin/env bash
# glibc's heap policy against one that keeps large blocks in the heap (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_
# huge, set in the environment: pmtrain sets nothing itself), in the same run. glibc serves a malloc above its
# mmap threshold with a mapping of its own and unmaps it at free, so a temporary made and freed every call, as
# Open MPI's reduce-scatter and all-reduce make one the size of the message, has its pages faulted in and zeroed
# again each time. The CPU backend therefore runs reduce-scatters and all-reduces over 1 MiB as 1 MiB pieces
# (comm/mpi_communicator.h), whose temporaries stay small; this script shows what keeping large blocks in the heap
# still changes beside them. Before the pieces it was 1.3-1.5x tokens/s on tiny_cpu, but the heap keeps what it
# was given and fragments: a 90M-parameter model at stage 3 then peaked past pmtrain's memory plan, which is why
# pmtrain does not set it (a user may, with that cost in mind: README, Benchmarks).
# Cells: configs/tiny_cpu.yaml (9.8M parameters, buckets of 39 MB) 10 steps at 2 and 4 ranks, and a 4-layer
# 90M-parameter model at stage 3 on 2 ranks (4 steps), CPU backend, without evaluation or checkpoints; per cell
# the better of two runs of each policy (alternating): tokens/s over all ranks, rank 0's comm share, the largest
# rank's peak RSS, and the plan's bytes per rank (train --dry-run). Then MPI's collectives (collectives_bench).
#   bash bench/comm/heap_policy.sh [PMTRAIN] [OUT]     (from the repository root)
set -euo pipefail
PMTRAIN=${1:-build/pmtrain/pmtrain}
OUT=${2:-bench/results/heap_policy.txt}
BENCH=${COLLECTIVES_BENCH:-build/bench/comm/collectives_bench}
source launch/mpi_env.sh
MPIRUN=${MPIRUN:-mpirun}
export OMP_NUM_THREADS=1
TMP=$(mktemp -d /tmp/heap_policy.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
RUN="--set data.cache_dir=$TMP/cache --set run.steps=10 --set run.eval_every=0 --set data.test_files=[]
  --set run.save_final=false --set run.log_every=10"

HEAP="-x MALLOC_MMAP_MAX_=0 -x MALLOC_TRIM_THRESHOLD_=2147483647"
WIDE="--set zero.stage=3 --set model.hidden_size=512 --set model.intermediate_size=1536 --set model.num_layers=4
  --set model.num_heads=8 --set model.num_kv_heads=4 --set model.head_dim=64 --set run.steps=4"
run() {  # run NP HEAP(0|1) ARGS...: "tokens/s comm% peak_rss_MiB" of one run
  local np=$1 heap=$2; shift 2
  rm -rf $TMP/run
  $MPIRUN -np $np $([ $heap = 1 ] && echo $HEAP) "$PMTRAIN" train configs/tiny_cpu.yaml $RUN "$@" \
    --set run.dir=$TMP/run > $TMP/out.txt 2>&1 || { cat $TMP/out.txt >&2; exit 1; }
  echo "$(sed -nE 's/^done: .*, ([0-9.]+) tokens\/s over all ranks.*/\1/p' $TMP/out.txt) $(sed -nE 's/.*\| comm ([0-9.]+)%.*/\1/p' $TMP/out.txt) $(sed -nE 's/.*peak RSS ([0-9.]+) MiB.*/\1/p' $TMP/out.txt)"
}
plan_mib() {  # plan_mib NP ARGS...: the plan's GiB per rank, in MiB
  "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --dry-run --set batch.world=$1 "${@:2}" 2>&1 \
    | sed -nE 's/^per rank: .* = ([0-9.]+) GiB;.*/\1/p' | awk '{ printf "%.0f", $1 * 1024 }'
}
{
  echo "# bench/comm/heap_policy.sh: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(hostname), $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores, $(date -u)"
  echo "# CPU backend, threads 1; tokens/s over all ranks (best of 2 runs each, alternating), rank 0's comm share, largest rank's peak RSS"
  printf "%-20s %11s %6s %9s %11s %6s %9s %8s %9s\n" cell "glibc tok/s" comm% "rss MiB" "heap tok/s" comm% "rss MiB" ratio "plan MiB"
  for cell in "tiny-np2-stage2|2|--set zero.stage=2" "tiny-np4-stage2|4|--set zero.stage=2" "tiny-np4-stage3|4|--set zero.stage=3" "90M-np2-stage3|2|$WIDE"; do
    IFS='|' read -r name np args <<< "$cell"
    best0=0 comm0=0 rss0=0 best1=0 comm1=0 rss1=0
    for _ in 1 2; do
      read -r t c r <<< "$(run $np 0 $args)"
      if awk -v a=$t -v b=$best0 'BEGIN { exit !(a > b) }'; then best0=$t comm0=$c rss0=$r; fi
      read -r t c r <<< "$(run $np 1 $args)"
      if awk -v a=$t -v b=$best1 'BEGIN { exit !(a > b) }'; then best1=$t comm1=$c rss1=$r; fi
    done
    printf "%-20s %11.0f %6s %9s %11.0f %6s %9s %8.2f %9s\n" "$name" "$best0" "$comm0" "$rss0" "$best1" "$comm1" "$rss1" \
      "$(awk -v a=$best1 -v b=$best0 'BEGIN { print a / b }')" "$(plan_mib $np $args)"
  done
  if [ -x "$BENCH" ]; then
    echo "# MPI's collectives at 2 ranks (collectives_bench, raw MPI columns: us a call), glibc's policy vs the heap's"
    $MPIRUN -np 2 "$BENCH" > $TMP/glibc.txt 2>&1
    $MPIRUN -np 2 $HEAP "$BENCH" > $TMP/heap.txt 2>&1
    printf "%-16s %10s %12s %12s %8s\n" op bytes "glibc us" "heap us" ratio
    for op in all_reduce reduce_scatter all_gather; do
      for bytes in 4194304 16777216 67108864; do
        a=$(awk -v o=$op -v b=$bytes '$1 == o && $2 == b { print $7 }' $TMP/glibc.txt)
        h=$(awk -v o=$op -v b=$bytes '$1 == o && $2 == b { print $7 }' $TMP/heap.txt)
        printf "%-16s %10s %12.0f %12.0f %8.2f\n" $op $bytes "$a" "$h" "$(awk -v a=$a -v h=$h 'BEGIN { print a / h }')"
      done
    done
  fi
} | tee "$OUT"
