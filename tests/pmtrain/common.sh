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
