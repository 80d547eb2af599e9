// DeviceOps for the CPU backend: plain loops over host memory (fp32 and Eigen's bfloat16), split over the rank's
// threads (zero/parallel_parts.h) with the same bits however split: the element-wise ones (copy, add, the
// non-finite count, AdamW) by any cut, the sums of squares in blocks cut by the length alone (fixed-point
// sums: exact in any order).
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/math/bf16.h"
#include "core/math/fixed_point.h"
#include "core/math/split_master.h"
#include "zero/device_ops.h"
#include "zero/parallel_parts.h"

namespace zero {
namespace {

// Element conversions through core/math/bf16.h, the CUDA kernels' conversion (bf16 is stored as
// Eigen::bfloat16, whose bits are the bf16's).
float to_f32(float x) { return x; }
float to_f32(bf16 x) { return math::bf16_to_f32(std::bit_cast<uint16_t>(x)); }
template <class T> T from_f32(float x);
template <> float from_f32<float>(float x) { return x; }
template <> bf16 from_f32<bf16>(float x) { return std::bit_cast<bf16>(math::f32_to_bf16(x)); }

// A fixed-point sum (DType::FX64, core/math/fixed_point.h) as an element type: read as its value, written
// by rounding to the fixed-point grid. Sums into one stay integer: add() below never goes through a float.
struct Fixed64 {
  int64_t q;
};
float to_f32(Fixed64 x) { return math::from_fixed(x.q); }
template <> Fixed64 from_f32<Fixed64>(float x) { return {math::to_fixed(x)}; }

template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(static_cast<float*>(nullptr)); return;
    case DType::BF16: f(static_cast<bf16*>(nullptr)); return;
    case DType::FX64: f(static_cast<Fixed64*>(nullptr)); return;
    default: throw ConfigError(fmt::format("the cpu backend does not support {} buffers (use fp32 or bf16)", dtype_name(t)));
  }
}

// dst += src where dst is a fixed-point sum: exact integer addition of src's fixed-point value (src already
// fixed point: its integers as they are).
template <class S>
void add_fixed(Fixed64* d, const S* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<S, Fixed64>)
      d[i].q += s[i].q;
    else
      d[i].q += math::to_fixed(to_f32(s[i]));
  }
}

// fn(D* dst, const S* src) with the element types of a (dst, src) dtype pair.
template <class F>
void dispatch_pair(void* dst, DType dt, const void* src, DType st, F&& fn) {
  dispatch(dt, [&](auto* dtag) {
    using D = std::remove_pointer_t<decltype(dtag)>;
    dispatch(st, [&](auto* stag) {
      using S = std::remove_pointer_t<decltype(stag)>;
      fn(static_cast<D*>(dst), static_cast<const S*>(src));
    });
  });
}

// The values not under `limit` in magnitude: NaN always, and at limit = infinity exactly the non-finite ones.
// Counted in parts on up to `threads` threads, the parts' counts added (integers: exact in any order).
size_t count_not_under(const void* src, DType t, size_t n, float limit, int threads) {
  std::atomic<size_t> bad{0};
  dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* s = static_cast<const T*>(src);
    parallel_parts(n, threads, [&](size_t lo, size_t hi) {
      size_t count = 0;
      for (size_t i = lo; i < hi; ++i) count += !(std::fabs(to_f32(s[i])) < limit);
      bad += count;
    });
  });
  return bad.load();
}

class CpuOps final : public DeviceOps {
 public:
  explicit CpuOps(int threads) : threads_(std::max(threads, 1)) {}
  const char* name() const override { return "cpu"; }
  bool supports_storage(DType t) const override { return t == DType::F32 || t == DType::BF16 || t == DType::FX64; }

