#!/usr/bin/env bash
# data.train_sets with data.train_weights: a training mix (data/mix.h), checked at the pairs each step trained
# on (metrics.jsonl's pair_id_sum: the step's real pair ids summed), against sums worked by hand.
#  - sets a (10 pairs: ids 0-9), b (12: ids 10-21, weight 0.5), c (4: ids 22-25, weight 2), in name order: an
#    epoch is 10 + 6 + 8 = 24 of the 26 pairs, 6 steps of 4 over 2 ranks; two epochs train on a twice
#    (2 x 45), c four times (4 x 94) and b once (each half in one epoch: 186): pair ids summing to 652;
#  - the log names the mix; `pmtrain plan` prices 24 pairs an epoch;
#  - per-set metrics: each epoch record holds a 10, b 6 and c 8 pairs; each step's sets add up to the step
#    (pairs, correct pairs, loss and reward sums, tokens computed and answer tokens); each epoch's sets are its
#    steps' summed; each set's answer tokens an epoch are what a run on that set's file alone counts (its train
#    records' totals): a's whole each epoch, c's twice, b's two halves its whole; the epoch line lists the sets;
#    under zero.world_invariant one rank logs the same per-set numbers as two;
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

# sets_add_up METRICS: each epoch's sets hold the mix's pairs; each step's and epoch's sets add up to it.
sets_add_up() {
  python3 - "$@" <<'PY' || fail "per-set train metrics of $1 do not add up (above)"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
epochs = [r for r in recs if r["type"] == "epoch"]
assert len(epochs) == 2, f"{len(epochs)} epoch records"
for e in epochs:
    got = {k: v["pairs"] for k, v in e["sets"].items()}
    assert got == {"a": 10, "b": 6, "c": 8}, f"epoch {e['epoch']}: set pairs {got}, want a 10, b 6, c 8"
for r in [r for r in recs if r["type"] == "train"] + epochs:
    sets = r["sets"].values()
    for key in ("pairs", "tokens", "answer_tokens"):
        assert sum(v[key] for v in sets) == r[key], (key, r)
steps = [r for r in recs if r["type"] == "train"]
for e in epochs:
    for name, v in e["sets"].items():
        for key in ("tokens", "answer_tokens"):
            summed = sum(r["sets"].get(name, {}).get(key, 0) for r in steps if r["epoch"] == e["epoch"])
            assert v[key] == summed, (e["epoch"], name, key, v[key], summed)
if len(sys.argv) > 2:  # each set's answer tokens an epoch against the runs on its file alone
    alone = dict(zip("abc", map(int, sys.argv[2:5])))
    one, two = (e["sets"] for e in epochs)
    assert one["a"]["answer_tokens"] == two["a"]["answer_tokens"] == alone["a"], ("a", one["a"], two["a"], alone)
    assert one["c"]["answer_tokens"] == two["c"]["answer_tokens"] == 2 * alone["c"], ("c", one["c"], two["c"], alone)
    assert one["b"]["answer_tokens"] + two["b"]["answer_tokens"] == alone["b"], ("b", one["b"], two["b"], alone)
    for key in ("loss", "accuracy", "chosen_reward", "rejected_reward"):
        total = sum(v[key] * v["pairs"] for v in sets)
        assert abs(total - r[key] * r["pairs"]) <= 1e-9 * (1 + abs(total)), (key, total, r)
PY
}
# Each set's file alone, 2 pairs a step for one epoch (every pair once): the answer tokens its train records count.
for set in a b c; do
  $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set batch.global=2 --set batch.micro=1 \
    --set "data.test_files=[]" --set "data.train_files=[$TMP/$set.jsonl]" --set run.dir=$TMP/alone_$set --set run.epochs=1 \
    > $TMP/alone_$set.txt 2>&1 || { cat $TMP/alone_$set.txt; fail "the run on set $set alone failed"; }
done
alone=($(for set in a b c; do json_field $TMP/alone_$set/metrics.jsonl train answer_tokens | awk '{s += $1} END {print s}'; done))
sets_add_up $TMP/run/metrics.jsonl "${alone[@]}"
echo "ok: each set's answer tokens an epoch as counted alone (a ${alone[0]}, b ${alone[1]} over two epochs, c 2 x ${alone[2]})"
grep -qE "^  set b \| loss [0-9.]+ \| acc [0-9.]+ \| .* \| 6 pairs$" $TMP/train.txt \
  || { cat $TMP/train.txt; fail "the epoch line does not list set b's 6 pairs"; }
for np in 1 2; do
  $MPIRUN -np $np "$PMTRAIN" train "${COMMON[@]}" --set run.dir=$TMP/inv$np --set run.steps=6 --set batch.micro=1 \
    --set zero.world_invariant=true > $TMP/inv$np.txt 2>&1 || { cat $TMP/inv$np.txt; fail "world_invariant np $np failed"; }
done
# step_sets METRICS: each train record's "sets", one line each.
step_sets() {
  python3 -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["type"] == "train": print(r["step"], json.dumps(r["sets"], sort_keys=True))' "$1"
}
diff <(step_sets $TMP/inv1/metrics.jsonl) <(step_sets $TMP/inv2/metrics.jsonl) \
  || fail "zero.world_invariant: per-set train metrics at 1 rank differ from 2 ranks'"
[ "$(step_sets $TMP/inv1/metrics.jsonl | wc -l)" = 6 ] || fail "not 6 steps of per-set metrics"
echo "ok: per-set train metrics add up to each step and epoch (a 10, b 6, c 8 pairs an epoch), same at 1 and 2 ranks"

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
