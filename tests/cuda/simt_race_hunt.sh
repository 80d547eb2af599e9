#!/usr/bin/env bash
# Hunts races in our CUDA kernels without a GPU: runs every emulated kernel test (the entries ctest runs in the
# default order, with their own filters and environment) under the SIMT emulator's random schedule, one seed
# after another (ZERO_SIMT_SCHEDULE=random:SEED, tests/cuda/simt_emulator.h: each seed one order of a block's
# threads between barriers). A kernel whose result depends on that order fails under some seed; the seed
# reproduces it. Not a ctest entry (a few minutes a seed range); ctest runs seed 1 (the *_random entries).
#   bash tests/cuda/simt_race_hunt.sh BUILD_DIR FIRST_SEED LAST_SEED
# Prints one line a seed, then the seeds that failed; exit 1 if any did.
set -u
BUILD=${1:?build directory}
FIRST=${2:?first seed}
LAST=${3:?last seed}
TESTS='^(model_kernels_emulated_test|cuda_kernels_emulated_test|attention_emulated_test|cuda_reward_model_emulated_test|cuda_model_ops_emulated_test|activation_pool_emulated_test|cuda_ops_emulated_test)$'
[ "$(ctest --test-dir "$BUILD" -N -R "$TESTS" | grep -c 'Test *#')" = 7 ] \
  || { echo "simt_race_hunt: $BUILD does not have the 7 emulated kernel tests (a build with ZERO_WITH_CUDA on?)"; exit 2; }
failed=()
for ((seed = FIRST; seed <= LAST; ++seed)); do
  start=$(date +%s.%N)
  if out=$(ZERO_SIMT_SCHEDULE=random:$seed ctest --test-dir "$BUILD" -R "$TESTS" --output-on-failure 2>&1); then
    printf 'seed %d: 7 passed (%.0f s)\n' "$seed" "$(echo "$(date +%s.%N) - $start" | bc)"
  else
    failed+=("$seed")
    printf 'seed %d: FAILED\n' "$seed"
    echo "$out" | grep -E "Failed|\*\*\*|Failure|rel L2" | head -20
  fi
done
if [ ${#failed[@]} -gt 0 ]; then echo "failed seeds: ${failed[*]}"; exit 1; fi
echo "all $((LAST - FIRST + 1)) seeds passed"
