// Fuzz target: loading a Hugging Face tokenizer.json (data/tokenizer.h) from arbitrary text. Bad files are
// an InputError/ConfigError naming the file; a tokenizer that loads encodes a fixed text (plain words,
// its added tokens, bytes that are not ASCII) and decodes the ids back to exactly that text (byte-level BPE
// is lossless), with every id inside the vocabulary.
#include "data/tokenizer.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zero;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_clean_error("fuzz/tokenizer.json", [&] {
    data::Tokenizer tok = data::Tokenizer::from_json_text(text, "fuzz/tokenizer.json");
    const std::string sample = "Hello world, it's 2024!\n<|im_end|>  caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd<|endoftext|>x";
    const std::vector<int32_t> ids = tok.encode(sample);
    for (int32_t id : ids)
      fuzz::require(id >= 0 && id < tok.vocab_size(), "encode gave id " + std::to_string(id) + " outside the vocabulary");
    fuzz::require(tok.decode(ids) == sample, "decode(encode(text)) != text");
  });
  return 0;
}
