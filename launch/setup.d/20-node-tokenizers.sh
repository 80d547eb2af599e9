#!/usr/bin/env bash
# Installs Hugging Face's `tokenizers` npm package (Rust core, prebuilt N-API binding) into
# third_party/node (gitignored) for the tokenizer cross-check test and benchmark (tests/data, bench/data).
# Idempotent: returns at once when the pinned version already loads. Skips quietly without node/npm.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=0.23.2
DEST=third_party/node

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "20-node-tokenizers: node/npm not found; the HF cross-check tests will be skipped"
  exit 0
fi

# Loads the binding for real (not just the JS shim) and prints its version.
probe() {
  NODE_PATH="$DEST/node_modules" node -e '
    const t = require("tokenizers");
    if (typeof t.Tokenizer !== "function") process.exit(1);
    console.log(require("tokenizers/package.json").version);' 2>/dev/null
}

if [ "$(probe || true)" = "$VERSION" ]; then
  exit 0
fi

echo "20-node-tokenizers: installing tokenizers@$VERSION into $DEST"
mkdir -p "$DEST"
[ -f "$DEST/package.json" ] || echo '{"name": "zero-node-tools", "private": true}' > "$DEST/package.json"
# A failure here must not stop the rest of set-up (offline machines): the cross-check test then
# reports itself as skipped in ctest, never as passed.
if ! npm install --prefix "$DEST" --no-audit --no-fund --loglevel=error "tokenizers@$VERSION" >/dev/null; then
  echo "20-node-tokenizers: npm install failed; data_hf_crosscheck will be skipped" >&2
  exit 0
fi
if [ "$(probe || true)" != "$VERSION" ]; then
  echo "20-node-tokenizers: tokenizers@$VERSION installed but its native binding does not load here;" \
       "data_hf_crosscheck will be skipped" >&2
  exit 0
fi
echo "20-node-tokenizers: ok"
