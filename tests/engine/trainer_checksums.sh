#!/usr/bin/env bash
# The example trainer prints the same final checksum for stages 0-3 at 1 and 3 ranks (within the
# parity tolerance: l2 within 1e-5 relative, sum within 1e-5 of the l2 norm).
# Usage: trainer_checksums.sh MPIRUN TRAINER
set -euo pipefail
MPIRUN=$1 TRAINER=$2
ref=""
for np in 1 3; do
  for stage in 0 1 2 3; do
    out=$($MPIRUN --oversubscribe --allow-run-as-root -np $np "$TRAINER" --stage $stage --steps 10 --global 12 --micro 2 --bucket 200)
    sum_l2=$(grep '^checksum:' <<<"$out" | awk '{print $3, $5}')
    [ -n "$sum_l2" ] || { echo "no checksum line at np $np stage $stage"; echo "$out"; exit 1; }
    echo "np $np stage $stage: $sum_l2"
    if [ -z "$ref" ]; then ref=$sum_l2; continue; fi
    awk -v a="$ref" -v b="$sum_l2" 'BEGIN { split(a, x, " "); split(b, y, " ");
      dl = (x[2] - y[2]) / x[2]; ds = (x[1] - y[1]) / x[2]; if (dl < 0) dl = -dl; if (ds < 0) ds = -ds;
      if (dl > 1e-5 || ds > 1e-5) { print "checksum mismatch:", a, "vs", b; exit 1 } }'
  done
done
echo "all checksums agree"
