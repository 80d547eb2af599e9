#!/usr/bin/env bash
# docs/CONFIG.md is generated from the config schema table (`pmtrain config-doc`); it must not drift.
source "$(dirname "$0")/common.sh"
"$PMTRAIN" config-doc > $TMP/CONFIG.md || fail "pmtrain config-doc failed"
diff -u docs/CONFIG.md $TMP/CONFIG.md || fail "docs/CONFIG.md differs from the schema (pmtrain/config.cpp); regenerate it with: build/pmtrain/pmtrain config-doc > docs/CONFIG.md"
echo "docs/CONFIG.md matches the schema ($(grep -c '^| `' docs/CONFIG.md) keys)"

# Every config key the other docs name in backticks (`optim.beta2`, `zero.shard_ranks: node`) is one of the
# schema's: a renamed or removed key leaves no doc pointing at nothing (docs/MIGRATING.md maps other trainers'
# settings onto them). A call (`model.cuda()`) or a file name (`model.safetensors`) is not a key.
grep -oE '^\| `[^`]+`' docs/CONFIG.md | sed -E 's/^\| `//; s/`$//' | sort -u > $TMP/keys.txt
doc_keys() {  # the section.key words in the backticked spans of the files given
  grep -ohE '`[^`]+`' "$@" | grep -oP '\b(run|model|data|batch|zero|optim|loss)\.[a-z_0-9]+\b(?![.(])' |
    grep -vE '\.(safetensors|json|jsonl|yaml|yml|gz|bin|txt|md|py|sh|cpp|h|png)$' | sort -u
}
unknown=0
for doc in README.md docs/*.md; do
  [ "$doc" = docs/CONFIG.md ] && continue
  while read -r key; do
    grep -qxF "$key" $TMP/keys.txt || { echo "$doc names \`$key\`, which is no config key"; unknown=$((unknown + 1)); }
  done < <(doc_keys "$doc")
done
[ "$unknown" = 0 ] || fail "$unknown config keys named in the docs are not in the schema (above)"
echo "the config keys README.md and docs/*.md name are the schema's ($(doc_keys README.md $(ls docs/*.md | grep -v CONFIG.md) | wc -l) keys)"
