#!/usr/bin/env bash
# eval and score take the trained weights, not the random init:
#  - `pmtrain eval CONFIG` on a finished run (2 ranks) says which checkpoint it evaluates and gives exactly
#    the run's final eval record (loss, accuracy, rewards, pairs); `--init` says so and differs, and
#    equals the run's step-0 record (run.eval_at_start); a run without checkpoints is an error that names
#    the choices;
#  - `pmtrain score` writes one row per input line in input order, with the input's line numbers, rows
#    for bad lines saying why, the count of skipped lines on stderr; data.bad_lines=fail stops there;
#  - eval's loss and accuracy equal what score's rewards give, plain and with margins and centering.
source "$(dirname "$0")/common.sh"
COMMON="configs/tiny_cpu.yaml --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache --set run.steps=3
  --set batch.global=8 --set run.eval_every=0 --set run.eval_pairs=16"
$MPIRUN -np 2 "$PMTRAIN" train $COMMON --set run.eval_at_start=true > $TMP/train.txt 2>&1 \
  || { cat $TMP/train.txt; fail "training failed"; }
# field NAME: the value of "NAME" in a one-line JSON record on stdin
field() { sed -E "s/.*\"$1\":([^,}]*).*/\1/"; }
final=$(grep '"final":true' $TMP/run/metrics.jsonl) || fail "no final eval record"

$MPIRUN -np 2 "$PMTRAIN" eval $COMMON > $TMP/eval.txt 2>&1 || { cat $TMP/eval.txt; fail "eval failed"; }
head -1 $TMP/eval.txt | grep -qxF "eval: weights: checkpoint $TMP/run/checkpoints/step_3 (step 3)" \
  || { cat $TMP/eval.txt; fail "eval's first line does not name the run's final checkpoint"; }
! grep -q "memory plan" $TMP/eval.txt || fail "eval printed the training plan"
rec=$(grep '^{.*"type":"eval"' $TMP/eval.txt) || { cat $TMP/eval.txt; fail "no eval record"; }
for f in loss accuracy chosen_reward rejected_reward pairs; do
  [ "$(field $f <<<"$rec")" = "$(field $f <<<"$final")" ] \
    || fail "eval $f $(field $f <<<"$rec") differs from the run's final eval $(field $f <<<"$final")"
done
echo "eval = the run's final eval: loss $(field loss <<<"$rec"), accuracy $(field accuracy <<<"$rec"), $(field pairs <<<"$rec") pairs"
# Each eval record, the run's and eval's, says how long it took (HF's eval_runtime, eval_samples_per_second).
python3 - "$rec" "$final" <<'PY' || fail "eval records without their runtime and pairs/s"
import json, sys
for r in map(json.loads, sys.argv[1:]):
    t, rate = r["runtime_s"], r["pairs_per_s"]
    assert 0 < t < 60 and abs(rate * t - r["pairs"]) <= 1e-6 * r["pairs"], r
PY
grep -qE "^eval \| loss .* \| 16 pairs in [0-9.]+ s, [0-9]+ pairs/s$" $TMP/eval.txt || { cat $TMP/eval.txt; fail "the eval line does not say its time"; }

# A long evaluation says how far it is (run.eval_progress_s; the default 30 s prints nothing for the one above):
# rank 0 alone, batches counted up to the total the first line gives, never the last (the result follows).
! grep -q "^eval: [0-9]* of" $TMP/eval.txt || fail "a short evaluation printed progress"
$MPIRUN -np 2 "$PMTRAIN" eval $COMMON --init --set run.eval_pairs=200 --set batch.eval_micro=1 \
  --set run.eval_progress_s=0.02 > $TMP/progress.txt 2>&1 || { cat $TMP/progress.txt; fail "eval with progress failed"; }
