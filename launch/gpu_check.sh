#!/usr/bin/env bash
# The GPU machine's check (issue "pmtrain on the GPU"): builds the CUDA targets from this tree and runs
# every GPU test with skips turned into failures (ZERO_REQUIRE_GPU=1), then prints "N passed, N failed".
#   here:       bash launch/gpu_deps.sh            (once: .debs of what that machine lacks)
#               bash launch/gpu_prebuild.sh        (after the last change: the test programs, built here)
#   device run: bash launch/gpu_check.sh $OUT/gpu_check.log     with carry [".gpudeps", ".gpuprebuilt"]
# The log goes where the first argument says (default bench/results/gpu_check_<date>.log). Copy it under
# bench/results/ and commit it: a GPU claim counts only with a saved log.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${1:-bench/results/gpu_check_$(date +%Y%m%d_%H%M).log}
mkdir -p "$(dirname "$LOG")"
exec > >(tee "$LOG") 2>&1
START=$(date +%s)
# GPU_CHECK_DEADLINE (epoch seconds, from launch/gpu_session.sh): every test and bench timeout is cut to what
# is left before it, so the whole check returns in time with what it has (a lease's device minutes are few).
DEADLINE=${GPU_CHECK_DEADLINE:-$((START + 3600))}
left() {  # left DEFAULT: seconds for the next phase, at most DEFAULT, at least 10
  local l=$((DEADLINE - $(date +%s)))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -lt 10 ] && l=10
  echo $l
}
echo "# gpu_check: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(hostname), $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi failed"

source launch/gpu_build.sh  # gpu_configure, gpu_test_targets, gpu_build, gpu_prebuilt_use: .gpudeps, flags, build
BUILD=${BUILD_DIR:-build-gpu}
gpu_configure "$BUILD" || { echo "0 passed, 1 failed"; exit 1; }
# Only what the gpu-labelled tests run and the NCCL bench: half the build.
TARGETS=$(gpu_test_targets "$BUILD")
total=$(cd "$BUILD" && ctest -L gpu -N | sed -nE 's/^Total Tests: ([0-9]+)/\1/p')  # before a build rewrites it
# The programs built on the CPU machine (launch/gpu_prebuild.sh, carried in .gpuprebuilt) when they are this
# tree's and load here: the tests start now, and $BUILD is built beside them for zero_torch (this python3's
# module) and for gpu_rerun.sh. Otherwise the build first, as the tests need it.
TEST_BUILD=$BUILD
bg_build=""
if [ -z "${GPU_CHECK_NO_PREBUILT:-}" ] && gpu_prebuilt_use; then
  TEST_BUILD=build-gpu-pre
  echo "# building $BUILD in the background ($BUILD.background.log): $TARGETS"
  # timeout stops the build's whole process group (make, nvcc) at the deadline; 4 cores stay with the tests.
  cores=$(machine_cores)
  GPU_DEPS_DONE=1 GPU_BUILD_JOBS=$((cores > 8 ? cores - 4 : cores)) timeout -k 10 $((DEADLINE - 20 - $(date +%s))) \
    bash -c 'source launch/gpu_build.sh && gpu_build "$@"' gpu_build "$BUILD" $TARGETS > "$BUILD.background.log" 2>&1 &
  bg_build=$!
else
  echo "# building: $TARGETS"
  gpu_build "$BUILD" $TARGETS || { echo "0 passed, 1 failed"; exit 1; }
  echo "# built in $(( $(date +%s) - START )) s"
fi

gpu_test_env
# The transformers parity table (tests/cuda/hf_parity_4b.py) is saved next to the log.
export ZERO_PARITY_TABLE=$(realpath -m "${LOG%.log}")_hf_parity.txt
# Every ctest entry labelled gpu (tests/cuda/); with ZERO_REQUIRE_GPU a skip is a failure. -V for the two
# end-to-end checks prints their numbers (parity table, losses) into the log even when they pass.
# Under a deadline the unit tests (first: they say where a failure is) stop 150 s before it, kept for the two;
# a test that never ran counts as failed.
until_deadline() {  # until_deadline RESERVE COMMAND...: COMMAND, stopped RESERVE s before the deadline
  local t=$((DEADLINE - $1 - $(date +%s))); shift
  [ "$t" -lt 30 ] && t=30
  timeout -k 10 "$t" "$@"
}
# Two at a time (a test of 2 ranks runs alone): a hung test leaves the others running beside it. NCCL's
# set-up and network lines go into the output a failed test prints (the H200's 2-rank NCCL test once hung
# with nothing to say where).
(cd "$TEST_BUILD" && NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET until_deadline 150 \
  ctest -j 2 -L gpu -E "^(hf_parity_4b|pmtrain_cuda)$" --timeout "$(left 300)" --output-on-failure) | tee "$BUILD.ctest.log"
(cd "$TEST_BUILD" && until_deadline 20 ctest -R "^(hf_parity_4b|pmtrain_cuda)$" --timeout "$(left 300)" -V) | tee -a "$BUILD.ctest.log"
if [ -n "$bg_build" ]; then
  # What the prebuilt programs left to $BUILD: the tests that are not in build-gpu-pre (zero_torch's).
  wait "$bg_build"; bg_rc=$?
  if [ "$bg_rc" -eq 0 ]; then
    echo "# $BUILD built beside the tests ($(( $(date +%s) - START )) s from the start)"
    only_here=$(comm -13 <(cd "$TEST_BUILD" && ctest -L gpu -N | sed -nE 's/^ *Test +#[0-9]+: //p' | sort) \
                         <(cd "$BUILD" && ctest -L gpu -N | sed -nE 's/^ *Test +#[0-9]+: //p' | sort) | paste -sd'|')
    [ -n "$only_here" ] && (cd "$BUILD" && until_deadline 20 ctest -R "^($only_here)$" --timeout "$(left 300)" \
      --output-on-failure) | tee -a "$BUILD.ctest.log"
  else
    [ "$bg_rc" -ge 124 ] && echo "# the background build of $BUILD was stopped at the deadline" \
      || { echo "# the background build of $BUILD failed:"; grep -E "error|Error |failed" "$BUILD.background.log" | head -20; }
  fi
fi
read -r passed failed <<< "$(ctest_counts "$BUILD.ctest.log")"
not_run=$(( ${total:-0} - passed - failed ))
[ "$not_run" -gt 0 ] && { echo "# $not_run of $total GPU tests did not run before the deadline"; failed=$((failed + not_run)); }
timeout "$(left 120)" mpirun -np 2 "$TEST_BUILD/bench/cuda/nccl_collectives_bench" 2>&1 | tail -30
# The engine's element-wise kernels (gradient accumulate, non-finite count, cast, AdamW) in 16-byte vectors and one
# element at a time, against cudaMemcpy: a few seconds.
timeout "$(left 60)" "$TEST_BUILD/bench/cuda/elementwise_bench" --iters 5 2>&1 | tail -9
# Attention speed, ours (fp32 and bf16 FMA paths, bf16 tensor cores) and torch's sdpa on the same shapes:
# numbers for the log, not part of the pass count.
timeout "$(left 120)" "$TEST_BUILD/bench/cuda/attention_bench" --iters 3 2>&1 | tail -24
timeout "$(left 90)" python3 bench/torch/sdpa_attention.py --iters 5 2>&1 | tail -6
[ -f "$ZERO_PARITY_TABLE" ] && echo "# transformers parity table: $ZERO_PARITY_TABLE"
echo "# gpu_check took $(( $(date +%s) - START )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
