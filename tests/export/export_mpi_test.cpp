// `pmtrain export` end to end, in process: a tiny Qwen3 reward model (2 layers, like the HF fixture) on a
// stage-3 engine at this test's world size takes two AdamW steps and saves two checkpoints through the
// Checkpointer (TrainState.extra as pmtrain writes it); rank 0 then exports them with run_export and checks
//   (a) the layout against the HF-written fixture tests/fixtures/qwen3_rm_tiny (names, dtypes, shapes implied by
//       config.json, config keys, score.weight [1, hidden], no lm_head, __metadata__ format pt);
//   (b) reloading with load_hf_reward_model: fp32 bitwise equal to the engine's full master, bf16 equal to
//       its round-to-nearest-even;
//   (c) rewards of the reloaded model equal those of the engine's master (fp32 bitwise, bf16 within 1e-2);
// plus --step, the engine-free reader (manifest order, only the needed bytes), the overwrite policy, a
// corrupted shard, and the errors: no checkpoint, missing step, no model_config, unknown dtype.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "checkpoint/checkpointer.h"
#include "checkpoint/full_tensors.h"
#include "checkpoint/safetensors.h"
#include "comm/mpi_communicator.h"
#include "tests/common/test_backend.h"
#include "model/hf_export.h"
#include "pmtrain/cli.h"
#include "model/hf_import.h"
#include "model/init.h"
#include "model/reward_model.h"
#include "pmtrain/engine_params.h"
#include "pmtrain/export_command.h"
#include "tests/model/model_test_util.h"

