#!/usr/bin/env bash
# zero.offload: optimizer (the fp32 master, m and v in host memory, AdamW by the host) trains the same bits as
# the optimizer on the backend, which on the CPU backend is the same memory: what this checks is the
# engine's offload path as pmtrain drives it (chunks, transfers, checkpoints), against the path without it.
#  1. 2 ranks at stage 2, fp32: every step's loss, grad norm and pairs equal the run without offload;
#  2. 2 ranks at stage 3, bf16 params: equal to the run without offload with an fp32 master (zero.master
#     auto is fp32 under offload, split without it);
#  3. a run stopped at step 2 and resumed from its checkpoint (the host arrays saved and loaded) gives the
#     uninterrupted offloaded run's steps; 3b. its host threads: `threads` when given, else the rank's share of
#     the node's cores;
#  4. zero.master split with zero.offload is refused in one line;
#  5. the plan of a cuda run moves the optimizer to the host: `--dry-run` of the Qwen3-0.6B config shows it
#     in host memory (6.6x GiB: 12 bytes a parameter of its 0.596e9 is 6.66 GiB, and 24 MiB of staging) and
#     none on the GPU.
source "$(dirname "$0")/common.sh"
BASE="configs/tiny_cpu.yaml --set data.cache_dir=$TMP/cache --set run.steps=4 --set batch.global=8 --set batch.micro=2
  --set run.eval_every=0 --set data.test_files=[] --set data.max_len=64"
train() {  # train NAME ARGS...: a 2-rank run in $TMP/NAME
  local name=$1; shift
  $MPIRUN -np 2 "$PMTRAIN" train $BASE --set run.dir=$TMP/$name "$@" > $TMP/$name.txt 2>&1 \
    || { tail -30 $TMP/$name.txt; fail "run $name failed: $*"; }
}
fields() { paste -d' ' <(json_field $TMP/$1/metrics.jsonl train loss) <(json_field $TMP/$1/metrics.jsonl train grad_norm) \
  <(json_field $TMP/$1/metrics.jsonl train pair_id_sum); }
same() {  # same A B WHAT: the runs' per-step fields are identical (4 steps)
  [ "$(fields $1 | wc -l)" = 4 ] || fail "$3: $(fields $1 | wc -l) steps in $1"
  diff <(fields $1) <(fields $2) > /dev/null || { paste <(fields $1) <(fields $2); fail "$3: the runs differ"; }
  echo "ok: $3 ($(fields $2 | tail -1))"
}

# 1. fp32 at stage 2.
train plain2 --set zero.stage=2 --set zero.param_dtype=fp32
train off2 --set zero.stage=2 --set zero.param_dtype=fp32 --set zero.offload=optimizer
grep -q "master weights fp32, with m and v in host memory, stepped by 1 host thread (zero.offload)" $TMP/off2.txt \
  || { grep "master weights" $TMP/off2.txt; fail "off2: the log does not say the optimizer is offloaded"; }
same plain2 off2 "stage 2 fp32: offload = no offload"

# 2. bf16 params at stage 3 (fp32 masters on both sides).
train plain3 --set zero.stage=3 --set zero.param_dtype=bf16 --set zero.master=fp32
train off3 --set zero.stage=3 --set zero.param_dtype=bf16 --set zero.offload=optimizer
same plain3 off3 "stage 3 bf16: offload = no offload with an fp32 master"

# 3. Stopped at step 2, resumed: the host arrays go through the checkpoint.
train cut3 --set zero.stage=3 --set zero.param_dtype=bf16 --set zero.offload=optimizer --set run.stop_at=2
train cut3 --set zero.stage=3 --set zero.param_dtype=bf16 --set zero.offload=optimizer --set run.resume=auto
grep -q "resumed from .*step_2: step 2" $TMP/cut3.txt || { tail -20 $TMP/cut3.txt; fail "cut3 did not resume"; }
same off3 cut3 "offloaded run stopped at 2 and resumed = uninterrupted"

