// CudaOps against CpuOps on the same random data, op by op: copy and add (every fp32/bf16 pair, bit
// for bit incl. round-to-nearest-even ties, overflow to inf, subnormals, NaN, inf), zero, count_nonfinite
// (exact), sum_squares (a different fixed summation order: 1e-12 relative, and bitwise repeatable),
// AdamW (fp32 and bf16 gradients: 1e-6 relative in max norm; bit-exact where both sides fuse the same operations).
// Sizes cross the kernels' grid limits (grid-stride loops) and the reduction's block count.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/check.h"
#include "core/splitmix.h"
#include "cuda/cuda_ops.h"
#include "tests/cuda/cuda_test_util.h"

using namespace zero;
using namespace zero::testing;

namespace {

constexpr size_t kBig = (size_t(1) << 20) + 4099;    // > 4096 blocks x 256 threads: grid-stride

// Floats that stress conversion and arithmetic: normal values across magnitudes, exact bf16 ties
// (low 16 bits 0x8000), subnormals, +-0, +-inf, NaNs with payloads and signs, values that round up to
// inf in bf16. `specials`: whether to include the non-finite ones.
std::vector<float> test_floats(size_t n, uint64_t seed, bool specials) {
  std::vector<float> v(n);
  uint64_t s = seed;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(s);
    const int kind = int(r % 16);
    uint32_t bits;
    if (kind == 0) {
      bits = (uint32_t(r >> 8) & 0xffff0000u) | 0x8000u;  // a tie between two bf16 values
      if ((bits & 0x7f800000u) == 0x7f800000u) bits &= 0xbfffffffu;  // keep it finite
    } else if (kind == 1) {
      bits = uint32_t(r >> 20) & 0x807fffffu;  // subnormal or zero
    } else if (kind == 2 && specials) {
      static const uint32_t sp[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa5a5a5u,
                                    0xffffffffu, 0x7f7fffffu, 0xff7fffffu, 0x00000000u, 0x80000000u};
      bits = sp[(r >> 8) % (sizeof(sp) / sizeof(sp[0]))];
    } else {
      const double u = double(r >> 11) * 0x1.0p-53;               // [0, 1)
      const double mag = std::ldexp(1.0 + u, int((r >> 3) % 40) - 20);
      bits = std::bit_cast<uint32_t>(float((r & 4) ? -mag : mag));
    }
    v[i] = std::bit_cast<float>(bits);
  }
  return v;
}

std::vector<uint8_t> as_bytes(const std::vector<float>& f, DType t) {
  std::vector<uint8_t> b(f.size() * dtype_size(t));
  if (t == DType::F32) {
    if (!b.empty()) std::memcpy(b.data(), f.data(), b.size());
  } else {
    bf16* p = reinterpret_cast<bf16*>(b.data());
    for (size_t i = 0; i < f.size(); ++i) p[i] = bf16(f[i]);
  }
  return b;
}

uint32_t elem_bits(const std::vector<uint8_t>& b, DType t, size_t i) {
  if (t == DType::F32) {
    uint32_t u;
    std::memcpy(&u, b.data() + 4 * i, 4);
    return u;
  }
  uint16_t u;
  std::memcpy(&u, b.data() + 2 * i, 2);
  return u;
}
bool elem_is_nan(const std::vector<uint8_t>& b, DType t, size_t i) {
  const uint32_t u = elem_bits(b, t, i);
  return t == DType::F32 ? (u & 0x7fffffffu) > 0x7f800000u : (u & 0x7fffu) > 0x7f80u;
}

// Bitwise equality; with nan_any, any NaN equals any NaN (x86 and CUDA pick different NaN results
// for arithmetic on NaN operands; conversions and copies must still agree bit for bit).
void expect_same(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType t, bool nan_any,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const size_t n = got.size() / dtype_size(t);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (nan_any && elem_is_nan(got, t, i) && elem_is_nan(want, t, i)) continue;
    if (elem_bits(got, t, i) != elem_bits(want, t, i) && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " got 0x" << std::hex << elem_bits(got, t, i) << " want 0x"
                    << elem_bits(want, t, i) << std::dec;
  }
  EXPECT_EQ(bad, 0u) << what;
}

struct Fixture : ::testing::Test {
  std::unique_ptr<DeviceOps> cpu = make_cpu_ops();
  std::unique_ptr<CudaOps> gpu;
  void SetUp() override {
    ZERO_SKIP_WITHOUT_CUDA();
    CUDA_CHECK(cudaSetDevice(0));
    gpu = make_cuda_ops();
  }
  // A device copy of host bytes.
  std::unique_ptr<DeviceBuffer> to_device(const std::vector<uint8_t>& h) {
    auto d = std::make_unique<DeviceBuffer>(h.size());
    d->upload(h);
    return d;
  }
};

