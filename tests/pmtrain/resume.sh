#!/usr/bin/env bash
# pmtrain resume through sharded checkpoints, in new processes:
#  - same world size and stage: the steps after the resume equal the uninterrupted run bit for bit
#    (loss, grad norm, and the ids of the pairs each step consumed), at every stage, with the weights from the
#    checkpoint alone (no random init made first);
#  - another world size and stage (4 ranks stage 3 -> 2 ranks stage 1): the same pairs per step (no
#    pair repeated or skipped) and the loss curve within fp32 round-off.
source "$(dirname "$0")/common.sh"
COMMON="configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set run.steps=4 --set batch.global=24 --set batch.micro=2
  --set run.eval_every=0 --set data.test_files=[] --set run.log_every=1"
# fields FILE: "loss grad_norm pair_id_sum" of every train record, one step per line
fields() { paste -d' ' <(json_field $1 train loss) <(json_field $1 train grad_norm) <(json_field $1 train pair_id_sum); }
train() { local np=$1; shift; $MPIRUN -np $np "$PMTRAIN" train $COMMON "$@" > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; fail "run failed: $*"; }; }

for stage in 0 1 2 3; do
  train 2 --set zero.stage=$stage --set run.dir=$TMP/full$stage --set run.save_final=false
  train 2 --set zero.stage=$stage --set run.dir=$TMP/cut$stage --set run.stop_at=2
  grep -q "stopped at step 2 of 4" $TMP/out.txt || fail "stage $stage: no early stop"
  if [ $stage = 0 ]; then  # --dry-run first: the checkpoint it would take and the settings it would change, nothing run
    "$PMTRAIN" train $COMMON --set zero.stage=0 --set run.dir=$TMP/cut0 --set run.resume=auto --set run.save_final=false \
      --dry-run > $TMP/dry.txt 2>&1 || { cat $TMP/dry.txt; fail "dry run of the resume"; }
    for want in "^resume: from $TMP/cut0/checkpoints/step_2: step 2, saved at world 2 stage 0 \(" \
        "^resume: 2 settings differ from the run that saved the checkpoint: run.save_final true -> false; run.stop_at 2 -> 0$"; do
      grep -qE "$want" $TMP/dry.txt || { cat $TMP/dry.txt; fail "dry run of the resume: no line '$want'"; }
    done
    "$PMTRAIN" train $COMMON --set run.dir=$TMP/none --set run.resume=auto --dry-run > $TMP/dry.txt 2>&1 \
      || { cat $TMP/dry.txt; fail "dry run of a resume with no checkpoint"; }
    grep -q "^resume auto: no checkpoint in $TMP/none yet: the run would start fresh$" $TMP/dry.txt \
      || { cat $TMP/dry.txt; fail "dry run: no word that nothing is there to resume"; }
    [ -e $TMP/none ] && fail "the dry run made run.dir"
    echo "ok: --dry-run with --resume auto names the checkpoint and the settings it would change"
  fi
  train 2 --set zero.stage=$stage --set run.dir=$TMP/cut$stage --set run.resume=auto --set run.save_final=false
  grep -q "resumed from .*step_2: step 2" $TMP/out.txt || { cat $TMP/out.txt; fail "stage $stage: did not resume"; }
  # The weights come from the checkpoint alone: no random init first, for the load to replace.
  grep -q "^pmtrain: model .*(the weights of the checkpoint resumed from, below)" $TMP/out.txt && ! grep -q "random init" $TMP/out.txt \
    || { grep "^pmtrain: model" $TMP/out.txt; fail "stage $stage: the resumed run initialised the weights too"; }
  # The settings it changes from the run that saved step_2, each once, and nothing else.
  want="^pmtrain: 2 settings differ from the run that saved the checkpoint: run.save_final true -> false; run.stop_at 2 -> 0$"
  grep -qE "$want" $TMP/out.txt || { grep "^pmtrain" $TMP/out.txt; fail "stage $stage: no line '$want'"; }
  diff <(fields $TMP/full$stage/metrics.jsonl) <(fields $TMP/cut$stage/metrics.jsonl) \
    || fail "stage $stage: resumed run differs from the uninterrupted one"
  echo "stage $stage: resume bit-exact ($(fields $TMP/cut$stage/metrics.jsonl | tail -1))"
done

