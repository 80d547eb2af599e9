#!/usr/bin/env bash
# Train a few steps on 2 ranks at stage 3, export the run as an HF directory, reload it with our own
# reader and model through `pmtrain score`, and check that the scores equal those of the fp32 export's
# weights (bf16 export within bf16 rounding).
# run.export final: the run writes the same directory itself when it ends (run.dir/hf, the bytes of
# `pmtrain export`); a run stopped before its end (run.stop_at) writes none, its resumed run does; a
# run.export_dir an export may not write, best without run.keep_best, and final without run.save_final are
# refused before training.
source "$(dirname "$0")/common.sh"
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache \
  --set run.steps=3 --set zero.stage=3 --set run.eval_every=0 --set data.test_files=[] \
  --set run.export=final --set run.export_dtype=fp32 > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; fail "training failed"; }
"$PMTRAIN" export $TMP/run --to $TMP/hf32 --dtype fp32
"$PMTRAIN" export $TMP/run --to $TMP/hf16 --dtype bf16
cmp $TMP/run/hf/model.safetensors $TMP/hf32/model.safetensors || fail "run.export final differs from pmtrain export --dtype fp32"
cmp $TMP/run/hf/config.json $TMP/hf32/config.json || fail "run.export final's config.json differs from pmtrain export's"
grep -qF "run.export final: $TMP/run/checkpoints/step_3 as an HF model directory" $TMP/out.txt \
  || { tail -4 $TMP/out.txt; fail "no run.export line naming step_3"; }
echo "ok: run.export final = pmtrain export of step_3, byte for byte"
# Progress lines (pmtrain export --progress-s, run.eval_progress_s): none at the default 30 s of a tiny export;
# every due one with a tiny interval: the checksums (2 rank files, so one line before the last is hashed), then
# the weights (a line after each tensor but the last), each with its bytes, rate and ETA; the same bytes exported.
! grep -q "^export: checksums\|^export: weights" $TMP/out.txt || fail "progress lines at the default 30 s"
"$PMTRAIN" export $TMP/run --to $TMP/hfp --dtype fp32 --progress-s 0.000001 > $TMP/progress.txt \
  || { cat $TMP/progress.txt; fail "export with --progress-s failed"; }
cmp $TMP/hfp/model.safetensors $TMP/hf32/model.safetensors || fail "the export with progress lines differs"
tensors=$(python3 -c "import json,struct,sys; f=open(sys.argv[1],'rb'); n=struct.unpack('<Q',f.read(8))[0]; \
print(len([k for k in json.loads(f.read(n)) if k != '__metadata__']))" $TMP/hf32/model.safetensors)
RATE="[0-9.]+ [MG]iB of [0-9.]+ [MG]iB \([0-9]+%\), [0-9.]+ [MG]iB/s, ETA [0-9hms]+"
n_sum=$(grep -cE "^export: checksums of the checkpoint's files: $RATE$" $TMP/progress.txt || true)
n_w=$(grep -cE "^export: weights read and written: $RATE$" $TMP/progress.txt || true)
[ "$n_sum" = 1 ] && [ "$n_w" = $((tensors - 1)) ] \
  || { cat $TMP/progress.txt; fail "progress lines: $n_sum for the checksums (want 1), $n_w for the weights (want $((tensors - 1)))"; }
echo "ok: export progress: 1 checksum line, $n_w weight lines for $tensors tensors: $(grep -m1 "^export: weights" $TMP/progress.txt)"

SMALL_RUN=(train configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set run.steps=3 --set data.test_files=[]
  --set batch.global=4 --set run.export=final)
"$PMTRAIN" "${SMALL_RUN[@]}" --set run.dir=$TMP/stop --set run.stop_at=2 > $TMP/stop.txt 2>&1 \
  || { cat $TMP/stop.txt; fail "the run to step 2 failed"; }
[ ! -e $TMP/stop/hf ] || fail "a run stopped at step 2 of 3 exported"
"$PMTRAIN" "${SMALL_RUN[@]}" --set run.dir=$TMP/stop --resume auto --set run.eval_progress_s=0.000001 > $TMP/resume.txt 2>&1 \
  || { cat $TMP/resume.txt; fail "the resumed run failed"; }
grep -qE "^export: weights read and written: " $TMP/resume.txt || { cat $TMP/resume.txt; fail "run.export printed no progress at run.eval_progress_s 1e-6"; }
grep -q '"step": *3' $TMP/stop/hf/zero_export.json || fail "the resumed run's export is not of step 3"
echo "ok: run.export waits for the end: none at run.stop_at 2, step 3's after the resume"
mkdir -p $TMP/foreign && echo keep > $TMP/foreign/notes.txt
bad "a run.export_dir holding other files" "export: refusing to write into $TMP/foreign: it is not empty" \
  "${SMALL_RUN[@]}" --set run.dir=$TMP/x1 --set run.export_dir=$TMP/foreign
