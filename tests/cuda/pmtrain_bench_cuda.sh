#!/usr/bin/env bash
# `pmtrain bench` on backend cuda (tiny config): the token count per step from this script's arithmetic, alone
# and at 2 ranks on the one GPU; MFU against the default H100 peak (989 TFLOP/s) between 0 and 1; the peak
# memory from the backend's tracking and the device's bytes in use; and, in fp32 mode, the per-step losses of
# the synthetic pairs equal the CPU backend's within 1e-4 relative (the same seeded init and tokens through
# the same step), which shows bench runs the real step on the GPU; the host's seconds issuing each category and
# op beside the stream's (the event clock's), within the steps' wall time; and each op's launches (AdamW one a
# call, the norm, the non-finite counts two a call); with run.step_clock host, the host's clock instead (no
# launches, no host half).
# Without a GPU: exit 77 (ctest: skipped), or a failure under ZERO_REQUIRE_GPU=1. PMTRAIN_CUDA_DRYRUN=1 runs
# it with backend cpu in place of cuda (a check of this script; it says nothing about the GPU).
source "$(dirname "$0")/../pmtrain/common.sh"
GPU=cuda
[ "${PMTRAIN_CUDA_DRYRUN:-0}" = 1 ] && { GPU=cpu; echo "DRY RUN: backend cpu in place of cuda"; }
skip() {
  if [ -n "${ZERO_REQUIRE_GPU:-}" ] && [ "${ZERO_REQUIRE_GPU}" != 0 ]; then fail "cannot run: $* (ZERO_REQUIRE_GPU is set)"; fi
  echo "SKIPPED: $*"; exit 77
}
if [ $GPU = cuda ] && [[ "$("$PMTRAIN" --version)" != *"CUDA backend: built"* ]]; then skip "this pmtrain has no CUDA backend"; fi

# bench NAME NP ARGS...: pmtrain bench of the tiny config into $TMP/NAME.json
bench() {
  local name=$1 np=$2; shift 2
  if ! "$MPIRUN" -np $np "$PMTRAIN" bench configs/tiny_cpu.yaml --json "$@" > $TMP/$name.json 2> $TMP/$name.err; then
    grep -q "no CUDA device is visible" $TMP/$name.err && skip "no CUDA device ($(head -1 $TMP/$name.err))"
    cat $TMP/$name.err; fail "bench $name failed"
  fi
}
bench bf16 1 --set backend=$GPU --set zero.param_dtype=bf16 --seq 128 --steps 4 --peak-tflops 989
# NCCL_DEBUG=VERSION: NCCL prints its version on stdout, as it did on the H200 ahead of the JSON (gpu_20261128_h200);
# the JSON must stay alone on stdout, the NCCL line in stderr.
NCCL_DEBUG=VERSION bench two 2 --set backend=$GPU --set zero.param_dtype=bf16 --seq 128 --pairs-per-step 4 --steps 3 --warmup 1 --peak-tflops 989
bench gpu_fp32 1 --set backend=$GPU --set zero.param_dtype=fp32 --seq 64 --steps 3 --warmup 1
bench cpu_fp32 1 --set backend=cpu --set zero.param_dtype=fp32 --seq 64 --steps 3 --warmup 1
bench host_clock 1 --set backend=$GPU --set zero.param_dtype=bf16 --seq 64 --steps 2 --warmup 1 --set run.step_clock=host
if [ $GPU = cuda ]; then
  grep -q "NCCL version" $TMP/two.err || { cat $TMP/two.err; fail "NCCL_DEBUG=VERSION: no NCCL version line in stderr"; }
  echo "ok: NCCL's version line went to stderr: $(grep -m1 "NCCL version" $TMP/two.err)"
fi
python3 - $TMP $GPU <<'PY' || fail "pmtrain bench on $GPU"
import json, math, sys
tmp, gpu = sys.argv[1], sys.argv[2]
j = {n: json.load(open(f"{tmp}/{n}.json")) for n in ("bf16", "two", "gpu_fp32", "cpu_fp32")}
for name, pairs, seq, world in (("bf16", 2, 128, 1), ("two", 4, 128, 2)):
    r = j[name]
    assert r["backend"] == gpu and r["world"] == world, r
    assert r["tokens_per_step"] == pairs * 2 * seq and set(r["step_tokens"]) == {pairs * 2 * seq}, r
    assert math.isfinite(r["tokens_per_s"]) and r["tokens_per_s"] > 0, r
    assert r["peak_tflops"] == 989 and 0 < r["mfu"] < 1, r
    assert r["peak_memory_bytes"] > 0, r
    if gpu == "cuda":
        assert r["peak_memory_kind"].startswith("tracked") and r["device_in_use_bytes"] > 0, r
        # The event clock's host half: every category and op with the host's seconds in its scopes, which add up
        # to no more than the measured steps' wall time (the host issued them inside it).
        host = r["measured_host_time_s"]
        assert set(host) == set(r["measured_time_s"]) - {"other"} and min(host.values()) >= 0, host
        wall = r["median_step_s"] * (r["steps"] - r["warmup"])
        assert 0 < sum(host.values()) <= 1.5 * wall, (host, wall)
        assert all(op["host_s"] >= 0 for op in r["measured_op_s"].values()), r["measured_op_s"]
        # The work each op queued (cuda/launch_count.h): every device op queues some; a gradient view's non-finite
        # counts are two launches for all its tensors (a layer's eleven: fewer than kMaxCountRuns), and each fold
        # into the accumulator one.
        ops = r["measured_op_s"]
        for name in ("linear_forward", "attention_forward", "rmsnorm_forward", "finite_count", "adamw"):
            assert ops[name]["launches"] >= ops[name]["calls"] > 0, (name, ops[name])
        assert ops["finite_count"]["launches"] == 2 * ops["finite_count"]["calls"], ops["finite_count"]
        if world == 1:  # the views fold into the accumulator where they lie (at any stage)
            assert ops["accumulate"]["launches"] == ops["accumulate"]["calls"] > 0, ops["accumulate"]
        # AdamW one launch a call (a call a run of tensors that decay alike: a group), the norm of a group's shard
        # two (the second pass adds into the step's accumulator).
        assert ops["adamw"]["launches"] == ops["adamw"]["calls"], ops["adamw"]
        assert ops["grad_norm"]["launches"] == 2 * ops["grad_norm"]["calls"] > 0, ops["grad_norm"]
    else:
        assert r["measured_host_time_s"] is None, r  # the host clock: one time
    print(f"ok: {name}: {r['tokens_per_s']:.0f} tokens/s, MFU {100 * r['mfu']:.3f}%, peak {r['peak_memory_bytes']} B")
# run.step_clock host: the host's clock in place of the events, so no host half and no launches by op.
h = json.load(open(f"{tmp}/host_clock.json"))
assert h["measured_host_time_s"] is None and h["measured_op_s"]["adamw"]["calls"] > 0, h
assert all(op.get("launches", 0) == 0 for op in h["measured_op_s"].values()), h["measured_op_s"]
print("ok: run.step_clock host: the host's clock (no host half, no launches by op)")
a, b = j["gpu_fp32"]["step_loss"], j["cpu_fp32"]["step_loss"]
assert len(a) == len(b) == 3 and all(abs(x - y) <= 1e-4 * abs(y) for x, y in zip(a, b)), (a, b)
print(f"ok: fp32 losses on {gpu} {a} = cpu {b} within 1e-4")
PY
echo "ok: pmtrain bench on $GPU"
