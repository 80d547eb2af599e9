#!/usr/bin/env bash
# ZeRO-3 really saves memory: a 41.8M-parameter Qwen3-shaped reward model (38.9M of it the embedding,
# vocabulary 151936 x hidden 256) at 4 ranks, 2 steps at stage 0 and at stage 3. Measured as the
# operating system's peak resident memory of the largest rank (VmHWM, from pmtrain's summary record),
# not the allocator's own report. Model states are 16 bytes a parameter here (fp32 params, which are their
# own master, gradient accumulator, m, v): stage 3 keeps a quarter of them, 12 x 41.8M bytes = 478 MiB less
# per rank; at least 400 MiB must show. It can only show if no
# buffer is sized by the embedding (its gradient staging and stage-3 gathers come in pieces).
source "$(dirname "$0")/common.sh"
run() {  # run STAGE -> peak RSS in MiB of the largest rank
  $MPIRUN -np 4 "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/run$1 --set data.cache_dir=$TMP/cache \
    --set model.hidden_size=256 --set model.intermediate_size=1024 --set model.num_layers=3 \
    --set model.num_heads=4 --set model.num_kv_heads=2 --set model.head_dim=64 \
    --set run.steps=2 --set run.eval_every=0 --set run.save_final=false --set run.eval_pairs=8 \
    --set batch.global=8 --set batch.micro=1 --set zero.bucket_elements=4194304 --set zero.stage=$1 \
    > $TMP/log$1.txt 2>&1 || { cat $TMP/log$1.txt; fail "stage $1 run failed"; }
  grep -q "41778816 parameters" $TMP/log$1.txt || fail "stage $1: not the 41.8M-parameter model"
  local bytes
  bytes=$(json_field $TMP/run$1/metrics.jsonl summary peak_rss_bytes_max_rank)
  [ -n "$bytes" ] || fail "stage $1: no peak_rss_bytes_max_rank in the summary"
  echo $(( bytes / 1048576 ))
}
s0=$(run 0)
s3=$(run 3)
echo "peak RSS per rank (largest rank): stage 0 ${s0} MiB, stage 3 ${s3} MiB, saved $((s0 - s3)) MiB"
[ $((s0 - s3)) -ge 400 ] || fail "stage 3 saves $((s0 - s3)) MiB per rank against stage 0; at least 400 expected"
