// Reading a Hugging Face tokenizer.json without a JSON tree for its two big lists. Qwen3's file is 11 MB:
// 151k vocabulary entries and 151k merges, 454k values that a DOM would allocate one by one (a std::map
// node per entry, an array per merge) only for BpeModel to copy them out again; that took 0.3 s of the
// tokenizer's 0.8 s load, in every pmtrain command. Here a SAX pass streams "model"."vocab" and
// "model"."merges" into flat vectors and builds the tree for the rest (the pre-tokenizer, added tokens,
// the model's small options), so errors still name the file and what is wrong with it.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "data/bpe_model.h"

namespace zero::data {

struct TokenizerJson {
  nlohmann::json tree;  // the whole file but "model"."vocab" and "model"."merges" when streamed
  BpeLists lists;  // "model"'s vocab and merges
};

// Parses `text` (the contents of `name`); InputError naming `name` on invalid JSON or a value JSON allows
// but nlohmann cannot hold (a number past a double's range).
TokenizerJson read_tokenizer_json(const std::string& text, const std::string& name);

// The error for a JSON file `name` that should have been a `what` and is not: the byte where the syntax
// breaks, or nlohmann's reason for a value it cannot hold.
std::string bad_json_message(const std::string& name, const char* what, const nlohmann::json::exception& e);

}  // namespace zero::data
