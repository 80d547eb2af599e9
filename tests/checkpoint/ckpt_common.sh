# Shared by the checkpoint resume scripts: mpirun wrapper, a scratch dir, assertions.
# Usage (sourced): MPIRUN=... TRAINER=... then `run NP args...` prints the trainer's stdout.
set -euo pipefail
WORK=$(mktemp -d /tmp/zero_ckpt_sh.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
COMMON=(--steps 8 --global 12 --micro 2 --bucket 200 --clip 0.5)
run() {
  local np=$1; shift
  timeout 120 "$MPIRUN" --oversubscribe --allow-run-as-root --bind-to none -np "$np" "$TRAINER" "${COMMON[@]}" "$@"
}
fail() { echo "FAIL: $*"; exit 1; }
steps_of() { grep '^step ' <<<"$1" || true; }
# Step lines after step $2 of output $1.
steps_after() { awk -v s="$2" '/^step /{ split($2, a, "/"); if (a[1] > s) print }' <<<"$1"; }
