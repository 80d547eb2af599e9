#!/usr/bin/env bash
# data.train_sets with data.train_weights: a training mix (data/mix.h), checked at the pairs each step trained
# on (metrics.jsonl's pair_id_sum: the step's real pair ids summed), against sums worked by hand.
#  - sets a (10 pairs: ids 0-9), b (12: ids 10-21, weight 0.5), c (4: ids 22-25, weight 2), in name order: an
#    epoch is 10 + 6 + 8 = 24 of the 26 pairs, 6 steps of 4 over 2 ranks; two epochs train on a twice
#    (2 x 45), c four times (4 x 94) and b once (each half in one epoch: 186): pair ids summing to 652;
#  - the log names the mix; `pmtrain plan` prices 24 pairs an epoch;
#  - stopped at step 5 and resumed, the steps after are the uninterrupted run's, bit for bit;
#  - a weight naming no set, a weight of 0, one too small to take a pair, and a file in two sources are
#    errors naming the key.
source "$(dirname "$0")/common.sh"
zcat data/assets/hh-rlhf/harmless-base/train.jsonl.gz | sed -n 1,10p > $TMP/a.jsonl
zcat data/assets/hh-rlhf/harmless-base/train.jsonl.gz | sed -n 11,22p > $TMP/b.jsonl
zcat data/assets/hh-rlhf/harmless-base/train.jsonl.gz | sed -n 23,26p > $TMP/c.jsonl
COMMON=(configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set batch.global=4 --set "data.test_files=[]"
  --set "data.train_files=[]" --set "data.train_sets={a: [$TMP/a.jsonl], b: [$TMP/b.jsonl], c: [$TMP/c.jsonl]}"
  --set "data.train_weights={b: 0.5, c: 2}")
$MPIRUN -np 2 "$PMTRAIN" train "${COMMON[@]}" --set run.dir=$TMP/run --set run.epochs=2 --set run.save_every=5 \
  > $TMP/train.txt 2>&1 || { cat $TMP/train.txt; fail "training on a mix failed"; }
grep -qF "training mix (data.train_sets x data.train_weights): a 10 pairs x 1 = 10, b 12 x 0.5 = 6, c 4 x 2 = 8: 24 pairs an epoch" \
  $TMP/train.txt || { cat $TMP/train.txt; fail "no line naming the mix"; }
grep -qF "12 steps (6 per epoch)" $TMP/train.txt || { cat $TMP/train.txt; fail "not 6 steps an epoch"; }
sum=$(json_field $TMP/run/metrics.jsonl train pair_id_sum | awk '{s += $1} END {print s}')
[ "$sum" = 652 ] || fail "two epochs trained on pair ids summing to $sum, not 652 (2 x a, 4 x c, b once)"
echo "ok: two epochs of the mix: pair ids sum to $sum"

# Stopped at step 5 (its checkpoint) and resumed: the same steps after it.
$MPIRUN -np 2 "$PMTRAIN" train "${COMMON[@]}" --set run.dir=$TMP/stop --set run.epochs=2 --set run.stop_at=5 > $TMP/stop.txt 2>&1 \
  || { cat $TMP/stop.txt; fail "the run to step 5 failed"; }
$MPIRUN -np 2 "$PMTRAIN" train "${COMMON[@]}" --set run.dir=$TMP/stop --set run.epochs=2 --resume auto > $TMP/resume.txt 2>&1 \
  || { cat $TMP/resume.txt; fail "the resumed run failed"; }
diff <(fields $TMP/run/metrics.jsonl | awk '$1 == "train" && $2 > 5') \
     <(fields $TMP/stop/metrics.jsonl | awk '$1 == "train" && $2 > 5') > /dev/null \
  || fail "resumed at step 5, the steps after differ from the uninterrupted run's"
echo "ok: resumed at step 5 of the mix: steps 6-12 as uninterrupted"

"$PMTRAIN" plan "${COMMON[@]}" --world 2 > $TMP/plan.txt 2>&1 || { cat $TMP/plan.txt; fail "plan failed"; }
grep -qF "24 pairs/epoch" $TMP/plan.txt || { cat $TMP/plan.txt; fail "plan does not price the mix's 24 pairs an epoch"; }

X=(train "${COMMON[@]}" --set run.dir=$TMP/bad --set run.steps=1)
bad "a weight naming no set" "data.train_weights names 'd', which is not a data.train_sets set (the sets: a, b, c)" \
  "${X[@]}" --set "data.train_weights={d: 2}"
bad "a weight of 0" "set 'b' has weight 0" "${X[@]}" --set "data.train_weights={b: 0}"
stops "a weight too small" "source 'b' at weight 0.01 takes none of its 12 pairs an epoch" \
  "${X[@]}" --set "data.train_weights={b: 0.01}"
stops "a file in two sources" "data.train_sets.b gives $TMP/a.jsonl, which data.train_sets.a gives too" \
  "${X[@]}" --set "data.train_sets={a: [$TMP/a.jsonl], b: [$TMP/a.jsonl], c: [$TMP/c.jsonl]}"
echo "PASS"
