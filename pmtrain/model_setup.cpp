#include "pmtrain/model_setup.h"

#include <fmt/ranges.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/chunks.h"
#include "model/hf_import.h"
#include "model/init.h"

namespace zero::pmtrain {

namespace {
struct Preset {
  ModelPreset which;
  int64_t hidden, inter, layers, heads, kv, head_dim;
  double theta;
  bool tied;
  int64_t vocab;  // 0: the tokenizer's size
};
// FACTS.md: Qwen3 sizes (head_dim 128, vocab 151936, rope_theta 1e6). "tiny" is the CPU default. The
// spellings are config.cpp's (model.preset is typed at load).
constexpr Preset kPresetShapes[] = {
    {ModelPreset::Tiny, 64, 160, 2, 4, 2, 16, 10000.0, true, 0},
    {ModelPreset::Qwen3_0_6B, 1024, 3072, 28, 16, 8, 128, 1e6, true, 151936},
    {ModelPreset::Qwen3_1_7B, 2048, 6144, 28, 16, 8, 128, 1e6, true, 151936},
    {ModelPreset::Qwen3_4B, 2560, 9728, 36, 32, 8, 128, 1e6, true, 151936},
    {ModelPreset::Qwen3_8B, 4096, 12288, 36, 32, 8, 128, 1e6, false, 151936},
};
}  // namespace

model::Qwen3Config resolve_model_config(const ModelSection& m, int64_t tokenizer_vocab) {
  model::Qwen3Config c;
  if (!m.hf_dir.empty()) {
    c = model::load_hf_config(m.hf_dir);
  } else {
    const Preset* p = nullptr;
    for (const Preset& q : kPresetShapes)
      if (m.preset == q.which) p = &q;
    ZERO_REQUIRE(p || m.preset == ModelPreset::Custom, InternalError, "model.preset: a preset without a shape");
    if (p) {
      c.hidden_size = p->hidden, c.intermediate_size = p->inter, c.num_layers = p->layers;
      c.num_heads = p->heads, c.num_kv_heads = p->kv, c.head_dim = p->head_dim, c.rope_theta = p->theta;
      c.tie_word_embeddings = p->tied;
      c.vocab_size = p->vocab;
    }
    c.rms_norm_eps = m.rms_norm_eps;
  }
  // Explicit keys override the preset (or the HF config).
  if (m.hidden_size) c.hidden_size = m.hidden_size;
  if (m.intermediate_size) c.intermediate_size = m.intermediate_size;
  if (m.num_layers) c.num_layers = m.num_layers;
  if (m.num_heads) c.num_heads = m.num_heads;
  if (m.num_kv_heads) c.num_kv_heads = m.num_kv_heads;
  if (m.head_dim) c.head_dim = m.head_dim;
  if (m.rope_theta > 0) c.rope_theta = m.rope_theta;
  if (m.vocab_size) c.vocab_size = m.vocab_size;
  if (c.vocab_size == 0) c.vocab_size = tokenizer_vocab;
  // Called before a run resolves auto (which then sets selective_layers and recompute_attention itself).
  ZERO_REQUIRE(m.selective_layers == 0 || !m.checkpointing_auto, ConfigError,
               "model.selective_layers {} is chosen by model.activation_checkpointing: auto; leave it 0 under auto, "
               "or set activation_checkpointing to full",
               m.selective_layers);
  ZERO_REQUIRE(!m.recompute_attention || !m.checkpointing_auto, ConfigError,
               "model.recompute_attention is chosen by model.activation_checkpointing: auto; leave it false under "
               "auto, or set activation_checkpointing to full");
  ZERO_REQUIRE(!m.recompute_attention || m.activation_checkpointing == model::ActivationCheckpointing::Full,
               ConfigError,
               "model.recompute_attention recomputes the attention of fully checkpointed layers, but "
               "model.activation_checkpointing is {}: set it to full, or recompute_attention to false",
               checkpointing_name(m.activation_checkpointing));
  ZERO_REQUIRE(m.selective_layers == 0 || m.activation_checkpointing == model::ActivationCheckpointing::Full,
               ConfigError,
               "model.selective_layers {} makes some layers of full checkpointing selective, but "
               "model.activation_checkpointing is {}: set it to full, or selective_layers to 0",
               m.selective_layers, checkpointing_name(m.activation_checkpointing));
  ZERO_REQUIRE(m.selective_layers <= c.num_layers, ConfigError,
               "model.selective_layers {} is more than the model's {} layers (activation_checkpointing: selective keeps "
               "them all)",
               m.selective_layers, c.num_layers);
  ZERO_REQUIRE(c.vocab_size >= tokenizer_vocab, ConfigError,
               "model.vocab_size {} is smaller than the tokenizer's {} tokens", c.vocab_size, tokenizer_vocab);
  c.validate("model");
  return c;
}

std::string init_model_parameters(Engine& engine, const ModelSection& m, const model::Qwen3Config& qc,
                                  const std::vector<model::GroupSpec>& groups, int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  auto took = [&] {
    return fmt::format("{:.1f} s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  if (m.hf_dir.empty()) {  // a piece at a time (model::kInitPieceElements): no host buffer of a whole tensor
    HostVector<float> piece;
    for (size_t g = 0; g < groups.size(); ++g)
      for (size_t t = 0; t < groups[g].tensors.size(); ++t) {
        const model::TensorSpec& spec = groups[g].tensors[t];
        model::for_each_init_piece(engine.kept_tensor_range(int(g), int(t)), [&](size_t first, size_t count) {
          piece.resize(count);
          model::init_tensor_range(spec, qc, m.init_seed, first, piece, threads);
          engine.set_tensor_range(int(g), int(t), first, count, piece.data());
        });
      }
    return fmt::format("random init (seed {}), {} on {} thread{}", m.init_seed, took(), threads, threads > 1 ? "s" : "");
  }
  std::unordered_map<std::string, std::pair<int, int>> where;
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t t = 0; t < groups[g].tensors.size(); ++t) where[groups[g].tensors[t].name] = {int(g), int(t)};
  model::ImportOptions opt;
  opt.score_seed = m.init_seed;
  opt.elements = [&](const model::TensorSpec& spec) {
    const auto [g, t] = where.at(spec.name);
    return engine.kept_tensor_range(g, t);
  };
  const auto report = model::import_hf_weights(m.hf_dir, qc, groups, [&](const std::string& name, size_t first,
                                                                          std::span<const float> data) {
    const auto [g, t] = where.at(name);
    engine.set_tensor_range(g, t, first, data.size(), data.data());
  }, opt);
  // Name them: "1 initialised" alone does not say that the score head is new (untrained).
  auto names = [](const std::vector<std::string>& v) { return v.empty() ? std::string() : fmt::format(": {}", fmt::join(v, ", ")); };
  return fmt::format("{} tensors from {} ({} initialised{}; {} ignored{}), {}", report.loaded.size(), m.hf_dir,
                     report.initialised.size(), names(report.initialised), report.ignored.size(), names(report.ignored),
                     took());
}

namespace {
struct Cores {
  int node = 1;    // the node's
  int usable = 1;  // this rank's: its affinity mask
};
Cores cores_here() {
  Cores c;
  c.node = std::max(1, int(std::thread::hardware_concurrency()));
  c.usable = c.node;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) c.usable = CPU_COUNT(&set);
  return c;
}
}  // namespace

