#!/usr/bin/env bash
# The README's main job: mpirun -np 4 pmtrain train configs/tiny_cpu.yaml. The whole path must learn:
# on the last epoch the training loss is at most 0.5 and the training accuracy at least 80%; a final
# eval on the test split is reported, and tokens/s is logged.
source "$(dirname "$0")/common.sh"
$MPIRUN -np 4 "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache \
  > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; fail "training failed"; }
M=$TMP/run/metrics.jsonl
[ -s "$M" ] || fail "no metrics.jsonl"
loss=$(json_field $M epoch loss | tail -1)
acc=$(json_field $M epoch accuracy | tail -1)
echo "last epoch: loss $loss accuracy $acc"
awk -v l="$loss" -v a="$acc" 'BEGIN { exit !(l <= 0.5 && a >= 0.8) }' || fail "did not learn: loss $loss acc $acc"
grep -q '"final":true' $M || fail "no final eval record"
grep -q '^final eval | loss' $TMP/out.txt || fail "no final eval line"
grep -q 'world 4' $TMP/out.txt || fail "not a 4-rank run"
[ -s $TMP/run/config.resolved.yaml ] || fail "resolved config not saved"
grep -E '^(final eval|done:)' $TMP/out.txt
