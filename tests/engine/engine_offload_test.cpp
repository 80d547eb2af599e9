// zero.offload (EngineConfig::offload_optimizer): the fp32 master, m and v in host memory, AdamW by host
// threads a chunk at a time, the params sent back up. Against the engine without it, given the same
// gradients (written into grad_view, independent of the params, so the runs cannot drift apart through a
// forward pass), at every stage, in fp32 and bf16 params: the masters, m and v and the params the model
// reads are the same bits after every round of steps. Chunks of 100 elements cut groups of ~300 and cross
// their tensor boundaries; three threads split a 360k-element tensor. The allocator holds what buffer_plan says, and
// checkpoint transfers round-trip. Under ZERO_TEST_BACKEND=scrambled (engine_mpi_test's scrambled run) the
// backend's memory is not host memory: a transfer the offload forgot would read or write garbage; and its
// copies are in flight until waited for (a download's bytes arrive at wait_transfer, an upload's buffer must be
// left alone until then), so a chunk read or refilled before its wait gives wrong bits or an error.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "core/check.h"
#include "tests/engine/engine_harness.h"

using namespace zero;
using namespace zero::testing;

namespace {

EngineConfig config(int stage, DType params, bool offload, int threads = 1, size_t chunk = 100) {
  EngineConfig c = base_config(stage, 2);
  c.param_dtype = params;
  c.offload_optimizer = offload;
  c.offload_threads = threads;
  c.offload_chunk = chunk;
  return c;
}


// Every group's full master, m and v, concatenated, as bits.
std::vector<uint32_t> optimizer_bits(Engine& e) {
  std::vector<uint32_t> out;
  for (OptimArray a : {OptimArray::Master, OptimArray::M, OptimArray::V})
    for (int g = 0; g < int(e.groups().size()); ++g)
      for (float x : e.full_optimizer_array(g, a)) out.push_back(std::bit_cast<uint32_t>(x));
  return out;
}

// Every group's params as the model sees them (gathered), widened to fp32 bits.
std::vector<uint32_t> param_bits(Harness& h) {
  Engine& e = *h.engine;
  std::vector<uint32_t> out;
  e.begin_forward();
  for (int g = 0; g < int(e.groups().size()); ++g) {
    for (const TensorView& t : e.gather(g)) {
      std::vector<float> v(t.numel);
      h.ops->copy_to_host(v.data(), t.data, t.dtype, t.numel);
      for (float x : v) out.push_back(std::bit_cast<uint32_t>(x));
    }
    e.release(g);
  }
  return out;
}

size_t differing(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

// The offloaded engine against the one without, round after round.
void expect_same_training(const EngineConfig& without, const EngineConfig& with, const example::MlpSpec& spec,
                          const std::string& what) {
  Harness ref(without, spec), off(with, spec);
  const std::vector<uint32_t> start = optimizer_bits(*ref.engine);
  EXPECT_EQ(differing(start, optimizer_bits(*off.engine)), 0u) << what << ": after init";
  for (int round = 0; round < 3; ++round) {
    train_patterned(ref, 2);
    train_patterned(off, 2);
    EXPECT_EQ(differing(optimizer_bits(*ref.engine), optimizer_bits(*off.engine)), 0u)
        << what << " round " << round << ": master, m or v differ";
    EXPECT_EQ(differing(param_bits(ref), param_bits(off)), 0u) << what << " round " << round << ": params differ";
  }
  // The control: training moved the state (an engine whose step did nothing would also compare equal).
  EXPECT_GT(differing(start, optimizer_bits(*off.engine)), start.size() / 2) << what << ": training did not move it";
}

}  // namespace

TEST(EngineOffload, StepsTheSameBitsAsTheBackendAtEveryStage) {
  for (DType params : {DType::F32, DType::BF16})
    for (int stage = 0; stage <= 3; ++stage)
      expect_same_training(config(stage, params, false), config(stage, params, true), {},
                           fmt::format("stage {} {} params, 100-element chunks", stage, dtype_name(params)));
}

TEST(EngineOffload, HostThreadsSplitALargeTensorToTheSameBits) {
  example::MlpSpec wide;
  wide.dims = {12, 600, 600, 5};  // a 600 x 600 weight: 360k elements, three threads of 120k
  for (int stage : {0, 3})
    expect_same_training(config(stage, DType::BF16, false), config(stage, DType::BF16, true, 3, size_t(1) << 22),
                         wide, fmt::format("stage {}, 3 threads", stage));
}

TEST(EngineOffload, HoldsWhatTheBufferPlanSays) {
  for (int stage = 0; stage <= 3; ++stage) {
    const EngineConfig with = config(stage, DType::BF16, true), without = config(stage, DType::BF16, false);
    Harness off(with), ref(without);
    const BufferPlan plan = plan_buffers(with, off.engine->partition());
    // The staging: two chunks (100 elements, or the whole shard when smaller) of fp32 gradients and two of bf16
    // params, one copied while the host works on the other.
    const size_t staging = 2 * std::min<size_t>(plan.optimizer, 100) * (4 + 2);
    const size_t optimizer =
        plan.bytes(MemCategory::Master) + plan.bytes(MemCategory::OptimM) + plan.bytes(MemCategory::OptimV);
    EXPECT_EQ(plan.host_bytes(), optimizer + staging);
    EXPECT_EQ(plan.device_bytes() + plan.host_bytes(), plan.total_bytes());
    const MemoryStats backend = off.alloc.stats(), host = off.engine->host_memory_report();
    const size_t before = ref.alloc.stats().live_total;
    if (off.ops->host_addressable()) {  // the CPU backend: one allocator holds it all, as before plus the staging
      for (MemCategory c : {MemCategory::Master, MemCategory::OptimM, MemCategory::OptimV, MemCategory::Other})
        EXPECT_EQ(backend.live_of(c), plan.bytes(c)) << "stage " << stage << " " << mem_category_name(c);
      EXPECT_EQ(backend.live_total - before, staging) << "stage " << stage;
      EXPECT_EQ(host.live_total, 0u);
    } else {  // a device backend (the scrambled one): the optimizer and the staging leave it for the host
      for (MemCategory c : {MemCategory::Master, MemCategory::OptimM, MemCategory::OptimV}) {
        EXPECT_EQ(backend.live_of(c), 0u) << "stage " << stage << " " << mem_category_name(c);
        EXPECT_EQ(host.live_of(c), plan.bytes(c)) << "stage " << stage << " " << mem_category_name(c);
      }
      EXPECT_EQ(before - backend.live_total, optimizer) << "stage " << stage;
      EXPECT_EQ(host.live_total, plan.host_bytes()) << "stage " << stage;
    }
  }
}

TEST(EngineOffload, CheckpointTransfersRoundTrip) {
  for (int stage = 0; stage <= 3; ++stage) {
    Harness h(config(stage, DType::F32, true));
    Engine& e = *h.engine;
    for (int g = 0; g < int(e.groups().size()); ++g) {
      const size_t n = e.optimizer_shard(g).count;
      std::vector<float> in[3], out[3];
      for (int a = 0; a < 3; ++a) {
        in[a].resize(n), out[a].resize(n);
        for (size_t i = 0; i < n; ++i) in[a][i] = 0.5f * float(a + 1) + 1e-3f * float(i) + float(h.rank());
      }
      e.write_optimizer_state(g, 0, n, in[0].data(), in[1].data(), in[2].data());
      e.read_optimizer_state(g, 0, n, out[0].data(), out[1].data(), out[2].data());
      for (int a = 0; a < 3; ++a) EXPECT_EQ(in[a], out[a]) << "stage " << stage << " group " << g << " array " << a;
    }
  }
}

TEST(EngineOffload, RefusesASplitMaster) {
  EngineConfig c = config(2, DType::BF16, true);
  c.split_master = true;
  EXPECT_THROW(
      {
        try {
          validate(c);
        } catch (const ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("zero.offload optimizer keeps an fp32 master in host memory"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      ConfigError);
}
