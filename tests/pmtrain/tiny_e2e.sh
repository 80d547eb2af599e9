#!/usr/bin/env bash
# The README's main job: mpirun -np 4 pmtrain train configs/tiny_cpu.yaml. The whole path must learn:
# on the last epoch the training loss is at most 0.5 and the training accuracy at least 80%; a final
# eval on the test split is reported, and tokens/s is logged.
source "$(dirname "$0")/common.sh"
$MPIRUN -np 4 "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache \
  > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; fail "training failed"; }
M=$TMP/run/metrics.jsonl
[ -s "$M" ] || fail "no metrics.jsonl"
loss=$(json_field $M epoch loss | tail -1)
acc=$(json_field $M epoch accuracy | tail -1)
echo "last epoch: loss $loss accuracy $acc"
awk -v l="$loss" -v a="$acc" 'BEGIN { exit !(l <= 0.5 && a >= 0.8) }' || fail "did not learn: loss $loss acc $acc"
grep -q '"final":true' $M || fail "no final eval record"
grep -q '^final eval | loss' $TMP/out.txt || fail "no final eval line"
grep -q 'world 4' $TMP/out.txt || fail "not a 4-rank run"
[ -s $TMP/run/config.resolved.yaml ] || fail "resolved config not saved"
grep -E '^(final eval|done:)' $TMP/out.txt
# The step-time breakdown: every train record has each category and "other" (seconds), none negative
# beyond rounding, summing to its step_s; the summary's totals are the steps' sums; the shares line is printed.
python3 - "$M" <<'PY' || fail "step-time breakdown"
import json, sys
keys = {"gemm", "attention", "elementwise", "grad_buckets", "optimizer", "comm", "other"}
recs = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in recs if r["type"] == "train"]
summary = [r for r in recs if r["type"] == "summary"][-1]
assert train, "no train records"
for r in train:
    t = r["time_s"]
    assert set(t) == keys, f"step {r['step']}: keys {sorted(t)}"
    assert all(v >= -1e-6 for v in t.values()), f"step {r['step']}: negative {t}"
    assert abs(sum(t.values()) - r["step_s"]) <= 1e-6 * max(1.0, r["step_s"]), f"step {r['step']}: {t} vs {r['step_s']}"
    assert t["gemm"] > 0 and t["attention"] > 0 and t["elementwise"] > 0 and t["optimizer"] > 0, t
for k in keys:
    total = sum(r["time_s"][k] for r in train)
    assert abs(summary["time_s"][k] - total) <= 1e-6 * max(1.0, summary["train_step_s"]), (k, summary["time_s"][k], total)
assert abs(summary["train_step_s"] - sum(r["step_s"] for r in train)) <= 1e-6 * summary["train_step_s"]
# The time by op (the summary's op_s): every second of the model's gemm, attention and element-wise categories is
# a named op's; the engine's named ops lie inside its own categories.
ops, model_cats = summary["op_s"], ("gemm", "attention", "elementwise")
model = sum(summary["time_s"][c] for c in model_cats)
assert abs(sum(o["s"] for o in ops.values() if o["category"] in model_cats) - model) <= 1e-9 + 1e-9 * model, (ops, model)
for c in ("grad_buckets", "optimizer"):
    assert sum(o["s"] for o in ops.values() if o["category"] == c) <= summary["time_s"][c] * (1 + 1e-9), (c, ops)
assert ops["attention_backward"]["calls"] > 0 and ops["adamw"]["category"] == "optimizer", ops
print("breakdown over %d steps: %s" % (len(train), {k: round(v / summary["train_step_s"], 3) for k, v in summary["time_s"].items()}))
PY
grep -qE '^time in train steps \(rank 0, .*\): gemm [0-9.]+% \| attention .* \| other -?[0-9.]+%$' $TMP/out.txt \
  || { grep '^time in' $TMP/out.txt; fail "no step-time shares line"; }
grep -qE '^ops in train steps \(rank 0, ms a step\): (.* \| )?adamw [0-9.]+ \([0-9.]+ GB/s\)' $TMP/out.txt \
  || { grep '^ops' $TMP/out.txt; fail "no ops line"; }
