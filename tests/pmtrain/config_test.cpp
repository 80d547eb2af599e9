// The YAML config: every key typed, unknown keys and bad values are errors naming file, line and key
// (with a did-you-mean), --set overrides, and the resolved config round-trips.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>

#include "comm/hybrid_groups.h"
#include "core/check.h"
#include "pmtrain/config.h"
#include "pmtrain/config_changes.h"
#include "pmtrain/engine_assembly.h"

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

std::string load_error_of(const std::string& path) {
  try {
    load_config(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

// zero.accum_dtype auto: the param dtype only where the accumulator sums nothing (1 rank, accum 1, pair
// batches), fp32 everywhere else; an explicit dtype is kept as given.
TEST(PmtrainConfig, AutoAccumulationIsTheParamDtypeOnlyWhereNothingIsSummed) {
  const Config bf16 = parse_config("zero:\n  param_dtype: bf16\n", "t.yaml");
  EXPECT_EQ(accum_dtype_for(bf16, 1, 1), DType::BF16);
  EXPECT_EQ(engine_config(bf16, 1, 1, 10).accum_dtype, DType::BF16);
  EXPECT_EQ(accum_dtype_for(bf16, 2, 1), DType::F32);
  EXPECT_EQ(accum_dtype_for(bf16, 1, 2), DType::F32);
  EXPECT_EQ(engine_config(bf16, 2, 1, 10).accum_dtype, DType::F32);
  const Config budget = parse_config("zero:\n  param_dtype: bf16\nbatch:\n  micro_tokens: 4096\n", "t.yaml");
  EXPECT_EQ(accum_dtype_for(budget, 1, 1), DType::F32);  // token budgets vary the micro-steps
  EXPECT_EQ(accum_dtype_for(parse_config("zero:\n  param_dtype: fp32\n", "t.yaml"), 1, 1), DType::F32);
  const Config pinned = parse_config("zero:\n  param_dtype: bf16\n  accum_dtype: fp32\n", "t.yaml");
  EXPECT_EQ(accum_dtype_for(pinned, 1, 1), DType::F32);
  EXPECT_EQ(accum_dtype_for(parse_config("zero:\n  accum_dtype: bf16\n", "t.yaml"), 4, 8), DType::BF16);
}

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
  EXPECT_EQ(b.model.preset, ModelPreset::Qwen3_4B);
  EXPECT_EQ(b.zero.stage, 1);
  // Every known key appears in the resolved config.
  for (const std::string& k : known_keys()) {
    const std::string leaf = k.substr(k.rfind('.') + 1);
    EXPECT_NE(y.find(leaf + ":"), std::string::npos) << k;
  }
}

TEST(PmtrainConfig, OutOfRangeValuesNameFileLineKeyAndRange) {
  const std::string lr = error_of("run:\n  steps: 3\noptim:\n  lr: -1\n");
  EXPECT_NE(lr.find("test.yaml:4: key 'optim.lr' is -1; it must be > 0"), std::string::npos) << lr;
  const std::string warm = error_of("optim:\n  warmup_ratio: 2\n");
  EXPECT_NE(warm.find("test.yaml:2: key 'optim.warmup_ratio' is 2; it must be in [0, 1]"), std::string::npos) << warm;
  const std::string beta = error_of("optim:\n  beta2: 1\n");
  EXPECT_NE(beta.find("key 'optim.beta2' is 1; it must be in [0, 1)"), std::string::npos) << beta;
  // From --set, the override is named instead of the file.
  const std::string set = error_of("", {"zero.bucket_elements=-1"});
  EXPECT_NE(set.find("--set: key 'zero.bucket_elements' is -1; it must be >= 0"), std::string::npos) << set;
  EXPECT_NE(error_of("optim:\n  eps: .nan\n").find("key 'optim.eps'"), std::string::npos);
}

TEST(PmtrainConfig, EachRangeEndIsWhereTheSchemaSaysIt) {
  // {key, the last accepted value, the first rejected one} at each bound.
  const struct {
    const char* key;
    const char* ok;
    const char* bad;
  } bounds[] = {
      {"optim.lr", "1e-12", "0"},           {"optim.warmup_ratio", "0", "-0.01"},
      {"optim.warmup_ratio", "1", "1.01"},  {"optim.beta1", "0", "-0.1"},
      {"optim.beta1", "0.999", "1"},        {"optim.beta2", "0", "-0.5"},
      {"optim.eps", "1e-30", "0"},          {"optim.weight_decay", "0", "-0.1"},
      {"optim.clip_norm", "0", "-1"},       {"optim.min_lr_ratio", "0", "-0.1"},
      {"optim.min_lr_ratio", "1", "1.5"},   {"optim.warmup_steps", "0", "-1"},
      {"batch.global", "0", "-4"},          {"batch.micro", "0", "-1"},
      {"batch.accum", "0", "-1"},           {"run.steps", "0", "-1"},
      {"run.epochs", "1", "0"},             {"data.max_len", "1", "0"},
      {"zero.bucket_elements", "0", "-1"},   {"zero.prefetch_depth", "0", "-1"},
      {"zero.stage", "3", "4"},             {"zero.stage", "0", "-1"},
      {"threads", "1", "0"},                {"run.keep_last", "1", "0"},
  };
  for (const auto& b : bounds) {
    EXPECT_EQ(error_of("", {std::string(b.key) + "=" + b.ok}), "no error") << b.key << "=" << b.ok;
    EXPECT_NE(error_of("", {std::string(b.key) + "=" + b.bad}).find(std::string("key '") + b.key + "'"),
              std::string::npos)
        << b.key << "=" << b.bad;
  }
}

// `threads` left out of the file and --set comes from OMP_NUM_THREADS (as a Slurm script exports it from
// --cpus-per-task), through the key's own checks; a value given anywhere wins over it.
TEST(PmtrainConfig, ThreadsLeftOutComeFromOmpNumThreads) {
  const char* was = std::getenv("OMP_NUM_THREADS");
  const std::optional<std::string> saved = was ? std::optional<std::string>(was) : std::nullopt;
  auto with_omp = [](const char* v) { v ? setenv("OMP_NUM_THREADS", v, 1) : unsetenv("OMP_NUM_THREADS"); };

  with_omp(nullptr);
  EXPECT_EQ(parse_config("", "t.yaml").threads, 1);
  EXPECT_EQ(parse_config("", "t.yaml").threads_from, ThreadsFrom::Default);
  with_omp("6");
  EXPECT_EQ(parse_config("", "t.yaml").threads, 6);
  EXPECT_EQ(parse_config("", "t.yaml").threads_from, ThreadsFrom::OmpNumThreads);
  EXPECT_NE(to_yaml(parse_config("", "t.yaml")).find("threads: 6\n"), std::string::npos);
  EXPECT_EQ(parse_config("threads: 2\n", "t.yaml").threads, 2);
  EXPECT_EQ(parse_config("threads: 2\n", "t.yaml").threads_from, ThreadsFrom::Config);
  EXPECT_EQ(parse_config("", "t.yaml", {"threads=3"}).threads, 3);
  with_omp(" 8,4");  // OpenMP's nesting: the outer level's
  EXPECT_EQ(parse_config("", "t.yaml").threads, 8);
  with_omp("");  // set but empty: as OpenMP, ignored
  EXPECT_EQ(parse_config("", "t.yaml").threads, 1);
  with_omp("abc");
  const std::string bad = error_of("");
  EXPECT_NE(bad.find("OMP_NUM_THREADS=abc (taken as threads, which the config and --set leave out): key 'threads': "
                     "cannot use 'abc' here"),
            std::string::npos)
      << bad;
  EXPECT_EQ(error_of("threads: 1\n"), "no error");  // not read when the config gives threads
  with_omp("0");
  const std::string zero = error_of("");
  EXPECT_NE(zero.find("OMP_NUM_THREADS=0 (taken as threads, which the config and --set leave out): key 'threads' is "
                      "0; it must be >= 1"),
            std::string::npos)
      << zero;
  with_omp(saved ? saved->c_str() : nullptr);
}

// What a resumed run says it changed: keys compared as YAML, in the later config's order, then the ones gone;
// a value "" is not a missing key; lists and empty mappings compared as one line each.
TEST(PmtrainConfig, ChangesBetweenTwoResolvedConfigs) {
  const std::string before =
      "threads: 1\nrun:\n  resume: \"\"\n  steps: 4\noptim:\n  lr: 1e-05\ndata:\n  test_files:\n    - a.jsonl\n"
      "  test_sets:\n    {}\n  old_key: 7\n";
  EXPECT_TRUE(config_changes(before, before, "b").empty());
  const std::string after =
      "threads: 2\nrun:\n  resume: auto\n  steps: 4\noptim:\n  lr: 2e-05\ndata:\n  test_files:\n    - a.jsonl\n"
      "    - b.jsonl\n  test_sets:\n    {}\n  new_key: x\n";
  const std::vector<ConfigChange> c = config_changes(before, after, "b");
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].key, "threads");
  EXPECT_EQ(c[0].before, "1");
  EXPECT_EQ(c[0].after, "2");
  EXPECT_EQ(c[1].key, "run.resume");
  EXPECT_EQ(c[1].before, "");
  EXPECT_EQ(c[2].key, "optim.lr");
  EXPECT_EQ(c[3].key, "data.test_files");
  EXPECT_EQ(c[3].after, "[a.jsonl, b.jsonl]");
  EXPECT_EQ(c[4].key, "data.new_key");
  EXPECT_FALSE(c[4].before.has_value());
  EXPECT_EQ(c[5].key, "data.old_key");
  EXPECT_FALSE(c[5].after.has_value());
  EXPECT_EQ(describe_changes(c, 12),
            "threads 1 -> 2; run.resume \"\" -> auto; optim.lr 1e-05 -> 2e-05; data.test_files [a.jsonl] -> [a.jsonl, "
            "b.jsonl]; data.new_key (none) -> x; data.old_key 7 -> (none)");
  EXPECT_EQ(describe_changes(c, 2), "threads 1 -> 2; run.resume \"\" -> auto; and 4 more");
  // The text written by to_yaml compares with itself key by key: no change from a round trip.
  const std::string resolved = to_yaml(parse_config("threads: 3\n", "t.yaml"));
  EXPECT_TRUE(config_changes(resolved, to_yaml(parse_config(resolved, "r.yaml")), "r").empty());
  EXPECT_EQ(config_changes(resolved, to_yaml(parse_config(resolved, "r.yaml", {"zero.stage=3"})), "r").size(), 1u);
  try {
    config_changes("- a\n", after, "step_2/manifest.json's config");
    ADD_FAILURE() << "a list compared as a config";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("step_2/manifest.json's config: not a config"), std::string::npos) << e.what();
  }
}

