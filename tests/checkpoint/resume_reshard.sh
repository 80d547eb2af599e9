#!/usr/bin/env bash
# Resume in a new process at another world size and stage: the run continues like the uninterrupted one
# within fp32 round-off (final parameter checksum: l2 and sum within 1e-5 of l2). The bitwise equality of
# master/m/v per global element right after the load is asserted by checkpoint_mpi_test.
# Usage: resume_reshard.sh MPIRUN TRAINER
MPIRUN=$1 TRAINER=$2
source "$(dirname "$0")/ckpt_common.sh"
COMMON=(--steps 8 --global 24 --micro 2 --bucket 200 --clip 0.5)  # 24 = 2 x accum x world for world 2, 3, 4
check_close() {  # "sum l2" "sum l2"
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
    dl = (x[2] - y[2]) / x[2]; ds = (x[1] - y[1]) / x[2]; if (dl < 0) dl = -dl; if (ds < 0) ds = -ds;
    if (dl > 1e-5 || ds > 1e-5) { print "checksum mismatch:", a, "vs", b; exit 1 } }'
}
sum_l2() { grep '^checksum:' <<<"$1" | awk '{print $3, $5}'; }
for c in "4 3 2 1" "2 0 3 2" "3 2 4 3" "2 3 2 1"; do
  set -- $c
  tag="w$1s$2_to_w$3s$4"
  full=$(run "$1" --stage "$2")
  run "$1" --stage "$2" --run-dir "$WORK/$tag" --stop-at 4 >/dev/null
  resumed=$(run "$3" --stage "$4" --run-dir "$WORK/$tag" --resume auto)
  grep -q "saved at world $1 stage $2" <<<"$resumed" || fail "$tag: no resume line"$'\n'"$resumed"
  check_close "$(sum_l2 "$full")" "$(sum_l2 "$resumed")" || fail "$tag"
  echo "$tag: $(sum_l2 "$full") vs $(sum_l2 "$resumed")"
done
echo "resharded resume: all within tolerance"
