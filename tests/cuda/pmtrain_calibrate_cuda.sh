#!/usr/bin/env bash
# `pmtrain calibrate` on backend cuda: the profile says gpu and names the device; the bf16 GEMM (the model's
# own linear forward through cuBLASLt), the device's element-wise bandwidth and the AdamW step fall within an
# H100's physical range (a GEMM above 989 TFLOP/s or a copy above 3.35 TB/s is a timing bug; one below a
# tenth of them a slow path); NCCL at 2 ranks on the one GPU is added to the same file beside the 1-rank
# copies; and `pmtrain plan` takes the profile for a cuda config (and refuses it for a CPU one).
# Without a GPU: exit 77 (ctest: skipped), or a failure under ZERO_REQUIRE_GPU=1.
source "$(dirname "$0")/../pmtrain/common.sh"
skip() {
  if [ -n "${ZERO_REQUIRE_GPU:-}" ] && [ "${ZERO_REQUIRE_GPU}" != 0 ]; then fail "cannot run: $* (ZERO_REQUIRE_GPU is set)"; fi
  echo "SKIPPED: $*"; exit 77
}
[[ "$("$PMTRAIN" --version)" == *"CUDA backend: built"* ]] || skip "this pmtrain has no CUDA backend"
CUDA_SET="--set backend=cuda --set zero.param_dtype=bf16"
# With Qwen3-4B's config: its projections' GEMMs too, at 512-32768 tokens, each pass.
if ! "$PMTRAIN" calibrate configs/qwen3_4b_bs128.yaml $CUDA_SET --out $TMP/gpu.json > $TMP/cal1.txt 2>&1; then
  grep -q "no CUDA device is visible" $TMP/cal1.txt && skip "no CUDA device ($(head -1 $TMP/cal1.txt))"
  cat $TMP/cal1.txt; fail "calibrate on cuda"
fi
cat $TMP/cal1.txt
"$MPIRUN" -np 2 "$PMTRAIN" calibrate configs/qwen3_4b_bs128.yaml $CUDA_SET --out $TMP/gpu.json > $TMP/cal2.txt 2>&1 || { cat $TMP/cal2.txt; fail "calibrate on cuda at 2 ranks"; }
grep "collectives at 2 ranks (nccl" $TMP/cal2.txt || { cat $TMP/cal2.txt; fail "calibrate at 2 ranks: no NCCL line"; }
python3 - $TMP/gpu.json <<'PY' || fail "the GPU profile"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["device"] == "gpu" and not p["assumed"], p
assert 98.9e12 <= p["gemm_flops"] <= 989e12, f"bf16 GEMM {p['gemm_flops'] / 1e12:.1f} TFLOP/s"
assert 0.335e12 <= p["elementwise_bytes"] <= 3.35e12, f"element-wise {p['elementwise_bytes'] / 1e9:.0f} GB/s"
assert p["adamw_elements"] > 1e9, f"AdamW {p['adamw_elements'] / 1e9:.2f} G elements/s"
# The engine's gradient kernels (non-finite count + add into fp32): memory-bound, within an H100's and an H200's
# HBM (3.35 and 4.8 TB/s).
assert 0.335e12 <= p["gradient_bytes"] <= 4.8e12, f"gradient work {p['gradient_bytes'] / 1e9:.0f} GB/s"
# Our attention kernels, forward and backward at Qwen3-4B heads and 2048 tokens, in the planner's counting
# (4 x q_dim FLOPs a causal score forward, 3.5 times that in all): within a GEMM's physical range.
assert 9.89e12 <= p["attention_flops"] <= 989e12, f"attention {p['attention_flops'] / 1e12:.1f} TFLOP/s"
# Qwen3-4B's projections (hidden 2560, 32/8 heads of 128, intermediate 9728), each GEMM pass within an H100's
# range (a tenth of the square GEMM's floor: 512 tokens of a narrow one may run far below it).
g = {(r["in"], r["out"], r["tokens"]): r for r in p["gemm_rates"]}
shapes = ((2560, 4096 + 2048), (4096, 2560), (2560, 2 * 9728), (9728, 2560))
assert set(g) == {(i, o, t) for i, o in shapes for t in (512, 2048, 8192, 32768)}, sorted(g)
for r in g.values():
    for k in ("flops", "input_grad_flops", "weight_grad_flops"):
        assert 9.89e12 <= r[k] <= 989e12, f"GEMM {r['in']} -> {r['out']} at {r['tokens']} tokens, {k}: {r[k] / 1e12:.1f} TFLOP/s"
c = p["collective_elements_per_s"]
assert set(c) == {"1", "2"} and all(r > 0 for w in c.values() for r in w.values()), c
print(f"ok: bf16 GEMM {p['gemm_flops'] / 1e12:.0f} TFLOP/s, {p['elementwise_bytes'] / 1e9:.0f} GB/s, "
      f"gradient work {p['gradient_bytes'] / 1e9:.0f} GB/s, "
      f"AdamW {p['adamw_elements'] / 1e9:.1f} G/s, {p['source']}")
PY
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --world 1,2 --gpu-mem 80GiB --profile $TMP/gpu.json > $TMP/plan.txt 2>&1 || { cat $TMP/plan.txt; fail "plan with the GPU profile"; }
grep -q "collectives measured at 1, 2 rank(s)" $TMP/plan.txt || { cat $TMP/plan.txt; fail "plan: the measured NCCL rates not named"; }
if "$PMTRAIN" plan configs/tiny_cpu.yaml --profile $TMP/gpu.json > $TMP/plan_cpu.txt 2>&1; then fail "a GPU profile taken for a CPU plan"; fi
grep -q "was measured on the GPU" $TMP/plan_cpu.txt || { cat $TMP/plan_cpu.txt; fail "the mismatch message"; }
echo "ok: pmtrain calibrate on cuda"