const DType kTypes[] = {DType::F32, DType::BF16};

}  // namespace

using CudaOpsTest = Fixture;

TEST_F(CudaOpsTest, CopyEveryDtypePairBitExact) {
  for (size_t n : {size_t(0), size_t(1), size_t(1000), kBig}) {
    const auto src_f = test_floats(n, 11 + n, /*specials=*/true);
    for (DType st : kTypes)
      for (DType dt : kTypes) {
        const auto src = as_bytes(src_f, st);
        std::vector<uint8_t> want(n * dtype_size(dt));
        cpu->copy(want.data(), dt, src.data(), st, n);
        auto dsrc = to_device(src);
        DeviceBuffer ddst(want.size());
        gpu->copy(ddst.get(), dt, dsrc->get(), st, n);
        gpu->synchronize();
        expect_same(ddst.download<uint8_t>(want.size()), want, dt, /*nan_any=*/false,
                    fmt::format("copy {} <- {} n={}", dtype_name(dt), dtype_name(st), n));
      }
  }
}

TEST_F(CudaOpsTest, AddEveryDtypePairInFp32) {
  for (size_t n : {size_t(1), size_t(777), kBig}) {
    const auto a_f = test_floats(n, 21 + n, true), b_f = test_floats(n, 31 + n, true);
    for (DType st : kTypes)
      for (DType dt : kTypes) {
        auto want = as_bytes(a_f, dt);
        const auto src = as_bytes(b_f, st);
        auto ddst = to_device(want);
        auto dsrc = to_device(src);
        cpu->add(want.data(), dt, src.data(), st, n);
        gpu->add(ddst->get(), dt, dsrc->get(), st, n);
        gpu->synchronize();
        expect_same(ddst->download<uint8_t>(want.size()), want, dt, /*nan_any=*/true,
                    fmt::format("add {} += {} n={}", dtype_name(dt), dtype_name(st), n));
      }
  }
}

TEST_F(CudaOpsTest, ZeroTouchesOnlyItsRange) {
  const size_t n = 10007;
  const auto f = test_floats(n, 5, false);
  for (DType t : kTypes) {
    auto want = as_bytes(f, t);
    auto d = to_device(want);
    const size_t lo = 123, len = 5000;
    gpu->zero(static_cast<char*>(d->get()) + lo * dtype_size(t), t, len);
    cpu->zero(want.data() + lo * dtype_size(t), t, len);
    gpu->synchronize();
    expect_same(d->download<uint8_t>(want.size()), want, t, false, fmt::format("zero {}", dtype_name(t)));
  }
}

TEST_F(CudaOpsTest, CountNonfiniteExact) {
  for (size_t n : {size_t(0), size_t(1), size_t(256), size_t(257), size_t(5000), kBig}) {
    const auto f = test_floats(n, 41 + n, true);
    for (DType t : kTypes) {
      const auto h = as_bytes(f, t);
      auto d = to_device(h);
      const size_t want = cpu->count_nonfinite(h.data(), t, n);
      EXPECT_EQ(gpu->count_nonfinite(d->get(), t, n), want) << dtype_name(t) << " n=" << n;
      if (n >= 5000) {
        EXPECT_GT(want, 0u);  // the data does contain some
      }
    }
  }
  // bf16 overflow: a finite fp32 value that rounds to inf in bf16 counts as non-finite there.
  const std::vector<float> big = {3.4e38f, 1.0f};
  const auto hb = as_bytes(big, DType::BF16);
  auto db = to_device(hb);
  EXPECT_EQ(gpu->count_nonfinite(db->get(), DType::BF16, 2), cpu->count_nonfinite(hb.data(), DType::BF16, 2));
}