TEST(PmtrainConfig, TheFinalValueIsChecked) {
  // A bad value in the file that an override replaces is no error: what runs is checked, not each step.
  EXPECT_EQ(error_of("optim:\n  lr: -1\n", {"optim.lr=0.1"}), "no error");
  EXPECT_EQ(error_of(""), "no error");  // and every default is in range
}

TEST(PmtrainConfig, AKeyGivenTwiceNamesBothLines) {
  const std::string e = error_of("optim:\n  lr: 0.1\n  eps: 1e-8\n  lr: 0.2\n");
  EXPECT_NE(e.find("test.yaml:4: key 'optim.lr' is given twice (lines 2 and 4)"), std::string::npos) << e;
  // A section given twice would silently drop one of them, whole.
  const std::string s = error_of("optim:\n  lr: 0.1\nrun:\n  steps: 2\noptim:\n  eps: 1e-8\n");
  EXPECT_NE(s.find("test.yaml:5: key 'optim' is given twice (lines 1 and 5)"), std::string::npos) << s;
}

// Training sets and their weights: read, written back by to_yaml to the same values (0.1 stays 0.1, not
// yaml-cpp's 17 digits), an empty map for none; bad weights and a weight naming no set named with the key.
TEST(PmtrainConfig, TrainSetsAndWeightsRoundTrip) {
  const std::string yaml =
      "data:\n  train_sets:\n    helpful: [h.jsonl]\n    harmless: [x.jsonl]\n  train_weights:\n    helpful: 0.1\n";
  const Config c = parse_config(yaml, "t.yaml");
  EXPECT_EQ(c.data.train_weights, (std::map<std::string, double>{{"helpful", 0.1}}));
  const std::string y = to_yaml(c);
  EXPECT_NE(y.find("helpful: 0.1\n"), std::string::npos) << y;
  const Config back = parse_config(y, "resolved.yaml");
  EXPECT_EQ(back.data.train_sets, c.data.train_sets);
  EXPECT_EQ(back.data.train_weights, c.data.train_weights);
  EXPECT_TRUE(parse_config(to_yaml(Config{}), "r.yaml").data.train_weights.empty());
  EXPECT_NE(error_of("data:\n  train_sets:\n    a: [x]\n  train_weights:\n    a: -2\n")
                .find("key 'data.train_weights': set 'a' has weight -2"),
            std::string::npos);
  EXPECT_NE(error_of("data:\n  train_sets:\n    a: [x]\n  train_weights:\n    a: .inf\n").find("train_weights"),
            std::string::npos);
  const std::string list = error_of("data:\n  train_sets:\n    a: [x]\n  train_weights: [a]\n");
  EXPECT_NE(list.find("key 'data.train_weights': cannot use this value here (expected a mapping like {name: 0.5})"),
            std::string::npos) << list;
  const std::string unknown = error_of("data:\n  train_sets:\n    a: [x]\n  train_weights:\n    b: 2\n");
  EXPECT_NE(unknown.find("data.train_weights names 'b', which is not a data.train_sets set (the sets: a)"),
            std::string::npos) << unknown;
}