using namespace zero;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// `pmtrain export ARGS...` as the command line parses it, then the export. A usage error (the parser's
// own message is tested in tests/pmtrain/cli.sh) is a ConfigError here.
int export_cli(std::vector<std::string> args) {
  args.insert(args.begin(), {"pmtrain", "export"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  pmtrain::CommandLine cl;
  if (const auto code = pmtrain::parse_command_line(int(argv.size()), argv.data(), false, cl))
    throw ConfigError(fmt::format("usage error (exit {})", *code));
  return pmtrain::run_export(cl.export_request);
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int w = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  return w;
}

std::string shared_temp_dir(const std::string& name) {
  char buf[512] = {0};
  if (world_rank() == 0) {
    const auto p = fs::temp_directory_path() / fmt::format("zero_export_{}_{}", name, ::getpid());
    fs::remove_all(p);
    fs::create_directories(p);
    snprintf(buf, sizeof(buf), "%s", p.c_str());
  }
  MPI_Bcast(buf, sizeof(buf), MPI_CHAR, 0, MPI_COMM_WORLD);
  return buf;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

template <class ErrorT, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << parts.front() << "'";
  } catch (const ErrorT& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  }
}

model::Qwen3Config test_config() {
  model::Qwen3Config c = model::tiny_qwen3_config();  // 2 layers, like the fixture
  c.eos_token_ids = {2};
  c.initializer_range = 0.02;
  return c;
}

using Masters = std::map<std::string, std::vector<float>>;

// A small batch of 3 pairs with random ids (pad 0 never inside a sequence).
data::PairBatch reward_batch(const model::Qwen3Config& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> tok(1, int32_t(c.vocab_size) - 1);
  std::vector<std::vector<int32_t>> seqs;
  for (int len : {11, 7, 5, 13, 9, 3}) {
    std::vector<int32_t> s(len);
    for (auto& t : s) t = tok(rng);
    seqs.push_back(std::move(s));
  }
  return model::testing::padded_batch(seqs, 0);
}

std::vector<float> rewards_of(const model::Qwen3Config& c, model::DenseParams& p) {
  const model::Qwen3RewardModel m(c);
  return m.forward(reward_batch(c, 99), p).rewards;
}

std::unique_ptr<model::DenseParams> dense_from(const model::Qwen3Config& c, const Masters& masters) {
  auto p = std::make_unique<model::DenseParams>(model::qwen3_rm_groups(c));
  for (const auto& [name, v] : masters) {
    auto dst = p->param(name);
    EXPECT_EQ(dst.size(), v.size()) << name;
    std::copy(v.begin(), v.end(), dst.begin());
  }
  return p;
}

// What the test's checkpoints hold, built once on every rank.
struct Shared {
  std::string root, run_dir, foreign_run, tokenizer, tokenizer_config;
  model::Qwen3Config config;
  Masters step3, step5;  // the engine's full fp32 master after each save
};
Shared* g = nullptr;

Masters full_masters(Engine& e) {
  Masters out;
  for (int gi = 0; gi < int(e.groups().size()); ++gi) {
    const std::vector<float> full = e.full_master(gi);  // collective
    const auto& L = e.partition().groups[gi];
    for (size_t t = 0; t < e.groups()[gi].tensors.size(); ++t) {
      const auto& ti = e.groups()[gi].tensors[t];
      out[ti.name].assign(full.begin() + L.tensor_offsets[t], full.begin() + L.tensor_offsets[t] + ti.numel);
    }
  }
  return out;
}

class ExportTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    g = new Shared;
    g->root = shared_temp_dir("suite");
    g->run_dir = g->root + "/run";
    g->foreign_run = g->root + "/foreign_run";
    g->tokenizer = g->root + "/tok/tokenizer.json";
    g->tokenizer_config = g->root + "/tok/tokenizer_config.json";
    g->config = test_config();
    if (world_rank() == 0) {
      fs::create_directories(g->root + "/tok");
      write_file(g->tokenizer, "{\"model\": {\"type\": \"BPE\"}, \"note\": \"a stand-in: export copies it byte for byte\"}\n");
      write_file(g->tokenizer_config, "{\"eos_token\": \"<|im_end|>\", \"pad_token\": \"<|endoftext|>\"}\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);

    auto comm_ptr = zero::testing::make_test_comm(MPI_COMM_WORLD);
    Communicator& comm = *comm_ptr;
    auto ops = zero::testing::make_test_ops();
    TrackingAllocator alloc{make_host_allocator()};
    const model::Qwen3RewardModel rm(g->config);
    EngineConfig ec;
    ec.stage = 3;
    ec.bucket_elements = 5000;
    ec.schedule.peak_lr = 1e-3f;
    Engine engine(ec, pmtrain::engine_groups(rm.groups()), comm, *ops, alloc);
    const auto& groups = rm.groups();
    engine.init_params([&](int gi, int t, float* dst) {
      const auto& spec = groups[gi].tensors[t];
      model::init_tensor(spec, g->config, 1234, {dst, size_t(spec.numel())});
    });
    pmtrain::EngineParamAccess access(engine, rm.groups());
    const data::PairBatch batch = reward_batch(g->config, 7 + world_rank());
    auto train_step = [&] {
      engine.begin_micro_step();
      rm.forward_backward(batch, access);
      engine.step(double(batch.num_pairs() * world_size()));
    };
    checkpoint::CheckpointOptions co;
    co.run_dir = g->run_dir;
    checkpoint::Checkpointer ck(engine, co);
    checkpoint::TrainState st;
    st.extra = {{"model_config", model::hf_config_json(g->config)},
                {"tokenizer", g->tokenizer},
                {"tokenizer_config", g->tokenizer_config}};
    train_step();
    st.step = 3;
    ck.save(st);
    g->step3 = full_masters(engine);
    train_step();
    st.step = 5;
    ck.save(st);
    g->step5 = full_masters(engine);
    // Another trainer's checkpoint of the same engine: no model_config.
    checkpoint::CheckpointOptions fo;
    fo.run_dir = g->foreign_run;
    checkpoint::Checkpointer fck(engine, fo);
    checkpoint::TrainState fs_state;
    fs_state.step = 5;
    fs_state.extra = {{"note", "not pmtrain"}};
    fck.save(fs_state);
  }
  static void TearDownTestSuite() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) fs::remove_all(g->root);
    delete g;
    g = nullptr;
  }

 protected:
  // Exports on rank 0 only (the other ranks skip the test body: no collectives below).
  static bool rank0() { return world_rank() == 0; }
  static std::string out(const std::string& name) { return g->root + "/out_" + name; }
  static void run(std::vector<std::string> args) { EXPECT_EQ(export_cli(args), 0); }
};

