// Shared helpers for the data tests: asset paths, temp folders, reading the bundled hh-rlhf texts.
#pragma once
#include <zlib.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/tokenizer.h"

namespace zero::data::test {

inline std::string asset(const std::string& rel) { return std::string(ZERO_DATA_ASSETS) + "/" + rel; }
inline std::string tokenizer_json() { return asset("qwen3/tokenizer.json"); }
inline std::string hh_train() { return asset("hh-rlhf/harmless-base/train.jsonl.gz"); }
inline std::string hh_test() { return asset("hh-rlhf/harmless-base/test.jsonl.gz"); }
inline std::string test_file(const std::string& rel) { return std::string(ZERO_DATA_TEST_DIR) + "/" + rel; }

// The message of the zero::Error fn throws, or "(no error)".
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The bundled Qwen3 tokenizer, loaded once per test binary.
inline Tokenizer& qwen() {
  static Tokenizer t = Tokenizer::from_file(tokenizer_json());
  return t;
}

// A fresh folder per test under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = std::filesystem::temp_directory_path() /
           (std::string("zero_data_") + info->test_suite_name() + "_" + info->name() + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_text(const std::string& path, const std::string& s) {
  std::ofstream(path, std::ios::binary) << s;
}
inline void write_gz(const std::string& path, const std::string& s) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, s.data(), unsigned(s.size()));
  gzclose(f);
}

// Golden cases {"text", "ids"} from tests/data/golden_dev.jsonl.
struct GoldenCase {
  std::string text;
  std::vector<int32_t> ids;
};
inline std::vector<GoldenCase> golden_cases() {
  std::ifstream f(test_file("golden_dev.jsonl"));
  std::vector<GoldenCase> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    out.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>()});
  }
  return out;
}

}  // namespace zero::data::test