total=$(sed -nE 's/^pmtrain: eval of 200 of .*\(([0-9]+) per rank\)$/\1/p' $TMP/progress.txt)
[ "$total" = 100 ] || { cat $TMP/progress.txt; fail "expected 100 batches per rank, got '$total'"; }
grep -E "^eval: [0-9]+ of" $TMP/progress.txt | awk -v total=$total '
  { ok = match($0, /^eval: [0-9]+ of [0-9]+ batches \([0-9]+%\), [0-9.]+ batches\/s, ETA [0-9hms]+$/) }
  !ok || $2 + 0 <= last || $4 != total || $2 + 0 >= total { print "bad progress line: " $0; bad = 1 }
  { last = $2 + 0; n++ }
  END { if (n < 2) { print "only " n " progress lines"; bad = 1 } exit bad }' \
  || { cat $TMP/progress.txt; fail "progress lines"; }
echo "progress: $(grep -c "^eval: [0-9]* of" $TMP/progress.txt) lines of a $total-batch evaluation, e.g. '$(grep -m1 "^eval: [0-9]* of" $TMP/progress.txt)'"

$MPIRUN -np 2 "$PMTRAIN" eval $COMMON --init > $TMP/init.txt 2>&1 || { cat $TMP/init.txt; fail "eval --init failed"; }
head -1 $TMP/init.txt | grep -q "^eval: weights: the config's initial weights: random init" || fail "--init: first line"
init_loss=$(grep '^{.*"type":"eval"' $TMP/init.txt | field loss)
[ "$init_loss" != "$(field loss <<<"$rec")" ] || fail "eval --init gives the trained loss"
echo "eval --init: loss $init_loss (untrained)"
# run.eval_at_start: the run's step-0 record is the evaluation of its starting weights, eval --init's.
start=$(grep '"type":"eval"' $TMP/run/metrics.jsonl | grep '"step":0,') || fail "no step-0 eval record (run.eval_at_start)"
init_rec=$(grep '^{.*"type":"eval"' $TMP/init.txt)
for f in loss accuracy chosen_reward rejected_reward pairs; do
  [ "$(field $f <<<"$start")" = "$(field $f <<<"$init_rec")" ] \
    || fail "run.eval_at_start: $f $(field $f <<<"$start") differs from eval --init's $(field $f <<<"$init_rec")"
done
grep -q "^eval @ step 0 | loss " $TMP/train.txt || fail "no 'eval @ step 0' line"
echo "run.eval_at_start: step-0 record = eval --init (loss $(field loss <<<"$start"))"

set +e
"$PMTRAIN" eval configs/tiny_cpu.yaml --set run.dir=$TMP/empty --set data.cache_dir=$TMP/cache > $TMP/none.txt 2>&1
rc=$?
set -e
[ $rc -ne 0 ] && grep -qF "no complete checkpoint in $TMP/empty/checkpoints" $TMP/none.txt && grep -q -- "--init" $TMP/none.txt \
  || { cat $TMP/none.txt; fail "eval without checkpoints: expected an error naming the run and --init"; }
echo "eval without checkpoints: $(cat $TMP/none.txt)"

# 12 pairs, then the same with a malformed line (3), a blank line (7) and a line without "rejected" (10).
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz | sed -n 1,12p > $TMP/clean.jsonl
awk 'NR == 3 { print "not json" } NR == 6 { print "" } NR == 8 { print "{\"chosen\": \"x\"}" } { print }' $TMP/clean.jsonl \
  > $TMP/dirty.jsonl
"$PMTRAIN" score $COMMON --data $TMP/clean.jsonl --out $TMP/clean.out 2> /dev/null
"$PMTRAIN" score $COMMON --data $TMP/dirty.jsonl --out $TMP/dirty.out 2> $TMP/score.err
head -1 $TMP/score.err | grep -qxF "score: weights: checkpoint $TMP/run/checkpoints/step_3 (step 3)" \
  || { cat $TMP/score.err; fail "score's first line does not name the checkpoint"; }
grep -q "12 pairs scored, 3 lines skipped" $TMP/score.err || { cat $TMP/score.err; fail "skipped count not on stderr"; }
[ "$(field line < $TMP/dirty.out | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 " ] || fail "rows not one per line in order"
grep -qxF '{"line":3,"skipped":"not a JSON object: parse error at line 1, column 2: syntax error while parsing value - invalid literal; last read: '"'no'"'"}' \
  $TMP/dirty.out || { cat $TMP/dirty.out; fail "line 3 not reported as malformed, with the parser's reason"; }
