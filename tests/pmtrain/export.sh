#!/usr/bin/env bash
# Train a few steps on 2 ranks at stage 3, export the run as an HF directory, reload it with our own
# reader and model through `pmtrain score`, and check that the scores equal those of the fp32 export's
# weights (bf16 export within bf16 rounding).
source "$(dirname "$0")/common.sh"
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache \
  --set run.steps=3 --set zero.stage=3 --set run.eval_every=0 --set data.test_files=[] > $TMP/out.txt 2>&1 \
  || { cat $TMP/out.txt; fail "training failed"; }
"$PMTRAIN" export $TMP/run --to $TMP/hf32 --dtype fp32
"$PMTRAIN" export $TMP/run --to $TMP/hf16 --dtype bf16
for f in config.json model.safetensors tokenizer.json; do [ -s $TMP/hf32/$f ] || fail "export lacks $f"; done
# A --tokenizer that is no tokenizer is refused before anything is written (it shipped as a 0-byte file).
: > $TMP/empty_tokenizer.json
bad "export --tokenizer of an empty file" "is not a usable tokenizer.json" export $TMP/run --to $TMP/hfbad \
  --tokenizer $TMP/empty_tokenizer.json
[ ! -e $TMP/hfbad ] || fail "a refused export left $TMP/hfbad behind"
grep -q '"pad_token_id": *151643' $TMP/hf32/config.json || fail "config.json lacks the pad token"
grep -q '"Qwen3ForSequenceClassification"' $TMP/hf32/config.json || fail "config.json lacks the architecture"
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
