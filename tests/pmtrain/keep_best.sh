#!/usr/bin/env bash
# run.keep_best: with an evaluation and a checkpoint at every step and run.keep_last 1, a run keeps its last
# checkpoint and the one whose evaluation was best by the run's own eval records in metrics.jsonl (lowest
# loss; the earliest of equals), links it as checkpoints/best, and `pmtrain eval --checkpoint .../best`
# gives that step's record again; export takes the link too, and run.export best writes that step's weights
# when the run ends (HF's load_best_model_at_end). run.early_stop ends a run by the same
# records. A save without an evaluation is refused before any data is read.
source "$(dirname "$0")/common.sh"
# A learning rate high enough that the eval loss rises again after its first steps, so the best is not
# simply the last (checked below: otherwise the test would not show retention keeping it).
RUN="configs/tiny_cpu.yaml --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache --set run.steps=8
  --set batch.global=8 --set run.eval_every=1 --set run.save_every=1 --set run.keep_last=1 --set run.eval_pairs=24
  --set optim.lr=0.03 --set optim.warmup_steps=1 --set optim.schedule=constant --set run.keep_best=loss"
$MPIRUN -np 2 "$PMTRAIN" train $RUN --set run.export=best --set run.export_dtype=fp32 > $TMP/train.txt 2>&1 \
  || { cat $TMP/train.txt; fail "training failed"; }
paste -d' ' <(grep '"type":"eval"' $TMP/run/metrics.jsonl | sed -E 's/.*"step":([0-9]+).*/\1/') \
            <(json_field $TMP/run/metrics.jsonl eval loss) > $TMP/evals.txt
[ $(wc -l < $TMP/evals.txt) = 8 ] || { cat $TMP/evals.txt; fail "expected an eval record at each of 8 steps"; }
want=$(awk 'NR == 1 || $2 < best { best = $2; step = $1 } END { print step }' $TMP/evals.txt)
[ "$want" != 8 ] || { cat $TMP/evals.txt; fail "the best eval is the last step's: pick settings where it is not"; }
[ "$(readlink $TMP/run/checkpoints/best)" = "step_$want" ] \
  || { cat $TMP/evals.txt; ls -l $TMP/run/checkpoints; fail "checkpoints/best does not link step_$want"; }
[ "$(ls $TMP/run/checkpoints | grep '^step_' | sort | tr '\n' ' ')" = "step_$want step_8 " ] \
  || { ls $TMP/run/checkpoints; fail "expected exactly step_$want (best) and step_8 (last) kept"; }
grep -qF "best checkpoint by eval loss: step_$want" $TMP/train.txt || { tail -5 $TMP/train.txt; fail "no best-checkpoint line"; }
echo "keep_best loss: evals $(awk '{printf "%s:%.4f ", $1, $2}' $TMP/evals.txt)-> step_$want kept and linked"

$MPIRUN -np 2 "$PMTRAIN" eval $RUN --checkpoint $TMP/run/checkpoints/best > $TMP/eval.txt 2>&1 \
  || { cat $TMP/eval.txt; fail "eval of checkpoints/best failed"; }
head -1 $TMP/eval.txt | grep -qxF "eval: weights: checkpoint $TMP/run/checkpoints/step_$want (step $want)" \
  || { cat $TMP/eval.txt; fail "eval does not name step_$want"; }
got=$(grep '^{.*"type":"eval"' $TMP/eval.txt | sed -E 's/.*"loss":([^,}]+).*/\1/')
[ "$got" = "$(awk -v s=$want '$1 == s { print $2 }' $TMP/evals.txt)" ] || fail "eval of best: loss $got, not step $want's record"
"$PMTRAIN" export $TMP/run/checkpoints/best --to $TMP/hf --dtype fp32 > $TMP/export.txt 2>&1 \
  || { cat $TMP/export.txt; fail "export of best failed"; }
