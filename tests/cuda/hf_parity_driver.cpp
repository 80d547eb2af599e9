// The C++ half of tests/cuda/hf_parity_4b.py (transformers parity at Qwen3-4B layer shapes): loads an HF
// directory with our importer, runs one forward/backward of the reward model on CudaModelOps over a batch
// of pairs, and writes what the script compares with transformers.
//
//   hf_parity_driver HF_DIR BATCH.safetensors fp32|bf16 OUT.safetensors
//
// BATCH holds seq.<s> (I64 token ids) for s = 0..2P-1 in pair order (2i chosen, 2i+1 rejected). OUT holds
// rewards [2P] (pair order), loss [1] (sum over pairs of softplus(r_rejected - r_chosen), pmtrain's loss)
// and grad.<HF name> for every parameter (the gradient of that sum, widened to fp32). The mode picks the
// parameter and activation dtype as pmtrain's zero.param_dtype does (bf16 params -> bf16 mode). The batch
// goes through data::make_batch (packed), as pmtrain's does. The step runs twice: the first warms the GEMM
// plans and the pool, the second is timed and must repeat the first bit for bit.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/check.h"
#include "cuda/check.h"
#include "cuda/device_select.h"
#include "data/batcher.h"
#include "model/cuda/cuda_model_ops.h"
#include "model/cuda/device_params.h"
#include "model/hf_import.h"
#include "model/reward_model.h"

using namespace zero;

namespace {

data::PairDataset read_batch(const std::string& path, int64_t vocab, int32_t pad_id) {
  const checkpoint::SafetensorsReader r(path);
  data::PairDataset ds;
  ds.pad_id = pad_id;
  ds.offsets.assign(1, 0);
  for (int64_t s = 0;; ++s) {
    const std::string name = "seq." + std::to_string(s);
    if (!r.contains(name)) break;
    for (int64_t id : r.read_i64(name)) {
      ZERO_REQUIRE(id >= 0 && id < vocab, InputError, "{}: {} holds token id {} outside the vocabulary [0, {})", path,
                   name, id, vocab);
      ds.tokens.push_back(int32_t(id));
    }
    ZERO_REQUIRE(int64_t(ds.tokens.size()) > ds.offsets.back(), InputError, "{}: {} is empty", path, name);
    ds.offsets.push_back(int64_t(ds.tokens.size()));
  }
  ZERO_REQUIRE(ds.offsets.size() >= 3 && ds.offsets.size() % 2 == 1, InputError,
               "{}: want seq.0 .. seq.<2P-1> (pairs), found {} sequences", path, ds.offsets.size() - 1);
  return ds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 || (std::strcmp(argv[3], "fp32") && std::strcmp(argv[3], "bf16"))) {
    fprintf(stderr, "usage: %s HF_DIR BATCH.safetensors fp32|bf16 OUT.safetensors\n", argv[0]);
    return 2;
  }
  try {
    ZERO_REQUIRE(cuda_device_count() > 0, ConfigError, "hf_parity_driver: no CUDA device is visible");
    const DType mode = std::strcmp(argv[3], "bf16") == 0 ? DType::BF16 : DType::F32;
    const model::HfRewardModel hf = model::load_hf_reward_model(argv[1]);
    const data::PairDataset ds = read_batch(argv[2], hf.config.vocab_size, int32_t(hf.config.pad_token_id));
    std::vector<int64_t> ids(size_t(ds.num_pairs()));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i);
    data::BatchConfig bc;
    bc.layout = data::BatchLayout::Packed;
    const data::PairBatch batch = data::make_batch(ds, ids, {}, bc);

    const model::Qwen3RewardModel m(hf.config, {}, model::make_cuda_model_ops({nullptr, mode, model::AttentionKind::Auto}));
    model::DeviceParams dev(*hf.params, mode);
    const model::RewardOutput warm = m.forward_backward(batch, dev);
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto t0 = std::chrono::steady_clock::now();
    const model::RewardOutput out = m.forward_backward(batch, dev);
    CUDA_CHECK(cudaDeviceSynchronize());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const bool repeat = warm.rewards == out.rewards && warm.pairs.loss_sum == out.pairs.loss_sum;
    printf("hf_parity_driver %s: %lld pairs, %lld tokens, forward+backward %.1f ms, second run %s the first\n",
           argv[3], (long long)ds.num_pairs(), (long long)out.real_tokens, ms, repeat ? "repeats" : "DIFFERS FROM");

    // Pair order of the dataset (the batch may order its pairs otherwise).
    std::vector<float> rewards(out.rewards.size());
    for (int64_t p = 0; p < batch.num_pairs(); ++p) {
      rewards[size_t(2 * batch.pair_ids[p])] = out.rewards[size_t(2 * p)];
      rewards[size_t(2 * batch.pair_ids[p] + 1)] = out.rewards[size_t(2 * p + 1)];
    }
    const std::vector<float> loss{float(out.pairs.loss_sum)};
    std::vector<checkpoint::SafetensorsDecl> decls{{"rewards", DType::F32, {int64_t(rewards.size())}},
                                                   {"loss", DType::F32, {1}}};
    for (const model::GroupSpec& g : dev.groups())
      for (const model::TensorSpec& t : g.tensors) decls.push_back({"grad." + t.name, DType::F32, t.shape});
    checkpoint::SafetensorsWriter w(argv[4], decls, {{"mode", argv[3]}, {"forward_backward_ms", std::to_string(ms)},
                                                     {"repeats", repeat ? "1" : "0"}});
    w.write("rewards", std::span<const float>(rewards));
    w.write("loss", std::span<const float>(loss));
    const auto& groups = dev.groups();
    for (size_t g = 0; g < groups.size(); ++g)
      for (size_t t = 0; t < groups[g].tensors.size(); ++t) {
        const std::vector<float> grad = dev.grad(int(g), int(t));
        w.write("grad." + groups[g].tensors[t].name, std::span<const float>(grad));
      }
    w.finish();
    return repeat ? 0 : 3;
  } catch (const std::exception& e) {
    fprintf(stderr, "hf_parity_driver: error: %s\n", e.what());
    return 1;
  }
}
