#!/usr/bin/env bash
# A resume costs no host memory in proportion to the model: the checkpoint's rank file streams into the
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
fresh=$(run 2)
[ -d $TMP/run/checkpoints/step_2 ] || fail "no checkpoint at step 2"
resumed=$(run 3)
grep -q "resum" $TMP/log3.txt || { cat $TMP/log3.txt; fail "the 3-step run did not resume"; }
echo "peak RSS: fresh start ${fresh} MiB, resumed from step 2 ${resumed} MiB (ratio $(awk "BEGIN {printf \"%.3f\", $resumed / $fresh}"), difference $((resumed - fresh)) MiB; the rank file is 478 MiB)"
[ $((resumed - fresh)) -le 150 ] || fail "the resume peaked $((resumed - fresh)) MiB above the fresh start; at most 150 expected"
