// Cross-check against Hugging Face's own tokenizer (npm `tokenizers`, the Rust core): every chosen and
// rejected text of the given hh-rlhf files, plus every golden text, is encoded by HF and by our
// zero_tokenize executable; the test fails on the first difference. Exit 77 (ctest skip) when the npm
// package is not installed (launch/setup.d/20-node-tokenizers.sh installs it).
// usage: node hf_crosscheck.js TOOL TOKENIZER_JSON GOLDEN_JSONL FILE.jsonl[.gz]...
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const { spawnSync } = require('child_process');

let Tokenizer;
try {
  ({ Tokenizer } = require('tokenizers'));
} catch (e) {
  console.log('SKIP: npm package `tokenizers` not found (run launch/setup.d/20-node-tokenizers.sh): ' + e.message);
  process.exit(77);
}

function readLines(path) {
  let buf = fs.readFileSync(path);
  if (buf[0] === 0x1f && buf[1] === 0x8b) buf = zlib.gunzipSync(buf);
  return buf.toString('utf8').split('\n').filter((l) => l.trim() !== '');
}

(async () => {
  const [tool, tokenizerPath, golden, ...files] = process.argv.slice(2);
  const texts = readLines(golden).map((l) => JSON.parse(l).text);
  for (const f of files)
    for (const l of readLines(f)) {
      const j = JSON.parse(l);
      texts.push(j.chosen, j.rejected);
    }
  const tok = Tokenizer.fromFile(tokenizerPath);
  const hf = await tok.encodeBatch(texts, { addSpecialTokens: false });

  const input = texts.map((t) => JSON.stringify({ text: t })).join('\n') + '\n';
  const run = spawnSync(tool, ['--tokenizer', tokenizerPath], { input, maxBuffer: 1 << 30 });
  if (run.status !== 0) {
    console.log(`FAIL: ${tool} exited ${run.status}: ${run.stderr}`);
    process.exit(1);
  }
  const ours = run.stdout.toString('utf8').trim().split('\n').map((l) => JSON.parse(l).ids);
  if (ours.length !== texts.length) {
    console.log(`FAIL: ${texts.length} texts in, ${ours.length} lines out`);
    process.exit(1);
  }
  let tokens = 0;
  for (let i = 0; i < texts.length; ++i) {
    const a = Array.from(hf[i].getIds());
    const b = ours[i];
    tokens += a.length;
    if (a.length !== b.length || a.some((v, k) => v !== b[k])) {
      let k = 0;
      while (k < a.length && a[k] === b[k]) ++k;
      console.log(`FAIL: text ${i} differs at token ${k}: HF ${JSON.stringify(a.slice(k, k + 8))} ours ` +
                  `${JSON.stringify(b.slice(k, k + 8))}\ntext: ${JSON.stringify(texts[i]).slice(0, 300)}`);
      process.exit(1);
    }
  }
  if (texts.length < 1000 || tokens < 100000) {
    console.log(`FAIL: only ${texts.length} texts / ${tokens} tokens compared: the sample is missing`);
    process.exit(1);
  }
  console.log(`OK: ${texts.length} texts, ${tokens} tokens identical to HF tokenizers ` +
              require('tokenizers/package.json').version);
})().catch((e) => {
  console.log('FAIL: ' + e.stack);
  process.exit(1);
});
