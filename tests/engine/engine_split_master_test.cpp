// A split master (EngineConfig::split_master: the fp32 master kept as the bf16 params plus 16 low bits) is
// the fp32 master bit for bit: two engines with bf16 params, one with a master array of its own and one
// split, given the same gradients (written into grad_view, independent of the params, so the runs cannot
// drift apart through their forward passes), hold the same masters after every step at every stage; the
// split one's params are its masters rounded half away from zero (the fp32 one's: to nearest even); its
// master buffer is half as large (counted by the allocator); and checkpoint transfers round-trip.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "tests/engine/engine_harness.h"

using namespace zero;
using namespace zero::testing;

namespace {

// The two roundings to bf16 bits, written out here (not core/math's): half away from zero, and to nearest
// with ties to even.
uint16_t round_away(float x) { return uint16_t((std::bit_cast<uint32_t>(x) + 0x8000u) >> 16); }
uint16_t round_even(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

EngineConfig config(int stage, bool split) {
  EngineConfig c = base_config(stage, 2);
  c.param_dtype = DType::BF16;
  c.split_master = split;
  return c;
}


std::vector<float> masters(Engine& e) {
  std::vector<float> out;
  for (int g = 0; g < int(e.groups().size()); ++g) {
    const std::vector<float> f = e.full_master(g);
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

// Every group's params as the model sees them (gathered), as bf16 bits.
std::vector<uint16_t> params(Harness& h) {
  Engine& e = *h.engine;
  std::vector<uint16_t> out;
  e.begin_forward();
  for (int g = 0; g < int(e.groups().size()); ++g) {
    const GroupView& view = e.gather(g);
    for (const TensorView& t : view) {
      std::vector<float> v(t.numel);
      h.ops->copy_to_host(v.data(), t.data, t.dtype, t.numel);
      for (float x : v) out.push_back(uint16_t(std::bit_cast<uint32_t>(x) >> 16));  // bf16 widened exactly: its bits are the top
    }
    e.release(g);
  }
  return out;
}

}  // namespace

TEST(EngineSplitMaster, IsTheFp32MasterBitForBitAtEveryStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    Harness whole(config(stage, false)), split(config(stage, true));
    ASSERT_EQ(masters(whole.engine.operator*()), masters(*split.engine)) << "stage " << stage << " after init";
    for (int round = 0; round < 3; ++round) {
      train_patterned(whole, 2);
      train_patterned(split, 2);
      const std::vector<float> mw = masters(*whole.engine), ms = masters(*split.engine);
      ASSERT_EQ(mw.size(), ms.size());
      size_t differ = 0;
      for (size_t i = 0; i < mw.size(); ++i) differ += std::bit_cast<uint32_t>(mw[i]) != std::bit_cast<uint32_t>(ms[i]);
      EXPECT_EQ(differ, 0u) << "stage " << stage << " round " << round << ": masters differ";
      const std::vector<uint16_t> pw = params(whole), ps = params(split);
      ASSERT_EQ(pw.size(), mw.size());
      size_t away = 0, even = 0;
      for (size_t i = 0; i < mw.size(); ++i) {
        away += ps[i] != round_away(ms[i]);
        even += pw[i] != round_even(mw[i]);
      }
      EXPECT_EQ(away, 0u) << "stage " << stage << ": split params are not the masters rounded half away from zero";
      EXPECT_EQ(even, 0u) << "stage " << stage << ": fp32-master params are not the masters rounded to even";
    }
    EXPECT_GT(rel_diff(masters(*split.engine), masters(*Harness(config(stage, true)).engine)), 1e-3)
        << "stage " << stage << ": training did not move the masters";
  }
}

TEST(EngineSplitMaster, HalvesTheMasterBuffer) {
  for (int stage = 0; stage <= 3; ++stage) {
    Harness whole(config(stage, false)), split(config(stage, true));
    const size_t w = whole.alloc.stats().live_of(MemCategory::Master), s = split.alloc.stats().live_of(MemCategory::Master);
    EXPECT_GT(w, 0u);
    EXPECT_EQ(2 * s, w) << "stage " << stage;
    EXPECT_EQ(s, plan_buffers(config(stage, true), split.engine->partition()).bytes(MemCategory::Master));
    // Everything else is the same size.
    EXPECT_EQ(whole.alloc.stats().live_total - w, split.alloc.stats().live_total - s) << "stage " << stage;
  }
}

TEST(EngineSplitMaster, CheckpointTransfersRoundTripExactly) {
  // Masters written through write_optimizer_state (a checkpoint's load) come back bit for bit, including
  // values on a rounding tie and ones whose high half carries into the exponent, and the params become
  // their high halves rounded away from zero.
  for (int stage = 0; stage <= 3; ++stage) {
    Harness h(config(stage, true));
    Engine& e = *h.engine;
    std::vector<float> written;
    for (int g = 0; g < int(e.groups().size()); ++g) {
      const OptimizerShard s = e.optimizer_shard(g);
      ASSERT_EQ(s.master, nullptr);
      std::vector<float> m(s.count), mm(s.count, 0.5f), vv(s.count, 0.25f);
      for (size_t i = 0; i < s.count; ++i) {
        const uint32_t hi = 0x3f80u + uint32_t((s.begin + i) % 200), lo[] = {0x8000u, 0x7fffu, 0xffffu, 0x0001u, 0x1234u};
        m[i] = std::bit_cast<float>((hi << 16) | lo[(s.begin + i) % 5]);
        if ((s.begin + i) % 7 == 0) m[i] = -m[i];
      }
      // Padding past the group's numel stays zero (the engine never writes it).
      const size_t numel = e.partition().groups[g].numel;
      for (size_t i = 0; i < s.count; ++i)
        if (s.begin + i >= numel) m[i] = 0;
      e.write_optimizer_state(g, 0, s.count, m.data(), mm.data(), vv.data());
      std::vector<float> back(s.count), mb(s.count), vb(s.count);
      e.read_optimizer_state(g, 0, s.count, back.data(), mb.data(), vb.data());
      EXPECT_EQ(0, std::memcmp(back.data(), m.data(), 4 * s.count)) << "stage " << stage << " group " << g;
      EXPECT_EQ(mb, mm);
      EXPECT_EQ(vb, vv);
    }
    e.sync_params();
    written = masters(e);
    const std::vector<uint16_t> p = params(h);
    ASSERT_EQ(p.size(), written.size());
    size_t away = 0, ties = 0, tie_rounded_even = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      away += p[i] != round_away(written[i]);
      const bool tie = (std::bit_cast<uint32_t>(written[i]) & 0xffffu) == 0x8000u;
      ties += tie;
      tie_rounded_even += tie && p[i] == round_even(written[i]) && round_even(written[i]) != round_away(written[i]);
    }
    EXPECT_EQ(away, 0u) << "stage " << stage;
    EXPECT_GT(ties, 0u);
    EXPECT_EQ(tie_rounded_even, 0u) << "stage " << stage << ": a tie rounded to even";
  }
}

// set_tensor_range (pmtrain's init and HF import, a piece at a time) sets what set_tensor sets whole: an
// engine zeroed and then set in pieces of 7 elements (crossing shard and tensor edges) holds the masters and
// params of one set whole, at every stage, with and without a split master.
TEST(EngineSetTensor, InPiecesIsWhole) {
  for (int stage = 0; stage <= 3; ++stage)
    for (bool split : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "stage " << stage << (split ? ", split master" : ""));
      Harness whole(config(stage, split)), pieces(config(stage, split));
      Engine& e = *pieces.engine;
      for (int g = 0; g < int(e.groups().size()); ++g)
        for (int t = 0; t < int(e.groups()[g].tensors.size()); ++t) {
          std::vector<float> v(e.groups()[g].tensors[t].numel, 0.0f);
          e.set_tensor(g, t, v.data());
          pieces.model.init(g, t, v.data());
          for (size_t first = 0; first < v.size(); first += 7)
            e.set_tensor_range(g, t, first, std::min<size_t>(7, v.size() - first), v.data() + first);
        }
      EXPECT_EQ(masters(*pieces.engine), masters(*whole.engine));
      EXPECT_EQ(params(pieces), params(whole));
    }
}

