#!/usr/bin/env bash
# `pmtrain bench`: synthetic pairs through the training step. The token count per step is checked against
# this script's own arithmetic (pairs x 2 x seq), alone, at 2 ranks under mpirun (the global count) and with
# token-budget micro-batches; the model FLOPs against a number worked out by hand; MFU from the median step
# and the peak given; the text lines; bad options: one line each.
source "$(dirname "$0")/common.sh"

# check JSON_FILE PAIRS SEQ WORLD STEPS WARMUP: every step holds PAIRS x 2 x SEQ tokens; the summary is the
# median of the measured steps; tokens/s finite and positive; a finite loss.
check() {
  python3 - "$@" <<'PY'
import json, math, statistics, sys
path, pairs, seq, world, steps, warm = sys.argv[1], *map(int, sys.argv[2:])
lines = open(path).read().splitlines()
assert len(lines) == 1, f"expected one JSON line, got {len(lines)}"
j = json.loads(lines[0])
want = pairs * 2 * seq
assert j["tokens_per_step"] == want, (j["tokens_per_step"], want)
assert j["step_tokens"] == [want] * steps, j["step_tokens"]
assert j["world"] == world and j["seq"] == seq and j["pairs_per_step"] == pairs, j
assert len(j["step_s"]) == steps and all(t > 0 for t in j["step_s"]), j["step_s"]
assert j["median_step_s"] == statistics.median(j["step_s"][warm:]), (j["median_step_s"], j["step_s"])
assert math.isfinite(j["tokens_per_s"]) and j["tokens_per_s"] > 0
assert abs(j["tokens_per_s"] - want / j["median_step_s"]) <= 1e-9 * j["tokens_per_s"], j
assert all(math.isfinite(l) and l > 0 for l in j["step_loss"]), j["step_loss"]
assert j["peak_memory_bytes"] > 0 and j["peak_memory_kind"] == "VmHWM", j
print(f"ok: {path}: {j['tokens_per_step']} tokens per step at world {world}, {j['tokens_per_s']:.0f} tokens/s")
PY
}

# Alone: 2 pairs x 2 x 64 tokens. The tiny shape's model FLOPs by hand (tests/pmtrain/model_flops_test.cpp):
# 6 x 86464 x 256 + 6 x 2 x 4 x 16 x 64 x 256 = 145391616; no MFU on the CPU without --peak-tflops.
"$PMTRAIN" bench configs/tiny_cpu.yaml --seq 64 --steps 4 --json > $TMP/one.json 2> $TMP/one.err \
  || { cat $TMP/one.err; fail "bench failed"; }
check $TMP/one.json 2 64 1 4 2 || fail "bench alone"
python3 - $TMP/one.json <<'PY' || fail "bench: model FLOPs or MFU"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["non_embedding_parameters"] == 86464 and j["model_flops_per_step"] == 145391616, j
assert j["mfu"] is None and j["peak_tflops"] is None, j
# Where the steps after warm-up went: the trainer's categories, the model's own work in them, adding up to
# those steps' own times (one rank: its clock is the step's).
t, measured = j["measured_time_s"], j["step_s"][j["warmup"]:]
assert set(t) == {"gemm", "attention", "elementwise", "grad_buckets", "optimizer", "comm", "other"}, t
assert all(t[k] > 0 for k in ("gemm", "attention", "elementwise", "optimizer")) and t["other"] >= 0, t
assert abs(sum(t.values()) - sum(measured)) <= 0.05 * sum(measured), (t, measured)
print(f"ok: time of steps {j['warmup'] + 1}-{j['steps']}: {sum(t.values()):.4f} s by category, {sum(measured):.4f} s by step")
# And the model's time by op: every GEMM, attention and element-wise second is a named op's; each layer's
# attention backward once a measured step (2 layers).
ops = j["measured_op_s"]
model = t["gemm"] + t["attention"] + t["elementwise"]
assert abs(sum(o["s"] for o in ops.values() if o["category"] in ("gemm", "attention", "elementwise")) - model) \
    <= 1e-9 + 1e-9 * model, (ops, t)
assert ops["attention_backward"]["calls"] == 2 * len(measured) and ops["swiglu_backward"]["s"] > 0, ops
# The engine's step by op: AdamW declares 28 bytes a parameter (one rank holds them all: the fp32 gradient read,
# master, m and v read and written) each measured step.
assert ops["adamw"]["category"] == "optimizer" and ops["adamw"]["bytes"] == 28 * j["parameters"] * len(measured), ops
print(f"ok: {len(ops)} ops, the model's {model:.4f} s in all")
PY
# With a peak: MFU = flops / (median x peak).
"$PMTRAIN" bench configs/tiny_cpu.yaml --seq 64 --steps 3 --warmup 1 --peak-tflops 0.002 --json > $TMP/mfu.json
check $TMP/mfu.json 2 64 1 3 1 || fail "bench --peak-tflops"
python3 - $TMP/mfu.json <<'PY' || fail "bench: MFU"
import json, sys
j = json.load(open(sys.argv[1]))
want = 145391616 / (j["median_step_s"] * 0.002e12)
assert abs(j["mfu"] - want) < 1e-12 + 1e-9 * want, (j["mfu"], want)
print(f"ok: MFU {j['mfu']:.4f} of 2 GFLOP/s")
PY

