#!/usr/bin/env bash
# Stages 0, 1, 2 and 3 on the same data give the same loss curve within fp32 round-off, at 1 and at
# 3 ranks (the data order does not depend on the stage). The small model (common.sh SMALL: 105,600 parameters)
# with buckets of 8192 elements: several buckets, the embedding (299 x 64 = 19,136 elements) cut into pieces.
source "$(dirname "$0")/common.sh"
for np in 1 3; do
  ref=""
  for stage in 0 1 2 3; do
    $MPIRUN -np $np "$PMTRAIN" train configs/tiny_cpu.yaml $SMALL --set run.dir=$TMP/s$stage.$np \
      --set data.cache_dir=$TMP/cache --set zero.stage=$stage --set run.steps=4 --set batch.global=12 --set batch.micro=2 \
      --set run.eval_every=0 --set data.test_files=[] --set zero.bucket_elements=8192 --set run.save_final=false > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; fail "np $np stage $stage failed"; }
    losses=$(json_field $TMP/s$stage.$np/metrics.jsonl train loss | tr '\n' ' ')
    echo "np $np stage $stage: $losses"
    [ $(wc -w <<<"$losses") = 4 ] || fail "expected 4 step losses"
    if [ -z "$ref" ]; then ref=$losses; continue; fi
    awk -v a="$ref" -v b="$losses" 'BEGIN { n = split(a, x, " "); split(b, y, " ");
      for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-5 * (x[i] < 0 ? -x[i] : x[i]) + 1e-7) exit 1 } }' \
      || fail "np $np stage $stage loss curve differs from stage 0: $losses vs $ref"
  done
done
echo "stages agree"
