# Shared by the pmtrain end-to-end scripts: $PMTRAIN $MPIRUN, a temp dir, and JSONL field extraction.
set -euo pipefail
PMTRAIN=$1
MPIRUN=$2
TMP=$(mktemp -d /tmp/pmtrain_test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# json_field FILE TYPE FIELD: the FIELD value of every line whose "type" is TYPE, one per line.
json_field() {
  grep "\"type\":\"$2\"" "$1" | sed -E "s/.*\"$3\":(-?[0-9.eE+-]+).*/\1/"
}
# last_losses METRICS: "step loss" per train step, the last record of each (a resumed run repeats none).
last_losses() {
  grep '"type":"train"' "$1" | sed -E 's/.*"loss":([^,}]+).*"step":([0-9]+).*/\2 \1/' \
    | awk '{l[$1]=$2} END {for (s in l) print s, l[s]}' | sort -n
}
# bad NAME EXPECTED_TEXT ARGS...: pmtrain ARGS exits non-zero with one line of output containing
# EXPECTED_TEXT, never a crash or an abort.
bad() {
  local name=$1 want=$2; shift 2
  set +e
  "$PMTRAIN" "$@" > $TMP/bad.txt 2>&1
  local rc=$?
  set -e
  [ $rc -ne 0 ] || { cat $TMP/bad.txt; fail "$name: exit code 0"; }
  [ $(wc -l < $TMP/bad.txt) = 1 ] || { cat $TMP/bad.txt; fail "$name: expected one line, got $(wc -l < $TMP/bad.txt)"; }
  ! grep -qiE "terminate called|what\(\)|core dumped|Aborted" $TMP/bad.txt || { cat $TMP/bad.txt; fail "$name: crashed"; }
  grep -qF -- "$want" $TMP/bad.txt || { cat $TMP/bad.txt; fail "$name: message lacks '$want'"; }
  echo "ok: $name (exit $rc): $(cat $TMP/bad.txt)"
}
# stops NAME WANT CMD...: CMD fails with an error line holding WANT, after other output perhaps (the splits
# loaded before the error print their pair counts), never a crash.
stops() {
  local name=$1 want=$2; shift 2
  ! "$PMTRAIN" "$@" > $TMP/stops.txt 2>&1 || { cat $TMP/stops.txt; fail "$name: exit code 0"; }
  ! grep -qiE "terminate called|what\(\)|core dumped|Aborted" $TMP/stops.txt || { cat $TMP/stops.txt; fail "$name: crashed"; }
  grep "error" $TMP/stops.txt | grep -qF -- "$want" || { cat $TMP/stops.txt; fail "$name: no error line says '$want'"; }
  echo "ok: $name: $(grep error $TMP/stops.txt)"
}
# fields FILE: type, grad norm, pairs and metrics of every train and eval record, one a line ("-": none): what
# two runs that must agree bit for bit (zero.world_invariant) are compared by.
field() { grep -E '"type":"(train|eval)"' $1 | sed -E "s/.*\"$2\":\"?(-?[0-9.eE+a-z-]+).*/\1/;t;s/.*/-/"; }
fields() {
  paste -d' ' <(field $1 type) <(field $1 step) <(field $1 grad_norm) <(field $1 pair_id_sum) <(field $1 loss) \
    <(field $1 accuracy) <(field $1 chosen_reward) <(field $1 rejected_reward)
}
# weights RUN_DIR NAME: the run's final weights exported in fp32 (the safetensors bytes) on stdout.
weights() { "$PMTRAIN" export $1 --to $TMP/hf_$2 --dtype fp32 > /dev/null || fail "export of $1 failed"; cat $TMP/hf_$2/model.safetensors; }
# untimed: eval records on stdin without their speed (runtime_s, pairs_per_s), to compare their numbers.
untimed() { sed -E 's/"(pairs_per_s|runtime_s)":[^,}]*,?//g'; }
# SMALL: overrides that put configs/tiny_cpu.yaml's model on a 299-token byte-level tokenizer
# (tests/fixtures/bytes_tokenizer/README.md): 105,600 parameters instead of 9.8M, nearly all of which are the
# Qwen3 vocabulary's embedding, so the engine's per-step work (gradient buckets, AdamW, collectives) no longer
# swamps the model's; data.max_len 160, since a text takes about 3x the tokens it takes with the real tokenizer.
# For the tests of machinery the vocabulary does not change (12 steps at 2 ranks: 2.8 s instead of 9 s here);
# the shipped config as it is keeps its own tests (tiny_e2e, plan, the tokenizer's golden ids).
SMALL_TOKENIZER="--set data.tokenizer=tests/fixtures/bytes_tokenizer/tokenizer.json"
SMALL="$SMALL_TOKENIZER --set data.max_len=160"