TEST(PmtrainConfig, NamedTestSetsFromAFileRoundTripAndNameTheirLine) {
  const std::string yaml = "data:\n  test_sets:\n    helpful: [h1.jsonl, h2.jsonl]\n    harmless: [x.jsonl]\n";
  const Config c = parse_config(yaml, "t.yaml");
  ASSERT_EQ(c.data.test_sets.size(), 2u);
  EXPECT_EQ(c.data.test_sets.at("helpful"), (std::vector<std::string>{"h1.jsonl", "h2.jsonl"}));
  EXPECT_EQ(c.data.test_sets.begin()->first, "harmless");  // reported in name order
  EXPECT_EQ(parse_config(to_yaml(c), "resolved.yaml").data.test_sets, c.data.test_sets);
  EXPECT_TRUE(parse_config("data:\n  test_sets:\n", "t.yaml").data.test_sets.empty());
  const std::string twice = error_of("data:\n  test_sets:\n    a: [x]\n    a: [y]\n");
  EXPECT_NE(twice.find("'data.test_sets.a' is given twice (lines 3 and 4)"), std::string::npos) << twice;
  const std::string empty = error_of("data:\n  test_sets:\n    a: []\n");
  EXPECT_NE(empty.find("test.yaml:2: key 'data.test_sets': set 'a' has no files"), std::string::npos) << empty;
  const std::string list = error_of("data:\n  test_sets: [x.jsonl]\n");
  EXPECT_NE(list.find("test.yaml:2: key 'data.test_sets': cannot use this value here (expected a mapping"),
            std::string::npos) << list;
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

// Enum keys are parsed once, when the YAML is read: typed values, and a bad value stops the load with the
// file, line, key and the accepted spellings (no later code re-parses a string).
TEST(PmtrainConfig, EnumKeysAreTypedAtLoad) {
  const Config c = parse_config(
      "backend: cuda\ndata:\n  format: chat\n  layout: padded\n  too_long: truncate_keep_start\n  bad_lines: fail\n"
      "  remainder: pad\nmodel:\n  attention: reference\noptim:\n  schedule: linear\nzero:\n  reduce_dtype: bf16\n",
      "t.yaml", {"zero.param_dtype=bf16"});
  EXPECT_EQ(c.backend, Backend::Cuda);
  EXPECT_EQ(c.data.format, data::TextMode::Chat);
  EXPECT_EQ(c.data.layout, data::BatchLayout::Padded);
  EXPECT_EQ(c.data.too_long, data::TooLongPolicy::TruncateKeepStart);
  EXPECT_EQ(c.data.bad_lines, data::BadLinePolicy::Fail);
  EXPECT_EQ(c.data.remainder, data::RemainderPolicy::Pad);
  EXPECT_EQ(c.model.attention, model::AttentionKind::Reference);
  EXPECT_EQ(parse_config("model:\n  attention: flash_fma\n", "t.yaml").model.attention, model::AttentionKind::FlashFma);
  EXPECT_EQ(parse_config("model:\n  attention: flash_wide\n", "t.yaml").model.attention, model::AttentionKind::FlashWide);
  EXPECT_EQ(c.optim.schedule, optim::ScheduleKind::Linear);
  EXPECT_EQ(c.zero.reduce_dtype, DType::BF16);
  EXPECT_EQ(c.zero.param_dtype, DType::BF16);
  EXPECT_FALSE(c.zero.accum_dtype.has_value());  // auto
  EXPECT_EQ(parse_config("zero:\n  accum_dtype: fp32\n", "t.yaml").zero.accum_dtype, DType::F32);
  // Printed back as written, and read back to the same values.
  const std::string y = to_yaml(c);
  EXPECT_NE(y.find("too_long: truncate_keep_start"), std::string::npos) << y;
  EXPECT_NE(y.find("backend: cuda"), std::string::npos) << y;
  EXPECT_EQ(parse_config(y, "again.yaml").data.too_long, data::TooLongPolicy::TruncateKeepStart);

  const std::string e = error_of("run:\n  steps: 3\ndata:\n  layout: pakced\n");
  EXPECT_NE(e.find("test.yaml:4: data.layout: unknown value 'pakced' (expected padded, packed)"), std::string::npos) << e;
  const std::string s = error_of("", {"optim.schedule=cosin"});
  EXPECT_NE(s.find("--set: optim.schedule: unknown value 'cosin' (expected constant, linear, cosine)"), std::string::npos) << s;
  EXPECT_NE(error_of("backend: tpu\n").find("test.yaml:1: backend: unknown value 'tpu' (expected cpu, cuda)"), std::string::npos);
  EXPECT_NE(error_of("model:\n  preset: qwen3-5b\n").find("test.yaml:2: model.preset: unknown value 'qwen3-5b' (expected tiny, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, custom)"), std::string::npos);
}

// model.activation_checkpointing was a bool: YAML booleans still read (true = full, false = none), the
// three modes by name, printed back by name; anything else names the key, the line and the spellings.
TEST(PmtrainConfig, CheckpointingModesAndTheOldBooleans) {
  using model::ActivationCheckpointing;
  EXPECT_EQ(parse_config("", "t.yaml").model.activation_checkpointing, ActivationCheckpointing::None);
  const std::vector<std::pair<std::string, ActivationCheckpointing>> cases = {
      {"true", ActivationCheckpointing::Full},       {"false", ActivationCheckpointing::None},
      {"yes", ActivationCheckpointing::Full},        {"off", ActivationCheckpointing::None},
      {"none", ActivationCheckpointing::None},       {"selective", ActivationCheckpointing::Selective},
      {"full", ActivationCheckpointing::Full}};
  for (const auto& [text, want] : cases) {
    const Config c = parse_config("model:\n  activation_checkpointing: " + text + "\n", "t.yaml");
    EXPECT_EQ(c.model.activation_checkpointing, want) << text;
    EXPECT_EQ(parse_config("", "t.yaml", {"model.activation_checkpointing=" + text}).model.activation_checkpointing, want)
        << text;
    EXPECT_EQ(parse_config(to_yaml(c), "again.yaml").model.activation_checkpointing, want) << text;
  }
  EXPECT_NE(to_yaml(parse_config("", "t.yaml", {"model.activation_checkpointing=true"})).find("activation_checkpointing: full"),
            std::string::npos);
  for (const auto& [text, want] : cases) EXPECT_FALSE(parse_config("model:\n  activation_checkpointing: " + text + "\n", "t.yaml").model.checkpointing_auto);
  // auto: the run chooses (full until then); printed back as auto.
  const Config a = parse_config("model:\n  activation_checkpointing: auto\n", "t.yaml");
  EXPECT_TRUE(a.model.checkpointing_auto);
  EXPECT_EQ(a.model.activation_checkpointing, ActivationCheckpointing::Full);
  EXPECT_NE(to_yaml(a).find("activation_checkpointing: auto"), std::string::npos);
  EXPECT_TRUE(parse_config(to_yaml(a), "again.yaml").model.checkpointing_auto);
  const std::string e = error_of("model:\n  activation_checkpointing: partial\n");
  EXPECT_NE(e.find("test.yaml:2: model.activation_checkpointing: unknown value 'partial' (expected auto, none, selective, full)"),
            std::string::npos) << e;
}

// zero.shard_ranks: a count, or node (the launch's ranks per node, resolved by resolve_shard_ranks and written
// back as node); anything else names the key and line. Placements as literal node-of-rank tables.
TEST(PmtrainConfig, ShardRanksNodeIsResolvedByTheLaunchAndWrittenBackAsNode) {
  Config c = parse_config("zero:\n  shard_ranks: node\n", "t.yaml");
  EXPECT_TRUE(c.zero.shard_ranks_node);
  EXPECT_NE(to_yaml(c).find("shard_ranks: node"), std::string::npos) << to_yaml(c);
  EXPECT_TRUE(parse_config(to_yaml(c), "again.yaml").zero.shard_ranks_node);
  EXPECT_TRUE(parse_config("", "t.yaml", {"zero.shard_ranks=node"}).zero.shard_ranks_node);
  EXPECT_THROW(shard_group_ranks(c, 16), InternalError);  // a command that forgot to resolve it
  EXPECT_EQ(shard_group_ranks(c, 1), 1);                  // one process: nothing to resolve
  // 16 ranks, 2 nodes of 8 in blocks: groups of 8, written back as node still.
  const std::vector<int> blocks = {0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8};
  resolve_shard_ranks(c, node_block_ranks(blocks));
  EXPECT_EQ(shard_group_ranks(c, 16), 8);
  EXPECT_EQ(stage_text(c, 16), "stage 2 in shard groups of 8 ranks, replicated 2x (zero.shard_ranks node)");
  EXPECT_NE(to_yaml(c).find("shard_ranks: node"), std::string::npos);
  EXPECT_EQ(shard_placement_warning(c, blocks), "");
  // Round-robin placement: node cannot be resolved; one line says why and what to do.
  const std::vector<int> cyclic = {0, 1, 0, 1, 0, 1, 0, 1};
  Config rr = parse_config("zero:\n  shard_ranks: node\n", "t.yaml");
  try {
    resolve_shard_ranks(rr, node_block_ranks(cyclic));
    ADD_FAILURE() << "node resolved on round-robin ranks";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("t.yaml: zero.shard_ranks node needs every node to hold the same number of "
                                         "ranks, placed in blocks"), std::string::npos) << e.what();
  }
  // A number is kept as given; groups across nodes are allowed, with a warning naming the count and the remedy.
  Config four = parse_config("zero:\n  shard_ranks: 4\n", "t.yaml");
  resolve_shard_ranks(four, 0);
  EXPECT_EQ(shard_group_ranks(four, 8), 4);
  EXPECT_EQ(shard_placement_warning(four, cyclic),
            "warning: 2 of 2 shard groups of 4 consecutive ranks (zero.shard_ranks 4) hold ranks of more than one node, so "
            "their gathers and reductions cross the network: the ranks are not placed in blocks per node (srun "
            "--distribution=cyclic or mpirun --map-by node?); place them in blocks (srun's default "
            "--distribution=block, mpirun --map-by slot)");
  Config sixteen = parse_config("zero:\n  shard_ranks: 16\n", "t.yaml");
  const std::vector<int> four_nodes = {0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8,
                                       16, 16, 16, 16, 16, 16, 16, 16, 24, 24, 24, 24, 24, 24, 24, 24};
  EXPECT_NE(shard_placement_warning(sixteen, four_nodes).find("warning: 2 of 2 shard groups of 16 consecutive ranks "
                                                              "(zero.shard_ranks 16) hold ranks of more than one node, so "
                                                              "their gathers and reductions cross the network: a node "
                                                              "holds 8 ranks here; zero.shard_ranks node"),
            std::string::npos) << shard_placement_warning(sixteen, four_nodes);
  EXPECT_EQ(shard_placement_warning(parse_config("", "t.yaml"), cyclic), "");  // no hybrid sharding: nothing to say
  const std::string e = error_of("zero:\n  shard_ranks: nodes\n");
  EXPECT_NE(e.find("test.yaml:2: key 'zero.shard_ranks': 'nodes' is neither a number of ranks nor node"), std::string::npos) << e;
  EXPECT_NE(error_of("zero:\n  shard_ranks: -2\n").find("key 'zero.shard_ranks' is -2; it must be >= 0"), std::string::npos);
}

