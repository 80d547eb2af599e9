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