// ---- (a) layout against the HF-written fixture ----------------------------------------------------------

bool is_param(const std::string& n) { return n.rfind("model.", 0) == 0 || n == "score.weight"; }
std::string pattern(const std::string& n) {
  static const std::regex layer(R"(^model\.layers\.\d+\.)");
  return std::regex_replace(n, layer, "model.layers.*.");
}

// The shape an HF Qwen3ForSequenceClassification state dict has for `name`, from config.json alone.
std::vector<int64_t> hf_shape(const std::string& name, const json& c) {
  const int64_t H = c.at("hidden_size"), I = c.at("intermediate_size"), V = c.at("vocab_size");
  const int64_t D = c.at("head_dim"), Q = c.at("num_attention_heads").get<int64_t>() * D,
                K = c.at("num_key_value_heads").get<int64_t>() * D;
  const std::map<std::string, std::vector<int64_t>> per_layer = {
      {"self_attn.q_proj.weight", {Q, H}}, {"self_attn.k_proj.weight", {K, H}}, {"self_attn.v_proj.weight", {K, H}},
      {"self_attn.o_proj.weight", {H, Q}}, {"self_attn.q_norm.weight", {D}},    {"self_attn.k_norm.weight", {D}},
      {"mlp.gate_proj.weight", {I, H}},    {"mlp.up_proj.weight", {I, H}},      {"mlp.down_proj.weight", {H, I}},
      {"input_layernorm.weight", {H}},     {"post_attention_layernorm.weight", {H}}};
  if (name == "model.embed_tokens.weight") return {V, H};
  if (name == "model.norm.weight") return {H};
  if (name == "score.weight") return {c.at("num_labels").get<int64_t>(), H};
  const std::string p = pattern(name);
  if (p.rfind("model.layers.*.", 0) == 0) {
    const auto it = per_layer.find(p.substr(std::strlen("model.layers.*.")));
    if (it != per_layer.end()) return it->second;
  }
  return {-1};
}

json read_json(const fs::path& p) { return json::parse(read_file(p)); }

