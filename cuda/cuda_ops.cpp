// CudaOps: dtype checks, the AdamW scalars (optim::adamw_scalars, the CPU backend's) and stream
// bookkeeping around the kernels in kernels.cu.
#include "cuda/cuda_ops.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "cuda/check.h"
#include "cuda/device_allocator.h"
#include "cuda/kernel_elem.h"
#include "cuda/kernels.h"

namespace zero {
namespace {

constexpr size_t kStagingElems = size_t(1) << 22;  // 16 MiB of fp32 per host transfer chunk

}  // namespace

using kernels::elem_of;

CudaOps::CudaOps() {
  CUDA_CHECK(cudaGetDevice(&device_));
  CUDA_CHECK(cudaStreamCreate(&stream_));  // a blocking stream: ordered after legacy-stream work (cudaMemcpy)
  waiter_ = std::make_unique<StreamWaiter>(stream_);
  CUDA_CHECK(cudaMalloc(&d_partials_, kernels::kMaxReduceBlocks * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&d_counts_, kernels::kMaxReduceBlocks * sizeof(unsigned long long)));
  CUDA_CHECK(cudaMalloc(&d_fixed_partials_, kernels::kMaxReduceBlocks * sizeof(math::FixedSquareSum)));
  CUDA_CHECK(cudaMalloc(&d_sum_, sizeof(double)));
  CUDA_CHECK(cudaMalloc(&d_count_, sizeof(unsigned long long)));
  CUDA_CHECK(cudaMallocHost(&h_sum_, sizeof(double)));
  CUDA_CHECK(cudaMallocHost(&h_count_, sizeof(unsigned long long)));
  for (cudaEvent_t& e : transferred_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

CudaOps::~CudaOps() {
  if (stream_) CUDA_WARN(cudaStreamSynchronize(stream_));
  CUDA_WARN(cudaFree(d_partials_));
  CUDA_WARN(cudaFree(d_counts_));
  CUDA_WARN(cudaFree(d_fixed_partials_));
  CUDA_WARN(cudaFree(d_sum_));
  CUDA_WARN(cudaFree(d_count_));
  CUDA_WARN(cudaFree(d_staging_));
  CUDA_WARN(cudaFreeHost(h_sum_));
  CUDA_WARN(cudaFreeHost(h_count_));
  for (cudaEvent_t e : transferred_)
    if (e) CUDA_WARN(cudaEventDestroy(e));
  waiter_.reset();
  if (stream_) CUDA_WARN(cudaStreamDestroy(stream_));
}

std::unique_ptr<CudaOps> make_cuda_ops() { return std::make_unique<CudaOps>(); }

// A kernel dereferencing a host pointer faults the whole context (sticky error); fail early and say
// which argument it was. cudaPointerGetAttributes is a host-side lookup (no device work).
void CudaOps::require_device(const void* p, const char* what, const char* op) const {
  cudaPointerAttributes a{};
  CUDA_CHECK(cudaPointerGetAttributes(&a, p));
  ZERO_CHECK(a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged,
             "CudaOps::{}: {} ({}) is not device memory (type {}); host data must go through copy_from_host / "
             "copy_to_host", op, what, p, int(a.type));
}

void CudaOps::copy(void* dst, DType dt, const void* src, DType st, size_t n) {
  if (n == 0) return;
  const auto d = elem_of(dt, "copy"), s = elem_of(st, "copy");
  require_device(dst, "dst", "copy");
  require_device(src, "src", "copy");
  kernels::copy(dst, d, src, s, n, stream_);
}

void CudaOps::add(void* dst, DType dt, const void* src, DType st, size_t n) {
  if (n == 0) return;
  const auto d = elem_of(dt, "add"), s = elem_of(st, "add");
  require_device(dst, "dst", "add");
  require_device(src, "src", "add");
  kernels::add(dst, d, src, s, n, stream_);
}

void CudaOps::zero(void* dst, DType dt, size_t n) {
  if (n == 0) return;
  require_device(dst, "dst", "zero");
  CUDA_CHECK(cudaMemsetAsync(dst, 0, n * dtype_size(dt), stream_));
}

double CudaOps::sum_squares(const void* src, DType t, size_t n) {
  if (n == 0) return 0.0;
  const auto e = elem_of(t, "sum_squares");
  require_device(src, "src", "sum_squares");
  kernels::sum_squares(src, e, n, d_partials_, d_sum_, stream_);
  CUDA_CHECK(cudaMemcpyAsync(h_sum_, d_sum_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  waiter_->wait();
  return *h_sum_;
}

size_t CudaOps::count_nonfinite(const void* src, DType t, size_t n) {
  if (n == 0) return 0;
  const auto e = elem_of(t, "count_nonfinite");
  require_device(src, "src", "count_nonfinite");
  kernels::count_nonfinite(src, e, n, std::numeric_limits<float>::infinity(), d_counts_, d_count_, stream_);
  CUDA_CHECK(cudaMemcpyAsync(h_count_, d_count_, sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream_));
  waiter_->wait();
  return size_t(*h_count_);
}

void CudaOps::accumulate_sum_squares(const void* src, DType t, size_t n, double* acc) {
  if (n == 0) return;
  const auto e = elem_of(t, "accumulate_sum_squares");
  require_device(src, "src", "accumulate_sum_squares");
  require_device(acc, "acc", "accumulate_sum_squares");
  kernels::sum_squares(src, e, n, d_partials_, acc, stream_, true);  // queued: no host wait
}

void CudaOps::accumulate_nonfinite(const void* src, DType t, size_t n, double* acc, float limit) {
  if (n == 0) return;
  const auto e = elem_of(t, "accumulate_nonfinite");
  require_device(src, "src", "accumulate_nonfinite");
  require_device(acc, "acc", "accumulate_nonfinite");
  kernels::count_nonfinite(src, e, n, limit, d_counts_, d_count_, stream_);
  kernels::accumulate_count(acc, d_count_, stream_);
}

void CudaOps::do_accumulate_nonfinite_runs(const void* src, DType t, const size_t* ends, size_t runs, double* acc,
                                            float limit) {
  const auto e = elem_of(t, "accumulate_nonfinite_runs");
  if (ends[runs - 1] > 0) require_device(src, "src", "accumulate_nonfinite_runs");
  require_device(acc, "acc", "accumulate_nonfinite_runs");
  kernels::accumulate_nonfinite_runs(src, e, ends, runs, limit, d_counts_, acc, stream_);  // queued: no host wait
}

void CudaOps::accumulate_fixed_square_sum(const int64_t* src, size_t n, math::FixedSquareSum* acc) {
  if (n == 0) return;
  require_device(src, "src", "accumulate_fixed_square_sum");
  require_device(acc, "acc", "accumulate_fixed_square_sum");
  kernels::accumulate_fixed_square_sum(src, n, d_fixed_partials_, acc, stream_);  // queued: no host wait
}

std::unique_ptr<RawAllocator> CudaOps::make_staging_allocator() const { return make_pinned_host_allocator(); }

void CudaOps::download(void* host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  require_device(src, "src", "download");
  waiter_->before_pageable_copy();
  CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_));
  waiter_->wait();
}

void CudaOps::upload(void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  require_device(dst, "dst", "upload");
  waiter_->before_pageable_copy();
  CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
  waiter_->wait();
}

// Staging is pinned (make_staging_allocator): the copy is a DMA the host does not wait for, and nothing for a
// driver to wait behind inside the call (before_pageable_copy is for pageable memory).
void CudaOps::download_async(int slot, void* host, const void* src, size_t bytes) {
  if (bytes > 0) require_device(src, "src", "download_async");
  queue_transfer(slot, host, src, bytes, cudaMemcpyDeviceToHost, "download_async");
}

void CudaOps::upload_async(int slot, void* dst, const void* host, size_t bytes) {
  if (bytes > 0) require_device(dst, "dst", "upload_async");
  queue_transfer(slot, dst, host, bytes, cudaMemcpyHostToDevice, "upload_async");
}

void CudaOps::wait_transfer(int slot) {
  waiter_->wait_if_pending(transfer_event(slot, "wait_transfer"));  // an event never recorded has completed
}

cudaEvent_t CudaOps::transfer_event(int slot, const char* op) const {
  ZERO_CHECK(slot >= 0 && slot < kTransferSlots, "{}: transfer slot {} of {}", op, slot, kTransferSlots);
  return transferred_[slot];
}

void CudaOps::queue_transfer(int slot, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* op) {
  const cudaEvent_t done = transfer_event(slot, op);
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
  CUDA_CHECK(cudaEventRecord(done, stream_));
}

void CudaOps::adamw(float* param, const void* grad, DType gt, float* m, float* v, size_t n,
                    const optim::AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) {
  if (n == 0) return;
  require_device(param, "param", "adamw");
  require_device(grad, "grad", "adamw");
  require_device(m, "m", "adamw");
  require_device(v, "v", "adamw");
  kernels::adamw(param, grad, elem_of(gt, "adamw"), m, v, n, optim::adamw_scalars(c, lr, t, decay, grad_scale),
                 stream_);
}

void CudaOps::split_master(void* high, uint16_t* low, const float* src, size_t n) {
  if (n == 0) return;
  require_device(high, "high", "split_master");
  if (low) require_device(low, "low", "split_master");
  require_device(src, "src", "split_master");
  kernels::split_master(high, low, src, n, stream_);
}

void CudaOps::join_master(float* dst, const void* high, const uint16_t* low, size_t n) {
  if (n == 0) return;
  require_device(dst, "dst", "join_master");
  require_device(high, "high", "join_master");
  require_device(low, "low", "join_master");
  kernels::join_master(dst, high, low, n, stream_);
}

void CudaOps::adamw_split(void* high, uint16_t* low, const void* grad, DType gt, float* m, float* v, size_t n,
                          const optim::AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) {
  if (n == 0) return;
  require_device(high, "high", "adamw_split");
  require_device(low, "low", "adamw_split");
  require_device(grad, "grad", "adamw_split");
  require_device(m, "m", "adamw_split");
  require_device(v, "v", "adamw_split");
  kernels::adamw_split(high, low, grad, elem_of(gt, "adamw_split"), m, v, n,
                       optim::adamw_scalars(c, lr, t, decay, grad_scale), stream_);
}

float* CudaOps::staging(size_t n) {
  const size_t want = std::min(n, kStagingElems);
  if (staging_elems_ < want) {
    if (d_staging_) waiter_->wait();  // the old scratch may still be in use
    CUDA_CHECK(cudaFree(d_staging_));
    d_staging_ = nullptr;
    staging_elems_ = 0;
    CUDA_CHECK(cudaMalloc(&d_staging_, want * sizeof(float)));
    staging_elems_ = want;
  }
  return d_staging_;
}

void CudaOps::copy_from_host(void* dst, DType dt, const float* src, size_t n) {
  if (n == 0) return;
  const auto d = elem_of(dt, "copy_from_host");
  require_device(dst, "dst", "copy_from_host");
  waiter_->before_pageable_copy();
  if (dt == DType::F32) {  // straight into place
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
  } else {
    float* tmp = staging(n);
    for (size_t off = 0; off < n; off += staging_elems_) {
      const size_t len = std::min(staging_elems_, n - off);
      CUDA_CHECK(cudaMemcpyAsync(tmp, src + off, len * sizeof(float), cudaMemcpyHostToDevice, stream_));
      kernels::copy(static_cast<char*>(dst) + off * dtype_size(dt), d, tmp, kernels::Elem::F32, len, stream_);
    }
  }
  waiter_->wait();  // `src` may be freed or reused as soon as we return
}

void CudaOps::copy_to_host(float* dst, const void* src, DType st, size_t n) {
  if (n == 0) return;
  const auto s = elem_of(st, "copy_to_host");
  require_device(src, "src", "copy_to_host");
  waiter_->before_pageable_copy();
  if (st == DType::F32) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  } else {
    float* tmp = staging(n);
    for (size_t off = 0; off < n; off += staging_elems_) {
      const size_t len = std::min(staging_elems_, n - off);
      kernels::copy(tmp, kernels::Elem::F32, static_cast<const char*>(src) + off * dtype_size(st), s, len, stream_);
      CUDA_CHECK(cudaMemcpyAsync(dst + off, tmp, len * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    }
  }
  waiter_->wait();
}

void CudaOps::synchronize() { waiter_->wait(); }

}  // namespace zero
