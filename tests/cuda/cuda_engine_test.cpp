// zero::Engine on the CUDA backend (CudaOps + NcclCommunicator + a TrackingAllocator over device
// memory) against the same run on the CPU backend (CpuOps + MpiCommunicator), stages 0-3, fp32 and
// bf16 (compute params and wire), with the NaN guard. The "model" writes known gradients into the
// grad views (host values, cudaMemcpy on the device side; no model math on the device yet).
//
// The runs set parameters by writing each rank's optimizer shard (optimizer_shard(g).master) and
// calling sync_params(), and read results from optimizer_shard(g) and gather(g) views, assembling the
// full master over MPI on the host: no engine call that moves host data. The last test covers those
// (init_params / set_tensor / full_master, through DeviceOps::copy_from_host / copy_to_host).
//
// Agreement: full master, m and v within 1e-6 relative (norm), gathered compute params within 1e-6
// (fp32) or one bf16 ulp per element (bf16), grad norm within 1e-9 relative (fp64 sums in another
// order), identical applied/skip decisions, lr, step, collective counters and tracked bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "comm/mpi_communicator.h"
#include "cuda/cuda_ops.h"
#include "cuda/device_allocator.h"
#include "cuda/nccl_communicator.h"
#include "tests/cuda/cuda_test_util.h"
#include "zero/engine.h"

using namespace zero;
using namespace zero::testing;