void check_layout(const std::string& dir, DType dtype) {
  const std::string fx = ZERO_MODEL_FIXTURE_DIR;
  const checkpoint::SafetensorsReader ref(fx + "/qwen3_rm_tiny.safetensors");
  const json ref_cfg = read_json(fx + "/config.json");
  const checkpoint::SafetensorsReader ours(dir + "/model.safetensors");
  const json cfg = read_json(dir + "/config.json");

  // config.json: every key the HF-written one has, with the same JSON type where both are non-null.
  for (const auto& [k, v] : ref_cfg.items()) {
    ASSERT_TRUE(cfg.contains(k)) << "config.json lacks the fixture's key '" << k << "'";
    if (!v.is_null() && !cfg[k].is_null()) {
      EXPECT_EQ(v.type_name(), std::string(cfg[k].type_name())) << k;
    }
  }
  EXPECT_EQ(cfg["architectures"], json::array({"Qwen3ForSequenceClassification"}));
  EXPECT_EQ(cfg["num_labels"], 1);
  EXPECT_EQ(cfg["id2label"], ref_cfg["id2label"]);
  EXPECT_EQ(cfg["label2id"], ref_cfg["label2id"]);
  EXPECT_EQ(cfg["rope_parameters"]["rope_type"], "default");
  EXPECT_EQ(cfg["rope_parameters"]["rope_theta"], cfg["rope_theta"]);
  EXPECT_EQ(cfg["dtype"], dtype == DType::BF16 ? "bfloat16" : "float32");
  EXPECT_EQ(cfg["torch_dtype"], cfg["dtype"]);
  EXPECT_EQ(cfg["num_hidden_layers"], ref_cfg["num_hidden_layers"]) << "the test compares against a 2-layer fixture";

  // Tensor names: the fixture's parameters (by pattern and, with equal layer counts, exactly) and ours.
  std::set<std::string> ref_names, our_names, ref_pat, our_pat;
  for (const auto& t : ref.tensors())
    if (is_param(t.name)) {
      ref_names.insert(t.name);
      ref_pat.insert(pattern(t.name));
      EXPECT_EQ(t.shape, hf_shape(t.name, ref_cfg)) << "shape rule disagrees with HF for " << t.name;
    }
  ASSERT_EQ(ref_names.size(), 25u);
  for (const auto& t : ours.tensors()) {
    our_names.insert(t.name);
    our_pat.insert(pattern(t.name));
    EXPECT_EQ(t.dtype, dtype) << t.name;
    EXPECT_EQ(t.shape, hf_shape(t.name, cfg)) << t.name << " is " << checkpoint::shape_string(t.shape);
  }
  EXPECT_EQ(our_pat, ref_pat);
  EXPECT_EQ(our_names, ref_names);
  EXPECT_FALSE(ours.contains("lm_head.weight"));
  EXPECT_EQ(ours.tensor("score.weight").shape, (std::vector<int64_t>{1, cfg["hidden_size"].get<int64_t>()}));
  EXPECT_EQ(ours.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  // The contiguity rules (offsets back to back, no gap) are checked by the reader; the file size too.
  uint64_t data_end = 0;
  for (const auto& t : ours.tensors()) data_end = std::max(data_end, t.end);
  uint64_t header = 0;
  std::ifstream(dir + "/model.safetensors", std::ios::binary).read(reinterpret_cast<char*>(&header), 8);
  EXPECT_EQ(header % 8, 0u);
  EXPECT_EQ(fs::file_size(dir + "/model.safetensors"), 8 + header + data_end);
}

TEST_F(ExportTest, Fp32LayoutMatchesHfFixture) {
  if (!rank0()) return;
  run({g->run_dir, "--to", out("layout32"), "--dtype", "fp32"});
  check_layout(out("layout32"), DType::F32);
}

TEST_F(ExportTest, Bf16LayoutMatchesHfFixture) {
  if (!rank0()) return;
  run({g->run_dir, "--to", out("layout16")});  // bf16 is the default
  check_layout(out("layout16"), DType::BF16);
}

// ---- (b) reload, (c) rewards --------------------------------------------------------------------------

TEST_F(ExportTest, Fp32ReloadIsBitwiseAndRewardsEqual) {
  if (!rank0()) return;
  const std::string dir = out("reload32");
  run({g->run_dir, "--to", dir, "--dtype=fp32"});
  model::HfRewardModel hf = model::load_hf_reward_model(dir);
  EXPECT_EQ(hf.config.hidden_size, g->config.hidden_size);
  EXPECT_EQ(hf.config.vocab_size, g->config.vocab_size);
  EXPECT_EQ(hf.config.eos_token_ids, g->config.eos_token_ids);
  EXPECT_EQ(hf.config.pad_token_id, g->config.pad_token_id);
  EXPECT_EQ(hf.config.rope_theta, g->config.rope_theta);
  EXPECT_TRUE(hf.report.initialised.empty());
  EXPECT_TRUE(hf.report.ignored.empty());
  ASSERT_EQ(hf.report.loaded.size(), g->step5.size());
  for (const auto& [name, v] : g->step5) {
    const auto got = hf.params->param(name);
    ASSERT_EQ(got.size(), v.size()) << name;
    EXPECT_EQ(std::memcmp(got.data(), v.data(), v.size() * 4), 0) << name << " differs from the engine's master";
  }
  auto ref = dense_from(g->config, g->step5);
  const std::vector<float> want = rewards_of(g->config, *ref);
  const std::vector<float> got = rewards_of(hf.config, *hf.params);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "reward " << i;
  // The export holds the trained master, not the init (the steps moved it).
  std::vector<float> init(g->step5.at("score.weight").size());
  model::init_tensor({"score.weight", {1, g->config.hidden_size}}, g->config, 1234, init);
  EXPECT_NE(std::memcmp(init.data(), g->step5.at("score.weight").data(), init.size() * 4), 0);
}

TEST_F(ExportTest, Bf16ReloadIsRoundedMasterAndRewardsClose) {
  if (!rank0()) return;
  const std::string dir = out("reload16");
  run({g->run_dir, "--to", dir, "--dtype", "bf16"});
  model::HfRewardModel hf = model::load_hf_reward_model(dir);
  for (const auto& [name, v] : g->step5) {
    const auto got = hf.params->param(name);
    ASSERT_EQ(got.size(), v.size()) << name;
    size_t bad = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const float r = static_cast<float>(bf16(v[i]));  // round to nearest even
      bad += std::memcmp(&got[i], &r, 4) != 0 || std::fabs(got[i] - v[i]) > std::ldexp(std::fabs(v[i]), -8);
    }
    EXPECT_EQ(bad, 0u) << name << ": elements not the bf16 rounding of the master";
  }
  // The reloaded model is exactly the bf16-rounded master: same rewards, bit for bit ...
  Masters rounded;
  for (const auto& [name, v] : g->step5)
    for (float x : v) rounded[name].push_back(static_cast<float>(bf16(x)));
  auto ref16 = dense_from(g->config, rounded);
  const std::vector<float> got = rewards_of(hf.config, *hf.params);
  EXPECT_EQ(got, rewards_of(g->config, *ref16));
  // ... and close to the fp32 master's: within 1e-2 of the batch's reward scale (measured: about 0.7%).
  auto ref = dense_from(g->config, g->step5);
  const std::vector<float> want = rewards_of(g->config, *ref);
  ASSERT_EQ(got.size(), want.size());
  float scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(w));
  ASSERT_GT(scale, 0.0f);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LE(std::fabs(got[i] - want[i]), 1e-2f * scale)
        << "reward " << i << ": bf16 " << got[i] << " vs fp32 " << want[i] << " (scale " << scale << ")";
}

