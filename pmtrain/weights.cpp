#include "pmtrain/weights.h"

#include <filesystem>

#include "checkpoint/full_tensors.h"
#include "checkpoint/publish.h"
#include "core/check.h"
#include "data/tokenizer.h"
#include "model/hf_import.h"
#include "model/init.h"
#include "model/param_layout.h"
#include "pmtrain/model_setup.h"
#include "pmtrain/paths.h"

namespace zero::pmtrain {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
std::string describe_checkpoint(const std::string& dir) {
  return fmt::format("checkpoint {} (step {})", dir, checkpoint::Manifest::read(dir).state.step);
}
}  // namespace

std::string trainer_extra_string(const checkpoint::Manifest& m, const char* key) {
  const json& extra = m.state.extra;
  if (!extra.is_object() || !extra.contains(key) || !extra[key].is_string()) return "";
  return extra[key].get<std::string>();
}

WeightsChoice choose_weights(const WeightsArgs& a, const Config& cfg) {
  WeightsChoice w;
  if (!a.model.empty()) {
    w.kind = WeightsChoice::Kind::HfDir;
    w.path = existing_model_dir(a.model, "--model");
    w.description = fmt::format("HF model directory {}", w.path);
  } else if (a.init) {
    w.kind = WeightsChoice::Kind::Init;
    w.description = cfg.model.hf_dir.empty()
                        ? fmt::format("the config's initial weights: random init (model.init_seed {}), untrained",
                                      cfg.model.init_seed)
                        : fmt::format("the config's initial weights: HF model directory {} (model.hf_dir)", cfg.model.hf_dir);
  } else {
    w.kind = WeightsChoice::Kind::Checkpoint;
    const std::string given = a.checkpoint.empty() ? cfg.run.dir : existing_path(a.checkpoint, "--checkpoint");
    const bool has_any = fs::exists(fs::path(given) / checkpoint::kManifestName) ||
                         !checkpoint::list_steps(checkpoint::RunPaths(given)).empty();
    ZERO_REQUIRE(has_any, ConfigError,
                 "no complete checkpoint in {}{}; train first, or choose the weights: --checkpoint PATH (a run or "
                 "step_N directory), --model HF_DIR (an exported model), or --init (the config's untrained initial "
                 "weights)",
                 (fs::path(given) / "checkpoints").string(), a.checkpoint.empty() ? " (run.dir of the config)" : "");
    w.path = absolute_path(checkpoint::resolve_checkpoint_dir(given));
    w.description = describe_checkpoint(w.path);
  }
  return w;
}

model::Qwen3Config checkpoint_model_config(const checkpoint::Manifest& m, const std::string& checkpoint_dir) {
  const std::string manifest_path = (fs::path(checkpoint_dir) / checkpoint::kManifestName).string();
  const json& extra = m.state.extra;
  ZERO_REQUIRE(extra.is_object() && extra.contains("model_config") && extra["model_config"].is_object(), InputError,
               "checkpoint {} has no model_config (trainer.extra.model_config in {}): it was not written by pmtrain "
               "train, so the model it holds is unknown",
               checkpoint_dir, manifest_path);
  return model::parse_hf_config(extra["model_config"].dump(), manifest_path + ": trainer.extra.model_config");
}

ScoringModel load_scoring_model(const WeightsChoice& w, const Config& cfg) {
  ScoringModel s;
  s.tokenizer = cfg.data.tokenizer;
  auto from_hf = [&](const std::string& dir) {
    model::ImportOptions opt;
    opt.score_seed = cfg.model.init_seed;
    model::HfRewardModel hf = model::load_hf_reward_model(dir, opt);
    s.config = hf.config;
    s.params = std::move(hf.params);
    if (fs::exists(fs::path(dir) / "tokenizer.json")) s.tokenizer = (fs::path(dir) / "tokenizer.json").string();
  };
  switch (w.kind) {
    case WeightsChoice::Kind::HfDir:
      from_hf(w.path);
      break;
    case WeightsChoice::Kind::Checkpoint: {
      const checkpoint::CheckpointTensors ck(w.path);
      s.config = checkpoint_model_config(ck.manifest(), w.path);
      s.params = std::make_unique<model::DenseParams>(model::qwen3_rm_groups(s.config));
      for (int g = 0; g < s.params->num_groups(); ++g)
        for (size_t t = 0; t < s.params->groups()[g].tensors.size(); ++t)
          ck.read_master(s.params->groups()[g].tensors[t].name, s.params->param(g, int(t)));
      if (const std::string tok = trainer_extra_string(ck.manifest(), "tokenizer"); !tok.empty()) s.tokenizer = tok;
      break;
    }
    case WeightsChoice::Kind::Init:
      if (!cfg.model.hf_dir.empty()) {
        from_hf(cfg.model.hf_dir);
        break;
      }
      s.config = resolve_model_config(cfg.model, data::Tokenizer::from_file(s.tokenizer).vocab_size());
      s.params = std::make_unique<model::DenseParams>(model::qwen3_rm_groups(s.config));
      model::init_random(*s.params, s.config, cfg.model.init_seed, int(cfg.threads));
      break;
  }
  return s;
}

}  // namespace zero::pmtrain
