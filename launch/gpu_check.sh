#!/usr/bin/env bash
# The GPU machine's check (issue "pmtrain on the GPU"): builds the CUDA targets from this tree and runs
# every GPU test with skips turned into failures (ZERO_REQUIRE_GPU=1), then prints "N passed, N failed".
#   here:       bash launch/gpu_deps.sh            (once: .debs of what that machine lacks)
#   device run: bash launch/gpu_check.sh $OUT/gpu_check.log     with carry [".gpudeps"]
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

source launch/gpu_build.sh  # gpu_configure, gpu_test_targets, gpu_build: .gpudeps, flags, build
BUILD=${BUILD_DIR:-build-gpu}
gpu_configure "$BUILD" || { echo "0 passed, 1 failed"; exit 1; }
# Only what the gpu-labelled tests run and the NCCL bench: half the build.
TARGETS=$(gpu_test_targets "$BUILD")
echo "# building: $TARGETS"
gpu_build "$BUILD" $TARGETS || { echo "0 passed, 1 failed"; exit 1; }
echo "# built in $(( $(date +%s) - START )) s"

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
total=$(cd "$BUILD" && ctest -L gpu -N | sed -nE 's/^Total Tests: ([0-9]+)/\1/p')
# Two at a time (a test of 2 ranks runs alone): a hung test leaves the others running beside it. NCCL's
# set-up and network lines go into the output a failed test prints (the H200's 2-rank NCCL test once hung
# with nothing to say where).
(cd "$BUILD" && NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET until_deadline 150 \
  ctest -j 2 -L gpu -E "^(hf_parity_4b|pmtrain_cuda)$" --timeout "$(left 300)" --output-on-failure) | tee "$BUILD.ctest.log"
(cd "$BUILD" && until_deadline 20 ctest -R "^(hf_parity_4b|pmtrain_cuda)$" --timeout "$(left 300)" -V) | tee -a "$BUILD.ctest.log"
read -r passed failed <<< "$(ctest_counts "$BUILD.ctest.log")"
not_run=$(( ${total:-0} - passed - failed ))
[ "$not_run" -gt 0 ] && { echo "# $not_run of $total GPU tests did not run before the deadline"; failed=$((failed + not_run)); }
timeout "$(left 120)" mpirun -np 2 "$BUILD/bench/cuda/nccl_collectives_bench" 2>&1 | tail -30
# Attention speed, ours (fp32 and bf16 FMA paths, bf16 tensor cores) and torch's sdpa on the same shapes:
# numbers for the log, not part of the pass count.
timeout "$(left 120)" "$BUILD/bench/cuda/attention_bench" --iters 3 2>&1 | tail -14
timeout "$(left 90)" python3 bench/torch/sdpa_attention.py --iters 5 2>&1 | tail -6
[ -f "$ZERO_PARITY_TABLE" ] && echo "# transformers parity table: $ZERO_PARITY_TABLE"
echo "# gpu_check took $(( $(date +%s) - START )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
