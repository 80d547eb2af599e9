// Times Hugging Face tokenizers (npm, Rust core) on JSONL {"text"} lines; the C++ benchmark starts it
// pinned to one core and compares the ids it writes. Tokenizer loading is not timed; each cold pass
// uses a freshly loaded tokenizer (empty BPE cache), as the C++ side clears its word cache.
// usage: node hf_tokenize.js TOKENIZER_JSON TEXTS_JSONL IDS_OUT REPEATS  -> JSON timings on stdout
'use strict';
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

(async () => {
  const [tokPath, textsPath, idsOut, repeatsArg] = process.argv.slice(2);
  const repeats = Number(repeatsArg || 3);
  const texts = fs.readFileSync(textsPath, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l).text);
  const opts = { addSpecialTokens: false };
  const now = () => Number(process.hrtime.bigint()) / 1e9;
  const res = { version: require('tokenizers/package.json').version, batch_cold_s: [], batch_warm_s: [], single_s: [] };
  let ids = null;
  for (let r = 0; r < repeats; ++r) {
    const tok = Tokenizer.fromFile(tokPath);
    let t0 = now();
    const enc = await tok.encodeBatch(texts, opts);
    res.batch_cold_s.push(now() - t0);
    ids = enc.map((e) => e.getIds());
    t0 = now();
    await tok.encodeBatch(texts, opts);
    res.batch_warm_s.push(now() - t0);
    t0 = now();
    for (const t of texts) await tok.encode(t, null, opts);
    res.single_s.push(now() - t0);
  }
  fs.writeFileSync(idsOut, ids.map((a) => JSON.stringify({ ids: Array.from(a) })).join('\n') + '\n');
  console.log(JSON.stringify(res));
})().catch((e) => {
  console.error(e.stack);
  process.exit(1);
});