// ---- checkpoint selection and the engine-free reader ---------------------------------------------------

TEST_F(ExportTest, StepSelectsTheCheckpoint) {
  if (!rank0()) return;
  EXPECT_EQ(checkpoint::resolve_checkpoint_dir(g->run_dir), g->run_dir + "/checkpoints/step_5");
  EXPECT_EQ(checkpoint::resolve_checkpoint_dir(g->run_dir, 3), g->run_dir + "/checkpoints/step_3");
  const std::string step_dir = g->run_dir + "/checkpoints/step_3";
  EXPECT_EQ(checkpoint::resolve_checkpoint_dir(step_dir), step_dir);  // a step directory given directly
  run({g->run_dir, "--step", "3", "--to", out("step3"), "--dtype", "fp32"});
  const checkpoint::SafetensorsReader r(out("step3") + "/model.safetensors");
  for (const auto& [name, v] : g->step3) EXPECT_EQ(r.read_f32(name), v) << name;
  const json info = read_json(out("step3") + "/" + model::kExportMarker);
  EXPECT_EQ(info["step"], 3);
  EXPECT_EQ(info["saved_world_size"], world_size());
  EXPECT_EQ(info["saved_stage"], 3);
  EXPECT_EQ(info["dtype"], "fp32");
}

TEST_F(ExportTest, FullTensorsStreamManifestOrderReadingOnlyMasters) {
  if (!rank0()) return;
  const std::string dir = g->run_dir + "/checkpoints/step_5";
  const checkpoint::CheckpointTensors ck(dir, /*verify_checksums=*/false);
  std::vector<std::string> order;
  uint64_t numel = 0;
  ck.for_each_master([&](const std::string& name, std::span<const float> v) {
    order.push_back(name);
    numel += v.size();
    ASSERT_EQ(v.size(), g->step5.at(name).size()) << name;
    EXPECT_EQ(std::memcmp(v.data(), g->step5.at(name).data(), v.size() * 4), 0) << name;
  });
  std::vector<std::string> want;
  for (const auto& gs : model::qwen3_rm_groups(g->config))
    for (const auto& t : gs.tensors) want.push_back(t.name);
  EXPECT_EQ(order, want);
  EXPECT_EQ(ck.bytes_read(), numel * 4) << "only the masters' real elements are read";
  const checkpoint::CheckpointTensors verified(dir);
  uint64_t files = 0;
  for (const auto& f : verified.manifest().files) files += f.bytes;
  EXPECT_EQ(verified.bytes_read(), files) << "verification hashes every rank file once";
}

