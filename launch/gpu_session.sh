#!/usr/bin/env bash
# A GPU session's device work in ONE call (a session has 15 device minutes, the machine's start included, and
# a call at most 600 s: there is room for one full call, not two): launch/gpu_check.sh (build, every GPU test
# with skips as failures, transformers parity, NCCL and attention benches), then bench/gpu/speed.sh with
# what is left, all under one deadline, and everything packed into OUT_DIR as 5 files (the device tool
# brings back 8).
#   here, first:  bash launch/gpu_deps.sh && bash launch/gpu_prebuild.sh   (the test programs built here, after
#                 the last change: gpu_check.sh then starts the tests at once; without them it builds first)
#   device run:   bash launch/gpu_session.sh $OUT      carry [".gpudeps", ".gpuprebuilt"], timeout_s 600
# A failure to look at again, at once (the machine stays warm 30 s and keeps build-gpu; the session's 15 device
# minutes leave about 4 after this call): bash launch/gpu_rerun.sh $OUT 'REGEX' 200, timeout_s 220 (it runs
# the tests from build-gpu, which gpu_check.sh builds beside the prebuilt programs' tests).
# Then copy $OUT's files under bench/results/ (gpu_check.log, its _hf_parity.txt, the ctest log, speed.tar.gz
# with speed.md, speed.log and every cell, attention_ncu.txt: ncu on the attention kernels) and commit them: a
# GPU claim counts only with a saved log.
#   GPU_SESSION_S        the whole run's seconds (default 570: the machine's start took about 30 s of the 900)
#   GPU_SESSION_CHECK_S  gpu_check's deadline, from the start (default 470: build, tests, parity, benches). The
#                        tests come first: on the H200 (2026-11-28) the build took 242 s of a 360 s deadline and
#                        10 of 18 tests never ran (bench/results/gpu_20261128_h200); speed.sh gets what is left
#   SPEED_SHAPES         speed.sh's shapes (default here "1.7b": the GPU issue's cell, Qwen3-1.7B at 4 x 2048
#                        tokens with checkpointing, beside PyTorch, comes first)
#   SPEED_REAL_SHAPE     speed.sh's real-data cell's shape (default: the first of SPEED_SHAPES); 4b for the
#                        issue's one-hour epoch (checkpointing on the baseline's side, auto on pmtrain's)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: launch/gpu_session.sh OUT_DIR}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
START=$(date +%s)
END=$((START + ${GPU_SESSION_S:-570}))

GPU_CHECK_DEADLINE=$((START + ${GPU_SESSION_CHECK_S:-470})) bash launch/gpu_check.sh "$OUT/gpu_check.log"
check_rc=$?
cp "${BUILD_DIR:-build-gpu}.ctest.log" "$OUT/gpu_check_ctest.log" 2>/dev/null

# ncu on the tensor-core attention kernels (bench/gpu/profile_attention.sh: five kernels, about a minute, at
# most 100 s):
# what they wait on, for issue 11's kernel work; only while 240 s are left for it and speed.sh.
if [ $((END - $(date +%s))) -ge 240 ]; then
  pre=build-gpu-pre
  [ -x "$pre/bench/cuda/attention_bench" ] || pre=${BUILD_DIR:-build-gpu}
  timeout -k 5 100 bash bench/gpu/profile_attention.sh "$OUT/attention_ncu.txt" "$pre"
  echo "# profile_attention: exit code $?"
fi

# speed.sh: a cell started late still gets a minute, so its budget keeps 80 s from the end.
budget=$((END - $(date +%s) - 80))
if [ "$budget" -ge 60 ]; then
  SPEED_SHAPES=${SPEED_SHAPES:-1.7b} SPEED_BUDGET_S=$budget SPEED_CELL_TIMEOUT_S=$((budget < 240 ? budget : 240)) \
    timeout -k 10 $((END - $(date +%s) - 10)) bash bench/gpu/speed.sh "$OUT/speed" > /dev/null 2>&1
  echo "# speed.sh: exit code $?"
else
  echo "# speed.sh: not run, $budget s left of its budget"
fi
[ -d "$OUT/speed" ] && tar czf "$OUT/speed.tar.gz" -C "$OUT" speed && rm -rf "$OUT/speed"

echo "# gpu_session took $(( $(date +%s) - START )) s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
[ -f "$OUT/speed.tar.gz" ] && tar xzf "$OUT/speed.tar.gz" -O speed/speed.md 2>/dev/null | tail -25
echo "gpu_check: $(tail -1 "$OUT/gpu_check.log" 2>/dev/null)"
exit $check_rc