  void copy(void* dst, DType dt, const void* src, DType st, size_t n) override {
    if (dt == DType::FX64 && st == DType::FX64) {
      if (n > 0) std::memmove(dst, src, n * 8);  // see zero()
      return;
    }
    dispatch_pair(dst, dt, src, st, [&](auto* d, const auto* s) {
      using D = std::remove_pointer_t<decltype(d)>;
      parallel_parts(n, threads_, [&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) d[i] = from_f32<D>(to_f32(s[i]));
      });
    });
  }

  void add(void* dst, DType dt, const void* src, DType st, size_t n) override {
    dispatch_pair(dst, dt, src, st, [&](auto* d, const auto* s) {
      using D = std::remove_pointer_t<decltype(d)>;
      parallel_parts(n, threads_, [&](size_t lo, size_t hi) {
        if constexpr (std::is_same_v<D, Fixed64>)
          add_fixed(d + lo, s + lo, hi - lo);
        else
          for (size_t i = lo; i < hi; ++i) d[i] = from_f32<D>(to_f32(d[i]) + to_f32(s[i]));
      });
    });
  }

  // An empty buffer's data() may be null (an fp32 run's master: the params themselves), and the C library's
  // memset, memcpy and memmove take no null pointer even for 0 bytes (UBSan stops there).
  void zero(void* dst, DType dt, size_t n) override {
    if (n > 0) std::memset(dst, 0, n * dtype_size(dt));
  }

  // Eight running sums, element i into sum i mod 8, added in lane order at the end: one sum would make every
  // add wait for the one before (about 3 GB/s on a core, the step's slowest op on a small model); eight
  // independent ones run at memory speed. Past kSquareBlock elements, blocks of kSquareBlock summed so, on the
  // rank's threads, and the blocks' sums added in block order: the blocks are cut by the length alone, so the
  // result is the same at any thread count (and, up to kSquareBlock elements, the one loop's).
  static constexpr size_t kSquareBlock = size_t(1) << 16;
  double sum_squares(const void* src, DType t, size_t n) override {
    if (n <= kSquareBlock) return lane_sum_squares(src, t, 0, n);
    dispatch(t, [](auto*) {});  // an unsupported dtype throws here, not inside a thread
    std::vector<double> block((n + kSquareBlock - 1) / kSquareBlock);
    parallel_parts(block.size(), threads_, [&](size_t b0, size_t b1) {
      for (size_t b = b0; b < b1; ++b) block[b] = lane_sum_squares(src, t, b * kSquareBlock, std::min(n, (b + 1) * kSquareBlock));
    }, 1);
    double acc = 0;
    for (double s : block) acc += s;
    return acc;
  }

  size_t count_nonfinite(const void* src, DType t, size_t n) override {
    return count_not_under(src, t, n, std::numeric_limits<float>::infinity(), threads_);
  }

  void accumulate_sum_squares(const void* src, DType t, size_t n, double* acc) override { *acc += sum_squares(src, t, n); }
  void accumulate_nonfinite(const void* src, DType t, size_t n, double* acc, float limit) override {
    *acc += double(count_not_under(src, t, n, limit, threads_));
  }
  // Each part's exact sum, added into acc under a lock: integers, so the same bits in any order.
  void accumulate_fixed_square_sum(const int64_t* src, size_t n, math::FixedSquareSum* acc) override {
    std::mutex adding;
    parallel_parts(n, threads_, [&](size_t lo, size_t hi) {
      math::FixedSquareSum part;
      for (size_t i = lo; i < hi; ++i) part.add_square(src[i]);
      const std::lock_guard<std::mutex> lock(adding);
      acc->add(part);
    });
  }
  void download(void* host, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, src, bytes);  // see zero()
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, host, bytes);
  }

  void adamw(float* param, const void* grad, DType gt, float* m, float* v, size_t n, const optim::AdamWConfig& c,
             float lr, int64_t t, bool decay, float grad_scale) override {
    check_adamw_grad(gt);
    const size_t gsz = dtype_size(gt);
    parallel_parts(n, threads_, [&](size_t lo, size_t hi) {
      adamw_range(param + lo, static_cast<const char*>(grad) + gsz * lo, gt, m + lo, v + lo, hi - lo, c, lr, t, decay,
                  grad_scale);
    });
  }

  // The high halves are bf16 storage: their bits, read and written through memcpy.
  void split_master(void* high, uint16_t* low, const float* src, size_t n) override {
    auto* h = static_cast<char*>(high);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t b = math::split_high(src[i]);
      std::memcpy(h + 2 * i, &b, 2);
      if (low) low[i] = math::split_low(src[i]);
    }
  }
  void join_master(float* dst, const void* high, const uint16_t* low, size_t n) override {
    const auto* h = static_cast<const char*>(high);
    for (size_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, h + 2 * i, 2);
      dst[i] = math::split_join(b, low[i]);
    }
  }
  // Joined, updated by adamw_range (adamw's loop) and split again, a chunk at a time.
  void adamw_split(void* high, uint16_t* low, const void* grad, DType gt, float* m, float* v, size_t n,
                   const optim::AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) override {
    check_adamw_grad(gt);
    const size_t gsz = dtype_size(gt);
    parallel_parts(n, threads_, [&](size_t lo, size_t hi) {
      constexpr size_t kChunk = 4096;
      float master[kChunk];
      for (size_t off = lo; off < hi; off += kChunk) {
        const size_t len = std::min(kChunk, hi - off);
        void* h = static_cast<char*>(high) + 2 * off;
        join_master(master, h, low + off, len);
        adamw_range(master, static_cast<const char*>(grad) + gsz * off, gt, m + off, v + off, len, c, lr, t, decay,
                    grad_scale);
        split_master(h, low + off, master, len);
      }
    });
  }

 private:
  // Before any thread starts: an exception inside one would end the process.
  static void check_adamw_grad(DType gt) {
    ZERO_CHECK(gt == DType::F32 || gt == DType::BF16 || gt == DType::FX64, "adamw: unsupported gradient dtype {}",
               dtype_name(gt));
  }
  // Elements [lo, hi) of src in eight running sums (sum_squares).
  static double lane_sum_squares(const void* src, DType t, size_t lo, size_t hi) {
    constexpr size_t kLanes = 8;
    double lane[kLanes] = {};
    dispatch(t, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* s = static_cast<const T*>(src) + lo;
      const size_t n = hi - lo;
      size_t i = 0;
      for (; i + kLanes <= n; i += kLanes)
        for (size_t l = 0; l < kLanes; ++l) {
          const double x = to_f32(s[i + l]);
          lane[l] += x * x;
        }
      for (; i < n; ++i) {
        const double x = to_f32(s[i]);
        lane[i % kLanes] += x * x;
      }
    });
    double acc = 0;
    for (double l : lane) acc += l;
    return acc;
  }
  // AdamW over n elements on this thread (gt checked).
  static void adamw_range(float* param, const void* grad, DType gt, float* m, float* v, size_t n,
                          const optim::AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) {
    if (gt == DType::F32) {
      optim::adamw_step(param, static_cast<const float*>(grad), m, v, n, c, lr, t, decay, grad_scale);
      return;
    }
    // Widen bf16 (or fixed-point) gradients to fp32 chunk by chunk (no full-size scratch).
    constexpr size_t kChunk = 4096;
    float tmp[kChunk];
    dispatch(gt, [&](auto* tag) {
      using G = std::remove_pointer_t<decltype(tag)>;
      const G* g = static_cast<const G*>(grad);
      for (size_t off = 0; off < n; off += kChunk) {
        const size_t len = std::min(kChunk, n - off);
        for (size_t i = 0; i < len; ++i) tmp[i] = to_f32(g[off + i]);
        optim::adamw_step(param + off, tmp, m + off, v + off, len, c, lr, t, decay, grad_scale);
      }
    });
  }

  int threads_;
};

}  // namespace

std::unique_ptr<DeviceOps> make_cpu_ops(int threads) { return std::make_unique<CpuOps>(threads); }

}  // namespace zero
