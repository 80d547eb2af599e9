// The CPU emulation of the tiled attention kernels (model/attention_tiled.h) against plain attention:
// the eager fp32 reference attention of the CPU backend, an fp64 plain attention written here from
// the definitions (exact to fp32's eyes; it also gives the log-sum-exp), and a few values worked out by
// hand, so that a bug the eager code and the tiled code happened to share could not hide. Per-tensor
// relative L2 error ||a - b|| / ||b|| of o, lse, dq, dk, dv at most 1e-6 against both references.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/splitmix.h"
#include "model/attention.h"
#include "model/cpu/attention_reference.h"
#include "model/attention_tiled.h"
#include "tests/common/exact_attention.h"

namespace zero::model {
namespace {

using testing::cu_seqlens_of;
using testing::exact_attention;
using testing::ExactAttention;
using testing::rel_l2;
using testing::uniform;

constexpr double kTolerance = 1e-6;

struct Case {
  std::string name;
  std::vector<int32_t> lengths;
  int64_t heads = 1, kv_heads = 1, head_dim = 8;
  // q is drawn from [-q_spread, q_spread), k from [-1, 1), so the scores' standard deviation is about
  // q_spread / 3: 1 gives a nearly uniform softmax (the hardest for rounding over long rows), 4 a
  // peaked one (the running max keeps moving).
  float q_spread = 3.0f;
  AttentionTiles tiles = {};
  std::vector<int32_t> hidden = {};  // begin, end per sequence (shared-prompt pairs), or empty
};

Case make_case(std::string name, std::vector<int32_t> lengths, int64_t heads, int64_t kv_heads, int64_t head_dim,
               float q_spread = 3.0f) {
  return {std::move(name), std::move(lengths), heads, kv_heads, head_dim, q_spread};
}

// Inputs and outputs in the token-major layout of attention_tiled.h.
struct Tensors {
  std::vector<float> q, k, v, d_o;
};

struct Result {
  std::vector<float> o, lse, dq, dk, dv;
};

Tensors random_inputs(const Case& c, uint64_t seed) {
  const int64_t n = cu_seqlens_of(c.lengths).back(), d = c.head_dim;
  uint64_t state = seed;
  Tensors t;
  t.q = uniform(n * c.heads * d, c.q_spread, state);
  t.k = uniform(n * c.kv_heads * d, 1.0f, state);
  t.v = uniform(n * c.kv_heads * d, 1.0f, state);
  t.d_o = uniform(n * c.heads * d, 1.0f, state);
  return t;
}

AttentionShape shape_of(const Case& c) { return {c.heads, c.kv_heads, c.head_dim}; }

Result run_tiled(const Case& c, const Tensors& in) {
  const auto cu = cu_seqlens_of(c.lengths);
  const int64_t n = cu.back(), d = c.head_dim;
  Result r;
  r.o.resize(n * c.heads * d);
  r.lse.resize(n * c.heads);
  r.dq.resize(n * c.heads * d);
  r.dk.resize(n * c.kv_heads * d);
  r.dv.resize(n * c.kv_heads * d);
  attention_tiled_forward(in.q.data(), in.k.data(), in.v.data(), shape_of(c), cu, c.hidden, r.o.data(), r.lse.data(),
                          c.tiles);
  attention_tiled_backward(in.q.data(), in.k.data(), in.v.data(), r.o.data(), in.d_o.data(), r.lse.data(), shape_of(c),
                           cu, c.hidden, r.dq.data(), r.dk.data(), r.dv.data(), c.tiles);
  return r;
}

// The eager fp32 attention of the CPU backend (model/cpu/attention_reference.h), on the same token-major
// arrays.
Result run_eager(const Case& c, const Tensors& in) {
  const auto cu = cu_seqlens_of(c.lengths);
  const int64_t n = cu.back(), d = c.head_dim;
  Result r;
  r.o.resize(n * c.heads * d);
  r.dq.resize(n * c.heads * d);
  r.dk.resize(n * c.kv_heads * d);
  r.dv.resize(n * c.kv_heads * d);
  std::vector<float> lse(n * c.heads);
  cpu::attention_reference_forward(in.q.data(), in.k.data(), in.v.data(), shape_of(c), cu, c.hidden, n, r.o.data(),
                                   lse.data());
  cpu::attention_reference_backward(in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), shape_of(c), cu, c.hidden, n,
                                    r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

// fp64 plain attention (tests/common/exact_attention.h; shared-prompt pairs split into their two answers).
ExactAttention run_exact(const Case& c, const Tensors& in) {
  return testing::exact_attention_hidden(in.q, in.k, in.v, in.d_o, c.lengths, c.hidden, c.heads, c.kv_heads,
                                         c.head_dim);
}

struct Errors {
  double o = 0, lse = -1, dq = 0, dk = 0, dv = 0;  // lse < 0: not compared (the eager code keeps none)
};

Errors errors(const Result& t, const ExactAttention& ref) {
  return {rel_l2(t.o, ref.o), rel_l2(t.lse, ref.lse), rel_l2(t.dq, ref.dq), rel_l2(t.dk, ref.dk), rel_l2(t.dv, ref.dv)};
}

Errors errors(const Result& t, const Result& ref) {
  return {rel_l2(t.o, ref.o), -1.0, rel_l2(t.dq, ref.dq), rel_l2(t.dk, ref.dk), rel_l2(t.dv, ref.dv)};
}

void expect_within(const Errors& e, double tol, const std::string& what) {
  EXPECT_LE(e.o, tol) << what << ": o";
  if (e.lse >= 0) {
    EXPECT_LE(e.lse, tol) << what << ": lse";
  }
  EXPECT_LE(e.dq, tol) << what << ": dq";
  EXPECT_LE(e.dk, tol) << what << ": dk";
  EXPECT_LE(e.dv, tol) << what << ": dv";
}

void print(const std::string& what, const Errors& e) {
  const std::string lse = e.lse >= 0 ? fmt::format("{:.2e}", e.lse) : "   -    ";
  fmt::print("{:<44} o {:.2e}  lse {}  dq {:.2e}  dk {:.2e}  dv {:.2e}\n", what, e.o, lse, e.dq, e.dk, e.dv);
}

std::string label(const Case& c) {
  return c.name + " " + std::to_string(c.tiles.block_q) + "x" + std::to_string(c.tiles.block_k);
}

// The tiled result against the eager fp32 attention and the fp64 one, both within kTolerance.
Result check_against_plain(const Case& c, uint64_t seed) {
  const Tensors in = random_inputs(c, seed);
  const auto t0 = std::chrono::steady_clock::now();
  const Result tiled = run_tiled(c, in);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Errors vs_eager = errors(tiled, run_eager(c, in)), vs_exact = errors(tiled, run_exact(c, in));
  print(label(c) + " vs eager fp32", vs_eager);
  print(label(c) + " vs fp64", vs_exact);
  fmt::print("{:<44} tiled forward + backward {:.2f} s\n", label(c), secs);
  expect_within(vs_eager, kTolerance, label(c) + " vs eager fp32");
  expect_within(vs_exact, kTolerance, label(c) + " vs fp64");
  return tiled;
}

// Tile edges: shorter than a tile, one short of, exactly and one past one and two tiles of 64.
const std::vector<int32_t> kTileEdges{63, 64, 65, 127, 128, 129, 1};

TEST(AttentionTiled, MatchesPlainAttentionAtTileEdgesAndGqaRatios) {
  check_against_plain(make_case("edges gqa1 d16", kTileEdges, 2, 2, 16), 1);
  check_against_plain(make_case("edges gqa2 d8", {1, 129, 64, 63, 128, 65, 127}, 4, 2, 8), 2);
  check_against_plain(make_case("edges gqa4 d16", kTileEdges, 4, 1, 16), 3);
  check_against_plain(make_case("ragged gqa4 d8 peaked", {300, 1, 37, 512, 2, 200}, 8, 2, 8, 4.0f), 4);
  check_against_plain(make_case("ragged gqa2 d128", {65, 190, 1, 256}, 4, 2, 128), 5);
}

TEST(AttentionTiled, MatchesPlainAttentionAtLength2048) {
  check_against_plain(make_case("2048 gqa2 d16", {2048, 3}, 2, 1, 16), 6);
  check_against_plain(make_case("2048 gqa1 d8 flat", {2048}, 1, 1, 8, 1.0f), 7);
  check_against_plain(make_case("2048 gqa2 d128", {2048}, 2, 1, 128), 8);
}

// Shared-prompt pairs (core/math/attention_mask.h): sequences [shared | chosen rest | rejected rest] whose
// rejected rest does not see the chosen rest, against the fp64 attention of the two answers computed apart
// (exact_attention_hidden: no mask code). Spans inside one tile, across tile edges and past 64-token tiles,
// a one-token chosen rest, a one-token shared prompt, and plain sequences (span 0, 0) between them.
TEST(AttentionTiled, SharedPromptPairsMatchTheirAnswersAlone) {
  Case c = make_case("shared gqa2 d16", {40, 9, 200, 130, 70, 3}, 4, 2, 16);
  c.hidden = {10, 25, 0, 0, 60, 140, 64, 65, 1, 35, 1, 2};
  check_against_plain(c, 12);
  for (const AttentionTiles tiles : {AttentionTiles{16, 32}, AttentionTiles{7, 3}, AttentionTiles{128, 128}}) {
    Case t = c;
    t.tiles = tiles;
    check_against_plain(t, 12);
  }
  Case d = make_case("shared gqa4 d128 peaked", {700, 129}, 8, 2, 128, 4.0f);
  d.hidden = {300, 520, 64, 128};
  check_against_plain(d, 13);
}

// The result depends on the tiling only through rounding: every tiling within kTolerance of plain
// attention, and of the default 64x64 tiling.
TEST(AttentionTiled, TilingChangesOnlyRounding) {
  const Case base = make_case("tilings gqa2 d16", {63, 64, 65, 1, 129, 200, 17}, 4, 2, 16);
  const Tensors in = random_inputs(base, 9);
  const Result reference_tiling = run_tiled(base, in);
  for (const AttentionTiles tiles : {AttentionTiles{16, 32}, AttentionTiles{32, 16}, AttentionTiles{64, 16},
                                     AttentionTiles{16, 64}, AttentionTiles{48, 80}, AttentionTiles{128, 128},
                                     AttentionTiles{1, 1}, AttentionTiles{7, 3}}) {
    Case c = base;
    c.tiles = tiles;
    const Result tiled = check_against_plain(c, 9);
    const Errors vs_64 = errors(tiled, reference_tiling);
    print(label(c) + " vs 64x64", vs_64);
    expect_within(vs_64, kTolerance, label(c) + " vs 64x64");
  }
}

// d = 2, one head, one sequence of 2 tokens, scale 1/sqrt(2), worked by hand (a = 1/sqrt(2)):
//   q0 = (1, 0), q1 = (1, 1);  k0 = (1, 0), k1 = (0, -1);  v0 = (1, 0), v1 = (0, 2);  dO0 = (1, 0), dO1 = (0, 1).
//   Query 0 sees key 0 only: o0 = v0, lse0 = s00 = a.
//   Query 1: s10 = a, s11 = -a, so p10 = 1 / (1 + e^(-2a)) = 0.80442968..., p11 = 1 - p10;
//     o1 = (p10, 2 p11), lse1 = a + log(1 + e^(-2a)) = 0.92472850...
//   dV_j = sum_i p_ij dO_i: dv0 = dO0 + p10 dO1 = (1, p10), dv1 = p11 dO1 = (0, p11).
//   dp_ij = dO_i . v_j, D_i = dO_i . o_i: dp00 = D0 = 1 so ds00 = 0; dp10 = 0, dp11 = 2, D1 = 2 p11, so
//     ds10 = p10 (0 - 2 p11) = -2 p10 p11, ds11 = p11 (2 - 2 p11) = 2 p10 p11.
//   With c = a * 2 p10 p11 = 0.22248771...: dq0 = 0, dq1 = a (ds10 k0 + ds11 k1) = (-c, -c),
//     dk0 = a (ds00 q0 + ds10 q1) = (-c, -c), dk1 = a ds11 q1 = (c, c).
TEST(AttentionTiled, TwoTokensWorkedByHand) {
  const std::vector<float> q{1, 0, 1, 1}, k{1, 0, 0, -1}, v{1, 0, 0, 2}, d_o{1, 0, 0, 1};
  const double a = 0.70710678118654752, p10 = 0.80442968250695690, p11 = 0.19557031749304310,
               c = 0.22248770991097155, lse1 = 0.92472850276829120;
  const std::vector<double> o{1, 0, p10, 2 * p11}, lse{a, lse1}, dq{0, 0, -c, -c}, dk{-c, -c, c, c},
      dv{1, p10, 0, p11};
  const std::vector<int32_t> cu{0, 2};
  for (const AttentionTiles tiles :
       {AttentionTiles{}, AttentionTiles{1, 1}, AttentionTiles{1, 2}, AttentionTiles{2, 1}}) {
    Result r{std::vector<float>(4), std::vector<float>(2), std::vector<float>(4), std::vector<float>(4),
             std::vector<float>(4)};
    attention_tiled_forward(q.data(), k.data(), v.data(), {1, 1, 2}, cu, {}, r.o.data(), r.lse.data(), tiles);
    attention_tiled_backward(q.data(), k.data(), v.data(), r.o.data(), d_o.data(), r.lse.data(), {1, 1, 2}, cu, {},
                             r.dq.data(), r.dk.data(), r.dv.data(), tiles);
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(r.o[i], o[i], 1e-7) << i;
      EXPECT_NEAR(r.dq[i], dq[i], 1e-7) << i;
      EXPECT_NEAR(r.dk[i], dk[i], 1e-7) << i;
      EXPECT_NEAR(r.dv[i], dv[i], 1e-7) << i;
    }
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(r.lse[i], lse[i], 1e-7) << i;
  }
}

// A one-token sequence attends to itself alone: softmax weight exactly 1, so o = v and dv = dO to the
// bit, lse = its one score, and dq = dk = 0 (the softmax of one element is constant) up to rounding:
// ds = p (dp - D) with dp = dO.v and D = dO.o = dO.v summed by different code, as in the kernels; seen
// ~1e-8. Placed between longer sequences, so a tile that reads past a sequence's end would show.
TEST(AttentionTiled, OneTokenSequencesReturnV) {
  const Case c = make_case("ones", {1, 5, 1, 70, 1}, 2, 2, 16);
  const Tensors in = random_inputs(c, 11);
  const Result r = run_tiled(c, in);
  const auto cu = cu_seqlens_of(c.lengths);
  const int64_t d = c.head_dim;
  for (size_t si = 0; si < c.lengths.size(); ++si) {
    if (c.lengths[si] != 1) continue;
    const int64_t t = cu[si];
    for (int64_t h = 0; h < c.heads; ++h) {
      double score = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        const int64_t qi = (t * c.heads + h) * d + i, ki = (t * c.kv_heads + h) * d + i;
        EXPECT_EQ(r.o[qi], in.v[ki]);
        EXPECT_EQ(r.dv[ki], in.d_o[qi]);
        EXPECT_NEAR(r.dq[qi], 0.0f, 1e-6);
        EXPECT_NEAR(r.dk[ki], 0.0f, 1e-6);
        score += double(in.q[qi]) * in.k[ki];
      }
      EXPECT_NEAR(r.lse[t * c.heads + h], score / std::sqrt(double(d)), 1e-6);
    }
  }
}

}  // namespace
}  // namespace zero::model
