// HF model directory -> reward-model parameters, with shape checks against config.json.
#include "model/hf_import.h"

#include <algorithm>
#include <functional>
#include <set>

#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "core/chunks.h"
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
  // fill(first, piece) for each piece of the tensor's wanted elements, in order, each then handed to the sink.
  auto in_pieces = [&](const TensorSpec& spec, const std::function<void(size_t, std::span<float>)>& fill) {
    const ElementRange want = options.elements ? options.elements(spec) : ElementRange{0, size_t(spec.numel())};
    for_each_init_piece(want, [&](size_t first, size_t count) {
      buf.assign(count, 0.0f);
      fill(first, buf);
      sink(spec.name, first, buf);
    });
  };
  for (const GroupSpec& g : groups) {
    for (const TensorSpec& spec : g.tensors) {
      wanted.insert(spec.name);
      if (!files.contains(spec.name) && spec.name == "score.weight") {
        in_pieces(spec, [&](size_t first, std::span<float> piece) {
          init_tensor_range(spec, config, options.score_seed, first, piece);
        });
        report.initialised.push_back(spec.name);
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
      in_pieces(spec, [&](size_t first, std::span<float> piece) { r.read_f32(spec.name, first, piece); });
      report.loaded.push_back(spec.name);
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
  m.report = import_hf_weights(dir, m.config, p.groups(), [&](const std::string& name, size_t first, std::span<const float> data) {
    std::copy(data.begin(), data.end(), p.param(name).begin() + ptrdiff_t(first));
  }, options);
  return m;
}

}  // namespace zero::model