int core_share(int node_cores, int usable_cpus, int ranks_on_node) {
  return std::max(1, std::min(usable_cpus, node_cores / std::max(1, ranks_on_node)));
}

int init_threads(int configured, int ranks_on_node) {
  const Cores c = cores_here();
  return std::max(configured, core_share(c.node, c.usable, ranks_on_node));
}

void resolve_rank_threads(Config& cfg, int ranks_on_node) {
  if (cfg.threads_from != ThreadsFrom::Default) return;
  cfg.threads = init_threads(1, ranks_on_node);
  cfg.threads_from = ThreadsFrom::CoreShare;
}

std::string threads_oversubscription(int threads, int ranks_on_node) {
  const Cores c = cores_here();
  if (threads <= 1) return "";  // more ranks than cores is the launch's choice, not the threads'
  if (threads > c.usable)
    return fmt::format("{} threads a rank on the {} CPU{} this rank may run on", threads, c.usable,
                       c.usable > 1 ? "s" : "");
  if (int64_t(threads) * ranks_on_node > c.node)
    return fmt::format("{} ranks on this node x {} threads = {} threads on its {} cores", ranks_on_node, threads,
                       int64_t(threads) * ranks_on_node, c.node);
  return "";
}

model::RewardModelOptions reward_model_options(const Config& cfg) {
  const ModelSection& m = cfg.model;
  model::RewardModelOptions o;
  o.activation_checkpointing = m.activation_checkpointing;
  o.selective_layers = m.selective_layers;
  o.recompute_attention = m.recompute_attention;
  o.decay.norms = m.decay_norms;
  o.decay.embedding = m.decay_embedding;
  o.attention = m.attention;
  o.threads = int(cfg.threads);
  o.center_rewards = cfg.loss.center_rewards;
  return o;
}

}  // namespace zero::pmtrain
