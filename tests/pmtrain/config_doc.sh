#!/usr/bin/env bash
# docs/CONFIG.md is generated from the config schema table (`pmtrain config-doc`); it must not drift.
source "$(dirname "$0")/common.sh"
"$PMTRAIN" config-doc > $TMP/CONFIG.md || fail "pmtrain config-doc failed"
diff -u docs/CONFIG.md $TMP/CONFIG.md || fail "docs/CONFIG.md differs from the schema (pmtrain/config.cpp); regenerate it with: build/pmtrain/pmtrain config-doc > docs/CONFIG.md"
echo "docs/CONFIG.md matches the schema ($(grep -c '^| `' docs/CONFIG.md) keys)"
