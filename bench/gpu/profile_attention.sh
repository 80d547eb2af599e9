#!/usr/bin/env bash
# Nsight Compute on the tensor-core attention kernels (the wide forward and dK/dV, dQ, the forward and dK/dV: the
# first launch of each, which attention_bench --mma-only makes first; attention_mma_kernels.cuh) at
# 2048-token sequences with Qwen3-4B's heads: where their time goes, before the kernels are changed for speed
# (issue 11: profiler first). Sections: SpeedOfLight (SM, memory and their share of peak), LaunchStats
# (registers, shared memory a block), Occupancy, WarpStateStats (what the warps wait on), ComputeWorkloadAnalysis
# (the pipes: tensor against the rest), MemoryWorkloadAnalysis_Tables (shared-memory bank conflicts).
# --clock-control none: the GPU machine's clocks are left as they are. ncu replays every kernel per section pass:
# about half a minute in all. Where ncu cannot read the
# counters (on a gVisor machine it could not: LibraryNotLoaded) the file says so and the exit code is ncu's.
#   bench/gpu/profile_attention.sh OUT_FILE [BUILD_DIR]     (BUILD_DIR default build-gpu: its attention_bench)
set -uo pipefail
OUT=${1:?usage: bench/gpu/profile_attention.sh OUT_FILE [BUILD_DIR]}
BENCH=${2:-build-gpu}/bench/cuda/attention_bench
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -x "$BENCH" ] || { echo "profile_attention: $BENCH is not built" | tee "$OUT"; exit 1; }
[ -n "$NCU" ] || { echo "profile_attention: no ncu on this machine" | tee "$OUT"; exit 1; }
"$NCU" --clock-control none --kernel-name 'regex:_mma_kernel' --launch-count 5 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  "$BENCH" --iters 1 --length 2048 --mma-only > "$OUT" 2>&1
rc=$?
echo "# ncu exit code $rc ($(basename "$NCU"), $BENCH)" >> "$OUT"
# The headline of each kernel for the session's log; the whole report is in OUT.
grep -E "_mma_kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy|Bank|ERR|==PROF==|ncu exit" "$OUT" | head -40
exit $rc