# Resuming under settings that change the data order stops before any step, naming the checkpoint and what differs.
bad_resume() {
  cp $TMP/cut0/config.resolved.yaml $TMP/resolved.before
  set +e; $MPIRUN -np 2 "$PMTRAIN" train $COMMON --set run.dir=$TMP/cut0 --set run.resume=$TMP/cut0/checkpoints/step_2 "$@" \
    > $TMP/bad.txt 2>&1; local rc=$?; set -e
  [ $rc -ne 0 ] && grep -q "error: .*: cannot continue the data order of checkpoint $TMP/cut0/checkpoints/step_2: $WHY" $TMP/bad.txt \
    || { cat $TMP/bad.txt; fail "resume with $*: no error naming the checkpoint and '$WHY'"; }
  ! grep -q "^step 3/" $TMP/bad.txt || fail "resume with $*: it trained"
  cmp -s $TMP/resolved.before $TMP/cut0/config.resolved.yaml || fail "resume with $*: the refused run replaced config.resolved.yaml"
}
WHY="sampler cursor has seed 1234 but the config says 99" bad_resume --set run.seed=99
WHY="sampler cursor was saved for 240 pairs but the dataset has 200" bad_resume --set data.max_train_pairs=200
echo "ok: a resume whose seed or data differ from the checkpoint's stops, naming the checkpoint"
# A damaged checkpoint: every rank fails alike (agreed), and the error is said once, by the rank that found it
# (each rank printed it, as "rank 1: error: rank 0: ...").
cp -r $TMP/cut0/checkpoints/step_2 $TMP/damaged && truncate -s 1000 $TMP/damaged/rank_0.bin
set +e; $MPIRUN -np 2 "$PMTRAIN" train $COMMON --set run.dir=$TMP/cut0 --set run.resume=$TMP/damaged > $TMP/bad.txt 2>&1; rc=$?; set -e
[ $rc -ne 0 ] && [ "$(grep -c 'error:' $TMP/bad.txt)" -eq 1 ] \
  && grep -q "^pmtrain train: error: rank 0: checkpoint file $TMP/damaged/rank_0.bin is truncated: 1000 bytes" $TMP/bad.txt \
  || { cat $TMP/bad.txt; fail "a damaged checkpoint at 2 ranks: not one error line naming rank 0 and the file"; }
echo "ok: a damaged checkpoint's error is said once at 2 ranks"

# Reshard: 4 ranks at stage 3, resume on 2 ranks at stage 1 (global batch kept, accumulation derived).
train 4 --set zero.stage=3 --set run.dir=$TMP/re --set run.stop_at=2
train 2 --set zero.stage=1 --set run.dir=$TMP/re --set run.resume=auto --set run.save_final=false
grep -q "resharded" $TMP/out.txt || { cat $TMP/out.txt; fail "reshard: not resharded"; }
want="^pmtrain: 3 settings differ from the run that saved the checkpoint: run.save_final true -> false; run.stop_at 2 -> 0; zero.stage 3 -> 1$"
grep -qE "$want" $TMP/out.txt || { grep "^pmtrain" $TMP/out.txt; fail "reshard: no line '$want'"; }
diff <(json_field $TMP/full1/metrics.jsonl train pair_id_sum) <(json_field $TMP/re/metrics.jsonl train pair_id_sum) \
  || fail "reshard: the pairs per step differ (a pair repeated or skipped)"
awk 'NR == FNR { a[FNR] = $1; next } { d = a[FNR] - $1; if (d < 0) d = -d; if (d > 1e-5 * a[FNR] + 1e-7) exit 1 }' \
  <(json_field $TMP/full1/metrics.jsonl train loss) <(json_field $TMP/re/metrics.jsonl train loss) \
  || fail "reshard: loss curve differs beyond fp32 round-off"
echo "reshard 4 ranks stage 3 -> 2 ranks stage 1: same pairs per step, losses within 1e-5"

# A resume's checkpoint reads show as progress lines (run.eval_progress_s; Qwen3's vocabulary, for a file of
# megabytes): with a line due at every read, the last one counts all that rank 0 read, its one file twice (hashed by
# --resume auto, then streamed into the engine): twice the size the file system gives, as pmtrain prints bytes.
P1="configs/tiny_cpu.yaml --set data.cache_dir=$TMP/cache --set run.steps=2 --set batch.global=4 --set batch.micro=2
  --set run.eval_every=0 --set data.test_files=[] --set zero.stage=0 --set run.dir=$TMP/prog"
$MPIRUN -np 1 "$PMTRAIN" train $P1 --set run.stop_at=1 > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; fail "progress: first run"; }
$MPIRUN -np 1 "$PMTRAIN" train $P1 --set run.resume=auto --set run.eval_progress_s=0.000001 > $TMP/prog.txt 2>&1 \
  || { cat $TMP/prog.txt; fail "progress: resumed run"; }
size=$(stat -c %s $TMP/prog/checkpoints/step_1/rank_0.bin)
want=$(python3 -c "b = 2 * $size; print(f'{b / 2**30:.1f} GiB' if b >= 2**30 else f'{b / 2**20:.0f} MiB')")
last=$(grep "^pmtrain: reading checkpoint files: " $TMP/prog.txt | tail -1)
[[ "$last" == "pmtrain: reading checkpoint files: $want read by rank 0 so far, "*"/s" ]] \
  || { grep -m3 "reading checkpoint" $TMP/prog.txt; fail "progress: the last reading line is not '$want read by rank 0' ($last)"; }
echo "resume progress: $(grep -c "^pmtrain: reading checkpoint files: " $TMP/prog.txt) lines, the last: ${last#pmtrain: }"
