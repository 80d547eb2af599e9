#!/usr/bin/env bash
# The small commands: `pmtrain tokenize` reproduces the golden tokenizations, `pmtrain plan` plans.
source "$(dirname "$0")/common.sh"
sed -E 's/,"ids":\[[^]]*\]//' tests/data/golden_dev.jsonl > $TMP/texts.jsonl
"$PMTRAIN" tokenize --tokenizer data/assets/qwen3/tokenizer.json < $TMP/texts.jsonl > $TMP/ids.jsonl
sed -E 's/.*("ids":\[[^]]*\]).*/\1/' tests/data/golden_dev.jsonl > $TMP/want.txt
sed -E 's/.*("ids":\[[^]]*\]).*/\1/' $TMP/ids.jsonl > $TMP/got.txt
[ $(wc -l < $TMP/want.txt) -gt 10 ] || fail "golden file too small"
cmp $TMP/want.txt $TMP/got.txt || { diff $TMP/want.txt $TMP/got.txt | head; fail "pmtrain tokenize differs from golden"; }
echo "tokenize: $(wc -l < $TMP/got.txt) golden cases equal"
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 4 | tee $TMP/plan.txt
grep -q '^fits$' $TMP/plan.txt || fail "tiny config should fit"
