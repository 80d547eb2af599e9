// The fixture's reward model on the engine as pmtrain assembles it (engine_config, engine_groups, the CPU
// backend), its parameters read from the fixture's safetensors, and each rank's share of the fixture's
// pairs: the set-up of the tests that run pmtrain's own training step on the fixture.
#pragma once
#include <memory>
#include <vector>

#include "checkpoint/safetensors.h"
#include "model/reward_model.h"
#include "pmtrain/config.h"
#include "pmtrain/engine_assembly.h"
#include "pmtrain/engine_params.h"
#include "tests/model/model_test_util.h"

namespace zero::pmtrain {

// Owns what the engine borrows, so it lives as long as the engine.
struct FixtureEngine {
  FixtureEngine(const Config& c, const model::Qwen3RewardModel& model, Communicator& comm,
                checkpoint::SafetensorsReader& reader)
      : ops(make_cpu_ops()),
        alloc(make_host_allocator()),
        engine(engine_config(c, comm.world(), 1, 5), engine_groups(model.groups()), comm, *ops, alloc),
        access(engine, model.groups()) {
    engine.init_params([&](int g, int t, float* dst) {
      const model::TensorSpec& s = model.groups()[g].tensors[t];
      reader.read_f32(s.name, {dst, size_t(s.numel())});
    });
  }
  std::unique_ptr<DeviceOps> ops;
  TrackingAllocator alloc;
  Engine engine;
  EngineParamAccess access;
};

// This rank's pairs of the fixture batch (pair p goes to rank p % world), chosen and rejected in turn.
inline std::vector<std::vector<int32_t>> rank_pairs(const model::testing::FixtureBatch& fb, int world, int rank) {
  std::vector<std::vector<int32_t>> mine;
  for (size_t p = size_t(rank); 2 * p + 1 < fb.seqs.size(); p += size_t(world)) {
    mine.push_back(fb.seqs[2 * p]);
    mine.push_back(fb.seqs[2 * p + 1]);
  }
  return mine;
}

}  // namespace zero::pmtrain
