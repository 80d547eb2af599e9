// The real zero_tokenize executable on golden_dev.jsonl: every case's ids, in order; and its errors.
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace zero::data {
namespace {

using test::TempDir;

struct RunResult {
  int status;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

RunResult run_tool(const TempDir& dir, const std::string& args, const std::string& stdin_path) {
  const std::string cmd = std::string("'") + ZERO_TOKENIZE_EXE + "' " + args + " < '" + stdin_path + "' > '" +
                          dir.file("out") + "' 2> '" + dir.file("err") + "'";
  const int rc = std::system(cmd.c_str());
  return {WEXITSTATUS(rc), slurp(dir.file("out")), slurp(dir.file("err"))};
}

TEST(TokenizeTool, ReproducesEveryGoldenCase) {
  TempDir dir;
  const auto cases = test::golden_cases();
  ASSERT_EQ(cases.size(), 60u);
  const auto r = run_tool(dir, "--tokenizer '" + test::tokenizer_json() + "'", test::test_file("golden_dev.jsonl"));
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    ASSERT_LT(i, cases.size());
    const auto j = nlohmann::json::parse(line);
    ASSERT_TRUE(j.contains("ids")) << line;
    EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), cases[i].ids) << "case " << i << ": " << cases[i].text;
  }
  EXPECT_EQ(i, cases.size());
}

TEST(TokenizeTool, BadLinesNameTheLine) {
  TempDir dir;
  test::write_text(dir.file("in.jsonl"), "{\"text\": \"ok\"}\n{\"text\": 5}\n");
  auto r = run_tool(dir, "--tokenizer '" + test::tokenizer_json() + "'", dir.file("in.jsonl"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("stdin:2: field 'text' is not a string"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[562]}\n");  // the good first line is still written ("ok" -> 562)

  test::write_text(dir.file("in2.jsonl"), "{\"text\": \"a\"}\n\nnot json\n");
  r = run_tool(dir, "--tokenizer '" + test::tokenizer_json() + "'", dir.file("in2.jsonl"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("stdin:3: not JSON"), std::string::npos) << r.err;

  r = run_tool(dir, "--tokenizer '" + dir.file("missing.json") + "'", dir.file("in.jsonl"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(dir.file("missing.json") + ": cannot open"), std::string::npos) << r.err;

  r = run_tool(dir, "", dir.file("in.jsonl"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--tokenizer PATH is required"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace zero::data
