#!/usr/bin/env bash
# Measures how well the SIMT emulator's schedules catch a missing barrier in our own kernels: each
# __syncthreads() / __syncwarp() call of the kernel files in turn is removed from the working tree, the
# emulated kernel tests are rebuilt and run under every schedule (the default order, reverse, ahead, and
# random with seeds 1-3: tests/cuda/simt_emulator.h), and a line says which schedules failed. A barrier no
# schedule misses is either not needed or one the emulator cannot see without it: read it. Each file is
# restored after its line (and on exit, from a copy); the build directory is left built from the restored tree.
#   bash tests/cuda/barrier_knockout.sh BUILD_DIR [FILE...]   (default: every kernel file with a barrier)
set -u
BUILD=$(realpath "${1:?build directory}")
shift
FILES=("$@")
[ ${#FILES[@]} -gt 0 ] || FILES=(model/cuda/attention_mma_kernels.cuh model/cuda/attention_fma_kernels.cuh
                                  model/cuda/model_kernels.cu cuda/kernels.cu)
TARGETS="model_kernels_emulated_test cuda_kernels_emulated_test attention_emulated_test cuda_reward_model_emulated_test"
SCHEDULES=("" reverse ahead random:1 random:2 random:3)
SAVE=$(mktemp -d)
for f in "${FILES[@]}"; do mkdir -p "$SAVE/$(dirname "$f")" && cp "$f" "$SAVE/$f"; done
restore() { for f in "${FILES[@]}"; do cmp -s "$SAVE/$f" "$f" || cp "$SAVE/$f" "$f"; done; }
trap 'restore; rm -rf "$SAVE"' EXIT
bins=()
for t in $TARGETS; do
  b=$(find "$BUILD/tests" -name "$t" -type f -perm -u+x | head -1)
  [ -n "$b" ] || { echo "barrier_knockout: no $t under $BUILD/tests (a build with ZERO_WITH_CUDA on?)"; exit 2; }
  bins+=("$b")
done
run_all() {  # prints one column per schedule: "-" passed, "X" failed (a test binary of the four)
  local cols=""
  for s in "${SCHEDULES[@]}"; do
    local ok=1
    for b in "${bins[@]}"; do
      (cd "$(dirname "$b")" && ZERO_SIMT_SCHEDULE=$s timeout 300 "$b" > /dev/null 2>&1) || { ok=0; break; }
    done
    cols+=$([ $ok = 1 ] && echo "  -" || echo "  X")
  done
  echo "$cols"
}
make -C "$BUILD" -j2 $TARGETS > /tmp/knockout_build.log 2>&1 || { echo "the unchanged tree does not build"; exit 2; }
echo "columns: default reverse ahead random:1 random:2 random:3 (X: a test failed)"
echo "unchanged tree:$(run_all)"
for f in "${FILES[@]}"; do
  for line in $(grep -n -E '__syncthreads\(\);|__syncwarp\(\);' "$f" | cut -d: -f1); do
    sed -i -E "${line}s/__syncthreads\(\);|__syncwarp\(\);/;/" "$f"
    if ! make -C "$BUILD" -j2 $TARGETS > /tmp/knockout_build.log 2>&1; then
      echo "$f:$line  build failed"
    else
      echo "$f:$line$(run_all)    $(sed -n "${line}p" "$SAVE/$f" | sed -E 's/^ +//' | cut -c1-90)"
    fi
    cp "$SAVE/$f" "$f"
  done
done
restore
make -C "$BUILD" -j2 $TARGETS > /dev/null 2>&1
