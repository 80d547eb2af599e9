#!/usr/bin/env bash
# Evaluation batches sized for a forward pass (batch.eval_micro 0, pmtrain/planner.h eval_batch) against the
# training micro-batch (batch.eval_micro = batch.micro, what evaluation used before), in the same run: the
# first 1200 pairs of the bundled hh-rlhf harmless-base train file, on the CPU backend, per cell the better
# of two runs' eval pairs/s (the eval record's pairs_per_s: the evaluation alone, not the start-up).
# Cells: configs/tiny_cpu.yaml (2 thin layers) at stage 2 on 2 ranks, 1200 pairs; a 4-layer 90M-parameter model
# (hidden 512, most of it the embedding) at stage 3 on 2 ranks, where each batch all-gathers the whole model,
# 200 pairs. Prints the eval batch
# each config gets on a GPU too (train --dry-run --set backend=cuda), where the GEMMs gain most.
#   bash bench/eval/eval_batches.sh [PMTRAIN] [OUT]     (from the repository root)
set -euo pipefail
PMTRAIN=${1:-build/pmtrain/pmtrain}
OUT=${2:-bench/results/eval_batches.txt}
source launch/mpi_env.sh
MPIRUN=${MPIRUN:-mpirun}
export OMP_NUM_THREADS=1
TMP=$(mktemp -d /tmp/eval_batches.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
DATA="--init --set data.cache_dir=$TMP/cache --set data.test_files=[data/assets/hh-rlhf/harmless-base/train.jsonl.gz]"
WIDE="--set zero.stage=3 --set model.hidden_size=512 --set model.intermediate_size=1536 --set model.num_layers=4
  --set model.num_heads=8 --set model.num_kv_heads=4 --set model.head_dim=64 --set run.eval_pairs=200"

rate() {  # rate ARGS...: the best eval pairs/s of two runs, and the batch line
  local best=0
  for _ in 1 2; do
    $MPIRUN -np 2 "$PMTRAIN" eval configs/tiny_cpu.yaml $DATA "$@" > $TMP/eval.txt 2>&1 || { cat $TMP/eval.txt >&2; exit 1; }
    local r=$(sed -nE 's/.*"pairs_per_s":([0-9.eE+-]+).*/\1/p' $TMP/eval.txt)
    best=$(awk -v a=$best -v b=$r 'BEGIN { print (b > a ? b : a) }')
  done
  echo "$best $(sed -nE 's/^pmtrain: eval of .*, (batches of at most .*)$/\1/p' $TMP/eval.txt)"
}
{
  echo "# bench/eval/eval_batches.sh: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(hostname), $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores, $(date -u)"
  echo "# eval of hh-rlhf pairs on 2 ranks, CPU backend, threads 1; pairs/s of the evaluation (best of 2 runs)"
  printf "%-34s %12s %12s %8s  %s\n" cell "micro pairs/s" "auto pairs/s" ratio "auto batches"
  for cell in "tiny_cpu-stage2|--set zero.stage=2 --set run.eval_pairs=1200" "90M-4-layers-stage3|$WIDE"; do
    name=${cell%%|*}; args=${cell#*|}
    read -r before _ <<< "$(rate $args --set batch.eval_micro=2)"
    read -r after batches <<< "$(rate $args)"
    printf "%-34s %12.1f %12.1f %8.2f  %s\n" "$name" "$before" "$after" "$(awk -v a=$after -v b=$before 'BEGIN { print a / b }')" "$batches"
  done
  echo "# evaluation batches on a GPU (bf16 activations; micro 2 at data.max_len 2048, checkpointing on):"
  for c in configs/qwen3_0_6b_bs128.yaml configs/qwen3_1_7b_bs128.yaml configs/qwen3_4b_bs128.yaml configs/qwen3_8b_bs128.yaml; do
    echo "#   $c: $("$PMTRAIN" train $c --dry-run --set backend=cuda --set batch.world=8 2>&1 | sed -n 's/^evaluation batches of at most //p')"
  done
} | tee "$OUT"
