#include "pmtrain/export_command.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "checkpoint/full_tensors.h"
#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "data/tokenizer.h"
#include "model/param_layout.h"
#include "pmtrain/metrics.h"
#include "pmtrain/progress.h"
#include "pmtrain/weights.h"

namespace zero::pmtrain {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// "export: checksums of the checkpoint's files: 12.3 GiB of 84.6 GiB (15%), 2.1 GiB/s, ETA 34s"
void progress_line(const char* what, uint64_t done, uint64_t total, const Progress& p) {
  const double fraction = double(done) / double(total);
  printf("export: %s: %s of %s (%.0f%%), %s/s, ETA %s\n", what, format_bytes(double(done)).c_str(),
         format_bytes(double(total)).c_str(), 100.0 * fraction, format_bytes(double(done) / p.elapsed_s()).c_str(),
         p.eta(fraction).c_str());
  fflush(stdout);
}
}  // namespace

ExportResult export_checkpoint(const ExportRequest& req) {
  ExportResult res;
  res.checkpoint_dir = checkpoint::resolve_checkpoint_dir(req.run_dir, req.step);
  // A Qwen3-8B checkpoint is 85 GiB to hash (fp32 master, m, v) and 28 GiB of masters to read: minutes, so
  // progress lines.
  Progress hashing(req.progress_s);
  const checkpoint::CheckpointTensors ck(res.checkpoint_dir, req.verify_checksums, [&](uint64_t done, uint64_t total) {
    if (done < total && hashing.due()) progress_line("checksums of the checkpoint's files", done, total, hashing);
  });
  const checkpoint::Manifest& m = ck.manifest();
  res.step = m.state.step;
  const std::string manifest_path = (fs::path(res.checkpoint_dir) / checkpoint::kManifestName).string();

  // The model shape comes from the trainer's state: a checkpoint of another trainer has none.
  res.config = checkpoint_model_config(m, res.checkpoint_dir);

  // Every tensor the HF model needs, with the element count its shape implies, and nothing else.
  const std::vector<model::GroupSpec> groups = model::qwen3_rm_groups(res.config);
  size_t expected = 0;
  uint64_t weights = 0;  // the fp32 masters' bytes: what the export reads (its progress lines' total)
  for (const model::GroupSpec& g : groups)
    for (const model::TensorSpec& t : g.tensors) {
      ++expected;
      weights += uint64_t(t.numel()) * sizeof(float);
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
  std::string tok = req.tokenizer.empty() ? trainer_extra_string(m, "tokenizer") : req.tokenizer;
  std::string tok_cfg = req.tokenizer.empty() ? trainer_extra_string(m, "tokenizer_config")
                                              : (fs::path(req.tokenizer).parent_path() / "tokenizer_config.json").string();
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::string tokenizer_error;
  if (!tok.empty()) {
    const std::string named_by = req.tokenizer.empty() ? manifest_path + ": trainer.extra.tokenizer" : "--tokenizer";
    ZERO_REQUIRE(fs::is_regular_file(tok), InputError,
                 "tokenizer file {} (named by {}) is missing{}; pass --tokenizer PATH/tokenizer.json", tok, named_by,
                 fs::path(tok).is_relative() ? " (a relative path is taken from the current directory: run export "
                                               "where training ran)" : "");
    try {
      tokenizer = std::make_unique<data::Tokenizer>(data::Tokenizer::from_file(tok));
    } catch (const Error& e) {
      tokenizer_error = e.what();
    }
    // A --tokenizer is read before it is shipped: a file that is no tokenizer would make an export nothing can
    // load. (The run's own is the one it trained with.)
    ZERO_REQUIRE(tokenizer || req.tokenizer.empty(), InputError,
                 "tokenizer file {} (named by --tokenizer) is not a usable tokenizer.json, so the export would ship "
                 "a broken one: {}", tok, tokenizer_error);
    opt.extra_files.push_back({tok, "tokenizer.json"});
    res.copied.push_back("tokenizer.json");
    if (!tok_cfg.empty() && fs::is_regular_file(tok_cfg)) {
      opt.extra_files.push_back({tok_cfg, "tokenizer_config.json"});
      res.copied.push_back("tokenizer_config.json");
    }
  }
  // HF needs pad_token_id to score batches (it pools the rightmost non-pad token): when the run's config
  // has none, take the tokenizer's pad (and eos) tokens, as pmtrain's data pipeline does.
  if (!tok.empty() && !tokenizer && (res.config.pad_token_id < 0 || res.config.eos_token_ids.empty()))
    res.notes.push_back(fmt::format("config.json keeps pad_token_id/eos_token_id as the run had them (the "
                                    "tokenizer could not be read: {})", tokenizer_error));
  if (tokenizer) {
    const data::Tokenizer& t = *tokenizer;
    if (res.config.pad_token_id < 0 && t.pad_id() >= 0 && t.pad_id() < res.config.vocab_size) {
      res.config.pad_token_id = t.pad_id();
      res.notes.push_back(fmt::format("pad_token_id {} from the tokenizer", t.pad_id()));
    }
    if (res.config.eos_token_ids.empty() && t.eos_id() >= 0 && t.eos_id() < res.config.vocab_size) {
      res.config.eos_token_ids = {t.eos_id()};
      res.notes.push_back(fmt::format("eos_token_id {} from the tokenizer", t.eos_id()));
    }
  }
  opt.provenance = {{"source_checkpoint", fs::absolute(res.checkpoint_dir).lexically_normal().string()},
                    {"step", m.state.step},
                    {"optimizer_step", m.optimizer_step},
                    {"saved_world_size", m.world},
                    {"saved_stage", m.stage},
                    {"tokenizer", tok.empty() ? json(nullptr) : json(fs::absolute(tok).lexically_normal().string())},
                    {"values", "fp32 master weights"}};
  uint64_t weights_read = 0;
  Progress writing(req.progress_s);
  res.hf = model::export_hf_model(
      req.out_dir, res.config,
      [&](const std::string& name, std::span<float> out) {
        ck.read_master(name, out);
        weights_read += out.size_bytes();
        if (weights_read < weights && writing.due())
          progress_line("weights read and written", weights_read, weights, writing);
      },
      opt);
  return res;
}

int run_export(const ExportRequest& req) {
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
