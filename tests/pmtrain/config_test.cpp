// The YAML config: every key typed, unknown keys and bad values are errors naming file, line and key
// (with a did-you-mean), --set overrides, and the resolved config round-trips.
#include <gtest/gtest.h>

#include "core/check.h"
#include "pmtrain/config.h"

using namespace zero;
using namespace zero::pmtrain;

namespace {
std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, "test.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(PmtrainConfig, ParsesNestedSectionsAndKeepsDefaults) {
  const Config c = parse_config("run:\n  steps: 7\nzero:\n  stage: 3\ndata:\n  train_files: [a.jsonl, b.jsonl.gz]\n",
                                "t.yaml");
  EXPECT_EQ(c.run.steps, 7);
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_EQ(c.data.train_files, (std::vector<std::string>{"a.jsonl", "b.jsonl.gz"}));
  EXPECT_EQ(c.optim.clip_norm, 1.0);  // default kept
}

TEST(PmtrainConfig, UnknownKeyIsAnErrorWithDidYouMeanAndLine) {
  const std::string e = error_of("run:\n  steps: 3\nzero:\n  stgae: 2\n");
  EXPECT_NE(e.find("test.yaml:4"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'zero.stgae'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'zero.stage'"), std::string::npos) << e;
  // Right name, wrong section.
  EXPECT_NE(error_of("run:\n  lr: 0.1\n").find("did you mean 'optim.lr'"), std::string::npos);
  EXPECT_NE(error_of("nonsense_section:\n  x: 1\n").find("unknown key 'nonsense_section'"), std::string::npos);
}

TEST(PmtrainConfig, WrongTypeAndMalformedYamlNameTheKeyAndLine) {
  const std::string e = error_of("run:\n  steps: many\n");
  EXPECT_NE(e.find("test.yaml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("'run.steps'"), std::string::npos) << e;
  const std::string m = error_of("run:\n  steps: [1, 2\n");
  EXPECT_NE(m.find("malformed YAML"), std::string::npos) << m;
  EXPECT_NE(m.find("test.yaml:"), std::string::npos) << m;
}

TEST(PmtrainConfig, SetOverridesGoThroughTheSameSchema) {
  const Config c = parse_config("zero:\n  stage: 1\n", "t.yaml", {"zero.stage=3", "optim.lr=2e-4", "data.test_files=[x, y]"});
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_DOUBLE_EQ(c.optim.lr, 2e-4);
  EXPECT_EQ(c.data.test_files.size(), 2u);
  EXPECT_NE(error_of("", {"zero.stag=3"}).find("did you mean 'zero.stage'"), std::string::npos);
  EXPECT_NE(error_of("", {"zero.stage"}).find("expected key=value"), std::string::npos);
}

TEST(PmtrainConfig, ResolvedConfigRoundTrips) {
  Config a = parse_config("run:\n  steps: 11\nmodel:\n  preset: qwen3-4b\n", "t.yaml", {"zero.stage=1"});
  const std::string y = to_yaml(a);
  Config b = parse_config(y, "resolved.yaml");
  EXPECT_EQ(to_yaml(b), y);
  EXPECT_EQ(b.run.steps, 11);
  EXPECT_EQ(b.model.preset, "qwen3-4b");
  EXPECT_EQ(b.zero.stage, 1);
  // Every known key appears in the resolved config.
  for (const std::string& k : known_keys()) {
    const std::string leaf = k.substr(k.rfind('.') + 1);
    EXPECT_NE(y.find(leaf + ":"), std::string::npos) << k;
  }
}

TEST(PmtrainConfig, MisnamedSectionSuggestsTheSection) {
  EXPECT_NE(error_of("optimizer:\n  lr: 0.1\n").find("did you mean 'optim'?"), std::string::npos)
      << error_of("optimizer:\n  lr: 0.1\n");
  EXPECT_NE(error_of("datas:\n  max_len: 8\n").find("did you mean 'data'?"), std::string::npos);
}

TEST(PmtrainConfig, ResolvedNumbersReadAsWritten) {
  const Config c = parse_config("optim:\n  lr: 3.0e-3\n  warmup_ratio: 0.05\n  beta2: 0.999\n", "t.yaml");
  const std::string y = to_yaml(c);
  EXPECT_NE(y.find("  lr: 0.003\n"), std::string::npos) << y;
  EXPECT_NE(y.find("  warmup_ratio: 0.05\n"), std::string::npos) << y;
  EXPECT_NE(y.find("  beta2: 0.999\n"), std::string::npos) << y;
  EXPECT_EQ(parse_config(y, "resolved.yaml").optim.lr, 3.0e-3);  // and read back exactly
}