// batch.micro_tokens auto: one pair at data.max_len (the max_len as finally set, --set included) until the run
// resolves it, written back as auto; a typo names the key; zero.world_invariant refuses it (its cuts would follow
// the GPUs' memory).
TEST(PmtrainConfig, MicroTokensAutoHoldsTheLeastBudgetUntilResolvedAndIsWrittenBackAsAuto) {
  Config c = parse_config("batch:\n  global: 8\n  micro_tokens: auto\ndata:\n  max_len: 100\n", "t.yaml",
                          {"data.max_len=300"});
  EXPECT_TRUE(c.batch.micro_tokens_auto);
  EXPECT_EQ(c.batch.micro_tokens, 600);
  EXPECT_EQ(run_batch(c, 2).micro, 1);
  c.batch.micro_tokens = 2400;  // as resolve_micro_tokens leaves it
  EXPECT_NE(to_yaml(c).find("micro_tokens: auto\n"), std::string::npos) << to_yaml(c);
  const Config again = parse_config(to_yaml(c), "again.yaml");
  EXPECT_TRUE(again.batch.micro_tokens_auto);
  EXPECT_EQ(again.batch.micro_tokens, 600);
  c = parse_config("batch:\n  micro_tokens: 512\n", "t.yaml");
  EXPECT_FALSE(c.batch.micro_tokens_auto);
  EXPECT_EQ(c.batch.micro_tokens, 512);
  EXPECT_NE(to_yaml(c).find("micro_tokens: 512\n"), std::string::npos);
  const std::string e = error_of("batch:\n  micro_tokens: automatic\n");
  EXPECT_NE(e.find("test.yaml:2: key 'batch.micro_tokens': 'automatic' is neither a number of tokens nor auto"),
            std::string::npos) << e;
  EXPECT_NE(error_of("batch:\n  micro_tokens: -2\n").find("key 'batch.micro_tokens' is -2; it must be >= 0"),
            std::string::npos);
  c = parse_config("batch:\n  global: 8\n  micro_tokens: auto\nzero:\n  world_invariant: true\n", "t.yaml");
  try {
    run_batch(c, 2);
    ADD_FAILURE() << "zero.world_invariant took batch.micro_tokens auto";
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("zero.world_invariant needs a budget that stays the same at every world size"),
              std::string::npos) << err.what();
  }
}