[ "$(cat $TMP/foreign/notes.txt)" = keep ] && [ ! -e $TMP/x1/checkpoints ] || fail "the refused run wrote something"
bad "run.export best without run.keep_best" "run.export is best: the checkpoint run.keep_best ranks best, but run.keep_best is none" \
  "${SMALL_RUN[@]}" --set run.dir=$TMP/x2 --set run.export=best
bad "run.export final without run.save_final" "run.export is final: the last step's checkpoint, but run.save_final is false" \
  "${SMALL_RUN[@]}" --set run.dir=$TMP/x3 --set run.save_final=false
bad "run.export of a bad value" "run.export: unknown value 'last' (expected none, final, best)" \
  "${SMALL_RUN[@]}" --set run.dir=$TMP/x4 --set run.export=last
for f in config.json model.safetensors tokenizer.json; do [ -s $TMP/hf32/$f ] || fail "export lacks $f"; done
# A --tokenizer that is no tokenizer is refused before anything is written (it shipped as a 0-byte file).
: > $TMP/empty_tokenizer.json
bad "export --tokenizer of an empty file" "is not a usable tokenizer.json" export $TMP/run --to $TMP/hfbad \
  --tokenizer $TMP/empty_tokenizer.json
[ ! -e $TMP/hfbad ] || fail "a refused export left $TMP/hfbad behind"
grep -q '"pad_token_id": *151643' $TMP/hf32/config.json || fail "config.json lacks the pad token"
grep -q '"Qwen3ForSequenceClassification"' $TMP/hf32/config.json || fail "config.json lacks the architecture"
# The fp32 export read back through the engine (eval --model: model.hf_dir) at stage 3 on 2 ranks, each rank
# reading only its shard of each tensor (Engine::kept_tensor_range): the checkpoint's own evaluation, number for
# number.
EVAL=(configs/tiny_cpu.yaml --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache --set zero.stage=3 --set run.eval_pairs=24)
$MPIRUN -np 2 "$PMTRAIN" eval "${EVAL[@]}" > $TMP/ev_ckpt.txt 2>&1 || { cat $TMP/ev_ckpt.txt; fail "eval of the checkpoint failed"; }
$MPIRUN -np 2 "$PMTRAIN" eval "${EVAL[@]}" --model $TMP/hf32 > $TMP/ev_hf.txt 2>&1 || { cat $TMP/ev_hf.txt; fail "eval --model failed"; }
ev_numbers() { grep '^{.*"type":"eval"' $1 | untimed | sed -E 's/,?"weights":"[^"]*"//'; }
[ -n "$(ev_numbers $TMP/ev_ckpt.txt)" ] && [ "$(ev_numbers $TMP/ev_hf.txt)" = "$(ev_numbers $TMP/ev_ckpt.txt)" ] \
  || { ev_numbers $TMP/ev_ckpt.txt; ev_numbers $TMP/ev_hf.txt; fail "eval --model of the fp32 export at stage 3 differs from the checkpoint's"; }
echo "ok: eval --model of the fp32 export at stage 3 on 2 ranks = the checkpoint's: $(ev_numbers $TMP/ev_hf.txt)"
DATA=data/assets/hh-rlhf/harmless-base/test.jsonl.gz
"$PMTRAIN" score --model $TMP/hf32 --data $DATA --out $TMP/s32.jsonl
"$PMTRAIN" score --model $TMP/hf16 --data $DATA --out $TMP/s16.jsonl
n=$(zcat $DATA | grep -c .)
[ $(wc -l < $TMP/s32.jsonl) = $n ] || fail "expected $n scored pairs"
# bf16 weights move rewards by bf16 rounding only: compare against the fp32 export.
paste -d' ' <(sed -E 's/.*"chosen":(-?[0-9.eE+-]+).*/\1/' $TMP/s32.jsonl) <(sed -E 's/.*"chosen":(-?[0-9.eE+-]+).*/\1/' $TMP/s16.jsonl) \
  | awk '{ d = $1 - $2; if (d < 0) d = -d; s = ($1 < 0 ? -$1 : $1); if (s > m) m = s; if (d > md) md = d; n++ }
         END { printf "fp32 vs bf16 export: max |reward diff| %.3g over %d pairs (max |reward| %.3g)\n", md, n, m;
               exit !(n > 0 && md <= 2e-2 * (m > 1 ? m : 1)) }' || fail "bf16 export rewards too far from fp32"
