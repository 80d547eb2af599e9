#!/usr/bin/env bash
# Bit-exact resume in a NEW process at the same world size, every stage 0-3 (2 ranks), sync and async
# saves: run 8 steps uninterrupted; run 4 steps (saves step_4) and stop; resume with --resume auto in a
# new mpirun and finish. The printed step lines after the resume point are string-identical and the final
# fp32 master/m/v dumps are byte-identical.
# Usage: resume_bitexact.sh MPIRUN TRAINER
MPIRUN=$1 TRAINER=$2
source "$(dirname "$0")/ckpt_common.sh"
for variant in "0" "1" "2" "3" "2 --async-save" "3 --async-save"; do
  set -- $variant
  stage=$1; shift
  extra=("$@")
  tag="stage${stage}${extra[*]:+_async}"
  full=$(run 2 --stage "$stage" --dump-state "$WORK/full_$tag.bin")
  first=$(run 2 --stage "$stage" --run-dir "$WORK/run_$tag" --stop-at 4 --save-every 2 "${extra[@]}")
  grep -q '^checkpoint: saved step_4' <<<"$first" || fail "$tag: no step_4 saved"$'\n'"$first"
  [ "$(cat "$WORK/run_$tag/checkpoints/latest")" = step_4 ] || fail "$tag: latest is not step_4"
  resumed=$(run 2 --stage "$stage" --run-dir "$WORK/run_$tag" --resume auto "${extra[@]}" --dump-state "$WORK/res_$tag.bin")
  grep -q "^resumed from $WORK/run_$tag/checkpoints/step_4: step 4" <<<"$resumed" || fail "$tag: did not resume"$'\n'"$resumed"
  a=$(steps_after "$full" 4); b=$(steps_after "$resumed" 4)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$tag: step lines differ"$'\n'"$a"$'\n---\n'"$b"
  [ "$(grep '^checksum' <<<"$full")" = "$(grep '^checksum' <<<"$resumed")" ] || fail "$tag: checksum lines differ"
  cmp "$WORK/full_$tag.bin" "$WORK/res_$tag.bin" || fail "$tag: final master/m/v differ"
  echo "$tag: resumed run bit-exact ($(wc -l <<<"$b") steps, $(stat -c %s "$WORK/res_$tag.bin") state bytes)"
done
echo "bit-exact resume: all stages agree"