TEST_F(CudaOpsTest, NonfiniteRunsEachCountedIntoItsOwnAccumulator) {
  // Runs of literal lengths (empty, shorter than a 16-byte head, crossing vectors, long enough for many blocks),
  // 150 of them (three launches of kMaxCountRuns), from a start one element past an aligned address; non-finite
  // values planted at each run's first and last element and one inside, so a run read one element off its bounds
  // counts wrong. The counts are the planting's own, added to accumulators that start at r + 0.5.
  const size_t lengths[] = {0, 1, 3, 7, 8, 9, 17, 64, 1000, 5000, 70001};
  std::vector<size_t> ends;
  size_t total = 0;
  for (size_t r = 0; r < 150; ++r) ends.push_back(total += lengths[r % std::size(lengths)]);
  const size_t runs = ends.size();
  const float bad_values[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), 3.4e38f};  // 3.4e38: inf once in bf16
  for (DType t : kTypes)
    for (float limit : {std::numeric_limits<float>::infinity(), 0.5f}) {
      SCOPED_TRACE(fmt::format("{} limit {}", dtype_name(t), limit));
      std::vector<float> f(total + 1, 0.25f);  // f[0] is before the first run (the misaligning element)
      std::vector<double> want(runs);
      size_t planted = 0;
      for (size_t r = 0, begin = 0; r < runs; begin = ends[r++]) {
        want[r] = double(r) + 0.5;
        const size_t n = ends[r] - begin;
        if (n == 0) continue;
        for (size_t i : std::set<size_t>{0, n / 2, n - 1}) {
          const float x = bad_values[planted++ % std::size(bad_values)];
          f[1 + begin + i] = x;
          // 3.4e38 counts in bf16 (inf there), and in fp32 only against the 0.5 limit.
          if (!(std::fabs(t == DType::BF16 ? float(bf16(x)) : x) < limit)) want[r] += 1;
        }
        if (limit == 0.5f && n > 3) {  // values at the limit count, under it do not
          f[1 + begin + 1] = -0.5f;
          want[r] += 1;
        }
      }
      const auto h = as_bytes(f, t);
      auto d = to_device(h);
      DeviceBuffer acc(runs * sizeof(double));
      std::vector<double> start(runs);
      for (size_t r = 0; r < runs; ++r) start[r] = double(r) + 0.5;
      acc.upload(start);
      gpu->accumulate_nonfinite_runs(static_cast<const char*>(d->get()) + dtype_size(t), t, ends.data(), runs,
                                     acc.as<double>(), limit);
      gpu->synchronize();
      EXPECT_EQ(acc.download<double>(runs), want);
      std::vector<double> cpu_acc = start;  // the CPU backend's loop (DeviceOps' default) agrees
      cpu->accumulate_nonfinite_runs(h.data() + dtype_size(t), t, ends.data(), runs, cpu_acc.data(), limit);
      EXPECT_EQ(cpu_acc, want);
    }
}

TEST_F(CudaOpsTest, FixedPointSumsAndLimitedCountsEqualTheCpu) {
  // zero.world_invariant's ops through CudaOps: terms into fixed point (copy and add from fp32 and bf16), the
  // count of values not under the fixed-point limit (NaN and inf included), and the exact sum of squares
  // accumulated in device memory: the CPU backend's results bit for bit.
  for (size_t n : {size_t(1), size_t(777), kBig}) {
    auto f = test_floats(n, 61 + n, true);
    for (size_t i = 0; i < n; i += 97) f[i] = 20000.0f * ((i & 1) ? 1.0f : -1.0f);  // past the limit
    // Sums take finite terms only (the engine skips a step with others before they reach one).
    const auto finite = test_floats(n, 71 + n, false);
    for (DType t : kTypes) {
      const auto h = as_bytes(f, t);
      auto d = to_device(h);
      double want_bad = 0;
      cpu->accumulate_nonfinite(h.data(), t, n, &want_bad, math::kFixedTermLimit);
      DeviceBuffer acc(sizeof(double));
      gpu->accumulate_nonfinite(d->get(), t, n, acc.as<double>(), math::kFixedTermLimit);
      gpu->synchronize();
      EXPECT_EQ(acc.download<double>(1)[0], want_bad) << dtype_name(t) << " n=" << n;
      EXPECT_GE(want_bad, double(n / 97));

      const auto hf = as_bytes(finite, t);
      auto df = to_device(hf);
      std::vector<int64_t> want(n);
      cpu->copy(want.data(), DType::FX64, hf.data(), t, n);
      cpu->add(want.data(), DType::FX64, hf.data(), t, n);
      DeviceBuffer q(n * 8);
      gpu->copy(q.get(), DType::FX64, df->get(), t, n);
      gpu->add(q.get(), DType::FX64, df->get(), t, n);
      gpu->synchronize();
      EXPECT_EQ(q.download<int64_t>(n), want) << dtype_name(t) << " n=" << n;

      math::FixedSquareSum want_sq;
      cpu->accumulate_fixed_square_sum(want.data(), n, &want_sq);
      DeviceBuffer sq(sizeof(math::FixedSquareSum));
      gpu->accumulate_fixed_square_sum(q.as<int64_t>(), n, sq.as<math::FixedSquareSum>());
      gpu->accumulate_fixed_square_sum(q.as<int64_t>(), n, sq.as<math::FixedSquareSum>());  // accumulates
      want_sq.add(want_sq);
      gpu->synchronize();
      const auto got = sq.download<uint64_t>(3);
      for (int w = 0; w < 3; ++w) EXPECT_EQ(got[size_t(w)], want_sq.w[w]) << dtype_name(t) << " n=" << n << " word " << w;
    }
  }
}

