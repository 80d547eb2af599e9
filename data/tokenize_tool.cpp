// The tokenize tool loop: parse each JSONL line, encode its "text", print the ids.
#include "data/tokenize_tool.h"

#include <iostream>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/tokenizer.h"

namespace zero::data {

int run_tokenize(const std::string& tokenizer_path, std::istream& in, std::ostream& out) {
  try {
    Tokenizer tok = Tokenizer::from_file(tokenizer_path);
    std::string line, buf;
    std::vector<int32_t> ids;
    int64_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines carry no record
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {
        throw InputError(fmt::format("stdin:{}: not JSON (byte {})", lineno, e.byte));
      } catch (const nlohmann::json::exception& e) {  // a number past a double's range
        throw InputError(fmt::format("stdin:{}: not JSON ({})", lineno, e.what()));
      }
      ZERO_REQUIRE(j.is_object() && j.contains("text"), InputError, "stdin:{}: no field 'text'", lineno);
      ZERO_REQUIRE(j["text"].is_string(), InputError, "stdin:{}: field 'text' is not a string", lineno);
      ids.clear();
      try {
        tok.encode_into(j["text"].get_ref<const std::string&>(), ids);
      } catch (const InputError& e) {
        throw InputError(fmt::format("stdin:{}: {}", lineno, e.what()));
      }
      buf.assign("{\"ids\":[");
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) buf.push_back(',');
        buf += std::to_string(ids[i]);
      }
      buf += "]}\n";
      out << buf;
    }
    out.flush();
    return 0;
  } catch (const Error& e) {
    std::cerr << "tokenize: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace zero::data
