// HF model directory -> reward-model parameters, with shape checks against config.json.
#include "model/hf_import.h"

#include <set>

#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "model/init.h"

namespace zero::model {

ImportReport import_hf_weights(const std::filesystem::path& dir, const Qwen3Config& config,
                               const std::vector<GroupSpec>& groups, const TensorSink& sink,
                               const ImportOptions& options) {
  const checkpoint::SafetensorsSet files = checkpoint::SafetensorsSet::open_model_dir(dir);
  const std::string config_path = (dir / "config.json").string();
  ImportReport report;
  report.files = files.files();
  std::set<std::string> wanted;
  std::vector<float> buf;
  for (const GroupSpec& g : groups) {
    for (const TensorSpec& spec : g.tensors) {
      wanted.insert(spec.name);
      buf.assign(size_t(spec.numel()), 0.0f);
      if (!files.contains(spec.name) && spec.name == "score.weight") {
        init_tensor(spec, config, options.score_seed, buf);
        report.initialised.push_back(spec.name);
        sink(spec.name, buf);
        continue;
      }
      ZERO_REQUIRE(files.contains(spec.name), InputError,
                   "{}: missing tensor '{}' (shape {}) in the model's safetensors files", dir.string(), spec.name,
                   checkpoint::shape_string(spec.shape));
      const checkpoint::SafetensorsReader& r = files.reader_for(spec.name);
      const checkpoint::SafetensorsTensor& t = r.tensor(spec.name);
      ZERO_REQUIRE(t.shape == spec.shape, InputError,
                   "{}: tensor '{}' has shape {} but {} implies shape {}: the weights do not match the config",
                   r.path().string(), spec.name, checkpoint::shape_string(t.shape), config_path,
                   checkpoint::shape_string(spec.shape));
      r.read_f32(spec.name, buf);
      report.loaded.push_back(spec.name);
      sink(spec.name, buf);
    }
  }
  for (const std::string& n : files.names())
    if (!wanted.count(n)) report.ignored.push_back(n);
  return report;
}

HfRewardModel load_hf_reward_model(const std::filesystem::path& dir, const ImportOptions& options) {
  HfRewardModel m;
  m.config = load_hf_config(dir / "config.json");
  m.params = std::make_unique<DenseParams>(qwen3_rm_groups(m.config, options.decay));
  DenseParams& p = *m.params;
  m.report = import_hf_weights(dir, m.config, p.groups(), [&](const std::string& name, std::span<const float> data) {
    std::span<float> dst = p.param(name);
    std::copy(data.begin(), data.end(), dst.begin());
  }, options);
  return m;
}

}  // namespace zero::model
