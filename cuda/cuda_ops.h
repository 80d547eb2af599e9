// DeviceOps on device memory (the CUDA backend): every op is queued on one CUDA stream owned by this
// object, in call order. Ops that return a value (sum_squares, count_nonfinite) wait for the stream
// (through waiter(), so under the peer timeout once the communicator's guard is in); the others return at
// once, and synchronize() waits for them. Numerics equal zero/cpu_ops.cpp (see
// cuda/kernels.h); sum_squares adds in a different (fixed, deterministic) order, so it matches the
// CPU's fp64 sum to rounding, not bit for bit.
//
// Pointers passed to copy/add/zero/... must be device memory (cudaMalloc, e.g. through
// make_device_allocator()): a host pointer throws (instead of faulting the context). Host data goes
// through copy_from_host / copy_to_host. Work on other streams must be ordered against stream():
// NcclCommunicator takes it as its producer stream.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>

#include "cuda/host_wait.h"
#include "zero/device_ops.h"

namespace zero {

class CudaOps final : public DeviceOps {
 public:
  CudaOps();  // on the current device (select it first: cuda/device_select.h)
  ~CudaOps() override;
  CudaOps(const CudaOps&) = delete;
  CudaOps& operator=(const CudaOps&) = delete;

  const char* name() const override { return "cuda"; }
  bool host_addressable() const override { return false; }
  std::unique_ptr<RawAllocator> make_staging_allocator() const override;  // page-locked (device_allocator.h)
  bool supports_storage(DType t) const override { return t == DType::F32 || t == DType::BF16 || t == DType::FX64; }
  void copy(void* dst, DType dt, const void* src, DType st, size_t n) override;
  void add(void* dst, DType dt, const void* src, DType st, size_t n) override;
  void zero(void* dst, DType dt, size_t n) override;
  double sum_squares(const void* src, DType t, size_t n) override;
  size_t count_nonfinite(const void* src, DType t, size_t n) override;
  // Queued on the stream, accumulating into device memory: no host wait.
  void accumulate_sum_squares(const void* src, DType t, size_t n, double* acc) override;
  void accumulate_nonfinite(const void* src, DType t, size_t n, double* acc, float limit) override;
  void accumulate_fixed_square_sum(const int64_t* src, size_t n, math::FixedSquareSum* acc) override;
  void download(void* host, const void* src, size_t bytes) override;
  void upload(void* dst, const void* host, size_t bytes) override;
  // On the stream into (out of) pinned staging, an event per slot; wait_transfer is a watched host wait on it.
  void download_async(int slot, void* host, const void* src, size_t bytes) override;
  void upload_async(int slot, void* dst, const void* host, size_t bytes) override;
  void wait_transfer(int slot) override;
  void adamw(float* param, const void* grad, DType gt, float* m, float* v, size_t n, const optim::AdamWConfig& c,
             float lr, int64_t t, bool decay, float grad_scale) override;
  void split_master(void* high, uint16_t* low, const float* src, size_t n) override;
  void join_master(float* dst, const void* high, const uint16_t* low, size_t n) override;
  void adamw_split(void* high, uint16_t* low, const void* grad, DType gt, float* m, float* v, size_t n,
                   const optim::AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) override;
  // Host fp32 <-> device buffer of dtype dt, converted on the device (in chunks through a device
  // scratch); both return when the copy is done, so the host buffer may be reused at once.
  void copy_from_host(void* dst, DType dt, const float* src, size_t n) override;
  void copy_to_host(float* dst, const void* src, DType st, size_t n) override;
  void synchronize() override;

  cudaStream_t stream() const { return stream_; }
  // Host waits on stream() (values returned, host copies, synchronize) go through this waiter: install
  // the communicator's guard (NcclCommunicator::host_wait_guard()) when the stream waits on collectives.
  StreamWaiter& waiter() { return *waiter_; }

 protected:
  // Two launches for each kernels::kMaxCountRuns runs, the counts added into acc on the stream: no host wait.
  void do_accumulate_nonfinite_runs(const void* src, DType t, const size_t* ends, size_t runs, double* acc,
                                    float limit) override;

 private:
  void require_device(const void* p, const char* what, const char* op) const;
  float* staging(size_t n);  // device fp32 scratch of at least min(n, kStagingElems) elements
  cudaEvent_t transfer_event(int slot, const char* op) const;  // the slot's event; a slot out of range is a bug
  // A copy on the stream, then the slot's event recorded behind it (nothing for 0 bytes).
  void queue_transfer(int slot, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* op);

  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<StreamWaiter> waiter_;
  double* d_partials_ = nullptr;            // reduction scratch: kMaxReduceBlocks doubles...
  unsigned long long* d_counts_ = nullptr;  // ...and counters
  math::FixedSquareSum* d_fixed_partials_ = nullptr;  // ...and exact sums of squares (fixed-point sums)
  double* d_sum_ = nullptr;                 // pass-2 outputs
  unsigned long long* d_count_ = nullptr;
  double* h_sum_ = nullptr;                 // pinned host copies of the outputs
  unsigned long long* h_count_ = nullptr;
  float* d_staging_ = nullptr;              // host transfers in chunks (lazily allocated)
  cudaEvent_t transferred_[kTransferSlots] = {};  // each transfer slot's last queued copy
  size_t staging_elems_ = 0;
};

std::unique_ptr<CudaOps> make_cuda_ops();

}  // namespace zero
