#!/usr/bin/env bash
# data.test_sets: named test sets, each evaluated and reported on its own (HF's dict of eval datasets).
#  - a 2-rank run with sets a (10 pairs) and b (14 pairs) writes, at each evaluation, the whole split at the top
#    of the eval record (24 pairs: the pair-weighted mean of the sets, to round-off) and each set under "sets",
#    prints a line per set, and ranks checkpoints by the whole split (run.keep_best);
#  - each set's numbers equal `pmtrain eval` of that file alone as data.test_files on the run's checkpoint,
#    to the last digit, with run.eval_pairs too (it limits each set);
#  - test_files and test_sets together: the split is both, only the named sets are listed;
#  - a set without files, a name that is no plain word, a missing file and a list instead of a mapping are
#    errors naming the key.
source "$(dirname "$0")/common.sh"
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz | sed -n 1,10p > $TMP/a.jsonl
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz | sed -n 11,24p > $TMP/b.jsonl
COMMON="configs/tiny_cpu.yaml $SMALL --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache --set batch.global=8"
SETS="data.test_sets={a: [$TMP/a.jsonl], b: [$TMP/b.jsonl]}"
$MPIRUN -np 2 "$PMTRAIN" train $COMMON --set run.steps=4 --set run.eval_every=2 --set run.save_every=2 \
  --set run.keep_best=loss --set "data.test_files=[]" --set "$SETS" > $TMP/train.txt 2>&1 \
  || { cat $TMP/train.txt; fail "training with test sets failed"; }
grep -qE '^  set a \| loss [0-9.]+ .*\| 10 pairs$' $TMP/train.txt && grep -qE '^  set b \| .*\| 14 pairs$' $TMP/train.txt \
  || { cat $TMP/train.txt; fail "no line per set under the eval lines"; }
[ -L $TMP/run/checkpoints/best ] || fail "keep_best with only test sets: no checkpoints/best"

# eval_one WEIGHTS_ARGS...: the eval record `pmtrain eval` prints (2 ranks).
eval_record() {
  $MPIRUN -np 2 "$PMTRAIN" eval $COMMON "$@" > $TMP/eval.txt 2>&1 || { cat $TMP/eval.txt; fail "eval $* failed"; }
  grep '^{.*"type":"eval"' $TMP/eval.txt | untimed
}
final=$(grep '"final":true' $TMP/run/metrics.jsonl)
alone_a=$(eval_record --set "data.test_files=[$TMP/a.jsonl]")
alone_b=$(eval_record --set "data.test_files=[$TMP/b.jsonl]")
five=$(eval_record --set "data.test_files=[]" --set "$SETS" --set run.eval_pairs=5)
five_a=$(eval_record --set "data.test_files=[$TMP/a.jsonl]" --set run.eval_pairs=5)
mixed=$(eval_record --set "data.test_files=[$TMP/a.jsonl]" --set "data.test_sets={b: [$TMP/b.jsonl]}")
# eval --data NAME=FILE names sets as data.test_sets does: the same record, and a plain FILE beside them.
sets=$(eval_record --set "data.test_files=[]" --set "$SETS")
[ "$(eval_record --data b=$TMP/b.jsonl --data a=$TMP/a.jsonl)" = "$sets" ] || fail "eval --data a=FILE --data b=FILE is not data.test_sets"
[ "$(eval_record --data $TMP/a.jsonl --data b=$TMP/b.jsonl)" = "$mixed" ] || fail "eval --data FILE --data b=FILE is not test_files + a set"
python3 - "$TMP/run/metrics.jsonl" "$final" "$alone_a" "$alone_b" "$five" "$five_a" "$mixed" <<'PY' || fail "test set records"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if '"type":"eval"' in l]
final, alone_a, alone_b, five, five_a, mixed = (json.loads(a) for a in sys.argv[2:])
FIELDS = ("loss", "accuracy", "chosen_reward", "rejected_reward")
def check(ok, what):
    if not ok: sys.exit(f"FAIL: {what}")