// One default per knob: the optimizer's defaults are written as doubles in pmtrain (so they print as
// written) and must be the very values optim::AdamWConfig (and LrSchedule, the peak rate) hold; the engine's
// are read from EngineConfig.
TEST(PmtrainConfig, DefaultsAgreeWithTheLibraries) {
  const Config c;
  const optim::AdamWConfig a;
  EXPECT_EQ(float(c.optim.lr), optim::LrSchedule{}.peak_lr);
  EXPECT_EQ(float(c.optim.beta1), a.beta1);
  EXPECT_EQ(float(c.optim.beta2), a.beta2);
  EXPECT_EQ(float(c.optim.eps), a.eps);
  EXPECT_EQ(float(c.optim.weight_decay), a.weight_decay);
  // zero.bucket_elements 0: the backend's, literally: 2^18 on the CPU, the engine's 2^24 on CUDA; a value given is kept.
  EXPECT_EQ(c.zero.bucket_elements, 0);
  EXPECT_EQ(bucket_elements_for(c), size_t(1) << 18);
  Config cuda;
  cuda.backend = Backend::Cuda;
  EXPECT_EQ(bucket_elements_for(cuda), size_t(1) << 24);
  EXPECT_EQ(EngineConfig{}.bucket_elements, size_t(1) << 24);
  cuda.zero.bucket_elements = 4096;
  EXPECT_EQ(bucket_elements_for(cuda), 4096u);
  EXPECT_EQ(engine_config(cuda, 2, 1, 10).bucket_elements, 4096u);
}