// kept_tensor_range is all a rank needs: an engine zeroed and then given only each tensor's kept range holds
// the masters and params of one set whole, at every stage, with and without a split master. Where it saves
// work, at stage 3 on several ranks, the ranks' ranges cover each tensor exactly once (their counts summed
// over the ranks, at the MPI boundary, are its size) and some rank is given less than all of a tensor.
TEST(EngineSetTensor, KeptRangeIsEnough) {
  for (int stage = 0; stage <= 3; ++stage)
    for (bool split : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "stage " << stage << (split ? ", split master" : ""));
      Harness whole(config(stage, split)), kept(config(stage, split));
      Engine& e = *kept.engine;
      std::vector<double> counts;  // per tensor, this rank's kept elements
      size_t partial = 0;          // tensors of which this rank keeps less than all
      for (int g = 0; g < int(e.groups().size()); ++g)
        for (int t = 0; t < int(e.groups()[g].tensors.size()); ++t) {
          std::vector<float> v(e.groups()[g].tensors[t].numel, 0.0f);
          e.set_tensor(g, t, v.data());
          kept.model.init(g, t, v.data());
          const ElementRange r = e.kept_tensor_range(g, t);
          ASSERT_LE(r.first + r.count, v.size());
          if (r.count > 0) e.set_tensor_range(g, t, r.first, r.count, v.data() + r.first);
          counts.push_back(double(r.count));
          partial += r.count < v.size();
          if (stage < 3) {
            EXPECT_EQ(r.count, v.size()) << "group " << g << " tensor " << t << ": full params, all kept";
          }
        }
      EXPECT_EQ(masters(*kept.engine), masters(*whole.engine));
      EXPECT_EQ(params(kept), params(whole));
      if (stage < 3 || kept.world() == 1) continue;
      EXPECT_GT(partial, 0u) << "rank " << kept.rank() << " keeps every tensor whole at stage 3";
      std::vector<double> sums = counts;
      kept.comm->all_reduce_scalars(sums.data(), sums.size(), ReduceOp::Sum);
      size_t i = 0;
      for (int g = 0; g < int(e.groups().size()); ++g)
        for (int t = 0; t < int(e.groups()[g].tensors.size()); ++t, ++i)
          EXPECT_EQ(sums[i], double(e.groups()[g].tensors[t].numel)) << "group " << g << " tensor " << t;
    }
}