# 2 ranks: the global batch of 4 pairs x 2 x 32 tokens, each rank half of it; and the same with token-budget
# micro-batches (the sampler's other path: 2 pairs of 2 x 32 tokens per 128-token micro-batch).
"$MPIRUN" -np 2 "$PMTRAIN" bench configs/tiny_cpu.yaml --seq 32 --pairs-per-step 4 --steps 3 --warmup 1 --json \
  > $TMP/two.json 2> $TMP/two.err || { cat $TMP/two.err; fail "bench at 2 ranks failed"; }
check $TMP/two.json 4 32 2 3 1 || fail "bench at 2 ranks"
"$MPIRUN" -np 2 "$PMTRAIN" bench configs/tiny_cpu.yaml --seq 32 --pairs-per-step 6 --steps 3 --warmup 1 --json \
  --set batch.micro=0 --set batch.micro_tokens=128 --set zero.stage=3 > $TMP/tok.json 2> $TMP/tok.err \
  || { cat $TMP/tok.err; fail "bench with micro_tokens failed"; }
check $TMP/tok.json 6 32 2 3 1 || fail "bench with batch.micro_tokens at 2 ranks"
# batch.micro_tokens auto at --seq 32: a rank's share of the step, 3 pairs of two 32-token answers (192 tokens),
# fits this host: the JSON names the budget the run chose.
"$MPIRUN" -np 2 "$PMTRAIN" bench configs/tiny_cpu.yaml --seq 32 --pairs-per-step 6 --steps 3 --warmup 1 --json \
  --set batch.micro=0 --set batch.micro_tokens=auto > $TMP/auto.json 2> $TMP/auto.err \
  || { cat $TMP/auto.err; fail "bench with micro_tokens auto failed"; }
check $TMP/auto.json 6 32 2 3 1 || fail "bench with batch.micro_tokens auto at 2 ranks"
python3 -c 'import json, sys; b = json.load(open(sys.argv[1]))["micro_tokens"]; sys.exit(0 if b == 192 else f"micro_tokens {b}, not 192")' \
  $TMP/auto.json || fail "bench with batch.micro_tokens auto: the budget"

# The lines: a header, one per step (warm-up marked), the summary.
"$PMTRAIN" bench configs/tiny_cpu.yaml --seq 16 --steps 3 > $TMP/text.txt || fail "bench (text) failed"
grep -q "^bench: .*backend cpu.*world 1, stage 2, 2 layers hidden 64.*seq 16, 2 pairs (4 sequences) per step" $TMP/text.txt \
  || { cat $TMP/text.txt; fail "bench: no header"; }
[ $(grep -c "^step [123]/3 | .* | 64 tokens | " $TMP/text.txt) = 3 ] || { cat $TMP/text.txt; fail "bench: step lines"; }
[ $(grep -c "warm-up" $TMP/text.txt) = 2 ] || { cat $TMP/text.txt; fail "bench: warm-up steps not marked"; }
grep -q "^summary | median step .* (steps 3-3) | 64 tokens per step | .* tokens/s | MFU: give --peak-tflops | peak RSS" \
  $TMP/text.txt || { cat $TMP/text.txt; fail "bench: summary"; }
grep -qE "^time in steps 3-3 \(rank 0\): gemm [0-9.]+% \| attention [0-9.]+% \| .*other [0-9.]+%$" $TMP/text.txt \
  || { cat $TMP/text.txt; fail "bench: no time shares line"; }
grep -qE "^ops in steps 3-3 \(rank 0, ms a step\): (.* \| )?attention_backward [0-9.]+ \([0-9.]+ [GT]FLOP/s\)" $TMP/text.txt \
  || { cat $TMP/text.txt; fail "bench: no ops line"; }
echo "ok: text: $(tail -1 $TMP/text.txt)"

# Bad options: one line each, never a crash.
bad "steps not above warmup" "--steps 2 must be more than --warmup 2" bench configs/tiny_cpu.yaml --steps 2
bad "zero seq" "--seq" bench configs/tiny_cpu.yaml --seq 0
bad "pairs not a number" "--pairs-per-step" bench configs/tiny_cpu.yaml --pairs-per-step two
bad "negative peak" "--peak-tflops: '-5' is not a number > 0" bench configs/tiny_cpu.yaml --peak-tflops -5
bad "no config" "config file" bench configs/nope.yaml
bad "unknown key" "zero.stag" bench configs/tiny_cpu.yaml --set zero.stag=1
bad "cuda without a GPU" "backend cuda" bench configs/tiny_cpu.yaml --set backend=cuda
echo "ok: pmtrain bench"
