// The element-wise work the engine asks of a backend, on buffers that backend allocated (host memory
// for the CPU backend, device memory for CUDA). Mixed dtypes are converted on the fly, so the engine
// never needs a scratch copy to change precision. Counts are elements.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/check.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "core/math/fixed_point.h"
#include "optim/adamw.h"

namespace zero {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  virtual const char* name() const = 0;
  // Whether the host may read and write this backend's memory with plain loads and stores (the CPU
  // backend). Device memory is not: host-side models go through copy_to_host / copy_from_host.
  virtual bool host_addressable() const { return true; }
  // Host memory this backend copies to and from fastest, for staging buffers (zero.offload's transfers):
  // page-locked on CUDA (a DMA engine reads it directly, no bounce through a driver buffer); plain host memory
  // here.
  virtual std::unique_ptr<RawAllocator> make_staging_allocator() const { return make_host_allocator(); }
  virtual bool supports_storage(DType t) const = 0;  // dtypes usable for params / grads
  virtual void copy(void* dst, DType dt, const void* src, DType st, size_t n) = 0;  // dst = (dt) src
  virtual void add(void* dst, DType dt, const void* src, DType st, size_t n) = 0;   // dst += src (in fp32)
  virtual void zero(void* dst, DType dt, size_t n) = 0;
  virtual double sum_squares(const void* src, DType t, size_t n) = 0;               // in fp64
  virtual size_t count_nonfinite(const void* src, DType t, size_t n) = 0;
  // The same, accumulated into one fp64 in backend memory (*acc += ...), so a step reads its norm and
  // finite flags back once instead of once per tensor. accumulate_nonfinite counts the values that are not
  // under `limit` in magnitude: non-finite ones at limit = infinity; fixed-point sums pass
  // math::kFixedTermLimit, the largest term they take.
  virtual void accumulate_sum_squares(const void* src, DType t, size_t n, double* acc) = 0;
  virtual void accumulate_nonfinite(const void* src, DType t, size_t n, double* acc, float limit) = 0;
  // accumulate_nonfinite over consecutive runs of src, each into its own accumulator: run r is the elements
  // [ends[r - 1], ends[r]) (ends[-1] = 0) and acc[r] += its count. The engine counts a gradient view a tensor at a
  // time, so that a bad value names its tensor; a backend may take all of a view's runs at once (CUDA: two
  // launches for a layer's eleven tensors, not three a tensor). Non-virtual: the run ends are checked here, once
  // for every backend, then handed to do_accumulate_nonfinite_runs.
  void accumulate_nonfinite_runs(const void* src, DType t, const size_t* ends, size_t runs, double* acc,
                                 float limit) {
    for (size_t r = 1; r < runs; ++r)
      ZERO_CHECK(ends[r] >= ends[r - 1], "accumulate_nonfinite_runs: run {} ends at {}, before run {} (at {})", r,
                 ends[r], r - 1, ends[r - 1]);
    if (runs > 0) do_accumulate_nonfinite_runs(src, t, ends, runs, acc, limit);
  }
  // The exact sum of squares of n fixed-point values (DType::FX64), added to *acc in backend memory.
  virtual void accumulate_fixed_square_sum(const int64_t* src, size_t n, math::FixedSquareSum* acc) = 0;
  // AdamW on an fp32 master shard; the gradient may be fp32, bf16 or fixed point (FX64).
  virtual void adamw(float* param, const void* grad, DType gt, float* m, float* v, size_t n,
                     const optim::AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) = 0;
  // zero.master split (core/math/split_master.h): an fp32 master kept as bf16 params (the high halves) and
  // their low 16 bits. split_master writes both from fp32 values in backend memory (low null: the high
  // halves only, a replica's params); join_master is the reverse; adamw_split is adamw on a master kept so.
  virtual void split_master(void* high, uint16_t* low, const float* src, size_t n) = 0;
  virtual void join_master(float* dst, const void* high, const uint16_t* low, size_t n) = 0;
  virtual void adamw_split(void* high, uint16_t* low, const void* grad, DType gt, float* m, float* v, size_t n,
                           const optim::AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) = 0;
  // Host <-> backend memory (imports, checksums, exports). The host backend's memory is host memory.
  virtual void copy_from_host(void* dst, DType dt, const float* src, size_t n) { copy(dst, dt, src, DType::F32, n); }
  virtual void copy_to_host(float* dst, const void* src, DType st, size_t n) { copy(dst, DType::F32, src, st, n); }
  // Raw bytes (counters, fp64 partials). Both return when the copy is done.
  virtual void download(void* host, const void* src, size_t bytes) = 0;
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  // zero.offload's transfers, overlapped with the host's work on the other staging buffer: a copy between
  // backend memory and staging memory (make_staging_allocator), queued behind the backend's work already
  // queued and before any queued after it, and the call returns at once. `slot` (0 .. kTransferSlots - 1) is
  // the staging buffer's: the host reads a buffer downloaded into, or writes one uploaded from, only after
  // wait_transfer(slot), and queues a slot's next copy only after that. These defaults are for backends
  // whose copies are done when they return (the CPU's).
  static constexpr int kTransferSlots = 2;
  virtual void download_async(int slot, void* host, const void* src, size_t bytes) { download(host, src, bytes); }
  virtual void upload_async(int slot, void* dst, const void* host, size_t bytes) { upload(dst, host, bytes); }
  virtual void wait_transfer(int slot) {}
  virtual void synchronize() {}

 protected:
  // accumulate_nonfinite_runs' backend hook (runs > 0, ends checked). This default: one accumulate_nonfinite a run.
  virtual void do_accumulate_nonfinite_runs(const void* src, DType t, const size_t* ends, size_t runs, double* acc,
                                            float limit) {
    size_t begin = 0;
    for (size_t r = 0; r < runs; begin = ends[r++])
      accumulate_nonfinite(static_cast<const char*>(src) + begin * dtype_size(t), t, ends[r] - begin, acc + r, limit);
  }
};

// The CPU backend's ops over host memory, split over up to `threads` threads with the same bits at any count:
// the element-wise ones (copy, add, the non-finite counts, AdamW) by any cut, the sums of squares in blocks cut
// by the length alone.
std::unique_ptr<DeviceOps> make_cpu_ops(int threads = 1);

}  // namespace zero
