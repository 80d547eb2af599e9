#!/usr/bin/env bash
# pmtrain run from another directory: relative paths are taken from the current directory. With absolute
# paths in the config a 1-rank run works from anywhere: its run directory lands where it was launched,
# the resolved config records absolute paths, and the token cache defaults to $XDG_CACHE_HOME/pmtrain.
# A wrong relative path is reported with the absolute path tried and where relative paths start from;
# errors at world 1 carry no "rank 0:" prefix.
source "$(dirname "$0")/common.sh"
REPO=$PWD
PMTRAIN=$(realpath "$PMTRAIN")
mkdir -p $TMP/elsewhere $TMP/xdg
sed "s|data/assets|$REPO/data/assets|" configs/tiny_cpu.yaml > $TMP/abs.yaml
cd $TMP/elsewhere
XDG_CACHE_HOME=$TMP/xdg "$PMTRAIN" train ../abs.yaml --set run.dir=runs/here --set run.steps=1 --set batch.global=4 \
  --set run.eval_pairs=4 --set data.max_train_pairs=8 > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; fail "run from another directory failed"; }
R=$TMP/elsewhere/runs/here
grep -q '"final":true' $R/metrics.jsonl || fail "no final eval in $R/metrics.jsonl"
ls $TMP/xdg/pmtrain/train_*.bin > /dev/null || fail "token cache not in \$XDG_CACHE_HOME/pmtrain"
grep -qxF "  dir: $R" $R/config.resolved.yaml || fail "resolved run.dir is not absolute"
grep -qxF "  tokenizer: $REPO/data/assets/qwen3/tokenizer.json" $R/config.resolved.yaml || fail "resolved tokenizer not absolute"
grep -qxF "  cache_dir: $TMP/xdg/pmtrain" $R/config.resolved.yaml || fail "resolved cache_dir is not the XDG default"
echo "ok: trained from $TMP/elsewhere: run in runs/here, cache in \$XDG_CACHE_HOME/pmtrain, absolute paths resolved"

# expect NAME TEXT COMMAND...: non-zero exit and TEXT in the output
expect() {
  local name=$1 want=$2; shift 2
  set +e
  "$@" > $TMP/err.txt 2>&1
  local rc=$?
  set -e
  [ $rc -ne 0 ] && grep -qF -- "$want" $TMP/err.txt || { cat $TMP/err.txt; fail "$name: expected an error with '$want'"; }
  ! grep -q "rank 0" $TMP/err.txt || fail "$name: 'rank 0' prefix at world 1"
  echo "ok: $name: $(cat $TMP/err.txt)"
}
NOTE="(relative paths are taken from the current directory, $TMP/elsewhere)"
expect "relative tokenizer from another directory" \
  "data.tokenizer: $TMP/elsewhere/data/assets/qwen3/tokenizer.json does not exist $NOTE" "$PMTRAIN" train $REPO/configs/tiny_cpu.yaml
expect "missing config" "config file: $TMP/elsewhere/nope.yaml does not exist $NOTE" "$PMTRAIN" eval nope.yaml
expect "missing --data" "--data: $TMP/elsewhere/pairs.jsonl does not exist $NOTE" "$PMTRAIN" score --init --data pairs.jsonl
# An HF model given as a Hub id (as transformers' from_pretrained takes it): the error says how to get a local copy.
HUB="if \"Qwen/Qwen3-4B\" is a Hugging Face Hub id: pmtrain reads a local model directory (config.json and safetensors), so download it first, for example \`huggingface-cli download Qwen/Qwen3-4B --local-dir DIR\`, and give DIR"
expect "model.hf_dir a Hub id" "model.hf_dir: $TMP/elsewhere/Qwen/Qwen3-4B does not exist $NOTE; $HUB" \
  "$PMTRAIN" train $REPO/configs/tiny_cpu.yaml --set data.tokenizer=$REPO/data/assets/qwen3/tokenizer.json \
  --set model.hf_dir=Qwen/Qwen3-4B
expect "score --model a Hub id" "--model: $TMP/elsewhere/Qwen/Qwen3-4B does not exist $NOTE; $HUB" \
  "$PMTRAIN" score --model Qwen/Qwen3-4B --data $REPO/data/assets/hh-rlhf/harmless-base/test.jsonl.gz
set +e; "$PMTRAIN" score --model ./Qwen/Qwen3-4B --data $REPO/data/assets/hh-rlhf/harmless-base/test.jsonl.gz > $TMP/err.txt 2>&1
set -e
grep -qF -- "--model: $TMP/elsewhere/Qwen/Qwen3-4B does not exist $NOTE" $TMP/err.txt && ! grep -q "Hub id" $TMP/err.txt \
  || { cat $TMP/err.txt; fail "a missing local path (./Qwen/Qwen3-4B) named as a Hub id"; }
echo "ok: a missing ./Qwen/Qwen3-4B is a missing path, no Hub id"
printf 'not json\n' > $TMP/bad.jsonl
expect "bad data line at world 1" "pmtrain train: error: $TMP/bad.jsonl:1: not a JSON object" \
  "$PMTRAIN" train ../abs.yaml --set run.dir=runs/bad --set "data.train_files=[../bad.jsonl]" --set data.bad_lines=fail \
  --set data.cache_dir=$TMP/cache