TEST_F(CudaOpsTest, SumSquaresFp64WithinTolerance) {
  // Stated tolerance: 1e-12 relative. Both sides add fp64 squares of the same fp32 values; only the
  // order differs (the CPU sequentially, the GPU in a fixed two-pass tree), so the difference is a
  // few fp64 roundings per term at worst (n x 2^-53 ~ 1e-10 bound; 1e-14 seen in practice).
  for (size_t n : {size_t(0), size_t(1), size_t(255), size_t(256), size_t(257), size_t(131072), kBig}) {
    const auto f = test_floats(n, 51 + n, false);
    for (DType t : kTypes) {
      const auto h = as_bytes(f, t);
      auto d = to_device(h);
      const double want = cpu->sum_squares(h.data(), t, n);
      const double got = gpu->sum_squares(d->get(), t, n);
      if (std::isfinite(want))
        EXPECT_NEAR(got, want, 1e-12 * std::abs(want)) << dtype_name(t) << " n=" << n;
      else  // a value past bf16's range rounds to inf: both sides must say inf
        EXPECT_EQ(got, want) << dtype_name(t) << " n=" << n;
      // Deterministic: the same input gives the same bits.
      const double again = gpu->sum_squares(d->get(), t, n);
      EXPECT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(again)) << dtype_name(t) << " n=" << n;
    }
  }
  // Non-finite input propagates as on the CPU (inf or NaN, not a finite number).
  const std::vector<float> bad = {1.0f, std::numeric_limits<float>::infinity(), 2.0f};
  auto db = to_device(as_bytes(bad, DType::F32));
  EXPECT_FALSE(std::isfinite(gpu->sum_squares(db->get(), DType::F32, 3)));
}

TEST_F(CudaOpsTest, AdamWMatchesCpu) {
  // Stated tolerance: max |gpu - cpu| <= 1e-6 max |cpu| per field (param, m, v) after three steps. Both sides
  // run core/math/adamw_math.h's update on optim::adamw_scalars, so elements should agree bit for bit; the
  // count is printed.
  optim::AdamWConfig c;
  const float peak_lr = 1e-2f;
  c.beta1 = 0.9f;
  c.beta2 = 0.95f;
  c.eps = 1e-8f;
  c.weight_decay = 0.1f;
  const size_t n = kBig;
  for (DType gt : kTypes)
    for (bool decay : {true, false}) {
      std::vector<float> p = test_floats(n, 61, false), m(n, 0.0f), v(n, 0.0f);
      for (auto& x : p) x = std::isfinite(x) ? std::clamp(x, -10.0f, 10.0f) : 0.5f;
      DeviceBuffer dp(n * 4), dm(n * 4), dv(n * 4), dg(n * dtype_size(gt));
      dp.upload(p);
      dm.upload(m);
      dv.upload(v);
      for (int64_t t = 1; t <= 3; ++t) {
        auto gf = test_floats(n, 70 + t, false);
        for (auto& x : gf) x = std::clamp(x, -1e3f, 1e3f);
        const auto g = as_bytes(gf, gt);
        dg.upload(g);
        const float lr = peak_lr * (1.0f - 0.1f * float(t)), scale = 0.37f;
        cpu->adamw(p.data(), g.data(), gt, m.data(), v.data(), n, c, lr, t, decay, scale);
        gpu->adamw(dp.as<float>(), dg.get(), gt, dm.as<float>(), dv.as<float>(), n, c, lr, t, decay, scale);
      }
      gpu->synchronize();
      const auto gp = dp.download<float>(n), gm = dm.download<float>(n), gv = dv.download<float>(n);
      size_t exact = 0;
      const std::vector<float>* want[3] = {&p, &m, &v};
      const std::vector<float>* got[3] = {&gp, &gm, &gv};
      const char* field[3] = {"param", "m", "v"};
      for (int k = 0; k < 3; ++k) {
        double max_ref = 0, max_diff = 0;
        size_t worst = 0;
        for (size_t i = 0; i < n; ++i) {
          max_ref = std::max(max_ref, std::abs(double((*want[k])[i])));
          const double d = std::abs(double((*got[k])[i]) - (*want[k])[i]);
          if (!(d <= max_diff)) max_diff = d, worst = i;  // NaN counts as worst
        }
        EXPECT_LE(max_diff, 1e-6 * max_ref) << "adamw grad " << dtype_name(gt) << " decay " << decay << " " << field[k]
                                            << ": element " << worst << " got " << (*got[k])[worst] << " want "
                                            << (*want[k])[worst];
      }
      for (size_t i = 0; i < n; ++i)
        exact += std::bit_cast<uint32_t>(gp[i]) == std::bit_cast<uint32_t>(p[i]) &&
                 std::bit_cast<uint32_t>(gm[i]) == std::bit_cast<uint32_t>(m[i]) &&
                 std::bit_cast<uint32_t>(gv[i]) == std::bit_cast<uint32_t>(v[i]);
      printf("adamw grad %s decay %d: %zu of %zu elements bit-exact\n", dtype_name(gt), int(decay), exact, n);
    }
}

