// hf_config_json: every key of the HF-written fixture config.json (same JSON types), both RoPE and dtype
// spellings, and a round trip through parse_hf_config for several shapes; resolve_checkpoint_dir's
// errors on run directories without checkpoints.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/full_tensors.h"
#include "core/check.h"
#include "model/hf_export.h"

using namespace zero;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json fixture_config() {
  std::ifstream in(std::string(ZERO_MODEL_FIXTURE_DIR) + "/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

void expect_same(const model::Qwen3Config& a, const model::Qwen3Config& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.pad_token_id, b.pad_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.initializer_range, b.initializer_range);
}

model::Qwen3Config qwen3_4b_like() {
  model::Qwen3Config c;
  c.vocab_size = 151936;
  c.hidden_size = 2560;
  c.intermediate_size = 9728;
  c.num_layers = 36;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.rope_theta = 1e6;
  c.pad_token_id = 151643;
  c.eos_token_ids = {151645};
  return c;
}

TEST(HfConfigJson, HasEveryFixtureKeyWithTheSameType) {
  const json ref = fixture_config();
  const json ours = model::hf_config_json(model::tiny_qwen3_config());
  for (const auto& [k, v] : ref.items()) {
    ASSERT_TRUE(ours.contains(k)) << "missing key " << k;
    if (!v.is_null() && !ours[k].is_null()) {
      EXPECT_EQ(std::string(v.type_name()), ours[k].type_name()) << k;
    }
  }
  EXPECT_EQ(ours["architectures"], ref["architectures"]);
  EXPECT_EQ(ours["id2label"], ref["id2label"]);
  EXPECT_EQ(ours["label2id"], ref["label2id"]);
  EXPECT_EQ(ours["num_labels"], 1);
  EXPECT_EQ(ours["model_type"], "qwen3");
  EXPECT_EQ(ours["hidden_act"], "silu");
  EXPECT_EQ(ours["attention_bias"], false);
  EXPECT_EQ(ours["layer_types"].size(), 2u);
  EXPECT_EQ(ours["rope_parameters"], (json{{"rope_theta", 10000.0}, {"rope_type", "default"}}));
  EXPECT_EQ(ours["rope_theta"], 10000.0);
  EXPECT_EQ(ours["dtype"], "float32");
  EXPECT_EQ(ours["torch_dtype"], "float32");
  EXPECT_EQ(ours["pad_token_id"], 0);
  EXPECT_TRUE(ours["eos_token_id"].is_null());
  EXPECT_TRUE(ours["bos_token_id"].is_null());
  const json b = model::hf_config_json(model::tiny_qwen3_config(), DType::BF16);
  EXPECT_EQ(b["dtype"], "bfloat16");
  EXPECT_EQ(b["torch_dtype"], "bfloat16");
  EXPECT_THROW(model::hf_config_json(model::tiny_qwen3_config(), DType::F16), ConfigError);
}

TEST(HfConfigJson, RoundTripsThroughParseHfConfig) {
  model::Qwen3Config untied = qwen3_4b_like();
  untied.tie_word_embeddings = false;
  untied.pad_token_id = -1;                 // null
  untied.eos_token_ids = {151645, 151643};  // a list
  untied.rms_norm_eps = 1.5e-6;
  untied.initializer_range = 0.0123;
  for (const model::Qwen3Config& c : {model::tiny_qwen3_config(), qwen3_4b_like(), untied}) {
    for (DType d : {DType::F32, DType::BF16}) {
      const json j = model::hf_config_json(c, d);
      expect_same(model::parse_hf_config(j.dump(2), "roundtrip"), c);
      if (c.pad_token_id < 0) {
        EXPECT_TRUE(j["pad_token_id"].is_null());
      }
    }
  }
  EXPECT_TRUE(model::hf_config_json(untied)["eos_token_id"].is_array());
  EXPECT_EQ(model::hf_config_json(qwen3_4b_like())["eos_token_id"], 151645);
  // Only the transformers-4.x spelling, or only the 5.x one, still parses to the same theta.
  json j4 = model::hf_config_json(qwen3_4b_like());
  j4.erase("rope_parameters");
  EXPECT_EQ(model::parse_hf_config(j4.dump(), "4.x").rope_theta, 1e6);
  json j5 = model::hf_config_json(qwen3_4b_like());
  j5.erase("rope_theta");
  EXPECT_EQ(model::parse_hf_config(j5.dump(), "5.x").rope_theta, 1e6);
}

TEST(HfConfigJson, FixtureConfigSurvivesARoundTrip) {
  const model::Qwen3Config c = model::load_hf_config(std::string(ZERO_MODEL_FIXTURE_DIR) + "/config.json");
  expect_same(model::parse_hf_config(model::hf_config_json(c).dump(), "roundtrip"), c);
}

TEST(ResolveCheckpointDir, Errors) {
  const fs::path root = fs::temp_directory_path() / fmt::format("zero_export_unit_{}", ::getpid());
  fs::remove_all(root);
  fs::create_directories(root / "run/checkpoints/.tmp_step_7");  // an unfinished save is not a checkpoint
  fs::create_directories(root / "run/checkpoints/step_9");      // nor a step dir without manifest.json
  try {
    checkpoint::resolve_checkpoint_dir((root / "nope").string());
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run directory " + (root / "nope").string() + " does not exist"),
              std::string::npos) << e.what();
  }
  for (std::optional<int64_t> step : {std::optional<int64_t>{}, std::optional<int64_t>{9}}) {
    try {
      checkpoint::resolve_checkpoint_dir((root / "run").string(), step);
      ADD_FAILURE();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("run directory " + (root / "run").string() + " has no checkpoints"),
                std::string::npos) << e.what();
    }
  }
  // Complete checkpoints without `latest`: the highest step; a missing step lists the available ones.
  for (int s : {2, 10}) {
    fs::create_directories(root / fmt::format("run/checkpoints/step_{}", s));
    std::ofstream(root / fmt::format("run/checkpoints/step_{}/manifest.json", s)) << "{}";
  }
  EXPECT_EQ(checkpoint::resolve_checkpoint_dir((root / "run").string()), (root / "run/checkpoints/step_10").string());
  EXPECT_EQ(checkpoint::resolve_checkpoint_dir((root / "run").string(), 2), (root / "run/checkpoints/step_2").string());
  try {
    checkpoint::resolve_checkpoint_dir((root / "run").string(), 9);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no checkpoint for step 9 (available steps: 2, 10)"), std::string::npos)
        << e.what();
  }
  // `latest` wins over the highest step (a run restarted from an older checkpoint); a dangling one is an error.
  std::ofstream(root / "run/checkpoints/latest") << "step_2\n";
  EXPECT_EQ(checkpoint::resolve_checkpoint_dir((root / "run").string()), (root / "run/checkpoints/step_2").string());
  std::ofstream(root / "run/checkpoints/latest") << "step_9\n";
  try {
    checkpoint::resolve_checkpoint_dir((root / "run").string());
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("names 'step_9', which is not a complete checkpoint"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("pass --step N (available steps: 2, 10)"), std::string::npos) << e.what();
  }
  fs::remove_all(root);
}

}  // namespace