namespace {

std::vector<GroupInfo> test_groups() {
  return {
      {"embed", {{"weight", 1000, true}}},
      {"layer0", {{"w", 300, true}, {"b", 17, false}}},
      {"layer1", {{"w", 301, true}, {"b", 17, false}}},
      {"tiny", {{"scale", 5, false}}},  // smaller than some world sizes: ranks holding only padding
      {"head", {{"w", 33, true}}},
  };
}

float init_value(int g, size_t j) { return 0.1f * std::cos(0.3f * float(j) + float(g)); }
float grad_value(int step, int micro, int rank, int g, size_t j) {
  static const float amp[] = {1.0f, 0.5f, 2.0f, 0.1f, 3.0f};
  return amp[g] * std::sin(0.013f * float(j) * float(g + 1) + 0.7f * float(micro) + 1.1f * float(step) +
                           0.37f * float(rank));
}

struct Backend {
  std::unique_ptr<DeviceOps> ops;
  std::unique_ptr<Communicator> comm;
  bool device = false;
  std::unique_ptr<TrackingAllocator> new_allocator() const {
    return std::make_unique<TrackingAllocator>(device ? make_device_allocator() : make_host_allocator());
  }
  void put(void* dst, const void* src, size_t bytes) const {
    if (!bytes) return;
    if (device) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    else std::memcpy(dst, src, bytes);
  }
  void get(void* dst, const void* src, size_t bytes) const {
    if (!bytes) return;
    if (device) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    else std::memcpy(dst, src, bytes);
  }
  std::vector<float> get_floats(const void* src, DType t, size_t n) const {
    std::vector<float> out(n);
    if (t == DType::F32) {
      get(out.data(), src, n * 4);
    } else {
      std::vector<bf16> tmp(n);
      get(tmp.data(), src, n * 2);
      for (size_t i = 0; i < n; ++i) out[i] = float(tmp[i]);
    }
    return out;
  }
  void put_floats(void* dst, DType t, const std::vector<float>& v) const {
    if (t == DType::F32) {
      put(dst, v.data(), v.size() * 4);
    } else {
      std::vector<bf16> tmp(v.size());
      for (size_t i = 0; i < v.size(); ++i) tmp[i] = bf16(v[i]);
      put(dst, tmp.data(), tmp.size() * 2);
    }
  }
};

struct Scenario {
  int steps = 3;
  double divisor = 8.0;
  int nan_step = -1, nan_rank = -1, nan_group = -1;  // a NaN written into one gradient element
};

struct RunResult {
  std::vector<std::vector<float>> master, m, v;  // per group: this rank's optimizer shard
  std::vector<std::vector<float>> full_master;   // per group: assembled over ranks (numel)
  std::vector<std::vector<float>> params;        // per group: gathered compute params (numel, as fp32)
  std::vector<StepResult> steps;
  CommReport comm;
  MemoryStats mem;
};

std::vector<float> gather_full(const Engine& e, int g, const std::vector<float>& shard) {
  const auto& L = e.partition().groups[g];
  std::vector<float> full(L.padded);
  if (e.config().stage == 0) {
    full = shard;
  } else {
    MPI_Allgather(shard.data(), int(L.shard), MPI_FLOAT, full.data(), int(L.shard), MPI_FLOAT, MPI_COMM_WORLD);
  }
  full.resize(L.numel);
  return full;
}

// check_assembly: also compare the engine's host-only full_master() with gather_full. It runs collectives and
// allocates of its own, so a run whose counters and peaks are compared with the other backend's leaves it out.
RunResult run(Backend& b, const EngineConfig& cfg, const Scenario& sc, bool check_assembly = false) {
  b.comm->reset_report();
  auto alloc = b.new_allocator();
  RunResult out;
  {
    Engine e(cfg, test_groups(), *b.comm, *b.ops, *alloc);
    const int G = int(e.groups().size()), rank = b.comm->rank();
    // Parameters: each rank writes the part of the master it owns, then the engine casts and gathers.
    for (int g = 0; g < G; ++g) {
      const OptimizerShard s = e.optimizer_shard(g);
      const size_t numel = e.partition().groups[g].numel;
      std::vector<float> h(s.count);
      for (size_t i = 0; i < s.count; ++i) h[i] = s.begin + i < numel ? init_value(g, s.begin + i) : 0.0f;
      if (s.master) b.put(s.master, h.data(), h.size() * 4);
      else e.write_optimizer_state(g, 0, s.count, h.data(), nullptr, nullptr);  // split: through the engine
    }
    e.sync_params();
    for (int step = 0; step < sc.steps; ++step) {
      for (int micro = 0; micro < cfg.accum_steps; ++micro) {
        e.begin_micro_step();
        for (int g = 0; g < G; ++g) {
          e.gather(g);
          e.release(g);
        }
        e.begin_backward();
        for (int g = G - 1; g >= 0; --g) {
          e.gather(g);
          const GroupView& views = e.grad_view(g);
          size_t j = 0;  // element index inside the group
          for (const TensorView& tv : views) {
            std::vector<float> vals(tv.numel);
            for (size_t i = 0; i < tv.numel; ++i) vals[i] = grad_value(step, micro, rank, g, j + i);
            if (step == sc.nan_step && rank == sc.nan_rank && g == sc.nan_group && micro == 0 && j == 0)
              vals[tv.numel / 2] = std::nanf("");
            b.put_floats(tv.data, tv.dtype, vals);
            j += tv.numel;
          }
          e.grad_ready(g);
          e.release(g);
        }
      }
      out.steps.push_back(e.step(sc.divisor));
    }
    for (int g = 0; g < G; ++g) {
      const OptimizerShard s = e.optimizer_shard(g);
      if (s.master) {
        out.master.push_back(b.get_floats(s.master, DType::F32, s.count));
      } else {  // split: joined by the engine
        out.master.emplace_back(s.count);
        e.read_optimizer_state(g, 0, s.count, out.master.back().data(), nullptr, nullptr);
      }
      out.m.push_back(b.get_floats(s.m, DType::F32, s.count));
      out.v.push_back(b.get_floats(s.v, DType::F32, s.count));
      out.full_master.push_back(gather_full(e, g, out.master.back()));
      if (check_assembly && !b.device) {  // the assembly agrees with the engine's own (host-only today)
        const auto fm = e.full_master(g);
        EXPECT_EQ(fm, out.full_master.back()) << "group " << g;
      }
    }
    e.begin_forward();
    for (int g = 0; g < G; ++g) {
      std::vector<float> p;
      for (const TensorView& tv : e.gather(g)) {
        const auto t = b.get_floats(tv.data, tv.dtype, tv.numel);
        p.insert(p.end(), t.begin(), t.end());
      }
      e.release(g);
      out.params.push_back(p);
    }
    out.comm = b.comm->report();
  }
  out.mem = alloc->stats();  // after the engine is gone: peaks, and live back to zero
  return out;
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(b[i]) * b[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

void expect_runs_agree(const RunResult& gpu, const RunResult& cpu, const EngineConfig& cfg, const std::string& what) {
  ASSERT_EQ(gpu.steps.size(), cpu.steps.size()) << what;
  for (size_t s = 0; s < cpu.steps.size(); ++s) {
    const StepResult &a = gpu.steps[s], &b = cpu.steps[s];
    EXPECT_EQ(a.applied, b.applied) << what << " step " << s;
    EXPECT_EQ(a.step, b.step) << what << " step " << s;
    EXPECT_EQ(a.lr, b.lr) << what << " step " << s;
    EXPECT_EQ(a.bad_rank, b.bad_rank) << what << " step " << s;
    EXPECT_EQ(a.bad_group, b.bad_group) << what << " step " << s;
    if (b.applied) {
      EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-9 * b.grad_norm) << what << " step " << s;
      EXPECT_NEAR(a.clip_coef, b.clip_coef, 1e-6f) << what << " step " << s;
    }
  }
  for (size_t g = 0; g < cpu.master.size(); ++g) {
    EXPECT_LT(rel_diff(gpu.full_master[g], cpu.full_master[g]), 1e-6) << what << " full master, group " << g;
    EXPECT_LT(rel_diff(gpu.master[g], cpu.master[g]), 1e-6) << what << " master shard, group " << g;
    EXPECT_LT(rel_diff(gpu.m[g], cpu.m[g]), 1e-6) << what << " m, group " << g;
    EXPECT_LT(rel_diff(gpu.v[g], cpu.v[g]), 1e-6) << what << " v, group " << g;
    if (cfg.param_dtype == DType::F32) {
      EXPECT_LT(rel_diff(gpu.params[g], cpu.params[g]), 1e-6) << what << " params, group " << g;
    } else {  // a 1-ulp fp32 master difference may flip one bf16 rounding
      ASSERT_EQ(gpu.params[g].size(), cpu.params[g].size());
      for (size_t i = 0; i < cpu.params[g].size(); ++i)
        ASSERT_LE(std::abs(gpu.params[g][i] - cpu.params[g][i]), std::ldexp(std::abs(cpu.params[g][i]), -7) + 1e-30)
            << what << " bf16 params, group " << g << " element " << i;
    }
  }
  // The run moved the parameters (an engine that did nothing would agree with itself too).
  std::vector<float> init(cpu.full_master[0].size());
  for (size_t j = 0; j < init.size(); ++j) init[j] = init_value(0, j);
  EXPECT_GT(rel_diff(gpu.full_master[0], init), 1e-3) << what;
  for (size_t k = 0; k < size_t(Collective::Count); ++k) {
    EXPECT_EQ(gpu.comm.by[k].calls, cpu.comm.by[k].calls) << what << " " << collective_name(Collective(k));
    EXPECT_EQ(gpu.comm.by[k].elements, cpu.comm.by[k].elements) << what << " " << collective_name(Collective(k));
  }
  EXPECT_EQ(gpu.mem.peak_total, cpu.mem.peak_total) << what;
  for (size_t c = 0; c < kMemCategories; ++c) {
    EXPECT_EQ(gpu.mem.peak[c], cpu.mem.peak[c]) << what << " " << mem_category_name(MemCategory(c));
    EXPECT_EQ(gpu.mem.live[c], 0u) << what << " " << mem_category_name(MemCategory(c));
  }
}

EngineConfig config(int stage, bool bf16) {
  EngineConfig c;
  c.stage = stage;
  c.accum_steps = 2;
  c.bucket_elements = 400;  // several buckets, some holding several groups
  c.prefetch_depth = 1;
  c.adamw.weight_decay = 0.01f;
  c.schedule = {optim::ScheduleKind::Cosine, 1e-2f, 1, 10, 0.1f};
  c.clip_norm = 1.0f;
  if (bf16) {
    c.param_dtype = DType::BF16;
    c.reduce_dtype = DType::BF16;
    c.accum_dtype = DType::F32;
  }
  return c;
}

class CudaEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!all_ranks_have_cuda()) return;
    setup_mpi_device();
    gpu_ = new Backend;
    auto ops = make_cuda_ops();
    gpu_->comm = std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, ops->stream());
    gpu_->ops = std::move(ops);
    gpu_->device = true;
    cpu_ = new Backend;
    cpu_->ops = make_cpu_ops();
    cpu_->comm = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
  }
  static void TearDownTestSuite() {
    if (gpu_) gpu_->comm.reset();  // NCCL before the ops' stream
    delete gpu_;
    delete cpu_;
    gpu_ = cpu_ = nullptr;
  }
  void SetUp() override {
    if (!gpu_) ZERO_GPU_SKIP("no CUDA device on some rank");
  }
  static Backend* gpu_;
  static Backend* cpu_;
};
Backend* CudaEngine::gpu_ = nullptr;
Backend* CudaEngine::cpu_ = nullptr;

}  // namespace