// ---- files, overwrite policy, damage -------------------------------------------------------------------

TEST_F(ExportTest, TokenizerFilesAreCopied) {
  if (!rank0()) return;
  run({g->run_dir, "--to", out("tok")});
  EXPECT_EQ(read_file(out("tok") + "/tokenizer.json"), read_file(g->tokenizer));
  EXPECT_EQ(read_file(out("tok") + "/tokenizer_config.json"), read_file(g->tokenizer_config));
  // --tokenizer overrides the run's, with its sibling tokenizer_config.json when there is one; it must be a
  // tokenizer (read before it is shipped), unlike the run's own stand-in above.
  fs::create_directories(g->root + "/tok2");
  fs::copy_file(ZERO_QWEN3_TOKENIZER, g->root + "/tok2/tokenizer.json", fs::copy_options::overwrite_existing);
  run({g->run_dir, "--to", out("tok2"), "--tokenizer", g->root + "/tok2/tokenizer.json"});
  EXPECT_EQ(read_file(out("tok2") + "/tokenizer.json"), read_file(ZERO_QWEN3_TOKENIZER));
  EXPECT_FALSE(fs::exists(out("tok2") + "/tokenizer_config.json"));
  fs::create_directories(g->root + "/tok4");
  write_file(g->root + "/tok4/tokenizer.json", "{\"other\": 1}\n");
  expect_error<InputError>([&] { export_cli({g->run_dir, "--to", out("tok4"), "--tokenizer", g->root + "/tok4/tokenizer.json"}); },
                           {"tokenizer file " + g->root + "/tok4/tokenizer.json", "is not a usable tokenizer.json"});
  EXPECT_FALSE(fs::exists(out("tok4")));
  expect_error<InputError>([&] { export_cli({g->run_dir, "--to", out("tok3"), "--tokenizer", g->root + "/nope.json"}); },
                           {"tokenizer file " + g->root + "/nope.json", "is missing"});
  EXPECT_FALSE(fs::exists(out("tok3")));
}

TEST_F(ExportTest, OverwritePolicy) {
  if (!rank0()) return;
  // A non-empty directory that is not an export is refused and left alone.
  const std::string foreign = out("foreign");
  fs::create_directories(foreign);
  write_file(foreign + "/precious.txt", "keep me");
  expect_error<InputError>([&] { export_cli({g->run_dir, "--to", foreign}); },
                           {"refusing to write into " + foreign, "not a previous export", model::kExportMarker});
  EXPECT_EQ(read_file(foreign + "/precious.txt"), "keep me");
  EXPECT_FALSE(fs::exists(foreign + ".tmp"));
  // An empty directory is fine; a previous export is replaced as a whole (a stale .tmp is removed).
  const std::string dir = out("again");
  fs::create_directories(dir);
  run({g->run_dir, "--to", dir, "--dtype", "fp32"});
  EXPECT_EQ(read_json(dir + "/config.json")["dtype"], "float32");
  fs::create_directories(dir + ".tmp");
  write_file(dir + ".tmp/" + model::kExportMarker, "{}");
  write_file(dir + "/extra_from_before.txt", "x");
  run({g->run_dir + "/", "--to", dir + "/", "--dtype", "bf16", "--step", "3"});
  EXPECT_EQ(read_json(dir + "/config.json")["dtype"], "bfloat16");
  EXPECT_EQ(read_json(dir + "/" + model::kExportMarker)["step"], 3);
  EXPECT_FALSE(fs::exists(dir + "/extra_from_before.txt")) << "the old export is replaced, not merged";
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  EXPECT_FALSE(fs::exists(dir + ".old"));
  // A file in the way is refused.
  write_file(out("file"), "x");
  expect_error<InputError>([&] { export_cli({g->run_dir, "--to", out("file")}); }, {"is not a directory"});
}

