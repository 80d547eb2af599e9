#!/usr/bin/env bash
# A second call on the warm GPU machine, right after launch/gpu_session.sh (the machine stays warm 30 s and
# keeps build-gpu): the tests named by REGEX, rebuilt first (incremental) and run verbosely in the
# environment gpu_check.sh gives them (gpu_test_env: carried libraries, MPI as root, ZERO_REQUIRE_GPU). A
# bare `ctest` there lacks the carried libraries' path (bench/results/gpu_20261127_h200: exit 127).
#   device run: bash launch/gpu_rerun.sh $OUT 'REGEX' [SECONDS]      carry [".gpudeps"]; SECONDS default 200
# (build-gpu, which gpu_check.sh builds beside the tests of a prebuilt pack, is built again incrementally).
# The log is $OUT/gpu_rerun.log; copy it under bench/results/ beside the session's.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: launch/gpu_rerun.sh OUT_DIR REGEX [SECONDS]}
REGEX=${2:?usage: launch/gpu_rerun.sh OUT_DIR REGEX [SECONDS]}
SECONDS_LEFT=${3:-200}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_rerun.log") 2>&1
START=$(date +%s)
echo "# gpu_rerun: $(git rev-parse --short HEAD 2>/dev/null || echo unknown), tests '$REGEX', $SECONDS_LEFT s"
source launch/gpu_build.sh
BUILD=${BUILD_DIR:-build-gpu}
gpu_build "$BUILD" $(gpu_test_targets "$BUILD") || { echo "0 passed, 1 failed"; exit 1; }
echo "# built in $(( $(date +%s) - START )) s"
gpu_test_env
left=$((START + SECONDS_LEFT - $(date +%s) - 10))
[ "$left" -lt 20 ] && left=20
(cd "$BUILD" && NCCL_DEBUG=${NCCL_DEBUG:-WARN} timeout -k 5 "$left" ctest -R "$REGEX" --timeout "$left" -V) > "$OUT/ctest.log" 2>&1
grep -E "Test +#|tests passed|FAIL|error" "$OUT/ctest.log" | tail -40
read -r passed failed <<< "$(ctest_counts "$OUT/ctest.log")"
echo "# gpu_rerun took $(( $(date +%s) - START )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