TEST_F(CudaEngine, EveryStageMatchesCpuFp32) {
  for (int stage = 0; stage <= 3; ++stage) {
    const EngineConfig cfg = config(stage, false);
    const RunResult cpu = run(*cpu_, cfg, {});
    const RunResult gpu = run(*gpu_, cfg, {});
    expect_runs_agree(gpu, cpu, cfg, "fp32 stage " + std::to_string(stage));
    for (const auto& s : cpu.steps) EXPECT_TRUE(s.applied);
    run(*cpu_, cfg, {}, /*check_assembly=*/true);
  }
}

TEST_F(CudaEngine, EveryStageMatchesCpuBf16) {
  for (int stage = 0; stage <= 3; ++stage) {
    const EngineConfig cfg = config(stage, true);
    const RunResult cpu = run(*cpu_, cfg, {});
    const RunResult gpu = run(*gpu_, cfg, {});
    expect_runs_agree(gpu, cpu, cfg, "bf16 stage " + std::to_string(stage));
  }
}

TEST_F(CudaEngine, EveryStageMatchesCpuWithASplitMaster) {
  // The split master's kernels (adamw_split, split/join in transfers) against the CPU backend's loops.
  for (int stage = 0; stage <= 3; ++stage) {
    EngineConfig cfg = config(stage, true);
    cfg.split_master = true;
    const RunResult cpu = run(*cpu_, cfg, {});
    const RunResult gpu = run(*gpu_, cfg, {});
    expect_runs_agree(gpu, cpu, cfg, "split master stage " + std::to_string(stage));
    run(*cpu_, cfg, {}, /*check_assembly=*/true);
  }
}

