#include "pmtrain/model_flops.h"

#include <string>

namespace zero::pmtrain {

namespace {
constexpr const char* kEmbeddingTensor = "model.embed_tokens.weight";  // HF's name (model/param_access.h)
}

int64_t non_embedding_params(const std::vector<model::GroupSpec>& groups) {
  int64_t n = 0;
  for (const model::GroupSpec& g : groups)
    for (const model::TensorSpec& t : g.tensors)
      if (t.name != kEmbeddingTensor) n += t.numel();
  return n;
}

double training_model_flops(const model::Qwen3Config& qc, int64_t non_embedding_params, int64_t seq, double tokens) {
  const double attention = 6.0 * double(qc.num_layers) * double(qc.num_heads) * double(qc.head_dim) * double(seq);
  return 6.0 * double(non_embedding_params) * tokens + attention * tokens;
}

double model_flops_utilisation(double flops, double seconds, double peak_tflops, int devices) {
  return flops / (seconds * peak_tflops * 1e12 * double(devices));
}

}  // namespace zero::pmtrain
