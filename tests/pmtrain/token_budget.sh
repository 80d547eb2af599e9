#!/usr/bin/env bash
# batch.micro_tokens: micro-batches filled to a token budget, the global batch still 8 pairs a step.
# At 2 ranks against pair batching (micro 2 x accum 2): the same pairs every step (pair_id_sum), the
# same loss within fp32 summation order (1e-5), a number of micro-steps that follows the budget; and a
# run stopped mid-epoch and resumed gives the uninterrupted token-budget run's losses bit for bit; the
# evaluation batches by the budget as well.
source "$(dirname "$0")/common.sh"
RUN="--set data.cache_dir=$TMP/cache --set run.steps=6 --set run.eval_every=0 --set run.save_final=false --set batch.global=8"
TOK="--set batch.micro=0 --set batch.micro_tokens=500"
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.dir=$TMP/pairs > $TMP/pairs.log 2>&1 \
  || { cat $TMP/pairs.log; fail "pair-batched run failed"; }
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN $TOK --set run.dir=$TMP/tok > $TMP/tok.log 2>&1 \
  || { cat $TMP/tok.log; fail "token-budget run failed"; }
grep -q "micro-batches of at most 500 tokens" $TMP/tok.log || fail "the plan line does not name the budget"
diff <(json_field $TMP/pairs/metrics.jsonl train pair_id_sum) <(json_field $TMP/tok/metrics.jsonl train pair_id_sum) \
  || fail "the token budget changed which pairs a step holds"
paste <(json_field $TMP/pairs/metrics.jsonl train loss) <(json_field $TMP/tok/metrics.jsonl train loss) \
  | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($1 < 0 ? -$1 : $1)) { print "step " NR ": " $1 " vs " $2; bad = 1 } } END { exit bad }' \
  || fail "losses differ beyond summation order"
micro=$(json_field $TMP/tok/metrics.jsonl train micro_steps | sort -u | tr '\n' ' ')
[ "$(json_field $TMP/tok/metrics.jsonl train micro_steps | sort -u | wc -l)" -ge 2 ] \
  || fail "micro-steps per step did not vary with the budget ($micro)"
# Stop at step 3, resume: bit-exact against the uninterrupted token-budget run.
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN $TOK --set run.dir=$TMP/cut --set run.stop_at=3 > $TMP/cut.log 2>&1 \
  || { cat $TMP/cut.log; fail "stopped run failed"; }
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN $TOK --set run.dir=$TMP/cut --resume auto > $TMP/res.log 2>&1 \
  || { cat $TMP/res.log; fail "resume failed"; }
diff <(json_field $TMP/tok/metrics.jsonl train loss) <(json_field $TMP/cut/metrics.jsonl train loss) \
  || fail "token-budget resume is not bit-exact"
echo "ok: same pairs and losses as pair batching; micro-steps per step: $micro; resume bit-exact"

# batch.micro_tokens auto on the CPU backend: this machine's memory holds the rank's whole share of a step at
# max_len (4 pairs of two 384-token answers: 3072 tokens), so every step is one micro-step a rank; --dry-run at
# 1 rank chooses its share, 6144; the resolved config still says auto.
AUTO="--set batch.micro=0 --set batch.micro_tokens=auto"
"$PMTRAIN" train configs/tiny_cpu.yaml $RUN $AUTO --set run.dir=$TMP/auto --dry-run > $TMP/auto_dry.txt 2>&1 \
  || { cat $TMP/auto_dry.txt; fail "dry run with batch.micro_tokens auto failed"; }
grep -q "^batch.micro_tokens auto: 6144$" $TMP/auto_dry.txt || { cat $TMP/auto_dry.txt; fail "dry run at 1 rank: not its share, 6144 tokens"; }
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN $AUTO --set run.dir=$TMP/auto > $TMP/auto.log 2>&1 \
  || { cat $TMP/auto.log; fail "batch.micro_tokens auto run failed"; }
grep -q "micro-batches of at most 3072 tokens (batch.micro_tokens auto: the most whose memory plan fits)" $TMP/auto.log \
  || { grep "micro-batches" $TMP/auto.log; fail "auto did not choose the ranks' whole share, 3072 tokens"; }
