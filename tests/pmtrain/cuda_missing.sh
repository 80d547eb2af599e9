#!/usr/bin/env bash
# `backend: cuda` where no GPU can be used says so in one line, before any data is read, and exits non-zero:
# no CUDA error dump, no data cache or run directory written, done in seconds. CUDA_VISIBLE_DEVICES is
# emptied, so this holds on the GPU machine too. Which line is expected depends on the build (pmtrain
# --version says whether the CUDA backend is built): "no CUDA device is visible" or "not available in this
# build". Checked for train (as a single process) and for score.
source "$(dirname "$0")/common.sh"
if [[ "$("$PMTRAIN" --version)" == *"CUDA backend: built"* ]]; then
  want="backend cuda: no CUDA device is visible"
else
  want="backend cuda: .*(not available in this build|this build has no CUDA backend)"
fi
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz | sed -n 1,3p > $TMP/pairs.jsonl

# check NAME COMMAND...: runs it without a visible GPU and asserts on its exit code, stderr and leftovers.
check() {
  local name=$1; shift
  local t0=$(date +%s%N) rc=0
  CUDA_VISIBLE_DEVICES= timeout 120 "$@" > $TMP/$name.out 2> $TMP/$name.err || rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ $rc -ne 0 ] || fail "$name: exit code 0 with backend cuda and no GPU"
  [ $rc -ne 124 ] || fail "$name: still running after 120 s"
  [ "$(wc -l < $TMP/$name.err)" -eq 1 ] || { cat $TMP/$name.err; fail "$name: want exactly one line on stderr"; }
  grep -qE "$want" $TMP/$name.err || { cat $TMP/$name.err; fail "$name: stderr does not say '$want'"; }
  ! grep -qiE "cudaError|CUDA error|terminate called|Aborted|Segmentation|backtrace" $TMP/$name.out $TMP/$name.err \
    || { cat $TMP/$name.out $TMP/$name.err; fail "$name: an error dump instead of one line"; }
  [ ! -e $TMP/cache ] || fail "$name: the data cache was written: the data was read before the backend was checked"
  [ ! -e $TMP/run ] || fail "$name: the run directory was created"
  [ $ms -lt 30000 ] || fail "$name: took $ms ms (want seconds)"
  echo "$name: exit $rc after $ms ms: $(cat $TMP/$name.err)"
}
check train "$PMTRAIN" train configs/tiny_cpu.yaml --set backend=cuda --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache
check score "$PMTRAIN" score configs/tiny_cpu.yaml --set backend=cuda --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache \
  --init --data $TMP/pairs.jsonl
