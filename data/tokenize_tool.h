// `pmtrain tokenize`: JSONL lines {"text": str} in, {"ids": [int...]} lines out, same order.
#pragma once
#include <iosfwd>
#include <string>

namespace zero::data {

// Returns the process exit code: 0 on success, 1 after printing "stdin:LINE: why" to stderr for a bad
// line or an unusable tokenizer. No BOS/EOS/template is added: ids are the raw encoding of "text".
int run_tokenize(const std::string& tokenizer_path, std::istream& in, std::ostream& out);

}  // namespace zero::data