TEST_F(CudaEngine, FixedPointSumsEqualTheCpuBitForBit) {
  // Fixed-point gradient sums (zero.world_invariant): the kernels add integers and share the conversions and
  // the optimizer's per-element math with the CPU backend, so the two engines agree exactly, not to round-off.
  for (bool bf16 : {false, true})
    for (int stage = 0; stage <= 3; ++stage) {
      EngineConfig cfg = config(stage, bf16);
      cfg.accum_dtype = cfg.reduce_dtype = DType::FX64;
      const RunResult cpu = run(*cpu_, cfg, {});
      const RunResult gpu = run(*gpu_, cfg, {});
      const std::string what = std::string(bf16 ? "bf16" : "fp32") + " params, fixed-point sums, stage " + std::to_string(stage);
      expect_runs_agree(gpu, cpu, cfg, what);
      for (size_t k = 0; k < cpu.steps.size(); ++k) {
        EXPECT_TRUE(cpu.steps[k].applied) << what;
        EXPECT_EQ(gpu.steps[k].grad_norm, cpu.steps[k].grad_norm) << what << " step " << k;
      }
      for (size_t g = 0; g < cpu.master.size(); ++g) {
        EXPECT_EQ(gpu.full_master[g], cpu.full_master[g]) << what << " full master, group " << g;
        EXPECT_EQ(gpu.m[g], cpu.m[g]) << what << " m, group " << g;
        EXPECT_EQ(gpu.v[g], cpu.v[g]) << what << " v, group " << g;
        EXPECT_EQ(gpu.params[g], cpu.params[g]) << what << " params, group " << g;
      }
    }
}

