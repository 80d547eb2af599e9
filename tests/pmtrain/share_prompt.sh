#!/usr/bin/env bash
# data.share_prompt (on by default): each pair's common first tokens stored and computed once. On the bundled
# hh-rlhf pairs at 2 ranks, against data.share_prompt=false: the same pairs every step and the same losses
# within fp32 summation order (1e-5), with at least 20% fewer tokens computed and answer_tokens (the
# answers whole) equal to what the run without sharing computes; `pmtrain eval` and
# `pmtrain score` give the same loss and rewards (1e-5).
source "$(dirname "$0")/common.sh"
RUN="--set data.cache_dir=$TMP/cache --set run.steps=6 --set run.eval_every=0 --set run.save_final=false --set batch.global=8"
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.dir=$TMP/shared > $TMP/shared.log 2>&1 \
  || { cat $TMP/shared.log; fail "shared-prompt run failed"; }
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set data.share_prompt=false --set run.dir=$TMP/whole \
  > $TMP/whole.log 2>&1 || { cat $TMP/whole.log; fail "whole-answer run failed"; }
diff <(json_field $TMP/shared/metrics.jsonl train pair_id_sum) <(json_field $TMP/whole/metrics.jsonl train pair_id_sum) \
  || fail "sharing prompts changed which pairs a step holds"
paste <(json_field $TMP/whole/metrics.jsonl train loss) <(json_field $TMP/shared/metrics.jsonl train loss) \
  | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($1 < 0 ? -$1 : $1)) { print "step " NR ": " $1 " vs " $2; bad = 1 } } END { exit bad }' \
  || fail "losses differ beyond summation order"
# answer_tokens: the answers whole, what the run without sharing computes, step by step.
diff <(json_field $TMP/whole/metrics.jsonl train tokens) <(json_field $TMP/whole/metrics.jsonl train answer_tokens) \
  || fail "without shared prompts, the tokens computed are not the answers' tokens"
diff <(json_field $TMP/whole/metrics.jsonl train tokens) <(json_field $TMP/shared/metrics.jsonl train answer_tokens) \
  || fail "answer_tokens with shared prompts differ from the tokens the whole-answer run computes"
tokens_whole=$(json_field $TMP/whole/metrics.jsonl train tokens | paste -sd+ | bc)
tokens_shared=$(json_field $TMP/shared/metrics.jsonl train tokens | paste -sd+ | bc)
[ "$tokens_shared" -lt $((tokens_whole * 8 / 10)) ] \
  || fail "expected at least 20% fewer tokens with shared prompts: $tokens_shared against $tokens_whole"
grep -qE "^pmtrain: shared prompts \(data.share_prompt\): [0-9]+ of the training answers' [0-9]+ tokens computed once" \
  $TMP/shared.log || fail "the header does not say what shared prompts save"
grep -q "shared prompts" $TMP/whole.log && fail "data.share_prompt=false still reports shared prompts"
echo "ok: same pairs and losses; $tokens_shared tokens computed instead of $tokens_whole"

# eval and score of the same weights, with and without sharing.
EV="--init --set run.eval_pairs=40 --set data.test_files=[data/assets/hh-rlhf/harmless-base/test.jsonl.gz]"
"$PMTRAIN" eval configs/tiny_cpu.yaml $RUN $EV > $TMP/ev_shared.txt 2>&1 || { cat $TMP/ev_shared.txt; fail "eval, shared"; }
"$PMTRAIN" eval configs/tiny_cpu.yaml $RUN $EV --set data.share_prompt=false > $TMP/ev_whole.txt 2>&1 \
  || { cat $TMP/ev_whole.txt; fail "eval, whole"; }
python3 -c "import gzip, sys; sys.stdout.writelines(list(gzip.open(sys.argv[1], 'rt'))[:24])" \
  data/assets/hh-rlhf/harmless-base/test.jsonl.gz > $TMP/pairs.jsonl
"$PMTRAIN" score configs/tiny_cpu.yaml $RUN --init --data $TMP/pairs.jsonl --out $TMP/sc_shared.jsonl 2> /dev/null \
  || fail "score, shared"
"$PMTRAIN" score configs/tiny_cpu.yaml $RUN --init --set data.share_prompt=false --data $TMP/pairs.jsonl \
  --out $TMP/sc_whole.jsonl 2> /dev/null || fail "score, whole"
python3 - "$(grep '^{' $TMP/ev_shared.txt)" "$(grep '^{' $TMP/ev_whole.txt)" $TMP/sc_shared.jsonl $TMP/sc_whole.jsonl <<'PY' \
  || fail "eval or score differ with shared prompts"
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
if a["pairs"] != 40 or b["pairs"] != 40: sys.exit(f"pairs {a['pairs']} {b['pairs']}")
for f in ("loss", "accuracy", "chosen_reward", "rejected_reward"):
    if abs(a[f] - b[f]) > 1e-5 * max(1e-3, abs(a[f])): sys.exit(f"eval {f}: {a[f]} vs {b[f]}")
rows = [[json.loads(l) for l in open(p)] for p in sys.argv[3:5]]
if len(rows[0]) != len(rows[1]) or len(rows[0]) < 20: sys.exit(f"score rows {len(rows[0])} {len(rows[1])}")
for x, y in zip(*rows):
    if "chosen" not in x: sys.exit(f"score line {x['line']} skipped")
    for f in ("chosen", "rejected"):
        if abs(x[f] - y[f]) > 1e-5 * max(1e-3, abs(y[f])): sys.exit(f"score line {x['line']} {f}: {x[f]} vs {y[f]}")
print(f"ok: eval loss {a['loss']:.9f} vs {b['loss']:.9f}; {len(rows[0])} score rows equal within 1e-5")
PY