// docs/CONFIG.md's source: one table row per key, with its type, default and accepted values.
TEST(PmtrainConfig, ReferenceListsEveryKey) {
  const std::string md = config_reference_markdown();
  size_t rows = 0;
  for (size_t p = 0; (p = md.find("\n| `", p)) != std::string::npos; ++p) ++rows;
  EXPECT_EQ(rows, known_keys().size());
  for (const std::string& k : known_keys()) EXPECT_NE(md.find("| `" + k + "` |"), std::string::npos) << k;
  EXPECT_NE(md.find("| `data.layout` | enum | `packed` | padded \\| packed |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `zero.stage` | integer | `2` | in [0, 3] |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `optim.lr` | number | `1e-05` | > 0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `data.train_files` | list of strings | `[]` |"), std::string::npos) << md;
}

// The batch the trainer runs and `pmtrain plan` shows, from one function: the contract, a pinned
// batch.world absorbed by the accumulation, and token budgets.
TEST(PmtrainConfig, RunBatchIsTheTrainersBatch) {
  Config c = parse_config("batch:\n  global: 24\n  micro: 2\n", "t.yaml");
  ResolvedBatch b = run_batch(c, 4);
  EXPECT_EQ(b.global, 24);
  EXPECT_EQ(b.micro, 2);
  EXPECT_EQ(b.accum, 3);
  c = parse_config("batch:\n  global: 24\n  micro: 2\n  accum: 6\n  world: 2\n", "t.yaml");
  try {
    run_batch(c, 4);
    ADD_FAILURE() << "a pinned world with every batch number fixed must not resolve at another world size";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("batch.world is 2 but the launcher started 4 ranks"), std::string::npos) << e.what();
  }
  EXPECT_EQ(run_batch(c, 2).accum, 6);
  c.batch.accum = 0;
  EXPECT_EQ(run_batch(c, 4).accum, 3);
  c = parse_config("batch:\n  global: 8\n  micro_tokens: 1000\ndata:\n  max_len: 100\n", "t.yaml");
  b = run_batch(c, 2);
  EXPECT_EQ(b.global, 8);
  EXPECT_EQ(b.micro, 5);  // 1000 tokens hold 5 pairs of two 100-token answers
  EXPECT_EQ(b.accum, 1);
  c.batch.micro = 2;
  EXPECT_THROW(run_batch(c, 2), ConfigError);
}

