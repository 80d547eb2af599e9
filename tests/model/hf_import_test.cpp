// safetensors I/O and HF model-directory import: round trips, sharded indexes, and clear errors for
// truncated files, bad headers, shapes that disagree with config.json and missing tensors.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "model/hf_import.h"
#include "model/init.h"
#include "model/qwen3_config.h"
#include "model_test_util.h"

namespace zero::model {
namespace {

namespace fs = std::filesystem;
using checkpoint::SafetensorsReader;

// A fresh directory per test under the system temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            fmt::format("zero_model_{}_{}_{}", info->test_suite_name(), info->name(), std::random_device{}());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Expects `f` to throw InputError whose message contains every needle.
template <class F>
void expect_input_error(F&& f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no InputError thrown";
  } catch (const InputError& e) {
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "'" << n << "' not in: " << e.what();
  }
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// A raw safetensors file from a header string and a data blob.
void write_raw(const fs::path& p, const std::string& header, const std::string& data) {
  std::ofstream out(p, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

// The fixture's 25 model tensors (minus `skip`) written as an HF model directory with its config.json.
void make_model_dir(const fs::path& dir, const std::vector<std::string>& skip = {},
                    const std::string& config_edit_from = "", const std::string& config_edit_to = "") {
  const SafetensorsReader r(testing::fixture_file());
  const Qwen3Config c = load_hf_config(testing::fixture_dir() + "/config.json");
  std::vector<std::vector<float>> data;
  std::vector<checkpoint::SafetensorsF32> ts;
  for (const GroupSpec& g : qwen3_rm_groups(c))
    for (const TensorSpec& t : g.tensors) {
      if (std::find(skip.begin(), skip.end(), t.name) != skip.end()) continue;
      data.push_back(r.read_f32(t.name));
      ts.push_back({t.name, t.shape, data.back()});
    }
  for (size_t i = 0; i < ts.size(); ++i) ts[i].data = data[i];  // vector growth moved the buffers
  checkpoint::write_safetensors(dir / "model.safetensors", ts, {{"format", "pt"}});
  std::ifstream in(testing::fixture_dir() + "/config.json");
  std::string cfg((std::istreambuf_iterator<char>(in)), {});
  if (!config_edit_from.empty()) {
    const size_t at = cfg.find(config_edit_from);
    ASSERT_NE(at, std::string::npos);
    cfg.replace(at, config_edit_from.size(), config_edit_to);
  }
  write_text(dir / "config.json", cfg);
}

// ---- safetensors ------------------------------------------------------------------------------------

TEST(Safetensors, RoundTripF32Bf16I64AndMetadata) {
  TempDir d;
  const fs::path f = d.path() / "t.safetensors";
  const std::vector<float> a = {1.0f, -2.5f, 3.25f, 1e-8f, 0.0f, -0.0f};
  const std::vector<float> b = {1.0f, 1.00390625f, 1.01171875f, -3.0f};  // bf16 ties/rounding
  const std::vector<int64_t> ids = {1, -2, 1ll << 40};
  {
    checkpoint::SafetensorsWriter w(f, {{"a", DType::F32, {2, 3}}, {"b", DType::BF16, {4}}, {"ids", DType::I64, {3}}},
                                    {{"generator", "test"}});
    w.write("a", std::span<const float>(a));
    w.write("b", std::span<const float>(b));
    w.write("ids", std::span<const int64_t>(ids));
    w.finish();
  }
  std::ifstream in(f, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);  // header padded with spaces so the data starts 8-byte aligned
  EXPECT_EQ(fs::file_size(f), 8 + n + 6 * 4 + 4 * 2 + 3 * 8);

  const SafetensorsReader r(f);
  EXPECT_EQ(r.metadata().at("generator"), "test");
  EXPECT_EQ(r.tensor("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.read_f32("a"), a);
  // bf16 round-to-nearest-even: 1+2^-8 is a tie -> 1.0; 1+3*2^-8 is a tie -> 1+2^-6 (even mantissa).
  EXPECT_EQ(r.read_f32("b"), (std::vector<float>{1.0f, 1.0f, 1.015625f, -3.0f}));
  EXPECT_EQ(r.read_i64("ids"), ids);
  // A piece of a tensor: the elements [first, first + n) of the whole read, from that piece's bytes alone.
  std::vector<float> piece(3);
  r.read_f32("a", 2, piece);
  EXPECT_EQ(piece, (std::vector<float>{3.25f, 1e-8f, 0.0f}));
  r.read_f32("b", 1, std::span<float>(piece.data(), 2));
  EXPECT_EQ(piece[0], 1.0f);
  EXPECT_EQ(piece[1], 1.015625f);
  expect_input_error([&] { r.read_f32("a", 4, piece); }, {"t.safetensors", "'a'", "reads [4, 7)"});
  expect_input_error([&] { r.read_f32("ids"); }, {"t.safetensors", "'ids'", "not a floating-point"});
  expect_input_error([&] { r.tensor("nope"); }, {"t.safetensors", "missing tensor 'nope'"});
}

TEST(Safetensors, ReadsF16AndI32) {
  TempDir d;
  const fs::path f = d.path() / "h.safetensors";
  const uint16_t half[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};  // 1, -2, 2^-24 (subnormal), 65504
  const int32_t i32[2] = {-7, 9};
  std::string data(reinterpret_cast<const char*>(half), 8);
  data.append(reinterpret_cast<const char*>(i32), 8);
  write_raw(f, R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"i":{"dtype":"I32","shape":[2],"data_offsets":[8,16]}})",
            data);
  const SafetensorsReader r(f);
  EXPECT_EQ(r.read_f32("h"), (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65504.0f}));
  EXPECT_EQ(r.read_i64("i"), (std::vector<int64_t>{-7, 9}));
}

TEST(Safetensors, HeaderErrorsNameTheFile) {
  TempDir d;
  const fs::path f = d.path() / "bad.safetensors";
  write_text(f, "abc");
  expect_input_error([&] { SafetensorsReader r(f); }, {"bad.safetensors", "truncated"});
  write_raw(f, "{\"a\": {", "");
  expect_input_error([&] { SafetensorsReader r(f); }, {"bad.safetensors", "bad safetensors header JSON"});
  write_raw(f, R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "xx");
  expect_input_error([&] { SafetensorsReader r(f); }, {"bad.safetensors", "'a'", "unsupported dtype 'U8'"});
  write_raw(f, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234");
  expect_input_error([&] { SafetensorsReader r(f); }, {"bad.safetensors", "'a'", "past the end", "truncated"});
  write_raw(f, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678");
  expect_input_error([&] { SafetensorsReader r(f); }, {"bad.safetensors", "'a'", "[3]"});
  // A header length beyond the file.
  {
    std::ofstream out(f, std::ios::binary);
    const uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  expect_input_error([&] { SafetensorsReader r(f); }, {"bad.safetensors", "truncated"});
}

TEST(Safetensors, TruncatedModelFile) {
  TempDir d;
  make_model_dir(d.path());
  const fs::path f = d.path() / "model.safetensors";
  fs::resize_file(f, fs::file_size(f) / 2);
  expect_input_error([&] { load_hf_reward_model(d.path()); },
                     {(d.path() / "model.safetensors").string(), "truncated"});
}

// ---- HF model directory import ----------------------------------------------------------------------

TEST(HfImport, LoadsTheFixtureModel) {
  TempDir d;
  make_model_dir(d.path());
  const HfRewardModel m = load_hf_reward_model(d.path());
  EXPECT_EQ(m.config.hidden_size, 48);
  EXPECT_EQ(m.report.loaded.size(), 25u);
  EXPECT_TRUE(m.report.initialised.empty());
  EXPECT_TRUE(m.report.ignored.empty());
  const SafetensorsReader r(testing::fixture_file());
  for (const std::string name : {"model.embed_tokens.weight", "model.layers.1.mlp.down_proj.weight", "score.weight"}) {
    auto p = m.params->param(name);
    EXPECT_EQ(std::vector<float>(p.begin(), p.end()), r.read_f32(name)) << name;
  }
}

TEST(HfImport, ExtraTensorsAreIgnoredAndReported) {
  TempDir d;
  fs::copy_file(testing::fixture_file(), d.path() / "model.safetensors");  // params + act.*, grad.*, batch, ...
  fs::copy_file(testing::fixture_dir() + "/config.json", d.path() / "config.json");
  const HfRewardModel m = load_hf_reward_model(d.path());
  EXPECT_EQ(m.report.loaded.size(), 25u);
  EXPECT_EQ(m.report.ignored.size(), 85u - 25u);
  EXPECT_NE(std::find(m.report.ignored.begin(), m.report.ignored.end(), "grad.score.weight"), m.report.ignored.end());
}

TEST(HfImport, ScoreHeadInitialisedWhenAbsent) {
  TempDir d;
  make_model_dir(d.path(), {"score.weight"});
  ImportOptions o;
  o.score_seed = 42;
  const HfRewardModel a = load_hf_reward_model(d.path(), o);
  const HfRewardModel b = load_hf_reward_model(d.path(), o);
  EXPECT_EQ(a.report.initialised, (std::vector<std::string>{"score.weight"}));
  auto sa = a.params->param("score.weight"), sb = b.params->param("score.weight");
  EXPECT_TRUE(std::equal(sa.begin(), sa.end(), sb.begin()));
  double sq = 0;
  for (float v : sa) sq += double(v) * v;
  EXPECT_GT(sq, 0.0);
  EXPECT_LT(std::sqrt(sq / 48.0), 0.06);  // normal(0, initializer_range = 0.02)
}

// Random init a piece at a time (what pmtrain's engine init and the import of an absent score head do) gives the
// numbers of the whole tensor: pieces of any even size, across the embedding's zeroed pad row, and a tensor of
// odd length.
TEST(HfImport, InitInPiecesIsTheWholeTensor) {
  Qwen3Config c;
  c.vocab_size = 37, c.hidden_size = 6, c.pad_token_id = 5;
  const TensorSpec emb{"model.embed_tokens.weight", {37, 6}};  // 222 elements, pad row [30, 36)
  const TensorSpec odd{"model.layers.0.mlp.down_proj.weight", {7, 9}};  // 63
  for (const TensorSpec& spec : {emb, odd}) {
    std::vector<float> whole(size_t(spec.numel()));
    init_tensor(spec, c, 11, whole);
    for (size_t piece : {size_t(2), size_t(8), size_t(32), size_t(64)}) {
      std::vector<float> joined;
      for (size_t first = 0; first < whole.size(); first += piece) {
        std::vector<float> p(std::min(piece, whole.size() - first));
        init_tensor_range(spec, c, 11, first, p, first % 4 == 0 ? 1 : 3);
        joined.insert(joined.end(), p.begin(), p.end());
      }
      EXPECT_EQ(joined, whole) << spec.name << " in pieces of " << piece;
    }
  }
  std::vector<float> row(6, 1.0f);
  init_tensor_range(emb, c, 11, 30, row);
  EXPECT_EQ(row, std::vector<float>(6, 0.0f)) << "the pad row";
  EXPECT_THROW(init_tensor_range(emb, c, 11, 3, std::span<float>(row.data(), 2)), Error) << "an odd start";
  // Large enough for threads: a piece from an even offset, split over 3 threads, is the whole stream's.
  std::vector<float> big(3u << 20), tail(big.size() - (1u << 20) - 2);
  fill_normal(big, 0.0, 1.0, 5, 1);
  fill_normal(tail, 0.0, 1.0, 5, 3, (1u << 20) + 2);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), big.begin() + (1 << 20) + 2)) << "threaded piece";
}

TEST(HfImport, ShardedIndex) {
  TempDir d;
  make_model_dir(d.path());
  // Split model.safetensors into two shards + an index, as save_pretrained does for large models.
  const SafetensorsReader whole(d.path() / "model.safetensors");
  std::vector<std::vector<float>> data;
  std::vector<checkpoint::SafetensorsF32> s1, s2;
  std::string index = R"({"metadata": {"total_size": 395520}, "weight_map": {)";
  data.reserve(whole.tensors().size());
  for (size_t i = 0; i < whole.tensors().size(); ++i) {
    const auto& t = whole.tensors()[i];
    data.push_back(whole.read_f32(t.name));
    const bool first = t.name.find("layers.1") == std::string::npos;
    (first ? s1 : s2).push_back({t.name, t.shape, data.back()});
    index += fmt::format("{}\"{}\": \"{}\"", i ? ", " : "", t.name,
                         first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors");
  }
  index += "}}";
  checkpoint::write_safetensors(d.path() / "model-00001-of-00002.safetensors", s1);
  checkpoint::write_safetensors(d.path() / "model-00002-of-00002.safetensors", s2);
  fs::remove(d.path() / "model.safetensors");
  write_text(d.path() / "model.safetensors.index.json", index);
  const HfRewardModel m = load_hf_reward_model(d.path());
  EXPECT_EQ(m.report.files.size(), 2u);
  EXPECT_EQ(m.report.loaded.size(), 25u);
  auto p = m.params->param("model.layers.1.self_attn.k_norm.weight");
  EXPECT_EQ(std::vector<float>(p.begin(), p.end()),
            SafetensorsReader(testing::fixture_file()).read_f32("model.layers.1.self_attn.k_norm.weight"));

  // An index that places a tensor in a shard that lacks it.
  std::string bad = index;
  const std::string key = "\"model.norm.weight\": \"model-00001-of-00002.safetensors\"";
  ASSERT_NE(bad.find(key), std::string::npos);
  bad.replace(bad.find(key), key.size(), "\"model.norm.weight\": \"model-00002-of-00002.safetensors\"");
  write_text(d.path() / "model.safetensors.index.json", bad);
  expect_input_error([&] { load_hf_reward_model(d.path()); },
                     {"model-00002-of-00002.safetensors", "missing tensor 'model.norm.weight'"});
}

TEST(HfImport, ShapeDisagreesWithConfig) {
  TempDir d;
  make_model_dir(d.path(), {}, "\"intermediate_size\": 104", "\"intermediate_size\": 96");
  expect_input_error([&] { load_hf_reward_model(d.path()); },
                     {"model.safetensors", "'model.layers.0.mlp.gate_proj.weight'", "has shape [104, 48]",
                      "config.json", "implies shape [96, 48]"});
}

TEST(HfImport, MissingTensor) {
  TempDir d;
  make_model_dir(d.path(), {"model.layers.1.mlp.up_proj.weight"});
  expect_input_error([&] { load_hf_reward_model(d.path()); },
                     {d.path().string(), "missing tensor 'model.layers.1.mlp.up_proj.weight'", "[104, 48]"});
}

TEST(HfImport, NotAModelDirectory) {
  TempDir d;
  expect_input_error([&] { load_hf_reward_model(d.path()); }, {"config.json", "cannot open"});
  fs::copy_file(testing::fixture_dir() + "/config.json", d.path() / "config.json");
  expect_input_error([&] { load_hf_reward_model(d.path()); }, {d.path().string(), "no model.safetensors"});
}

// ---- config.json ------------------------------------------------------------------------------------

TEST(HfConfig, BothRopeSpellingsAndEosForms) {
  const std::string base = R"("vocab_size": 151936, "hidden_size": 2560, "intermediate_size": 9728,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "model_type": "qwen3")";
  const Qwen3Config v4 = parse_hf_config("{" + base + R"(, "rope_theta": 1000000, "eos_token_id": 151645,
    "pad_token_id": null})", "v4");
  EXPECT_DOUBLE_EQ(v4.rope_theta, 1e6);
  EXPECT_EQ(v4.eos_token_ids, (std::vector<int64_t>{151645}));
  EXPECT_EQ(v4.pad_token_id, -1);
  EXPECT_EQ(v4.q_dim(), 4096);  // != hidden
  const Qwen3Config v5 = parse_hf_config("{" + base + R"(, "rope_parameters": {"rope_type": "default",
    "rope_theta": 5000000.0}, "eos_token_id": [151645, 151643], "pad_token_id": 151643})", "v5");
  EXPECT_DOUBLE_EQ(v5.rope_theta, 5e6);
  EXPECT_EQ(v5.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(v5.pad_token_id, 151643);

  expect_input_error([&] { parse_hf_config("{" + base + "}", "cfg.json"); }, {"cfg.json", "rope_theta"});
  expect_input_error([&] { parse_hf_config("{" + base + R"(, "rope_theta": 1e6, "num_key_value_heads": 5})", "cfg.json"); },
                     {"cfg.json"});
  expect_input_error([&] { parse_hf_config("{nope", "cfg.json"); }, {"cfg.json", "not valid JSON"});
  expect_input_error(
      [&] { parse_hf_config(R"({"model_type": "llama", "vocab_size": 1})", "cfg.json"); },
      {"cfg.json", "llama"});
}

}  // namespace
}  // namespace zero::model