TEST_F(ExportTest, CorruptedShardIsRefusedAndNothingWritten) {
  if (!rank0()) return;
  const std::string bad = g->root + "/corrupt_run";
  fs::create_directories(bad + "/checkpoints");
  fs::copy(g->run_dir + "/checkpoints/step_5", bad + "/checkpoints/step_5");
  const std::string f = bad + "/checkpoints/step_5/rank_0.bin";
  {
    std::fstream s(f, std::ios::in | std::ios::out | std::ios::binary);
    char c = 0;
    s.seekg(64);
    s.read(&c, 1);
    c ^= 0x20;
    s.seekp(64);
    s.write(&c, 1);
  }
  expect_error<InputError>([&] { export_cli({bad, "--to", out("corrupt")}); },
                           {"checkpoint file " + f + " is corrupted"});
  EXPECT_FALSE(fs::exists(out("corrupt")));
  // --no-verify skips the hash (the byte flipped is then exported as is).
  EXPECT_EQ(export_cli({bad, "--to", out("corrupt"), "--no-verify"}), 0);
}

// ---- errors ---------------------------------------------------------------------------------------------

TEST_F(ExportTest, ErrorRunWithoutCheckpoints) {
  if (!rank0()) return;
  const std::string empty = g->root + "/empty_run";
  fs::create_directories(empty);
  expect_error<InputError>([&] { export_cli({empty, "--to", out("x")}); },
                           {"run directory " + empty + " has no checkpoints"});
  expect_error<InputError>([&] { export_cli({g->root + "/missing_run", "--to", out("x")}); },
                           {"run directory " + g->root + "/missing_run does not exist"});
  EXPECT_FALSE(fs::exists(out("x")));
}

TEST_F(ExportTest, ErrorMissingStepListsAvailable) {
  if (!rank0()) return;
  expect_error<InputError>([&] { export_cli({g->run_dir, "--step", "4", "--to", out("x")}); },
                           {"run directory " + g->run_dir + " has no checkpoint for step 4", "(available steps: 3, 5)"});
  EXPECT_FALSE(fs::exists(out("x")));
}

TEST_F(ExportTest, ErrorCheckpointWithoutModelConfig) {
  if (!rank0()) return;
  expect_error<InputError>([&] { export_cli({g->foreign_run, "--to", out("x")}); },
                           {"checkpoint " + g->foreign_run + "/checkpoints/step_5 has no model_config",
                            "trainer.extra.model_config", "not written by pmtrain"});
  EXPECT_FALSE(fs::exists(out("x")));
}

TEST_F(ExportTest, ErrorBadArguments) {
  if (!rank0()) return;
  expect_error<ConfigError>([&] { export_cli({g->run_dir, "--to", out("x"), "--dtype", "fp16"}); }, {"usage error"});
  expect_error<ConfigError>([&] { export_cli({g->run_dir}); }, {"usage error"});
  expect_error<ConfigError>([&] { export_cli({"--to", out("x")}); }, {"usage error"});
  expect_error<ConfigError>([&] { export_cli({g->run_dir, "--to", out("x"), "--step", "-1"}); }, {"usage error"});
  expect_error<ConfigError>([&] { export_cli({g->run_dir, "--to", out("x"), "--bogus", "1"}); }, {"usage error"});
  EXPECT_FALSE(fs::exists(out("x")));
}

}  // namespace