grep -q "\"source_checkpoint\": *\"$TMP/run/checkpoints/step_$want\"" $TMP/hf/*.json \
  || { cat $TMP/export.txt; fail "export's provenance does not name step_$want"; }
grep -q "\"source_checkpoint\": *\"$TMP/run/checkpoints/step_$want\"" $TMP/run/hf/zero_export.json \
  || { cat $TMP/run/hf/zero_export.json; fail "run.export best did not export step_$want"; }
cmp $TMP/hf/model.safetensors $TMP/run/hf/model.safetensors || fail "run.export best differs from pmtrain export of best"
echo "eval and export of checkpoints/best: step_$want, loss $got"

# run.early_stop 2 on the same run: training ends at the first eval that makes two in a row without a better
# loss (from the records above: HF's patience count), saved there, the final eval at that step; a resumed
# run with the same patience has nothing left to train; with more patience it goes on from there and its
# evals equal the uninterrupted run's bit for bit.
stop_at=$(awk '{ if (NR == 1 || $2 < best) { best = $2; since = 0 } else if (++since >= 2) { print $1; exit } }' $TMP/evals.txt)
[ -n "$stop_at" ] && [ "$stop_at" -lt 8 ] || { cat $TMP/evals.txt; fail "the records give no early stop at patience 2"; }
ES="$RUN --set run.dir=$TMP/es --set run.early_stop=2"
$MPIRUN -np 2 "$PMTRAIN" train $ES > $TMP/es.txt 2>&1 || { cat $TMP/es.txt; fail "early-stop run failed"; }
grep -qF "training ends at step $stop_at of 8" $TMP/es.txt || { tail -8 $TMP/es.txt; fail "no early stop at step $stop_at"; }
[ "$(json_field $TMP/es/metrics.jsonl train step | tail -1)" = "$stop_at" ] || fail "train records past step $stop_at"
grep -q "\"final\":true.*\"step\":$stop_at\|\"step\":$stop_at.*\"final\":true" $TMP/es/metrics.jsonl || fail "no final eval at step $stop_at"
grep '"type":"summary"' $TMP/es/metrics.jsonl | grep -q '"early_stopped":true' || fail "summary does not say early_stopped"
[ "$(cat $TMP/es/checkpoints/latest)" = "step_$stop_at" ] || fail "latest is not step_$stop_at"
$MPIRUN -np 2 "$PMTRAIN" train $ES --resume auto > $TMP/es2.txt 2>&1 || { cat $TMP/es2.txt; fail "resume of a stopped run failed"; }
grep -qF "training ends at step $stop_at of 8" $TMP/es2.txt && ! grep -q '^step ' $TMP/es2.txt \
  || { cat $TMP/es2.txt; fail "a stopped run resumed with the same patience trained on"; }
# The stopped run resumed to rank by accuracy instead: the saved count is of the loss, so it starts afresh.
cp -r $TMP/es $TMP/es_acc
$MPIRUN -np 2 "$PMTRAIN" train $ES --set run.dir=$TMP/es_acc --set run.keep_best=accuracy --resume auto > $TMP/es_acc.txt 2>&1 \
  || { cat $TMP/es_acc.txt; fail "resume with another keep_best metric failed"; }
grep -qF "run.early_stop counts accuracy afresh: the checkpoint's count is of another metric (/eval/loss)" $TMP/es_acc.txt \
  && grep -q "^eval @ step $((stop_at + 1)) " $TMP/es_acc.txt || { cat $TMP/es_acc.txt; fail "a count of the loss stopped a run ranked by accuracy"; }
$MPIRUN -np 2 "$PMTRAIN" train $ES --set run.early_stop=100 --resume auto > $TMP/es3.txt 2>&1 \
  || { cat $TMP/es3.txt; fail "resume with more patience failed"; }
paste -d' ' <(grep '"type":"eval"' $TMP/es/metrics.jsonl | grep -v '"final":true' | sed -E 's/.*"step":([0-9]+).*/\1/') \
            <(grep '"type":"eval"' $TMP/es/metrics.jsonl | grep -v '"final":true' | sed -E 's/.*"loss":([^,}]+).*/\1/') \
  > $TMP/es_evals.txt
diff <(grep -v '^8 ' $TMP/evals.txt) $TMP/es_evals.txt || fail "the resumed run's evals differ from the uninterrupted run's"
# The first end's records (its summary, its final eval) gave way to the resumed run's own.
[ "$(grep -c '"type":"summary"' $TMP/es/metrics.jsonl)" = 1 ] && ! grep '"type":"summary"' $TMP/es/metrics.jsonl | grep -q '"early_stopped":true' \
  || fail "the early stop's summary is still in metrics.jsonl after the run went on"
[ "$(grep '"final":true' $TMP/es/metrics.jsonl | sed -E 's/.*"step":([0-9]+).*/\1/' | tr '\n' ' ')" = "8 " ] \
  || fail "final eval records other than the resumed run's at step 8"
echo "early_stop 2: ends at step $stop_at; resumed with patience 100: evals of steps $(cut -d' ' -f1 $TMP/es_evals.txt | tr '\n' ' ')= the uninterrupted run's"

