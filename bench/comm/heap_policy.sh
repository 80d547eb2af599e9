#!/usr/bin/env bash
# pmtrain's heap policy (core/memory.h keep_large_host_allocations_in_heap: no mmap per large block) against
# glibc's own (ZERO_GLIBC_MMAP=1), in the same run: configs/tiny_cpu.yaml (9.8M parameters, nearly all the
# embedding: buckets of 39 MB) training 10 steps on the CPU backend at 2 and 4 ranks, stages 2 and 3, without
# evaluation or checkpoints; per cell the better of two runs (tokens/s over all ranks, the comm share of rank
# 0's step time from the run's last line), the two policies alternating. Then MPI's own collectives at 16 and
# 64 MiB (collectives_bench) with glibc's policy and with the same policy through glibc's environment.
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

run() {  # run NP STAGE GLIBC(0|1): "tokens/s comm%" of one run
  rm -rf $TMP/run
  ZERO_GLIBC_MMAP=$3 $MPIRUN -np $1 -x ZERO_GLIBC_MMAP "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set zero.stage=$2 \
    --set run.dir=$TMP/run > $TMP/out.txt 2>&1 || { cat $TMP/out.txt >&2; exit 1; }
  echo "$(sed -nE 's/^done: .*, ([0-9.]+) tokens\/s over all ranks.*/\1/p' $TMP/out.txt) $(sed -nE 's/.*\| comm ([0-9.]+)%.*/\1/p' $TMP/out.txt)"
}
{
  echo "# bench/comm/heap_policy.sh: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(hostname), $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores, $(date -u)"
  echo "# tiny_cpu, 10 steps, CPU backend, threads 1; tokens/s over all ranks (best of 2 runs each, alternating) and rank 0's comm share"
  printf "%-16s %14s %8s %14s %8s %8s\n" cell "glibc tok/s" "comm%" "heap tok/s" "comm%" ratio
  for cell in "2 2" "4 2" "4 3"; do
    set -- $cell
    best0=0 comm0=0 best1=0 comm1=0
    for _ in 1 2; do
      read -r t c <<< "$(run $1 $2 1)"
      if awk -v a=$t -v b=$best0 'BEGIN { exit !(a > b) }'; then best0=$t comm0=$c; fi
      read -r t c <<< "$(run $1 $2 0)"
      if awk -v a=$t -v b=$best1 'BEGIN { exit !(a > b) }'; then best1=$t comm1=$c; fi
    done
    printf "%-16s %14.0f %8s %14.0f %8s %8.2f\n" "np$1-stage$2" "$best0" "$comm0" "$best1" "$comm1" \
      "$(awk -v a=$best1 -v b=$best0 'BEGIN { print a / b }')"
  done
  if [ -x "$BENCH" ]; then
    echo "# MPI's collectives at 2 ranks (collectives_bench, raw MPI columns: us a call), glibc's policy vs MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_ (the same policy)"
    $MPIRUN -np 2 "$BENCH" > $TMP/glibc.txt 2>&1
    $MPIRUN -np 2 -x MALLOC_MMAP_MAX_=0 -x MALLOC_TRIM_THRESHOLD_=2147483647 "$BENCH" > $TMP/heap.txt 2>&1
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