// yaml-cpp reads a null (`key:`, `key: ~`, `--set key=`) as the string "null": run.dir would become ./null.
// A null is an error naming the key and where; "" is a value only for keys whose doc says what "" means.
TEST(PmtrainConfig, NullOrEmptyValuesAreErrorsNotTheStringNull) {
  EXPECT_NE(error_of("run:\n  steps: 1\n  dir:\n").find("test.yaml:3: key 'run.dir' has no value"), std::string::npos)
      << error_of("run:\n  steps: 1\n  dir:\n");
  EXPECT_NE(error_of("run:\n  dir: ~\n").find("test.yaml:2: key 'run.dir' has no value"), std::string::npos);
  EXPECT_NE(error_of("run:\n  dir: \"\"\n").find("test.yaml:2: key 'run.dir' has no value"), std::string::npos);
  EXPECT_NE(error_of("", {"run.dir="}).find("--set: key 'run.dir' has no value"), std::string::npos);
  const std::string prompt = error_of("", {"data.prompt_field="});
  EXPECT_NE(prompt.find("--set: key 'data.prompt_field' has no value (for an empty one, give \"\")"), std::string::npos)
      << prompt;
  EXPECT_NE(error_of("optim:\n  lr: null\n").find("test.yaml:2: key 'optim.lr' has no value"), std::string::npos);
  EXPECT_NE(error_of("", {"backend="}).find("--set: key 'backend' has no value"), std::string::npos);
  const std::string entry = error_of("data:\n  train_files: [a.jsonl, ~]\n");
  EXPECT_NE(entry.find("test.yaml:2: key 'data.train_files' has an entry with no value"), std::string::npos) << entry;
  // Where the schema says what "" means, an explicit "" is that.
  EXPECT_EQ(parse_config("data:\n  prompt_field: \"\"\n", "t.yaml").data.prompt_field, "");
  EXPECT_EQ(parse_config("", "t.yaml", {"data.prompt_field=\"\"", "run.resume=''"}).data.prompt_field, "");
  EXPECT_EQ(parse_config("model:\n  hf_dir: \"\"\n", "t.yaml").model.hf_dir, "");
}

// yaml-cpp reads .inf, -.inf and .nan as numbers (and inf, nan not at all): every non-finite number is
// refused for every numeric key, as inf is.
TEST(PmtrainConfig, NonFiniteNumbersAreRefusedLikeInf) {
  const char* keys[] = {"optim.lr",           "optim.beta1",          "optim.beta2",
                        "optim.eps",          "optim.weight_decay",   "optim.warmup_ratio",
                        "optim.min_lr_ratio", "optim.clip_norm",      "loss.center_rewards",
                        "model.rope_theta",   "model.rms_norm_eps",   "run.collective_timeout_s",
                        "run.slow_phase_timeout_s", "run.steps",      "zero.stage"};
  for (const char* key : keys)
    for (const char* v : {".inf", "-.inf", "+.inf", ".Inf", ".nan", ".NaN", "inf", "nan", "1e999"}) {
      const std::string e = error_of("", {std::string(key) + "=" + v});
      EXPECT_NE(e.find(fmt::format("--set: key '{}': cannot use '{}' here (expected a value like", key, v)), std::string::npos)
          << e;
    }
  const std::string file = error_of("run:\n  collective_timeout_s: .inf\n");
  EXPECT_NE(file.find("test.yaml:2: key 'run.collective_timeout_s': cannot use '.inf' here"), std::string::npos) << file;
}

