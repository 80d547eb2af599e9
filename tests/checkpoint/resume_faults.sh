#!/usr/bin/env bash
# Faults during a save, in real processes (ZERO_FAULT, docs/CHECKPOINTS.md): a rank killed with SIGKILL
# in the middle of writing its shard (sync and async), and a write failing with ENOSPC. Each time the
# previous checkpoint survives, `latest` keeps naming it, and a new process resumes from it and finishes
# bit-exactly like an uninterrupted run.
# Usage: resume_faults.sh MPIRUN TRAINER
MPIRUN=$1 TRAINER=$2
source "$(dirname "$0")/ckpt_common.sh"
run 2 --stage 2 --dump-state "$WORK/full.bin" >/dev/null
for variant in kill kill_async enospc; do
  dir="$WORK/$variant" ck="$WORK/$variant/checkpoints"
  extra=(); [ "$variant" = kill_async ] && extra=(--async-save)
  run 2 --stage 2 --run-dir "$dir" --stop-at 4 "${extra[@]}" >/dev/null
  [ "$(cat "$ck/latest")" = step_4 ] || fail "$variant: no step_4"
  case $variant in
    kill*) fault="ckpt_kill_after_bytes=1000@rank1@step6" ;;
    enospc) fault="ckpt_enospc_after_bytes=1000@rank1@step6" ;;
  esac
  set +e
  out=$(ZERO_FAULT=$fault run 2 --stage 2 --run-dir "$dir" --resume auto --save-every 2 "${extra[@]}" 2>&1)
  rc=$?
  set -e
  [ $rc -ne 0 ] || fail "$variant: the faulty run exited 0"$'\n'"$out"
  [ "$(cat "$ck/latest")" = step_4 ] || fail "$variant: latest is $(cat "$ck/latest"), not step_4"
  [ ! -e "$ck/step_6" ] || fail "$variant: step_6 was published"
  case $variant in
    kill*)
      [ "$(stat -c %s "$ck/.tmp_step_6/rank_1.bin")" = 1000 ] || fail "$variant: rank 1 was not killed after 1000 bytes"
      [ ! -e "$ck/.tmp_step_6/manifest.json" ] || fail "$variant: manifest written" ;;
    enospc)
      for want in "saving checkpoint step_6" "rank 1: writing checkpoint file $ck/.tmp_step_6/rank_1.bin failed after 1000 bytes: No space left on device" \
                  "ENOSPC" "previous checkpoint and \`latest\` are unchanged"; do
        grep -qF "$want" <<<"$out" || fail "enospc: '$want' not in the error"$'\n'"$out"
      done
      [ ! -e "$ck/.tmp_step_6" ] || fail "enospc: temp dir left behind" ;;
  esac
  out=$(run 2 --stage 2 --run-dir "$dir" --resume auto --save-every 2 "${extra[@]}" --dump-state "$WORK/$variant.bin")
  grep -q "^resumed from $ck/step_4: step 4" <<<"$out" || fail "$variant: did not resume from step_4"$'\n'"$out"
  cmp "$WORK/full.bin" "$WORK/$variant.bin" || fail "$variant: resumed run differs from the uninterrupted one"
  [ ! -e "$ck/.tmp_step_6" ] && [ "$(cat "$ck/latest")" = step_8 ] || fail "$variant: stale temp dir or latest"
  echo "$variant: previous checkpoint survived; resumed run bit-exact"
done
echo "faults: all recovered"
