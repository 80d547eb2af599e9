#!/usr/bin/env bash
# zero.world_invariant, in new processes on the tiny config (12 micro-batches of 2 pairs a step):
#  - 1 rank at stage 0, 2 at stage 2, 3 at stage 3 and 4 at stage 1 give the same grad norms (exact: the
#    step's sum of squares is summed in integers) and the same pairs per step, the same logged metrics, of the
#    train steps and of the evaluations at steps 2 and 4 (loss, accuracy, rewards: each micro-batch's sums
#    added in the cut's order), and their final weights exported in fp32 are the same bytes;
#  - a run stopped at step 2 on 2 ranks and resumed on 3 continues as the uninterrupted 2-rank run, bit for bit;
#  - bf16 params: 1 and 3 ranks give the same bytes too; so do token budgets (batch.micro_tokens) in metrics;
#  - 1 and 3 math threads (`threads`) give the same bytes, at shapes whose products are cut into tiles;
#  - the control: without world_invariant, 1 and 3 ranks differ in weights and in eval metrics (so the
#    comparisons above can fail);
#  - bad combinations are refused in one line.
source "$(dirname "$0")/common.sh"
COMMON="configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set run.steps=4 --set batch.global=24 --set batch.micro=2
  --set run.eval_every=2 --set run.eval_pairs=20 --set run.log_every=1 --set zero.world_invariant=true"
train() { local np=$1; shift; $MPIRUN -np $np "$PMTRAIN" train $COMMON "$@" > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; fail "run failed: $*"; }; }

train 1 --set zero.stage=0 --set run.dir=$TMP/w1
grep -q "fixed64" $TMP/out.txt || { cat $TMP/out.txt; fail "the run does not say it sums in fixed point"; }
for cell in "2 2" "3 3" "4 1"; do
  set -- $cell
  train $1 --set zero.stage=$2 --set run.dir=$TMP/w$1
  [ $(fields $TMP/w$1/metrics.jsonl | grep -c '^eval') = 2 ] || fail "$1 ranks: not 2 evaluations"
  diff <(fields $TMP/w1/metrics.jsonl) <(fields $TMP/w$1/metrics.jsonl) || fail "$1 ranks, stage $2: grad norms, pairs or metrics differ from 1 rank"
  cmp -s <(weights $TMP/w1 1) <(weights $TMP/w$1 $1) || fail "$1 ranks, stage $2: the final weights differ from 1 rank's"
  echo "$1 ranks, stage $2: the same grad norms and final weights as 1 rank, stage 0 ($(fields $TMP/w$1/metrics.jsonl | tail -1))"
done

# Stop at step 2 on 2 ranks (stage 2), resume on 3 (stage 3): the uninterrupted 2-rank run, bit for bit.
train 2 --set zero.stage=2 --set run.dir=$TMP/cut --set run.stop_at=2
train 3 --set zero.stage=3 --set run.dir=$TMP/cut --set run.resume=auto
grep -q "resharded" $TMP/out.txt || { cat $TMP/out.txt; fail "2 -> 3 ranks: not resharded"; }
diff <(fields $TMP/w2/metrics.jsonl) <(fields $TMP/cut/metrics.jsonl) || fail "2 -> 3 ranks: the resumed steps differ"
cmp -s <(weights $TMP/w2 2) <(weights $TMP/cut cut) || fail "2 -> 3 ranks: the final weights differ"
echo "stopped at step 2 on 2 ranks, resumed on 3: the uninterrupted run's grad norms and final weights"

train 1 --set zero.param_dtype=bf16 --set run.dir=$TMP/b1
train 3 --set zero.param_dtype=bf16 --set run.dir=$TMP/b3
diff <(fields $TMP/b1/metrics.jsonl) <(fields $TMP/b3/metrics.jsonl) || fail "bf16 params: 3 ranks differ from 1"
cmp -s <(weights $TMP/b1 b1) <(weights $TMP/b3 b3) || fail "bf16 params: the final weights differ"
echo "bf16 params: 1 and 3 ranks give the same grad norms and final weights"

# Token budgets (micro-batches and eval batches cut by batch.micro_tokens): 1 and 3 ranks alike too.
train 1 --set batch.micro=0 --set batch.micro_tokens=1200 --set run.dir=$TMP/t1
train 3 --set batch.micro=0 --set batch.micro_tokens=1200 --set zero.stage=3 --set run.dir=$TMP/t3
diff <(fields $TMP/t1/metrics.jsonl) <(fields $TMP/t3/metrics.jsonl) || fail "token budgets: 3 ranks differ from 1"
echo "token budgets: 1 and 3 ranks give the same grad norms and metrics ($(fields $TMP/t3/metrics.jsonl | tail -1))"

# Any thread count (model/cpu/parallel.h): 1 and 3 math threads a rank give the same bits, at shapes whose
# products are cut into several tiles (an MLP 600 wide: gate and up are 1200 rows; 4 pairs a micro-batch).
WIDE="--set model.intermediate_size=600 --set batch.micro=4 --set run.steps=2"
train 1 $WIDE --set threads=1 --set run.dir=$TMP/th1
train 1 $WIDE --set threads=3 --set run.dir=$TMP/th3
grep -q "3 math threads a rank" $TMP/out.txt || { cat $TMP/out.txt; fail "threads=3: not 3 math threads"; }
diff <(fields $TMP/th1/metrics.jsonl) <(fields $TMP/th3/metrics.jsonl) || fail "1 and 3 threads: grad norms or metrics differ"
cmp -s <(weights $TMP/th1 th1) <(weights $TMP/th3 th3) || fail "1 and 3 threads: the final weights differ"
echo "1 and 3 math threads: the same grad norms, metrics and final weights"

# The control: fp32 sums and per-world micro-batches.
train 1 --set zero.world_invariant=false --set run.dir=$TMP/c1
train 3 --set zero.world_invariant=false --set run.dir=$TMP/c3
! cmp -s <(weights $TMP/c1 c1) <(weights $TMP/c3 c3) || fail "control: without world_invariant 1 and 3 ranks gave the same bytes"
! diff -q <(fields $TMP/c1/metrics.jsonl | grep '^eval') <(fields $TMP/c3/metrics.jsonl | grep '^eval') > /dev/null \
  || fail "control: without world_invariant 1 and 3 ranks gave the same eval metrics"
echo "control: without zero.world_invariant the weights and the eval metrics at 1 and 3 ranks differ"

bad "accum dtype" "leave zero.accum_dtype at auto" train $COMMON --set zero.accum_dtype=fp32 --set run.dir=$TMP/bad
bad "reduce dtype" "leave zero.reduce_dtype at fp32" train $COMMON --set zero.reduce_dtype=bf16 --set run.dir=$TMP/bad
bad "no micro" "zero.world_invariant needs batch.micro" train $COMMON --set batch.micro=0 --set batch.accum=3 --set run.dir=$TMP/bad
bad "too many micro-batches" "zero.world_invariant sums at most 65536 micro-batches a step" train $COMMON --set batch.global=262144 --set batch.micro=2 --set run.dir=$TMP/bad
