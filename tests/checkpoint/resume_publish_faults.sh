#!/usr/bin/env bash
# Faults at every publish step of a save, on rank 0 (ZERO_FAULT ckpt_kill_at / ckpt_enospc_at,
# checkpoint/fault.h): killed halfway through manifest.json, after the rename to step_6/ but before
# `latest`, halfway through the replacement of `latest`; ENOSPC halfway through manifest.json and through
# latest's temp file (after the rename). Each time `latest` still reads exactly "step_4", `--resume auto`
# loads that checkpoint (checksums verified) and the resumed run ends bit-exactly like an uninterrupted one.
# (resume_faults.sh covers the faults inside a shard file.)
# Usage: resume_publish_faults.sh MPIRUN TRAINER
MPIRUN=$1 TRAINER=$2
source "$(dirname "$0")/ckpt_common.sh"
run 2 --stage 2 --dump-state "$WORK/full.bin" >/dev/null
printf 'step_4\n' >"$WORK/latest_step_4"
for variant in kill_manifest kill_renamed kill_latest enospc_manifest enospc_latest; do
  dir="$WORK/$variant" ck="$WORK/$variant/checkpoints"
  run 2 --stage 2 --run-dir "$dir" --stop-at 4 >/dev/null
  cmp -s "$ck/latest" "$WORK/latest_step_4" || fail "$variant: no step_4"
  fault="ckpt_${variant%%_*}_at=${variant#*_}@rank0@step6"
  set +e
  out=$(ZERO_FAULT=$fault run 2 --stage 2 --run-dir "$dir" --resume auto --save-every 2 2>&1)
  rc=$?
  set -e
  [ $rc -ne 0 ] || fail "$variant: the faulty run exited 0"$'\n'"$out"
  cmp -s "$ck/latest" "$WORK/latest_step_4" || fail "$variant: latest reads '$(cat "$ck/latest")', not step_4"
  # What each fault leaves behind shows it fired where it should.
  case $variant in
    kill_manifest)
      size=$(stat -c %s "$ck/.tmp_step_6/manifest.json") || fail "$variant: no partial manifest"
      [ "$size" -gt 0 ] || fail "$variant: rank 0 was not killed halfway through the manifest"
      [ ! -e "$ck/step_6" ] || fail "$variant: step_6 was published" ;;
    kill_renamed)
      [ -e "$ck/step_6/manifest.json" ] && [ ! -e "$ck/.tmp_step_6" ] || fail "$variant: not killed after the rename"
      [ ! -e "$ck/latest.tmp" ] || fail "$variant: latest was touched before the kill" ;;
    kill_latest)
      [ "$(cat "$ck/latest.tmp")" = "ste" ] || fail "$variant: latest.tmp is not half written"
      [ -e "$ck/step_6/manifest.json" ] || fail "$variant: killed before the rename" ;;
    enospc_*)
      file=manifest.json; [ $variant = enospc_latest ] && file=latest.tmp
      for want in "saving checkpoint step_6" "$file failed after" "No space left on device" "ENOSPC" \
                  "previous checkpoint and \`latest\` are unchanged"; do
        grep -qF "$want" <<<"$out" || fail "$variant: '$want' not in the error"$'\n'"$out"
      done
      [ ! -e "$ck/.tmp_step_6" ] && [ ! -e "$ck/step_6" ] || fail "$variant: step_6 or its temp dir left behind" ;;
  esac
  out=$(run 2 --stage 2 --run-dir "$dir" --resume auto --save-every 2 --dump-state "$WORK/$variant.bin")
  grep -q "^resumed from $ck/step_4: step 4" <<<"$out" || fail "$variant: did not resume from step_4"$'\n'"$out"
  cmp "$WORK/full.bin" "$WORK/$variant.bin" || fail "$variant: resumed run differs from the uninterrupted one"
  [ "$(cat "$ck/latest")" = step_8 ] && [ ! -e "$ck/.tmp_step_6" ] || fail "$variant: stale temp dir or latest"
  echo "$variant: latest kept step_4; resumed run bit-exact"
done
echo "publish faults: all recovered"