# run.keep_best_set: the best by one named test set's loss (the run's own records of it), not the whole
# split's; the set must be one of data.test_sets.
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz | sed -n 1,12p > $TMP/a.jsonl
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz | sed -n 13,24p > $TMP/b.jsonl
SETS="data.test_sets={a: [$TMP/a.jsonl], b: [$TMP/b.jsonl]}"
$MPIRUN -np 2 "$PMTRAIN" train $RUN --set run.dir=$TMP/bs --set "data.test_files=[]" --set "$SETS" \
  --set run.keep_best_set=b > $TMP/bs.txt 2>&1 || { cat $TMP/bs.txt; fail "keep_best_set run failed"; }
want_b=$(python3 - $TMP/bs/metrics.jsonl <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"eval"' in l and '"final":true' not in l]
best_b = min(recs, key=lambda r: (r["sets"]["b"]["loss"], r["step"]))["step"]
best_all = min(recs, key=lambda r: (r["loss"], r["step"]))["step"]
print(best_b, best_all, " ".join(f"{r['step']}:{r['sets']['b']['loss']:.4f}" for r in recs))
PY
)
read best_b best_all evals_b <<<"$want_b"
[ "$best_b" != "$best_all" ] || { echo "$want_b"; fail "set b's best is the whole split's: pick sets where it is not"; }
[ "$(readlink $TMP/bs/checkpoints/best)" = "step_$best_b" ] \
  || { echo "$want_b"; ls -l $TMP/bs/checkpoints; fail "keep_best_set b: checkpoints/best is not step_$best_b"; }
grep -qF "best checkpoint by eval loss of set b: step_$best_b" $TMP/bs.txt || { tail -3 $TMP/bs.txt; fail "no best line for set b"; }
echo "keep_best_set b: best step_$best_b by set b ($want_b), step_$best_all by the whole split"
bad "keep_best_set not a set" "run.keep_best_set 'c' is not a data.test_sets set (the sets: a, b)" \
  train $RUN --set "$SETS" --set run.keep_best_set=c

bad "early_stop without keep_best" "run.early_stop 2 counts evaluations of run.keep_best's metric" \
  train $RUN --set run.keep_best=none --set run.early_stop=2
bad "keep_best without an eval at a save" "run.save_every (2) is not a multiple of run.eval_every (3)" \
  train $RUN --set run.save_every=2 --set run.eval_every=3
bad "keep_best without test data" "data.test_files and data.test_sets are empty" train $RUN --set "data.test_files=[]"

# run.stop_at under run.keep_best: the stop's checkpoint carries its step's evaluation, and is saved once. At a
# periodic save's step the stop saved it again without the evaluation (keep_best could no longer rank it); at
# another step its save lacked it; a rerun of the same stop_at wrote the checkpoint it had resumed from again.
SA="configs/tiny_cpu.yaml $SMALL --set run.dir=$TMP/sa --set data.cache_dir=$TMP/cache --set run.steps=4 --set batch.global=8
  --set run.eval_every=1 --set run.save_every=2 --set run.eval_pairs=24 --set run.keep_best=loss --set run.keep_last=4"
has_eval() { grep -q '"eval": *{' $TMP/sa/checkpoints/step_$1/manifest.json || fail "step_$1's manifest has no evaluation ($2)"; }
$MPIRUN -np 2 "$PMTRAIN" train $SA --set run.stop_at=2 > $TMP/sa1.txt 2>&1 || { cat $TMP/sa1.txt; fail "stop_at 2 failed"; }
[ "$(grep -c '^checkpoint: saved step_2$' $TMP/sa1.txt)" = 1 ] || { cat $TMP/sa1.txt; fail "stop_at 2 at a periodic save: step_2 saved other than once"; }
has_eval 2 "stop_at at a periodic save"
$MPIRUN -np 2 "$PMTRAIN" train $SA --set run.stop_at=3 --resume auto > $TMP/sa2.txt 2>&1 || { cat $TMP/sa2.txt; fail "stop_at 3 failed"; }
has_eval 3 "stop_at between periodic saves"
sum=$(md5sum < $TMP/sa/checkpoints/step_3/manifest.json)
$MPIRUN -np 2 "$PMTRAIN" train $SA --set run.stop_at=3 --resume auto > $TMP/sa3.txt 2>&1 || { cat $TMP/sa3.txt; fail "stop_at 3 again failed"; }
! grep -q '^checkpoint: saved' $TMP/sa3.txt && [ "$(md5sum < $TMP/sa/checkpoints/step_3/manifest.json)" = "$sum" ] \
  || { cat $TMP/sa3.txt; fail "a rerun of stop_at 3 saved the checkpoint it resumed from again"; }
echo "stop_at with keep_best: step_2 and step_3 carry their evaluations, saved once; a rerun at the stop saves nothing"
