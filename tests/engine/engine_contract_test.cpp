// Misuse of the engine's micro-step contract is a ConfigError naming the group (and piece) at fault, on
// every rank alike, never a step that silently trains on a stale or missing gradient: a grad_view is spent
// by its grad_ready, a group is handed in once a micro-step, step() names the group whose gradient did not
// arrive, and the stage-3 gather ring names what it holds. (docs/EMBEDDING.md, "Errors and failures".)
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/check.h"
#include "comm/mpi_communicator.h"
#include "tests/common/test_backend.h"
#include "zero/engine.h"

using namespace zero;
using namespace zero::testing;

namespace {

// Three groups in one bucket (alpha, beta, gamma); with `split_emb`, a splittable 'emb' of 2000 elements
// first, in pieces under buckets of 256.
struct Rig {
  std::unique_ptr<Communicator> comm = make_test_comm(MPI_COMM_WORLD);
  std::unique_ptr<DeviceOps> ops = make_test_ops();
  TrackingAllocator alloc{make_host_allocator()};
  std::unique_ptr<Engine> engine;

  Rig(int stage, int accum, bool split_emb = false, int prefetch_depth = 1) {
    EngineConfig c;
    c.stage = stage;
    c.accum_steps = accum;
    c.prefetch_depth = prefetch_depth;
    c.bucket_elements = split_emb ? 256 : 4096;
    std::vector<GroupInfo> groups = {{"alpha", {{"alpha.w", 10}}}, {"beta", {{"beta.w", 10}}}, {"gamma", {{"gamma.w", 20}}}};
    if (split_emb) groups.insert(groups.begin(), GroupInfo{"emb", {{"emb.w", 2000}}, true});
    engine = std::make_unique<Engine>(c, groups, *comm, *ops, alloc);
    engine->init_params([](int, int, float* dst) { dst[0] = 1.0f; });
  }
  int groups() const { return int(engine->groups().size()); }
  void forward() {
    for (int g = 0; g < groups(); ++g)
      if (engine->num_pieces(g) > 1) {
        for (int k = 0; k < engine->num_pieces(g); ++k) {
          engine->gather_piece(g, k);
          engine->release_piece(g, k);
        }
      } else {
        engine->gather(g);
        engine->release(g);
      }
  }
  // Hands in group g's gradient (zeros), or each of its pieces'.
  void hand_in(int g) {
    if (engine->num_pieces(g) > 1) {
      for (int k = 0; k < engine->num_pieces(g); ++k) {
        engine->grad_piece(g, k);
        engine->piece_ready(g, k);
      }
      return;
    }
    engine->gather(g);
    for (const TensorView& t : engine->grad_view(g)) engine->ops().zero(t.data, t.dtype, t.numel);
    engine->grad_ready(g);
    engine->release(g);
  }
  void micro_step(int skip = -1) {
    engine->begin_micro_step();
    forward();
    engine->begin_backward();
    for (int g = groups() - 1; g >= 0; --g)
      if (g != skip) hand_in(g);
  }
};

// fn throws ConfigError whose message holds every one of `parts`.
void expect_config_error(const std::function<void()>& fn, const std::vector<std::string>& parts, int stage) {
  try {
    fn();
    ADD_FAILURE() << "stage " << stage << ": no error; expected one naming " << parts.front();
  } catch (const ConfigError& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "stage " << stage << ": '" << e.what()
                                                                   << "' does not say " << p;
  }
}

}  // namespace

TEST(EngineContract, AGradViewIsSpentByItsGradReady) {
  // The second micro-step hands beta in without a grad_view of its own: the first micro-step's view (and
  // its staged gradient) must not be taken again.
  for (int stage = 0; stage <= 3; ++stage) {
    Rig r(stage, 2);
    r.micro_step();
    r.engine->begin_micro_step();
    r.forward();
    r.engine->begin_backward();
    r.hand_in(2);
    r.engine->gather(1);
    expect_config_error([&] { r.engine->grad_ready(1); }, {"grad_ready(1) without grad_view(1)", "'beta'"}, stage);
  }
}

TEST(EngineContract, AGroupIsHandedInOnceAMicroStep) {
  for (int stage = 0; stage <= 3; ++stage) {
    Rig r(stage, 1);
    r.engine->begin_micro_step();
    r.forward();
    r.engine->begin_backward();
    r.hand_in(2);
    r.engine->gather(1);
    r.engine->grad_view(1);
    r.engine->grad_ready(1);
    r.engine->grad_view(1);
    expect_config_error([&] { r.engine->grad_ready(1); }, {"'beta'", "handed in already"}, stage);
  }
}

TEST(EngineContract, APieceIsHandedInOnceAMicroStep) {
  for (int stage = 0; stage <= 3; ++stage) {
    Rig r(stage, 1, /*split_emb=*/true);
    ASSERT_GT(r.engine->num_pieces(0), 1);
    r.engine->begin_micro_step();
    r.forward();
    r.engine->begin_backward();
    for (int g = r.groups() - 1; g >= 1; --g) r.hand_in(g);
    r.engine->grad_piece(0, 1);
    r.engine->piece_ready(0, 1);
    r.engine->grad_piece(0, 1);
    expect_config_error([&] { r.engine->piece_ready(0, 1); }, {"piece 1 of group 'emb'", "handed in already"}, stage);
  }
}

TEST(EngineContract, StepAndTheNextMicroStepNameTheGroupThatDidNotArrive) {
  // alpha, beta and gamma share one bucket; beta (not the bucket's first group) is never handed in.
  for (int stage = 0; stage <= 3; ++stage) {
    {
      Rig r(stage, 1);
      r.micro_step(/*skip=*/1);
      expect_config_error([&] { r.engine->step(1.0); }, {"step()", "group 'beta' did not arrive"}, stage);
    }
    {
      Rig r(stage, 2);
      r.micro_step(/*skip=*/1);
      expect_config_error([&] { r.engine->begin_micro_step(); }, {"begin_micro_step()", "group 'beta' did not arrive"},
                          stage);
    }
    {  // a split group's missing piece is named with its piece
      Rig r(stage, 1, /*split_emb=*/true);
      r.engine->begin_micro_step();
      r.forward();
      r.engine->begin_backward();
      for (int g = r.groups() - 1; g >= 1; --g) r.hand_in(g);
      r.engine->grad_piece(0, 0);
      r.engine->piece_ready(0, 0);
      expect_config_error([&] { r.engine->step(1.0); }, {"piece 1 of group 'emb' did not arrive"}, stage);
    }
  }
}

TEST(EngineContract, TheGatherRingNamesWhatItHolds) {
  Rig r(3, 1, false, /*prefetch_depth=*/0);
  r.engine->begin_micro_step();
  r.engine->gather(0);
  if (r.comm->world() == 1) {  // one rank has no ring: its groups are read in place, any number at once
    const GroupView& beta = r.engine->gather(1);
    EXPECT_EQ(r.engine->memory_report().live_of(MemCategory::Gathered), 0u);
    EXPECT_FALSE(beta.empty());
    r.engine->release(1);
  } else {
    expect_config_error([&] { r.engine->gather(1); }, {"gathering group 'beta'", "held: 'alpha'"}, 3);
  }
  r.engine->release(0);
}