[ "$(json_field $TMP/auto/metrics.jsonl train micro_steps | sort -u)" = 1 ] || fail "auto's steps are not one micro-step"
grep -q "^  micro_tokens: auto$" $TMP/auto/config.resolved.yaml || fail "the resolved config does not say auto"
echo "ok: batch.micro_tokens auto chose 3072 tokens (the whole share) on the CPU, one micro-step a step"

# Evaluation batches by the budget too (longest pairs first, cut as a step is): the same 40 pairs in fewer
# batches than 2 pairs round-robin gives, and the same numbers to fp32 summation order. Then the default:
# batches as large as a forward pass fits in the step's activation memory (pmtrain/planner.h eval_batch), which
# for tiny_cpu's micro-batch of 2 pairs at max_len 1024 is more than 2, with the same numbers again.
EV="--init --set run.eval_pairs=40 --set data.test_files=[data/assets/hh-rlhf/harmless-base/test.jsonl.gz]"
$MPIRUN -np 2 "$PMTRAIN" eval configs/tiny_cpu.yaml $RUN $EV --set batch.eval_micro=2 > $TMP/ev_pairs.txt 2>&1 \
  || { cat $TMP/ev_pairs.txt; fail "eval by pairs"; }
$MPIRUN -np 2 "$PMTRAIN" eval configs/tiny_cpu.yaml $RUN $EV --set batch.micro=0 --set batch.micro_tokens=3000 \
  --set batch.eval_micro_tokens=3000 > $TMP/ev_tok.txt 2>&1 || { cat $TMP/ev_tok.txt; fail "eval by tokens"; }
$MPIRUN -np 2 "$PMTRAIN" eval configs/tiny_cpu.yaml $RUN $EV > $TMP/ev_auto.txt 2>&1 || { cat $TMP/ev_auto.txt; fail "eval, default batches"; }
grep -q "^pmtrain: eval of 40 of .* batches of at most 2 pairs (10 per rank)$" $TMP/ev_pairs.txt || { cat $TMP/ev_pairs.txt; fail "eval by pairs: batches"; }
per_rank=$(sed -nE 's/^pmtrain: eval of 40 of .*, batches of at most 3000 tokens \(([0-9]+) per rank\)$/\1/p' $TMP/ev_tok.txt)
[ -n "$per_rank" ] && [ "$per_rank" -lt 10 ] || { cat $TMP/ev_tok.txt; fail "eval by tokens: expected fewer than 10 batches per rank"; }
read -r auto auto_per_rank <<< "$(sed -nE 's/^pmtrain: eval of 40 of .*, batches of at most ([0-9]+) pairs \(([0-9]+) per rank\)$/\1 \2/p' $TMP/ev_auto.txt)"
[ -n "$auto" ] && [ "$auto" -gt 2 ] && [ "$auto_per_rank" -eq $(( (20 + auto - 1) / auto )) ] \
  || { cat $TMP/ev_auto.txt; fail "eval, default batches: expected more than 2 pairs a batch"; }
python3 - "$(grep '^{' $TMP/ev_pairs.txt)" "$(grep '^{' $TMP/ev_tok.txt)" "$(grep '^{' $TMP/ev_auto.txt)" <<'PY' || fail "eval by tokens or default batches differs from eval by pairs"
import json, sys
a, b, c = (json.loads(x) for x in sys.argv[1:])
for o in (b, c):
    if a["pairs"] != 40 or o["pairs"] != 40: sys.exit(f"pairs {a['pairs']} {o['pairs']}")
    for f in ("loss", "accuracy", "chosen_reward", "rejected_reward"):
        if abs(a[f] - o[f]) > 1e-5 * max(1e-3, abs(a[f])): sys.exit(f"{f}: {a[f]} vs {o[f]}")
PY
echo "ok: eval by the token budget: $per_rank batches per rank instead of 10; by default $auto pairs a batch ($auto_per_rank per rank); the same loss and accuracy"
