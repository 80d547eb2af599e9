// Fixed-point gradient sums (accum and reduce dtype FX64, core/math/fixed_point.h) make a step independent
// of how its micro-batches are spread: the same 12 micro-batch gradients a step, dealt to 1, 2, 3 or 4
// ranks (sub-communicators of the test's world) at stages 0-3, give the same masters, m and v bit for bit
// and the same gradient norms, for fp32 and bf16 params; the reference is one rank at stage 0 on
// MPI_COMM_SELF, in each process. fp32 sums of the same gradients are the control: at 3 ranks they differ
// from one rank (the gradients span many magnitudes, so the order of the sums shows). Groups: a splittable
// one larger than a bucket (pieces at every world size), a two-tensor group with a no-decay bias, and small
// ones. Also: a term at the fixed-point limit skips the step on every rank and names its group.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "comm/hybrid_groups.h"
#include "core/check.h"
#include "tests/common/pmpi_counter.h"
#include "tests/engine/engine_harness.h"

using namespace zero;
using namespace zero::testing;

namespace {

constexpr int kMicroBatches = 12;  // a step's micro-batches, over all ranks: divisible by 1-4

std::vector<GroupInfo> groups() {
  return {{"embed", {{"embed.weight", 1000, true}}, true},
          {"layer0", {{"layer0.weight", 300, true}, {"layer0.bias", 17, false}}, false},
          {"layer1", {{"layer1.weight", 129, true}}, false},
          {"head", {{"head.weight", 5, true}}, false}};
}

EngineConfig config(int stage, DType param, bool fixed, int accum) {
  EngineConfig c = base_config(stage, accum);
  c.param_dtype = param;
  c.bucket_elements = 256;  // the embedding in pieces, the layers in several buckets
  c.accum_dtype = c.reduce_dtype = fixed ? DType::FX64 : DType::F32;
  return c;
}

// Micro-batch j's gradient of step s: magnitudes from 1e-7 to 10, so fp32 sums depend on their order.
float grad_value(int s, int j, int g, size_t i) {
  const uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ uint64_t(s * 131 + j * 17 + g * 7919);
  const float unit = float(int64_t(h >> 40 & 0xfffff) - 0x80000) / float(0x80000);  // [-1, 1)
  return unit * std::pow(10.0f, float(int(h % 9)) - 7.0f);
}

struct Trained {
  std::vector<float> master, m, v;
  std::vector<double> norms;
};

// `steps` steps of kMicroBatches micro-batches on `comm`; data-parallel rank r takes a contiguous block of them.
// `across`: hybrid sharding, `mpi` then being the shard group and `across` the replicas (comm/hybrid_groups.h).
// `reduce`: the wire's dtype, if not the accumulator's.
Trained train(MPI_Comm mpi, int stage, DType param, bool fixed, int steps, float spike = 0,
              MPI_Comm across = MPI_COMM_NULL, CommReport* replica_report = nullptr,
              std::optional<DType> reduce = std::nullopt) {
  auto comm = make_test_comm(mpi);
  auto replicas = across == MPI_COMM_NULL ? nullptr : make_test_comm(across);
  auto ops = make_test_ops();
  TrackingAllocator alloc{make_host_allocator()};
  const int W = comm->world() * (replicas ? replicas->world() : 1);
  const int r = replicas ? replicas->rank() * comm->world() + comm->rank() : comm->rank(), accum = kMicroBatches / W;
  EngineConfig cfg = config(stage, param, fixed, accum);
  if (reduce) cfg.reduce_dtype = *reduce;
  Engine e(cfg, groups(), *comm, *ops, alloc, replicas.get());
  EXPECT_EQ(e.data_rank(), r);
  EXPECT_EQ(e.data_world(), W);
  e.init_params([](int g, int t, float* dst) {
    const size_t n = groups()[size_t(g)].tensors[size_t(t)].numel;
    for (size_t i = 0; i < n; ++i) dst[i] = 0.02f * float(int((i * 37 + size_t(g) * 11 + size_t(t)) % 101) - 50);
  });
  const int G = int(e.groups().size());
  Trained out;
  for (int s = 0; s < steps; ++s) {
    for (int k = 0; k < accum; ++k) {
      const int j = r * accum + k;  // the global micro-batch
      // Fills n gradient values of group g starting at its flat element `begin`.
      const auto fill = [&](int g, size_t begin, void* data, DType t, size_t n) {
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = grad_value(s, j, g, begin + i);
        if (spike != 0 && g == 2 && j == kMicroBatches - 1 && begin == 0) v[0] = spike;
        ops->copy_from_host(data, t, v.data(), n);
      };
      e.begin_micro_step();
      for (int g = 0; g < G; ++g)
        for (int p = 0; p < e.num_pieces(g); ++p) {
          if (e.num_pieces(g) > 1) {
            e.gather_piece(g, p);
            e.release_piece(g, p);
          } else {
            e.gather(g);
            e.release(g);
          }
        }
      e.begin_backward();
      for (int g = G - 1; g >= 0; --g) {
        if (e.num_pieces(g) > 1) {
          for (int p = 0; p < e.num_pieces(g); ++p) {
            const PieceView& piece = e.grad_piece(g, p);
            for (const FlatRun& run : piece.runs) fill(g, run.begin, run.data, piece.dtype, run.count);
            e.piece_ready(g, p);
          }
          continue;
        }
        e.gather(g);
        size_t begin = 0;
        for (const TensorView& t : e.grad_view(g)) {
          fill(g, begin, t.data, t.dtype, t.numel);
          begin += t.numel;
        }
        e.grad_ready(g);
        e.release(g);
      }
    }
    const StepResult res = e.step(24.0);
    if (spike != 0 && std::fabs(spike) < math::kFixedTermLimit) {
      EXPECT_TRUE(res.applied) << "a term of " << spike << " is inside the fixed-point range";
      return out;
    }
    if (spike != 0) {
      EXPECT_FALSE(res.applied);
      EXPECT_EQ(res.bad_group, "layer1");
      EXPECT_EQ(res.bad_rank, W - 1);  // the rank holding the last micro-batch
      return out;
    }
    EXPECT_TRUE(res.applied);
    out.norms.push_back(res.grad_norm);
  }
  for (int g = 0; g < G; ++g) {
    for (auto [a, dst] : {std::pair{OptimArray::Master, &out.master}, {OptimArray::M, &out.m}, {OptimArray::V, &out.v}}) {
      const std::vector<float> f = e.full_optimizer_array(g, a);
      dst->insert(dst->end(), f.begin(), f.end());
    }
  }
  if (replica_report) *replica_report = e.replica_comm_report();
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Calls fn(sub-communicator) on the first w ranks of the world (others skip), for w = 1 .. world.
template <class F>
void for_each_world(F&& fn) {
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int w = 1; w <= world; ++w) {
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, rank < w ? 0 : MPI_UNDEFINED, rank, &sub);
    if (sub != MPI_COMM_NULL) {
      fn(w, sub);
      MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// Hybrid sharding: calls fn(S, shard group, replicas) for every group size S that divides the world and is
// smaller than it (none at one rank).
template <class F>
void for_each_hybrid(F&& fn) {
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int S = 1; S < world; ++S) {
    if (world % S) continue;
    const HybridComms h = split_hybrid(MPI_COMM_WORLD, S);
    fn(S, h.shard, h.replicas);
    MPI_Comm h_shard = h.shard, h_replicas = h.replicas;
    MPI_Comm_free(&h_shard);
    MPI_Comm_free(&h_replicas);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

}  // namespace

TEST(EngineWorldInvariant, FixedPointSumsGiveTheSameBitsAtAnyWorldAndStage) {
  for (DType param : {DType::F32, DType::BF16}) {
    const Trained ref = train(MPI_COMM_SELF, 0, param, true, 3);
    for_each_world([&](int w, MPI_Comm sub) {
      for (int stage = 0; stage <= 3; ++stage) {
        const Trained got = train(sub, stage, param, true, 3);
        const std::string where = fmt::format("{} params, {} ranks, stage {}", dtype_name(param), w, stage);
        EXPECT_TRUE(same_bits(got.master, ref.master)) << where << ": master differs by " << rel_diff(got.master, ref.master);
        EXPECT_TRUE(same_bits(got.m, ref.m)) << where << ": m";
        EXPECT_TRUE(same_bits(got.v, ref.v)) << where << ": v";
        EXPECT_EQ(got.norms, ref.norms) << where;
      }
    });
  }
}

TEST(EngineWorldInvariant, Fp32SumsDependOnTheWorld) {
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 3) GTEST_SKIP() << "the control needs 3 ranks";
  const Trained ref = train(MPI_COMM_SELF, 0, DType::F32, false, 3);
  for_each_world([&](int w, MPI_Comm sub) {
    if (w != 3) return;
    const Trained got = train(sub, 2, DType::F32, false, 3);
    EXPECT_FALSE(same_bits(got.master, ref.master) && got.norms == ref.norms) << "fp32 sums at 3 ranks equal 1 rank's";
    EXPECT_LT(rel_diff(got.master, ref.master), 1e-5);
  });
}

TEST(EngineWorldInvariant, ATermAtTheFixedPointLimitSkipsTheStep) {
  for_each_world([&](int, MPI_Comm sub) {
    for (int stage = 0; stage <= 3; ++stage) train(sub, stage, DType::F32, true, 1, math::kFixedTermLimit);
  });
  // Just under the limit the step is taken.
  for_each_world([&](int, MPI_Comm sub) {
    train(sub, 0, DType::F32, true, 1, std::nextafter(math::kFixedTermLimit, 0.0f));
  });
}

TEST(EngineWorldInvariant, RefusesFixedPointSumsThatCouldRoundOrOverflow) {
  EngineConfig c = config(2, DType::F32, true, 1);
  EXPECT_NO_THROW(validate(c));
  c.reduce_dtype = DType::F32;  // a fixed-point accumulator fed by a float wire
  EXPECT_THROW(validate(c), ConfigError);
  c = config(2, DType::F32, true, 1);
  c.nan_guard = false;  // nothing would refuse the terms past the range
  EXPECT_THROW(validate(c), ConfigError);
  // More micro-batches a step than the sums hold.
  auto comm = make_test_comm(MPI_COMM_SELF);
  auto ops = make_test_ops();
  TrackingAllocator alloc{make_host_allocator()};
  c = config(2, DType::F32, true, int(math::kFixedMaxTerms) + 1);
  EXPECT_THROW(Engine(c, groups(), *comm, *ops, alloc), ConfigError);
  c.accum_steps = 1;
  Engine e(c, groups(), *comm, *ops, alloc);
  EXPECT_THROW(e.set_accum_steps(int(math::kFixedMaxTerms) + 1), ConfigError);
  EXPECT_NO_THROW(e.set_accum_steps(int(math::kFixedMaxTerms)));
}

// Hybrid sharding (shard groups of S ranks, replicated across them) with fixed-point sums: the same bits as one
// rank, at every stage, and every group skips a step that one rank's gradient spoils, naming that rank.
TEST(EngineHybrid, FixedPointSumsGiveTheSameBitsInShardGroups) {
  const Trained ref = train(MPI_COMM_SELF, 0, DType::F32, true, 3);
  int ran = 0;
  for_each_hybrid([&](int S, MPI_Comm shard, MPI_Comm replicas) {
    for (int stage = 0; stage <= 3; ++stage) {
      const Trained got = train(shard, stage, DType::F32, true, 3, 0, replicas);
      const std::string where = fmt::format("groups of {} ranks, stage {}", S, stage);
      EXPECT_TRUE(same_bits(got.master, ref.master)) << where << ": master differs by " << rel_diff(got.master, ref.master);
      EXPECT_TRUE(same_bits(got.m, ref.m)) << where << ": m";
      EXPECT_TRUE(same_bits(got.v, ref.v)) << where << ": v";
      EXPECT_EQ(got.norms, ref.norms) << where;
      train(shard, stage, DType::F32, true, 1, math::kFixedTermLimit, replicas);  // skipped everywhere
      ++ran;
    }
  });
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  EXPECT_EQ(ran > 0, world > 1);
}

// fp32 sums: the replicas of a shard hold the same master bit for bit (each group steps on the same sums), close
// to one rank's; the all-reduces across replicas move each rank's owned range once a step, counted twice
// (comm_report's convention): at stages 1-3 the shard (groups of 2: 512 + 192 + 128 + 64 = 896 elements of
// embed 1000, layer0 317, layer1 129 and head 5 at 64-element alignment; groups of 1: 1600), at stage 0 the
// whole padded model (2 ranks: 1792; 1 rank: 1600).
TEST(EngineHybrid, ReplicasStayIdenticalAndMoveTheirShardOnceAStep) {
  const Trained ref = train(MPI_COMM_SELF, 0, DType::F32, false, 3);
  for_each_hybrid([&](int S, MPI_Comm shard, MPI_Comm replicas) {
    for (int stage = 0; stage <= 3; ++stage) {
      CommReport across;
      const Trained got = train(shard, stage, DType::F32, false, 3, 0, replicas, &across);
      const std::string where = fmt::format("groups of {} ranks, stage {}", S, stage);
      EXPECT_LT(rel_diff(got.master, ref.master), 1e-5) << where;
      std::vector<float> first = got.master;  // replica 0's, on every replica
      MPI_Bcast(first.data(), int(first.size()), MPI_FLOAT, 0, replicas);
      EXPECT_TRUE(same_bits(got.master, first)) << where << ": replicas differ";
      const uint64_t owned = S == 1 ? 1600 : S == 2 ? (stage == 0 ? 1792 : 896) : 0;
      if (owned > 0) {
        EXPECT_EQ(across.of(Collective::AllReduce).elements, 3 * 2 * owned) << where;
      }
      EXPECT_EQ(across.of(Collective::ReduceScatter).calls + across.of(Collective::AllGather).calls, 0u) << where;
    }
  });
}

// zero.reduce_dtype bf16 under hybrid sharding: the replicas' all-reduce crosses in bf16 as the group's reductions
// do. Counted at the MPI boundary, bytes reduced by MPI_Iallreduce (at stages 1-3 only the replicas' bulk and the
// step's fp64 scalars, the same in both runs): an fp32 wire carries 2 bytes an element more over the owned range
// (groups of 2: 896 elements, of 1: 1600) each of the 3 steps; at stage 0 over the padded model (1600 at one rank
// a group, 1792 at two), which groups of 2 all-reduce inside too. At every stage the replicas still step on the same
// sums bit for bit; the result is a bf16 wire's, close to one rank's fp32 and not the fp32 wire's.
TEST(EngineHybrid, ABf16ReduceDtypeCrossesTheReplicasInBf16) {
  const Trained ref = train(MPI_COMM_SELF, 0, DType::F32, false, 3);
  for_each_hybrid([&](int S, MPI_Comm shard, MPI_Comm replicas) {
    for (int stage = 0; stage <= 3; ++stage) {
      uint64_t bytes[2];
      Trained got[2];
      for (int b = 0; b < 2; ++b) {
        pmpi_reset();
        got[b] = train(shard, stage, DType::F32, false, 3, 0, replicas, nullptr, b ? DType::BF16 : DType::F32);
        bytes[b] = pmpi_count("MPI_Iallreduce").bytes;
      }
      const std::string where = fmt::format("groups of {} ranks, stage {}", S, stage);
      const uint64_t moved = stage == 0 ? (S == 1 ? 1600 : S == 2 ? 2 * 1792 : 0) : (S == 1 ? 1600 : S == 2 ? 896 : 0);
      if (moved > 0) {
        EXPECT_EQ(bytes[0] - bytes[1], 3 * moved * 2) << where << ": fp32 " << bytes[0] << " bytes, bf16 " << bytes[1];
      }
      std::vector<float> first = got[1].master;
      MPI_Bcast(first.data(), int(first.size()), MPI_FLOAT, 0, replicas);
      EXPECT_TRUE(same_bits(got[1].master, first)) << where << ": replicas differ";
      EXPECT_LT(rel_diff(got[1].master, ref.master), 5e-5) << where;
      EXPECT_FALSE(same_bits(got[1].master, got[0].master)) << where << ": a bf16 wire gave fp32's bits";
    }
  });
}

TEST(EngineHybrid, ShardGroupsMustDivideTheWorld) {
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  EXPECT_THROW(split_hybrid(MPI_COMM_WORLD, 0), ConfigError);
  EXPECT_THROW(split_hybrid(MPI_COMM_WORLD, world + 1), ConfigError);
  if (world == 4) {
    EXPECT_THROW(split_hybrid(MPI_COMM_WORLD, 3), ConfigError);
  }
}
