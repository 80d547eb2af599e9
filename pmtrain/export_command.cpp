#include "pmtrain/export_command.h"

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/full_tensors.h"
#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "data/tokenizer.h"
#include "model/param_layout.h"

namespace zero::pmtrain {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr const char* kUsage =
    "usage: pmtrain export RUN_DIR [--step N] --to OUT_DIR [--dtype bf16|fp32] [--tokenizer FILE] [--no-verify]";

DType parse_export_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp32" || s == "float32" || s == "f32") return DType::F32;
  throw ConfigError(fmt::format("export: --dtype must be bf16 or fp32, got '{}'", s));
}

int64_t parse_step(const std::string& s) {
  ZERO_REQUIRE(!s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos, ConfigError,
               "export: --step must be a non-negative integer, got '{}'", s);
  return std::stoll(s);
}

// A string member of trainer.extra ("" when absent, null or not a string).
std::string extra_string(const json& extra, const char* key) {
  if (!extra.is_object() || !extra.contains(key) || !extra[key].is_string()) return "";
  return extra[key].get<std::string>();
}
}  // namespace

ExportRequest parse_export_args(const std::vector<std::string>& args) {
  ExportRequest r;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string k = args[i], v;
    const bool is_flag = k.rfind("--", 0) == 0;
    if (is_flag && k != "--no-verify") {
      if (const size_t eq = k.find('='); eq != std::string::npos) {
        v = k.substr(eq + 1);
        k = k.substr(0, eq);
      } else {
        ZERO_REQUIRE(i + 1 < args.size(), ConfigError, "export: {} needs a value\n{}", k, kUsage);
        v = args[++i];
      }
    }
    if (!is_flag) {
      ZERO_REQUIRE(r.run_dir.empty(), ConfigError, "export: unexpected argument '{}' (one RUN_DIR only)\n{}", k, kUsage);
      r.run_dir = k;
    } else if (k == "--step") {
      r.step = parse_step(v);
    } else if (k == "--to") {
      r.out_dir = v;
    } else if (k == "--dtype") {
      r.dtype = parse_export_dtype(v);
    } else if (k == "--tokenizer") {
      r.tokenizer = v;
    } else if (k == "--no-verify") {
      r.verify_checksums = false;
    } else {
      throw ConfigError(fmt::format("export: unknown option '{}'\n{}", k, kUsage));
    }
  }
  ZERO_REQUIRE(!r.run_dir.empty(), ConfigError, "export: no RUN_DIR given\n{}", kUsage);
  ZERO_REQUIRE(!r.out_dir.empty(), ConfigError, "export: no --to OUT_DIR given\n{}", kUsage);
  return r;
}