# 3b. Its host threads: `threads` when given (launch/mpi.env's OMP_NUM_THREADS=1 above), else the rank's share of
# the node's cores (one rank here: all of them), as the init takes them.
share=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
env -u OMP_NUM_THREADS $MPIRUN -np 1 "$PMTRAIN" train $BASE --set run.dir=$TMP/share --set run.steps=1 \
  --set zero.param_dtype=fp32 --set zero.offload=optimizer > $TMP/share.txt 2>&1 || { tail -20 $TMP/share.txt; fail "run share"; }
grep -qE "stepped by $share host threads? \(zero.offload\)" $TMP/share.txt \
  || { grep "master weights" $TMP/share.txt; fail "threads left out: the offloaded AdamW is not on the rank's $share cores"; }
echo "ok: threads left out: $(grep -o 'stepped by [0-9]* host threads\?' $TMP/share.txt) (the rank's share of $share cores)"

# 4. A split master cannot be offloaded.
if $MPIRUN -np 1 "$PMTRAIN" train $BASE --set run.dir=$TMP/bad --set zero.param_dtype=bf16 --set zero.master=split \
     --set zero.offload=optimizer > $TMP/bad.txt 2>&1; then fail "split master with offload ran"; fi
grep -q "zero.offload optimizer keeps an fp32 master in host memory, zero.master split keeps it in the bf16" $TMP/bad.txt \
  || { cat $TMP/bad.txt; fail "split master with offload: no clear error"; }
echo "ok: split master with offload refused: $(grep -o 'zero.offload optimizer keeps[^:]*' $TMP/bad.txt | head -1)"

# 5. The cuda plan: the optimizer on the host, none of it on the GPU.
"$PMTRAIN" train configs/qwen3_0_6b_bs128.yaml --dry-run --set backend=cuda --set batch.world=1 --set zero.stage=0 \
  --set zero.offload=optimizer --set run.save_final=false --set run.save_every=0 --set data.cache_dir=$TMP/cache \
  > $TMP/dry.txt || { tail -3 $TMP/dry.txt; fail "dry run with offload does not fit this host"; }
# (the fp32 master, m and v: 12 bytes a parameter, 6.66 GiB, and the staging: two chunks of 4 Mi elements each way
# of fp32 gradients and bf16 params, 48 MiB)
grep -qE '^host memory per rank: .*optimizer 6\.7[01] GiB' $TMP/dry.txt || { tail -3 $TMP/dry.txt; fail "dry run: the host plan lacks the optimizer"; }
grep -qE '^GPU memory per rank on its GPU: .*optimizer 0\.00 GiB' $TMP/dry.txt || { tail -3 $TMP/dry.txt; fail "dry run: optimizer on the GPU"; }
echo "ok: cuda plan with offload: $(grep -oE 'optimizer [0-9.]+ GiB' $TMP/dry.txt | tr '\n' ' ')(host, GPU)"
# Too much offloaded for this host (Qwen3-8B's optimizer over 8 ranks of this 24 GiB machine: 85 GiB): refused,
# with the way out that keeps the ranks (the optimizer back on the GPU).
if "$PMTRAIN" train configs/qwen3_8b_bs128.yaml --dry-run --set backend=cuda --set batch.world=8 \
     --set zero.offload=optimizer --set data.cache_dir=$TMP/cache > $TMP/big.txt 2>&1; then fail "8B offloaded on 8 ranks fit a 24 GiB host"; fi
grep -q "cannot hold the run's host memory: .*the optimizer on the GPU (zero.offload: none)" $TMP/big.txt \
  || { tail -2 $TMP/big.txt; fail "8B offloaded on 8 ranks: the refusal does not say zero.offload: none"; }
echo "ok: an offloaded optimizer too big for the host is refused: $(grep -o 'Use fewer.*' $TMP/big.txt)"
echo "PASS"
