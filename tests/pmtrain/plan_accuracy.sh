#!/usr/bin/env bash
# Two cells of bench/planner/accuracy.sh: the planner's peak per rank (built-in process baseline, no
# profile) within 10% of the operating system's peak resident memory of the largest rank (VmHWM, from
# pmtrain's summary) for a 41.8M-parameter model, stage 0 at 1 rank and stage 3 with checkpointing at 2.
source "$(dirname "$0")/common.sh"
MODEL="--set model.hidden_size=256 --set model.intermediate_size=1024 --set model.num_layers=3 --set model.num_heads=4
  --set model.num_kv_heads=2 --set model.head_dim=64 --set data.max_len=64 --set zero.bucket_elements=4194304"
cell() {  # STAGE RANKS CKPT
  local opts="$MODEL --set zero.stage=$1 --set batch.micro=2 --set batch.global=$((4 * $2))
    --set model.activation_checkpointing=$3 --set data.max_train_pairs=$((8 * $2)) --set run.epochs=1"
  $MPIRUN -np $2 "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/run$1 --set data.cache_dir=$TMP/cache \
    --set run.eval_every=0 --set run.save_final=false --set run.eval_pairs=8 $opts > $TMP/log$1.txt 2>&1 \
    || { cat $TMP/log$1.txt; fail "stage $1 run failed"; }
  grep -q "41778816 parameters" $TMP/log$1.txt || fail "stage $1: not the 41.8M-parameter model"
  local meas pred
  meas=$(json_field $TMP/run$1/metrics.jsonl summary peak_rss_bytes_max_rank)
  pred=$("$PMTRAIN" plan configs/tiny_cpu.yaml --world $2 --micro 2 --json $opts \
    | python3 -c "import json,sys; print([c for c in json.load(sys.stdin)['cells'] if c['stage']==$1][0]['peak_per_rank_bytes'])")
  python3 -c "
p, m = $pred, $meas
print('stage $1, $2 ranks, checkpointing $3: predicted %.0f MiB, measured %.0f MiB, ratio %.3f' % (p / 2**20, m / 2**20, p / m))
assert abs(p / m - 1) <= 0.10, 'prediction off by more than 10%'" || fail "stage $1: memory prediction off"
}
cell 0 1 false
cell 3 2 true