ExportResult export_checkpoint(const ExportRequest& req) {
  ExportResult res;
  res.checkpoint_dir = checkpoint::resolve_checkpoint_dir(req.run_dir, req.step);
  const checkpoint::CheckpointTensors ck(res.checkpoint_dir, req.verify_checksums);
  const checkpoint::Manifest& m = ck.manifest();
  res.step = m.state.step;
  const std::string manifest_path = (fs::path(res.checkpoint_dir) / checkpoint::kManifestName).string();

  // The model shape comes from the trainer's state: a checkpoint of another trainer has none.
  const json& extra = m.state.extra;
  ZERO_REQUIRE(extra.is_object() && extra.contains("model_config") && extra["model_config"].is_object(), InputError,
               "checkpoint {} has no model_config (trainer.extra.model_config in {}): it was not written by pmtrain "
               "train, so the model it holds is unknown; only pmtrain checkpoints can be exported",
               res.checkpoint_dir, manifest_path);
  res.config = model::parse_hf_config(extra["model_config"].dump(), manifest_path + ": trainer.extra.model_config");

  // Every tensor the HF model needs, with the element count its shape implies, and nothing else.
  const std::vector<model::GroupSpec> groups = model::qwen3_rm_groups(res.config);
  size_t expected = 0;
  for (const model::GroupSpec& g : groups)
    for (const model::TensorSpec& t : g.tensors) {
      ++expected;
      ZERO_REQUIRE(ck.contains(t.name), InputError,
                   "checkpoint {} does not match its model_config: tensor '{}' (shape {}) is missing", res.checkpoint_dir,
                   t.name, checkpoint::shape_string(t.shape));
      ZERO_REQUIRE(ck.tensor(t.name).numel == size_t(t.numel()), InputError,
                   "checkpoint {} does not match its model_config: tensor '{}' has {} elements, the config implies "
                   "shape {} ({} elements)", res.checkpoint_dir, t.name, ck.tensor(t.name).numel,
                   checkpoint::shape_string(t.shape), t.numel());
    }
  ZERO_REQUIRE(ck.tensors().size() == expected, InputError,
               "checkpoint {} does not match its model_config: it holds {} tensors, the config implies {}",
               res.checkpoint_dir, ck.tensors().size(), expected);

  // Tokenizer files: --tokenizer (with its sibling tokenizer_config.json) or what the run used.
  model::HfExportOptions opt;
  opt.dtype = req.dtype;
  std::string tok = req.tokenizer.empty() ? extra_string(extra, "tokenizer") : req.tokenizer;
  std::string tok_cfg = req.tokenizer.empty() ? extra_string(extra, "tokenizer_config")
                                              : (fs::path(req.tokenizer).parent_path() / "tokenizer_config.json").string();
  if (!tok.empty()) {
    ZERO_REQUIRE(fs::is_regular_file(tok), InputError,
                 "tokenizer file {} (named by {}) is missing{}; pass --tokenizer PATH/tokenizer.json", tok,
                 req.tokenizer.empty() ? manifest_path + ": trainer.extra.tokenizer" : std::string("--tokenizer"),
                 fs::path(tok).is_relative() ? " (a relative path is taken from the current directory: run export "
                                               "where training ran)" : "");
    opt.extra_files.push_back({tok, "tokenizer.json"});
    res.copied.push_back("tokenizer.json");
    if (!tok_cfg.empty() && fs::is_regular_file(tok_cfg)) {
      opt.extra_files.push_back({tok_cfg, "tokenizer_config.json"});
      res.copied.push_back("tokenizer_config.json");
    }
  }
  // HF needs pad_token_id to score batches (it pools the rightmost non-pad token): when the run's config
  // has none, take the tokenizer's pad (and eos) tokens, as pmtrain's data pipeline does.
  if (!tok.empty() && (res.config.pad_token_id < 0 || res.config.eos_token_ids.empty())) {
    try {
      const data::Tokenizer t = data::Tokenizer::from_file(tok);
      if (res.config.pad_token_id < 0 && t.pad_id() >= 0 && t.pad_id() < res.config.vocab_size) {
        res.config.pad_token_id = t.pad_id();
        res.notes.push_back(fmt::format("pad_token_id {} from the tokenizer", t.pad_id()));
      }
      if (res.config.eos_token_ids.empty() && t.eos_id() >= 0 && t.eos_id() < res.config.vocab_size) {
        res.config.eos_token_ids = {t.eos_id()};
        res.notes.push_back(fmt::format("eos_token_id {} from the tokenizer", t.eos_id()));
      }
    } catch (const Error& e) {
      res.notes.push_back(fmt::format("config.json keeps pad_token_id/eos_token_id as the run had them (the "
                                      "tokenizer could not be read: {})", e.what()));
    }
  }
  opt.provenance = {{"source_checkpoint", fs::absolute(res.checkpoint_dir).lexically_normal().string()},
                    {"step", m.state.step},
                    {"optimizer_step", m.optimizer_step},
                    {"saved_world_size", m.world},
                    {"saved_stage", m.stage},
                    {"tokenizer", tok.empty() ? json(nullptr) : json(fs::absolute(tok).lexically_normal().string())},
                    {"values", "fp32 master weights"}};
  res.hf = model::export_hf_model(req.out_dir, res.config,
                                  [&](const std::string& name, std::span<float> out) { ck.read_master(name, out); }, opt);
  return res;
}

int run_export(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "-h" || a == "--help") {
      printf("%s\n", kUsage);
      return 0;
    }
  const ExportRequest req = parse_export_args(args);
  const ExportResult r = export_checkpoint(req);
  std::string files = "config.json, model.safetensors";
  for (const std::string& f : r.copied) files += ", " + f;
  printf("export: %s (step %lld) -> %s: %lld tensors, %lld parameters as %s, %.1f MiB%s; files: %s\n",
         r.checkpoint_dir.c_str(), (long long)r.step, r.hf.dir.c_str(), (long long)r.hf.tensors,
         (long long)r.hf.parameters, req.dtype == DType::BF16 ? "bf16" : "fp32",
         double(r.hf.safetensors_bytes) / (1 << 20), r.hf.replaced_previous ? " (replaced the previous export)" : "",
         files.c_str());
  if (r.copied.empty())
    printf("export: note: the checkpoint names no tokenizer; pass --tokenizer FILE to include one\n");
  else if (r.copied.size() == 1)
    printf("export: note: no tokenizer_config.json next to the tokenizer; copied tokenizer.json only\n");
  for (const std::string& n : r.notes) printf("export: note: %s\n", n.c_str());
  return 0;
}

}  // namespace zero::pmtrain