grep -qxF '{"line":7,"skipped":"blank line"}' $TMP/dirty.out || fail "line 7 not reported as blank"
grep -qxF "{\"line\":10,\"skipped\":\"no field 'rejected'\"}" $TMP/dirty.out || fail "line 10 not reported"
# The scored rows carry the clean file's rewards in the clean file's order.
diff <(field chosen < $TMP/clean.out) <(grep -v skipped $TMP/dirty.out | field chosen) || fail "rewards moved between lines"
[ $(field chosen < $TMP/clean.out | sort -u | wc -l) = 12 ] || fail "expected 12 different rewards"
# Batches reorder their pairs (longest first): the same pairs in reverse order, so in other batches, get
# the same rewards back in reverse (within fp32 round-off).
tac $TMP/clean.jsonl > $TMP/reversed.jsonl
"$PMTRAIN" score $COMMON --data $TMP/reversed.jsonl --out $TMP/reversed.out 2> /dev/null
paste -d' ' <(field chosen < $TMP/clean.out) <(field chosen < $TMP/reversed.out | tac) \
  | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($1 < 0 ? -$1 : $1) + 1e-6) exit 1 }' \
  || fail "the reversed file's rewards are not the clean file's in reverse: rows do not follow their input lines"
echo "score: 15 lines -> 15 rows in order, 3 skipped (lines 3, 7, 10), rewards equal the clean file's"
# From a pipe (--data /dev/stdin): the same rows (the reader once lost a pipe's first two bytes, read to look for
# gzip's magic); gzip from a pipe is refused by name.
"$PMTRAIN" score $COMMON --data /dev/stdin --out $TMP/piped.out < <(cat $TMP/clean.jsonl) 2> $TMP/piped.err \
  || { cat $TMP/piped.err; fail "score from a pipe failed"; }
cmp -s $TMP/clean.out $TMP/piped.out || fail "score from a pipe differs from the file's rows"
! "$PMTRAIN" score $COMMON --data /dev/stdin < <(cat data/assets/hh-rlhf/harmless-base/test.jsonl.gz) > $TMP/gzpipe.txt 2>&1 \
  && grep -q "^pmtrain score: error: /dev/stdin: gzip data from a pipe: give the .gz file itself" $TMP/gzpipe.txt \
  || { cat $TMP/gzpipe.txt; fail "score of gzip from a pipe: expected the error naming it"; }
# A long score says how far it is (run.eval_progress_s, on stderr): the share of the file read rising, lines and
# pairs scored counted up, pairs/s and an ETA; the default (30 s) prints nothing for the 12 lines above.
! grep -q "of the file read" $TMP/score.err || fail "a short score printed progress"
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz > $TMP/test_set.jsonl
"$PMTRAIN" score $COMMON --data $TMP/test_set.jsonl --set run.eval_progress_s=0.01 --out $TMP/test_set.out \
  2> $TMP/progress_score.err || { cat $TMP/progress_score.err; fail "score with progress failed"; }
grep "of the file read" $TMP/progress_score.err | awk '
  { ok = match($0, /^score: [0-9]+% of the file read, [0-9]+ lines, [0-9]+ pairs scored, [0-9.]+ pairs\/s, ETA [0-9hms]+$/) }
  !ok || $2 + 0 < pct || $7 + 0 <= lines || $9 + 0 > $7 + 0 { print "bad progress line: " $0; bad = 1 }
  { pct = $2 + 0; lines = $7 + 0; n++ }
  END { if (n < 3 || pct == 0) { print n " progress lines, last at " pct "%"; bad = 1 } exit bad }' \
  || { cat $TMP/progress_score.err; fail "score's progress lines"; }
