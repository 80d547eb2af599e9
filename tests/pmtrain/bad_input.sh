#!/usr/bin/env bash
# Bad input gets a clear error (naming the file, key or tensor), a non-zero exit, never a crash or a hang.
source "$(dirname "$0")/common.sh"
# expect_error NAME EXPECTED_TEXT COMMAND...
expect_error() {
  local name=$1 want=$2; shift 2
  set +e
  timeout 300 "$@" > $TMP/err.txt 2>&1
  local rc=$?
  set -e
  [ $rc -ne 0 ] || { cat $TMP/err.txt; fail "$name: exit code 0"; }
  [ $rc -ne 124 ] || fail "$name: hung (timeout)"
  ! grep -qiE "segmentation fault|core dumped|terminate called|signal [0-9]+" $TMP/err.txt || { cat $TMP/err.txt; fail "$name: crashed"; }
  grep -qF -- "$want" $TMP/err.txt || { cat $TMP/err.txt; fail "$name: message lacks '$want'"; }
  echo "ok: $name: $(grep -F -- "$want" $TMP/err.txt | head -1 | cut -c1-200)"
}
RUN="--set run.dir=$TMP/run --set data.cache_dir=$TMP/cache"

expect_error "missing config" "config file: $TMP/nope.yaml does not exist" $MPIRUN -np 2 "$PMTRAIN" train $TMP/nope.yaml
printf 'run:\n  steps: [1, 2\n' > $TMP/malformed.yaml
expect_error "malformed YAML" "malformed.yaml:3: malformed YAML" $MPIRUN -np 2 "$PMTRAIN" train $TMP/malformed.yaml
printf 'run:\n  steps: 2\noptim:\n  learning_rate: 0.1\n' > $TMP/unknown.yaml
expect_error "unknown key" "unknown.yaml:4: unknown key 'optim.learning_rate'" $MPIRUN -np 2 "$PMTRAIN" train $TMP/unknown.yaml
printf 'run:\n  steps: 2\noptim:\n  lr: -1\n' > $TMP/negative_lr.yaml
expect_error "negative lr" "negative_lr.yaml:4: key 'optim.lr' is -1; it must be > 0" \
  $MPIRUN -np 2 "$PMTRAIN" train $TMP/negative_lr.yaml
printf 'optim:\n  warmup_ratio: 2\n' > $TMP/warmup.yaml
expect_error "warmup ratio above 1" "warmup.yaml:2: key 'optim.warmup_ratio' is 2; it must be in [0, 1]" \
  $MPIRUN -np 2 "$PMTRAIN" train $TMP/warmup.yaml
printf 'optim:\n  lr: 0.1\n  eps: 1e-8\n  lr: 0.2\n' > $TMP/twice.yaml
expect_error "key given twice" "twice.yaml:4: key 'optim.lr' is given twice (lines 2 and 4)" \
  $MPIRUN -np 2 "$PMTRAIN" train $TMP/twice.yaml
expect_error "unknown --set key" "did you mean 'zero.stage'" $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml --set zero.stag=1
expect_error "selective_layers without full checkpointing" \
  "model.selective_layers 1 makes some layers of full checkpointing selective, but model.activation_checkpointing is none" \
  "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --dry-run --set model.selective_layers=1 --set model.activation_checkpointing=none
expect_error "selective_layers above the layer count" "model.selective_layers 99 is more than the model's" \
  "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --dry-run --set model.selective_layers=99 --set model.activation_checkpointing=full
expect_error "missing data file" "nope.jsonl.gz" \
  $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set "data.train_files=[$TMP/nope.jsonl.gz]"
printf 'not json\n' | gzip > $TMP/bad.jsonl.gz
expect_error "malformed data line (policy fail)" "bad.jsonl.gz:1" \
  $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set "data.train_files=[$TMP/bad.jsonl.gz]" --set data.bad_lines=fail
expect_error "more ranks than pairs" "fewer than the 4 ranks" \
  $MPIRUN -np 4 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set data.max_train_pairs=3 --set batch.global=4 --set batch.micro=1
expect_error "inconsistent batch contract" "inconsistent" \
  $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set batch.accum=5
expect_error "unknown attention" "model.attention: unknown value 'bogus' (expected auto, flash, reference, flash_fma, flash_wide)" \
  $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set model.attention=bogus
expect_error "unknown stage" "key 'zero.stage' is 7; it must be in [0, 3]" $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set zero.stage=7
expect_error "negative collective timeout" "key 'run.collective_timeout_s' is -1; it must be >= 0" \
  $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.collective_timeout_s=-1
expect_error "unsupported reduction dtype" "reduce_dtype fp16 cannot be packed" \
  $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set zero.reduce_dtype=fp16
# The seed 4B config loads and validates, then stops: no CUDA backend here, and the CPU cannot hold it.
expect_error "4B config on this machine (cuda)" "backend cuda" $MPIRUN -np 2 "$PMTRAIN" train configs/qwen3_4b_bs128.yaml $RUN
expect_error "4B config on this machine (cpu)" "this machine cannot hold the run" \
  $MPIRUN -np 2 "$PMTRAIN" train configs/qwen3_4b_bs128.yaml $RUN --set backend=cpu
# srun without a PMI plugin this MPI reads: each task a world of 1 (faked here: Slurm's variables, no srun).
expect_error "srun without PMI" "srun started 4 tasks, but MPI sees a world of 1 in this one" \
  env SLURM_JOB_ID=1 SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=4 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN
# A model directory whose shapes disagree with its config.json.
mkdir -p $TMP/badmodel
cp tests/fixtures/qwen3_rm_tiny/qwen3_rm_tiny.safetensors $TMP/badmodel/model.safetensors
sed 's/"intermediate_size": 104/"intermediate_size": 96/' tests/fixtures/qwen3_rm_tiny/config.json > $TMP/badmodel/config.json
grep -q '"intermediate_size": 96' $TMP/badmodel/config.json || fail "fixture config.json changed shape; update this test"
expect_error "model shapes disagree with config.json" "implies shape [96, 48]" \
  "$PMTRAIN" score --model $TMP/badmodel --data data/assets/hh-rlhf/harmless-base/test.jsonl.gz
echo "all bad inputs rejected cleanly"
