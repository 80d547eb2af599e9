#!/usr/bin/env bash
# The GPU speed comparison's scripts, on the CPU: bench/gpu/speed.sh in its dry run (tiny shape, backend cpu,
# the transformers side skipped) writes its table with pmtrain's numbers in every synthetic row and the
# real-data row; bench/torch/hf_reward_baseline.py compiles, parses its options and, without torch, reports a
# result row rather than a traceback.
source "$(dirname "$0")/common.sh"

SPEED_DRYRUN=1 PMTRAIN="$PMTRAIN" bash bench/gpu/speed.sh $TMP/speed > $TMP/speed.out 2>&1 \
  || { cat $TMP/speed.out; fail "speed.sh dry run failed"; }
md=$TMP/speed/speed.md
[ -f $md ] || { cat $TMP/speed.out; fail "no speed.md"; }
for ck in off on; do
  grep -qE "^\| tiny \| $ck \| [0-9,]+ \| - \| [0-9.]+ \| dry run \|" $md || { cat $md $TMP/speed.out; fail "no pmtrain numbers for ckpt $ck"; }
done
grep -qE "^\| tiny \| off \| [0-9,]+ \| dry run \| - \|" $md || { cat $md $TMP/speed.out; fail "no real-data row"; }
grep -q "Cells not run: .*HF eager tiny ckpt off (dry run)" $md || { cat $md; fail "the skipped cells are not named"; }
# The planner beside the measured cells, from the profile the script calibrated on this backend.
for ck in off on; do
  grep -qE "^\| tiny \| $ck \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$" $md \
    || { cat $md $TMP/speed.out; fail "no planner row for ckpt $ck"; }
done
# The real-data cell again on the host's clock (run.step_clock host; on the CPU the same clock) beside it.
grep -qE "^pmtrain tiny real data with run.step_clock host \(no events on the stream\): [0-9,]+ real tokens/s, host clock / device clock [0-9.]+ " $md \
  || { cat $md; fail "no host-clock line for the real-data cell"; }
# The wide attention kernels' cell (model.attention flash_wide; on the CPU the tiled attention) beside the default's.
grep -qE "^pmtrain tiny ckpt on with model.attention flash_wide .*: [0-9,]+ tokens/s, wide / default [0-9.]+$" $md \
  || { cat $md; fail "no flash_wide cell"; }
# pmtrain's profile beside each of its cells: the shares of its steps by category.
for cell in "tiny ckpt off" "tiny ckpt on" "tiny real data"; do
  grep -qE "^\| $cell \|( [0-9.]+% \|){7}$" $md || { cat $md; fail "no profile row for $cell"; }
done
# And by op, with each op's rate: the GEMMs' in FLOP/s, AdamW's in GB/s; the host's ms and the launches only from a
# device's clock.
grep -qE "^\| linear_forward \| gemm \| [0-9.]+ \| - \| [0-9.]+ \| - \| [0-9.]+ TFLOP/s \|$" $md || { cat $md; fail "no GEMM row by op"; }
grep -qE "^\| adamw \| optimizer \| [0-9.]+ \| - \| [0-9.]+ \| - \| [0-9]+ GB/s \|$" $md || { cat $md; fail "no AdamW row by op"; }
python3 - $TMP/speed/cells/ours_real.json <<'PY' || fail "real-data cell"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["tokens_per_s"] > 0 and j["real_tokens"] > 0 and j["steps"] == 3, j
print("ok: real-data cell:", j)
PY
echo "ok: speed.sh dry run"; cat $md
# No time left: no cell starts, and the table says so for each.
SPEED_DRYRUN=1 SPEED_BUDGET_S=0 PMTRAIN="$PMTRAIN" bash bench/gpu/speed.sh $TMP/none > $TMP/none.out 2>&1 \
  || { cat $TMP/none.out; fail "speed.sh with no budget failed"; }
grep -q "Cells not run: .*pmtrain tiny ckpt off (time budget (0 s) spent); .*pmtrain tiny ckpt on (time budget" \
  $TMP/none/speed.md || { cat $TMP/none/speed.md; fail "cells past the budget are not named"; }
[ ! -d $TMP/none/cells/real_run ] || fail "a cell ran past the budget"
echo "ok: speed.sh past its budget"

# The baseline script: byte-compiles (into TMP: the tree stays clean), --help, and a row without torch.
python3 -c "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)" \
  bench/torch/hf_reward_baseline.py $TMP/baseline.pyc || fail "hf_reward_baseline.py does not compile"
python3 bench/torch/hf_reward_baseline.py --help | grep -q -- "--compile" || fail "hf_reward_baseline.py --help"
set +e
python3 bench/torch/hf_reward_baseline.py --steps 2 --warmup 2 > $TMP/bad.txt 2>&1; rc=$?
set -e
[ $rc = 2 ] && grep -q "need --steps > --warmup" $TMP/bad.txt || { cat $TMP/bad.txt; fail "baseline: bad options"; }
if ! python3 -c "import torch" 2>/dev/null; then
  python3 bench/torch/hf_reward_baseline.py --shape 4b --json > $TMP/row.json || true
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); assert r['error'] == 'torch is not installed', r" \
    $TMP/row.json || { cat $TMP/row.json; fail "baseline without torch"; }
fi
echo "ok: hf_reward_baseline.py"

# launch/gpu_check.sh's pass/fail count (ctest_counts) on a ctest log as ctest writes it: the stars follow the
# dots with no space (a pattern that wanted one counted no failure at all, and the check passed).
cat > $TMP/ctest.log <<'LOG'
 1/7 Test #12: cuda_device_sharing_test .........   Passed    0.00 sec
 2/7 Test #13: cuda_ops_test ....................***Failed    0.01 sec
 3/7 Test #14: nccl_comm_test_np2 ...............***Skipped   2.38 sec
 4/7 Test #16: cuda_engine_test_np1 .............***Timeout  300.01 sec
 5/7 Test #17: cuda_engine_test_np2 .............***Exception: SegFault  1.38 sec
 6/7 Test #18: core_math_device_test ............***Not Run   0.00 sec
25: [  PASSED  ] 3 tests. Passed 1 sec
 7/7 Test #19: attention_grid_test ..............   Passed    0.46 sec
LOG
source launch/gpu_build.sh
[ "$(ctest_counts $TMP/ctest.log)" = "2 5" ] || fail "gpu_check counts: got '$(ctest_counts $TMP/ctest.log)', want '2 5'"
echo "ok: gpu_check's counts"
# The GPU build runs on every core although launch/mpi_env.sh has set OMP_NUM_THREADS=1 (nproc obeys it: the
# H200's build once ran on one of its 16 cores). The reference is the scheduler's CPU set, as Python reads it.
cores=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
got=$(OMP_NUM_THREADS=1 OMP_THREAD_LIMIT=1 machine_cores)
[ "$got" = "$cores" ] || fail "machine_cores under OMP_NUM_THREADS=1: got '$got', want $cores"
echo "ok: machine_cores = $cores under OMP_NUM_THREADS=1"