echo "score progress: $(grep -c "of the file read" $TMP/progress_score.err) lines, e.g. '$(grep -m1 "of the file read" $TMP/progress_score.err)'"
# score's forward passes: with a training batch, eval's batches (what `train --dry-run` says they are: sized
# by the training micro-batch's activation memory), batch.eval_micro(_tokens) when set, 8 pairs without a
# training batch; a token budget cuts the pairs in input order. Other batches, the same rewards.
eval_pairs=$("$PMTRAIN" train $COMMON --dry-run 2>&1 | sed -nE 's/^evaluation batches of at most ([0-9]+) pairs per rank$/\1/p')
[ -n "$eval_pairs" ] || fail "train --dry-run did not say its evaluation batch"
grep -q " forward passes of $eval_pairs pairs\? (what the training micro-batch's activation memory holds)$" $TMP/score.err \
  || { cat $TMP/score.err; fail "score did not take eval's batch of $eval_pairs pairs"; }
same_rewards() {
  paste -d' ' <(field chosen < $TMP/clean.out) <(field chosen < $1) \
    | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($1 < 0 ? -$1 : $1) + 1e-6) exit 1 }'
}
"$PMTRAIN" score $COMMON --data $TMP/clean.jsonl --set batch.eval_micro=2 --out $TMP/by2.out 2> $TMP/by2.err
grep -q "; 6 forward passes of 2 pairs (as set)$" $TMP/by2.err || { cat $TMP/by2.err; fail "score did not take batch.eval_micro"; }
same_rewards $TMP/by2.out || fail "score's rewards in batches of 2 differ from batches of $eval_pairs"
"$PMTRAIN" score $COMMON --data $TMP/clean.jsonl --set batch.micro=0 --set batch.global=0 --out $TMP/by8.out 2> $TMP/by8.err
grep -q "; 2 forward passes of 8 pairs (the default without a training batch)$" $TMP/by8.err \
  || { cat $TMP/by8.err; fail "score without a training batch did not take 8 pairs"; }
same_rewards $TMP/by8.out || fail "score's rewards in batches of 8 differ from batches of $eval_pairs"
"$PMTRAIN" score $COMMON --data $TMP/clean.jsonl --set batch.micro_tokens=600 --set batch.eval_micro_tokens=700 \
  --out $TMP/by700.out 2> $TMP/by700.err
grep -q " forward passes of at most 700 tokens (as set)$" $TMP/by700.err \
  || { cat $TMP/by700.err; fail "score did not take batch.eval_micro_tokens"; }
same_rewards $TMP/by700.out || fail "score's rewards in passes of at most 700 tokens differ from batches of $eval_pairs"

# eval's numbers against another path to them: `score` the eval set (the test file's first 16 pairs, one
# rank, its own batches) and take the mean pair loss softplus(r_rejected - r_chosen) and the accuracy
# from its rewards: the same to fp32 round-off.
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz | sed -n 1,16p > $TMP/eval_set.jsonl
"$PMTRAIN" score $COMMON --data $TMP/eval_set.jsonl --out $TMP/eval_set.out 2> /dev/null
paste -d' ' <(field chosen < $TMP/eval_set.out) <(field rejected < $TMP/eval_set.out) \
  | awk -v loss="$(field loss <<<"$rec")" -v acc="$(field accuracy <<<"$rec")" '
      { d = $2 - $1; s += (d > 0 ? d + log(1 + exp(-d)) : log(1 + exp(d))); n++; if ($1 > $2) c++ }
      END { m = s / n; e = m - loss; if (e < 0) e = -e
            printf "eval from score'"'"'s rewards: loss %.6f (eval %s), accuracy %.4f (eval %s), %d pairs\n", m, loss, c / n, acc, n
            if (n != 16 || e > 1e-5 * loss + 1e-6 || (c / n - acc) ^ 2 > 1e-12) exit 1 }' \
  || fail "eval's loss or accuracy is not what score's rewards give for the same pairs"

# The loss with per-pair margins (data.margin_field) and reward centering (loss.center_rewards), the same
# way: eval on the eval set with a margin on each line (0, 0.5, 1, 1.5, in turn) against the mean of
# softplus(r_rejected - r_chosen + margin) + 0.01 (r_chosen + r_rejected)^2 over score's rewards.
awk '{ sub(/}[ \t]*$/, ", \"margin\": " (NR % 4) * 0.5 "}"); print }' $TMP/eval_set.jsonl > $TMP/eval_margin.jsonl
$MPIRUN -np 2 "$PMTRAIN" eval $COMMON --set "data.test_files=[$TMP/eval_margin.jsonl]" --set data.margin_field=margin \
  --set loss.center_rewards=0.01 > $TMP/eval_margin.txt 2>&1 || { cat $TMP/eval_margin.txt; fail "eval with margins failed"; }