// yaml-cpp's Load reads the first document only: a second one would be dropped without a word.
TEST(PmtrainConfig, ASecondYamlDocumentIsAnError) {
  const std::string e = error_of("run: {steps: 1}\n---\nrun: {steps: 99}\n");
  EXPECT_NE(e.find("test.yaml:2: a second YAML document starts here"), std::string::npos) << e;
  const std::string lead = error_of("---\nrun: {steps: 1}\n\n---\n");
  EXPECT_NE(lead.find("test.yaml:4: a second YAML document starts here"), std::string::npos) << lead;
  EXPECT_EQ(parse_config("---\nrun: {steps: 1}\n", "t.yaml").run.steps, 1);  // one document, marked
}

// A ',' at the top level stalls yaml-cpp 0.7's parser: its LoadAll read the same empty document again and again,
// allocating, and pmtrain hung on a 2-byte config (found by fuzz_config). It is malformed YAML at its line.
TEST(PmtrainConfig, AStreamTheParserCannotGetPastIsMalformedNotAHang) {
  for (const std::string text : {",", ",!", "!,", "\n\n ,,"}) {
    // A parse that hangs fails here within 10 s and ends the process: it would allocate until the machine
    // runs out of memory.
    auto parsed = std::async(std::launch::async, [text] { return error_of(text); });
    if (parsed.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      fprintf(stderr, "FAILED: parse_config of '%s' did not return within 10 s\n", text.c_str());
      std::_Exit(1);
    }
    const std::string e = parsed.get();
    EXPECT_NE(e.find("malformed YAML: nothing can be read past column"), std::string::npos) << text << ": " << e;
    EXPECT_NE(e.find(text[0] == '\n' ? "test.yaml:3:" : "test.yaml:1:"), std::string::npos) << text << ": " << e;
  }
}

// YAML's complex keys ('? KEY' with a list or mapping as the key) escaped as yaml-cpp's own bad-conversion error,
// naming neither the file nor the line (found by fuzz_config).
TEST(PmtrainConfig, AKeyThatIsNoNameSaysSo) {
  std::string e = error_of("model:\n  ? [a, b]\n  : 1\n");
  EXPECT_NE(e.find("test.yaml:2: a key must be a name, not a list"), std::string::npos) << e;
  e = error_of("? {run: 1}\n: 2\n");
  EXPECT_NE(e.find("test.yaml:1: a key must be a name, not a mapping"), std::string::npos) << e;
}

// A directory opens as a stream that reads nothing, so it loaded as an empty config; each kind of path
// that is no readable file says so, naming it.
TEST(PmtrainConfig, AConfigPathThatIsNoReadableFileSaysSo) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("pmtrain_config_test_{}", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_EQ(load_error_of(dir.string()), dir.string() + ": is a directory, not a config file");
  EXPECT_EQ(load_error_of((dir / "missing.yaml").string()), (dir / "missing.yaml").string() + ": no such config file");
  const fs::path locked = dir / "locked.yaml";
  std::ofstream(locked) << "run: {steps: 1}\n";
  EXPECT_EQ(load_config(locked.string()).run.steps, 1);
  fs::permissions(locked, fs::perms::none);
  if (std::ifstream(locked).good()) {  // root reads it anyway
    std::cerr << "(as root: the unreadable-file case is not checked)\n";
  } else {
    EXPECT_EQ(load_error_of(locked.string()), locked.string() + ": cannot read the config file: Permission denied");
  }
  fs::remove_all(dir);
}

// A section given a value (`run: 5`, `--set optim=5`) is named as a section, not an unknown key.
TEST(PmtrainConfig, ASectionGivenAValueSaysItIsASection) {
  const std::string scalar = error_of("run: 5\n");
  EXPECT_NE(scalar.find("test.yaml:1: key 'run' must be a mapping (run.dir, run.seed, ...), not a scalar"),
            std::string::npos) << scalar;
  const std::string list = error_of("optim: [1, 2]\n");
  EXPECT_NE(list.find("test.yaml:1: key 'optim' must be a mapping (optim.lr, optim.beta1, ...), not a list"),
            std::string::npos) << list;
  const std::string set = error_of("", {"optim={lr: 1}"});
  EXPECT_NE(set.find("--set 'optim={lr: 1}': key 'optim' is a section (optim.lr, optim.beta1, ...); set its keys one by "
                     "one (--set optim.KEY=VALUE)"),
            std::string::npos) << set;
  EXPECT_NE(error_of("", {"run=5"}).find("--set 'run=5': key 'run' is a section"), std::string::npos);
}
