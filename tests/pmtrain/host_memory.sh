#!/usr/bin/env bash
# Host memory that no longer grows with the model (peak resident memory, VmHWM, from pmtrain's summary record):
# 1. Init: a tensor is initialised a piece at a time (model::kInitPieceElements, 64 MiB of fp32), not whole. A
#    159M-parameter model whose embedding (151936 x 1024) is 593 MiB in fp32, stage 3 on 1 rank: the process
#    peaks at most 300 MiB above the engine's buffers as the plan prints them (params, grads, optimizer, comm,
#    gathered: the engine's own buffer_plan); made whole, the embedding put it 661 MiB above (before 2026-11-27).
#    No test set: a final evaluation at stage 3 gathers the 593 MiB embedding for each of its 221 one-pair
#    batches (13 s of this test's 28, none of it about init).
# 2. A resume costs no host memory in proportion to the model: the checkpoint's rank file streams into the
# engine through one 64 MiB buffer (checkpoint::load_rank_file) instead of being read whole first. A
# 41.8M-parameter Qwen3-shaped reward model (vocabulary 151936 x hidden 256) on 1 rank at stage 0: its rank
# file is 12 bytes a parameter, 478 MiB. The peak resident memory (VmHWM, from pmtrain's summary record) of
# a run resumed from step 2 must stay within 150 MiB of the same run's fresh start (ratio printed); read
# whole first (before 2026-11-27), the file put the resume 328 MiB above it (ratio 1.298).
source "$(dirname "$0")/common.sh"
run() {  # run STEPS -> peak RSS in MiB of the run's process
  "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache \
    --set model.hidden_size=256 --set model.intermediate_size=1024 --set model.num_layers=3 \
    --set model.num_heads=4 --set model.num_kv_heads=2 --set model.head_dim=64 --set batch.world=1 \
    --set run.steps=$1 --set run.eval_every=0 --set run.save_final=true --set run.eval_pairs=8 --set run.resume=auto \
    --set batch.global=4 --set batch.micro=1 --set zero.bucket_elements=4194304 --set zero.stage=0 --set threads=1 \
    > $TMP/log$1.txt 2>&1 || { cat $TMP/log$1.txt; fail "$1-step run failed"; }
  grep -q "41778816 parameters" $TMP/log$1.txt || fail "$1 steps: not the 41.8M-parameter model"
  local bytes
  bytes=$(grep '"type":"summary"' $TMP/run/metrics.jsonl | tail -1 | sed -E 's/.*"peak_rss_bytes_max_rank":([0-9]+).*/\1/')
  [ -n "$bytes" ] || fail "$1 steps: no peak_rss_bytes_max_rank in the summary"
  echo $(( bytes / 1048576 ))
}
# 1. Init.
"$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/init --set data.cache_dir=$TMP/cache \
  --set model.hidden_size=1024 --set model.intermediate_size=1024 --set model.num_layers=1 --set model.num_heads=4 \
  --set model.num_kv_heads=2 --set model.head_dim=64 --set batch.world=1 --set run.steps=1 --set run.eval_every=0 \
  --set run.save_final=false --set batch.global=2 --set batch.micro=1 --set data.max_len=32 --set zero.stage=3 \
  --set zero.bucket_elements=4194304 --set threads=1 --set data.test_files=[] > $TMP/init.txt 2>&1 || { cat $TMP/init.txt; fail "the init run failed"; }
grep -q "159245440 parameters" $TMP/init.txt || fail "init: not the 159M-parameter model"
engine_mib=$(grep -m1 'memory plan per rank' $TMP/init.txt \
  | sed -E 's/.*params ([0-9.]+) GiB, grads ([0-9.]+) GiB, optimizer ([0-9.]+) GiB, comm buffers ([0-9.]+) GiB, gathered ([0-9.]+) GiB.*/\1 \2 \3 \4 \5/' \
  | awk '{printf "%d", ($1 + $2 + $3 + $4 + $5) * 1024}')
[ -n "$engine_mib" ] || { cat $TMP/init.txt; fail "init: no memory plan in the log"; }
peak=$(( $(grep '"type":"summary"' $TMP/init/metrics.jsonl | sed -E 's/.*"peak_rss_bytes_max_rank":([0-9]+).*/\1/') / 1048576 ))
echo "init: peak RSS ${peak} MiB, the engine's buffers ${engine_mib} MiB (ratio $(awk "BEGIN {printf \"%.3f\", $peak / $engine_mib}"), $((peak - engine_mib)) MiB above them; the embedding is 593 MiB in fp32)"
[ $((peak - engine_mib)) -le 300 ] || fail "init peaked $((peak - engine_mib)) MiB above the engine's buffers; at most 300 expected"

# 2. Resume.
fresh=$(run 2)
[ -d $TMP/run/checkpoints/step_2 ] || fail "no checkpoint at step 2"
resumed=$(run 3)
grep -q "resum" $TMP/log3.txt || { cat $TMP/log3.txt; fail "the 3-step run did not resume"; }
echo "peak RSS: fresh start ${fresh} MiB, resumed from step 2 ${resumed} MiB (ratio $(awk "BEGIN {printf \"%.3f\", $resumed / $fresh}"), difference $((resumed - fresh)) MiB; the rank file is 478 MiB)"
[ $((resumed - fresh)) -le 150 ] || fail "the resume peaked $((resumed - fresh)) MiB above the fresh start; at most 150 expected"