TEST_F(CudaEngine, NanGuardSkipsLikeCpu) {
  const int W = gpu_->comm->world();
  Scenario sc;
  sc.nan_step = 1;
  sc.nan_rank = W - 1;
  sc.nan_group = 2;
  for (int stage : {0, 2, 3}) {
    const EngineConfig cfg = config(stage, false);
    const RunResult cpu = run(*cpu_, cfg, sc);
    const RunResult gpu = run(*gpu_, cfg, sc);
    expect_runs_agree(gpu, cpu, cfg, "nan stage " + std::to_string(stage));
    ASSERT_EQ(gpu.steps.size(), 3u);
    EXPECT_TRUE(gpu.steps[0].applied);
    EXPECT_FALSE(gpu.steps[1].applied);
    EXPECT_EQ(gpu.steps[1].bad_rank, W - 1);
    EXPECT_EQ(gpu.steps[1].bad_group, "layer1");
    EXPECT_TRUE(gpu.steps[2].applied);
    EXPECT_EQ(gpu.steps[2].step, 2);
  }
}

TEST_F(CudaEngine, InitParamsAndFullMasterThroughHostTransfers) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (bool bf16 : {false, true}) {
      const EngineConfig cfg = config(stage, bf16);
      std::vector<std::vector<float>> master[2], params[2];
      for (int k = 0; k < 2; ++k) {
        Backend& b = k == 0 ? *cpu_ : *gpu_;
        auto alloc = b.new_allocator();
        Engine e(cfg, test_groups(), *b.comm, *b.ops, *alloc);
        e.init_params([](int g, int t, float* dst) {
          const size_t n = test_groups()[g].tensors[t].numel;
          for (size_t i = 0; i < n; ++i) dst[i] = init_value(g, i) + float(t);
        });
        e.set_tensor(4, 0, std::vector<float>(33, 0.25f).data());  // one tensor replaced afterwards
        for (int g = 0; g < int(e.groups().size()); ++g) {
          master[k].push_back(e.full_master(g));
          std::vector<float> p;
          for (const TensorView& tv : e.gather(g)) {
            const auto t = b.get_floats(tv.data, tv.dtype, tv.numel);
            p.insert(p.end(), t.begin(), t.end());
          }
          e.release(g);
          params[k].push_back(p);
        }
      }
      for (size_t g = 0; g < master[0].size(); ++g) {  // conversions are bit-exact: equal, not close
        EXPECT_EQ(master[1][g], master[0][g]) << "stage " << stage << " bf16 " << bf16 << " group " << g;
        EXPECT_EQ(params[1][g], params[0][g]) << "stage " << stage << " bf16 " << bf16 << " group " << g;
      }
      EXPECT_EQ(master[1][4], std::vector<float>(33, 0.25f));
    }
  }
}