def weighted(rec, names):
    n = sum(rec["sets"][s]["pairs"] if s in rec["sets"] else names[s]["pairs"] for s in names)
    for f in FIELDS:
        want = sum((rec["sets"].get(s) or names[s])[f] * (rec["sets"].get(s) or names[s])["pairs"] for s in names) / n
        check(abs(rec[f] - want) <= 1e-12 * max(1.0, abs(want)), f"step {rec['step']}: whole-split {f} {rec[f]} is not the sets' pair-weighted mean {want}")
    check(rec["pairs"] == n, f"whole split has {rec['pairs']} pairs, the sets {n}")
check([r["step"] for r in records] == [2, 4], f"eval steps {[r['step'] for r in records]}")
for r in records:
    check(sorted(r["sets"]) == ["a", "b"] and r["sets"]["a"]["pairs"] == 10 and r["sets"]["b"]["pairs"] == 14,
          f"step {r['step']}: sets {r.get('sets')}")
    weighted(r, {"a": None, "b": None})
# Each set of the run's final eval is that file evaluated alone, to the last digit.
for name, alone in (("a", alone_a), ("b", alone_b)):
    for f in FIELDS + ("pairs",):
        check(final["sets"][name][f] == alone[f], f"set {name} {f}: run {final['sets'][name][f]}, alone {alone[f]}")
    check("sets" not in alone, "an eval without named sets lists sets")
check(five["pairs"] == 10 and five["sets"]["a"]["pairs"] == 5 and five["sets"]["b"]["pairs"] == 5, f"eval_pairs 5: {five}")
for f in FIELDS:
    check(five["sets"]["a"][f] == five_a[f], f"eval_pairs 5, set a {f}: {five['sets']['a'][f]} against {five_a[f]}")
check(list(mixed["sets"]) == ["b"] and mixed["pairs"] == 24, f"test_files + one set: {mixed}")
weighted(mixed | {"step": "mixed"}, {"a": alone_a, "b": None})
print(f"sets: final a loss {final['sets']['a']['loss']:.6f} (alone {alone_a['loss']:.6f}), b {final['sets']['b']['loss']:.6f} "
      f"(alone {alone_b['loss']:.6f}), whole {final['loss']:.6f} over {final['pairs']} pairs; eval_pairs 5 per set")
PY

X="train $COMMON --set run.dir=$TMP/bad --set run.steps=1"
# Files whose every line is dropped (no pair left) stop the run before it trains, naming the key, the files and
# why their lines went: a set of 0 pairs once scored loss 0 and won run.keep_best.
echo '{"chosen": "no rejected answer"}' > $TMP/e.jsonl
# (the splits loaded before it print their pair counts too: common.sh's stops)
stops "a test set with no pair left" "the test set 'e' (data.test_sets.e: $TMP/e.jsonl) has no pairs left" $X \
  --set "data.test_files=[]" --set "data.test_sets={a: [$TMP/a.jsonl], e: [$TMP/e.jsonl]}"
stops "a test split with no pair left" "the test split (data.test_files: $TMP/e.jsonl) has no pairs left" $X \
  --set "data.test_files=[$TMP/e.jsonl]"
stops "a train split with no pair left" "the train split (data.train_files: $TMP/e.jsonl) has no pairs left" $X \
  --set "data.train_files=[$TMP/e.jsonl]"
stops "why the lines went" "missing_field: 1 (first: $TMP/e.jsonl:1" $X --set "data.test_files=[$TMP/e.jsonl]"
bad "set without files" "set 'a' has no files" $X --set "data.test_sets={a: []}"
stops "a file twice in a set" "data.test_sets.a gives $TMP/a.jsonl twice" $X --set "data.test_sets={a: [$TMP/a.jsonl, $TMP/a.jsonl]}"
bad "set name with a space" "set name 'a b' must be" $X --set "data.test_sets={a b: [$TMP/a.jsonl]}"
bad "missing file" "data.test_sets.b: $TMP/none.jsonl does not exist" $X --set "data.test_sets={b: [$TMP/none.jsonl]}"
bad "list instead of mapping" "expected a mapping" $X --set "data.test_sets=[$TMP/a.jsonl]"
bad "eval --data with a bad set name" "set name 'a b' must be" eval $COMMON --data "a b=$TMP/a.jsonl"
bad "eval --data NAME=missing file" "--data a: $TMP/none.jsonl does not exist" eval $COMMON --data a=$TMP/none.jsonl