TEST_F(CudaOpsTest, HostTransfersConvert) {
  const size_t n = 5003;
  const auto f = test_floats(n, 81, true);
  for (DType t : kTypes) {
    DeviceBuffer d(n * dtype_size(t));
    gpu->copy_from_host(d.get(), t, f.data(), n);
    std::vector<uint8_t> want(n * dtype_size(t));
    cpu->copy(want.data(), t, f.data(), DType::F32, n);
    expect_same(d.download<uint8_t>(want.size()), want, t, false, fmt::format("copy_from_host {}", dtype_name(t)));
    std::vector<float> back(n), want_back(n);
    gpu->copy_to_host(back.data(), d.get(), t, n);
    cpu->copy(want_back.data(), DType::F32, want.data(), t, n);
    EXPECT_EQ(std::memcmp(back.data(), want_back.data(), n * 4), 0) << "copy_to_host " << dtype_name(t);
  }
}

// Each op that returns after the stream's work waits through the waiter's guard (cuda/host_wait.h), and
// only there: pmtrain installs the NCCL communicator's, which watches every such wait under the peer
// timeout. Counted at the guard: one wait per call, and one more before a copy to or from pageable host
// memory (the stream drained first: the driver may otherwise wait inside the copy, unwatched).
TEST_F(CudaOpsTest, EveryHostWaitGoesThroughTheGuard) {
  int waits = 0;
  gpu->waiter().set_guard([&](cudaEvent_t done) {
    ++waits;
    CUDA_CHECK(cudaEventSynchronize(done));
  });
  const size_t n = 1024;
  DeviceBuffer d(n * 4);
  std::vector<float> h(n, 1.0f);
  gpu->copy_from_host(d.get(), DType::BF16, h.data(), n);
  EXPECT_EQ(waits, 2);  // pageable source
  gpu->copy_to_host(h.data(), d.get(), DType::BF16, n);
  EXPECT_EQ(waits, 4);  // pageable destination
  EXPECT_EQ(gpu->sum_squares(d.get(), DType::BF16, n), double(n));  // through pinned memory
  EXPECT_EQ(gpu->count_nonfinite(d.get(), DType::BF16, n), 0u);
  EXPECT_EQ(waits, 6);
  double x = 0;
  gpu->download(&x, d.get(), sizeof x);
  gpu->upload(d.get(), &x, sizeof x);
  gpu->synchronize();
  EXPECT_EQ(waits, 11);
  gpu->add(d.get(), DType::F32, d.get(), DType::F32, n);  // queued: no wait
  EXPECT_EQ(waits, 11);
  gpu->waiter().set_guard({});
}

TEST_F(CudaOpsTest, HostPointerIsRejectedNotFaulted) {
  std::vector<float> host(16, 1.0f);
  DeviceBuffer d(64);
  EXPECT_THROW(gpu->copy(d.get(), DType::F32, host.data(), DType::F32, 16), InternalError);
  EXPECT_THROW(gpu->sum_squares(host.data(), DType::F32, 16), InternalError);
  // The context is still usable.
  EXPECT_EQ(gpu->count_nonfinite(d.get(), DType::F32, 16), 0u);
}

TEST_F(CudaOpsTest, UnsupportedDtypeIsAConfigError) {
  DeviceBuffer a(64), b(64);
  EXPECT_FALSE(gpu->supports_storage(DType::F16));
  EXPECT_THROW(gpu->copy(a.get(), DType::F16, b.get(), DType::F32, 4), ConfigError);
  EXPECT_THROW(gpu->sum_squares(a.get(), DType::F64, 4), ConfigError);
}