mrec=$(grep '^{.*"type":"eval"' $TMP/eval_margin.txt) || { cat $TMP/eval_margin.txt; fail "no eval record with margins"; }
# eval --data FILE: that file instead of the config's test split, the same record as data.test_files=[FILE].
$MPIRUN -np 2 "$PMTRAIN" eval $COMMON --data $TMP/eval_margin.jsonl --set data.margin_field=margin \
  --set loss.center_rewards=0.01 > $TMP/eval_data.txt 2>&1 || { cat $TMP/eval_data.txt; fail "eval --data failed"; }
[ "$(grep '^{.*"type":"eval"' $TMP/eval_data.txt | untimed)" = "$(untimed <<<"$mrec")" ] \
  || { cat $TMP/eval_data.txt; fail "eval --data differs from data.test_files"; }
bad "eval --data of a missing file" "--data: $TMP/none.jsonl does not exist" eval $COMMON --data $TMP/none.jsonl
paste -d' ' <(field chosen < $TMP/eval_set.out) <(field rejected < $TMP/eval_set.out) \
  | awk -v loss="$(field loss <<<"$mrec")" -v plain="$(field loss <<<"$rec")" '
      { m = (NR % 4) * 0.5; d = $2 - $1 + m; s += (d > 0 ? d + log(1 + exp(-d)) : log(1 + exp(d))) + 0.01 * ($1 + $2) ^ 2; n++ }
      END { e = s / n - loss; if (e < 0) e = -e
            printf "eval with margins and centering from score'"'"'s rewards: loss %.6f (eval %s; without them %s)\n", s / n, loss, plain
            if (n != 16 || e > 1e-5 * loss + 1e-6 || loss - plain < 0.1) exit 1 }' \
  || fail "eval's loss with margins and centering is not what score's rewards give"

set +e
"$PMTRAIN" score $COMMON --data $TMP/dirty.jsonl --set data.bad_lines=fail > $TMP/fail.out 2> $TMP/fail.err
rc=$?
set -e
[ $rc -ne 0 ] && grep -qF "dirty.jsonl:3: not a JSON object" $TMP/fail.err || { cat $TMP/fail.err; fail "bad_lines=fail did not stop at line 3"; }
[ "$(field line < $TMP/fail.out | tr '\n' ' ')" = "1 2 " ] || fail "bad_lines=fail: rows before line 3 expected"
echo "score with data.bad_lines=fail: stopped at line 3 ($(tail -1 $TMP/fail.err))"

# Reasons quote the input; a row must stay valid JSON whatever bytes the line holds: a margin of 50
# non-ASCII characters (cut at 40, whole characters) and a line that is not UTF-8 (its bytes as \xNN).
{ printf '{"chosen": "a", "rejected": "b", "margin": "'; for i in $(seq 50); do printf '\xc3\xa9'; done; printf '"}\n'
  printf '\xff\xfe{}\n'; } > $TMP/bytes.jsonl
"$PMTRAIN" score $COMMON --data $TMP/bytes.jsonl --set data.margin_field=margin --out $TMP/bytes.out 2> $TMP/bytes.err \
  || { cat $TMP/bytes.err; fail "score of lines with non-ASCII and non-UTF-8 reasons failed"; }
python3 - $TMP/bytes.out <<'PY' || fail "score rows of non-ASCII reasons"
import sys, json
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
want = ["field 'margin' is not a finite number (a float's range): \"" + "\u00e9" * 39 + "...",
        "not a JSON object: parse error at line 1, column 1: syntax error while parsing value - invalid literal; last read: '\\xff'"]
if [r.get("skipped") for r in rows] != want: sys.exit(f"FAIL: rows {rows}")
print("score rows quote non-ASCII input as valid JSON:", [r["skipped"][:60] for r in rows])
PY
