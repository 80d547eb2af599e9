#include "tests/common/test_backend.h"

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/check.h"

namespace zero::testing {
namespace {

constexpr unsigned char kKey = 0xA5;  // every stored byte is byte ^ kKey

void scramble(void* p, size_t bytes) {
  auto* b = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) b[i] ^= kKey;
}
// The plain value of backend bytes, in a host vector.
std::vector<char> plain(const void* src, size_t bytes) {
  std::vector<char> v(bytes);
  if (bytes) std::memcpy(v.data(), src, bytes);
  scramble(v.data(), bytes);
  return v;
}
// Stores plain bytes into backend memory.
void store(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  scramble(dst, bytes);
}

// CpuOps on unscrambled copies: decode the inputs, compute, encode the outputs.
class ScrambledOps final : public DeviceOps {
 public:
  const char* name() const override { return "scrambled"; }
  bool host_addressable() const override { return false; }
  bool supports_storage(DType t) const override { return cpu_->supports_storage(t); }

  void copy(void* dst, DType dt, const void* src, DType st, size_t n) override {
    auto s = plain(src, n * dtype_size(st));
    std::vector<char> d(n * dtype_size(dt));
    cpu_->copy(d.data(), dt, s.data(), st, n);
    store(dst, d.data(), d.size());
  }
  void add(void* dst, DType dt, const void* src, DType st, size_t n) override {
    auto s = plain(src, n * dtype_size(st));
    auto d = plain(dst, n * dtype_size(dt));
    cpu_->add(d.data(), dt, s.data(), st, n);
    store(dst, d.data(), d.size());
  }
  void zero(void* dst, DType dt, size_t n) override {
    std::vector<char> z(n * dtype_size(dt), 0);
    store(dst, z.data(), z.size());
  }
  double sum_squares(const void* src, DType t, size_t n) override {
    auto s = plain(src, n * dtype_size(t));
    return cpu_->sum_squares(s.data(), t, n);
  }
  size_t count_nonfinite(const void* src, DType t, size_t n) override {
    auto s = plain(src, n * dtype_size(t));
    return cpu_->count_nonfinite(s.data(), t, n);
  }
  void accumulate_sum_squares(const void* src, DType t, size_t n, double* acc) override {
    add_to(acc, sum_squares(src, t, n));
  }
  void accumulate_nonfinite(const void* src, DType t, size_t n, double* acc, float limit) override {
    auto s = plain(src, n * dtype_size(t));
    double count = 0;
    cpu_->accumulate_nonfinite(s.data(), t, n, &count, limit);
    add_to(acc, count);
  }
  void accumulate_fixed_square_sum(const int64_t* src, size_t n, math::FixedSquareSum* acc) override {
    auto s = plain(src, n * 8);
    auto a = plain(acc, sizeof(*acc));
    cpu_->accumulate_fixed_square_sum(reinterpret_cast<const int64_t*>(s.data()), n,
                                      reinterpret_cast<math::FixedSquareSum*>(a.data()));
    store(acc, a.data(), a.size());
  }
  void adamw(float* param, const void* grad, DType gt, float* m, float* v, size_t n, const optim::AdamWConfig& c,
             float lr, int64_t t, bool decay, float grad_scale) override {
    auto p = plain(param, n * 4), mm = plain(m, n * 4), vv = plain(v, n * 4), g = plain(grad, n * dtype_size(gt));
    cpu_->adamw(reinterpret_cast<float*>(p.data()), g.data(), gt, reinterpret_cast<float*>(mm.data()),
                reinterpret_cast<float*>(vv.data()), n, c, lr, t, decay, grad_scale);
    store(param, p.data(), p.size());
    store(m, mm.data(), mm.size());
    store(v, vv.data(), vv.size());
  }
  void split_master(void* high, uint16_t* low, const float* src, size_t n) override {
    auto s = plain(src, n * 4);
    std::vector<char> h(n * 2), l(n * 2);
    cpu_->split_master(h.data(), low ? reinterpret_cast<uint16_t*>(l.data()) : nullptr,
                       reinterpret_cast<const float*>(s.data()), n);
    store(high, h.data(), h.size());
    if (low) store(low, l.data(), l.size());
  }
  void join_master(float* dst, const void* high, const uint16_t* low, size_t n) override {
    auto h = plain(high, n * 2), l = plain(low, n * 2);
    std::vector<char> d(n * 4);
    cpu_->join_master(reinterpret_cast<float*>(d.data()), h.data(), reinterpret_cast<const uint16_t*>(l.data()), n);
    store(dst, d.data(), d.size());
  }
  void adamw_split(void* high, uint16_t* low, const void* grad, DType gt, float* m, float* v, size_t n,
                   const optim::AdamWConfig& c, float lr, int64_t t, bool decay, float grad_scale) override {
    auto h = plain(high, n * 2), l = plain(low, n * 2), mm = plain(m, n * 4), vv = plain(v, n * 4),
         g = plain(grad, n * dtype_size(gt));
    cpu_->adamw_split(h.data(), reinterpret_cast<uint16_t*>(l.data()), g.data(), gt, reinterpret_cast<float*>(mm.data()),
                      reinterpret_cast<float*>(vv.data()), n, c, lr, t, decay, grad_scale);
    store(high, h.data(), h.size());
    store(low, l.data(), l.size());
    store(m, mm.data(), mm.size());
    store(v, vv.data(), vv.size());
  }
  void copy_from_host(void* dst, DType dt, const float* src, size_t n) override {
    std::vector<char> d(n * dtype_size(dt));
    cpu_->copy(d.data(), dt, src, DType::F32, n);
    store(dst, d.data(), d.size());
  }
  void copy_to_host(float* dst, const void* src, DType st, size_t n) override {
    auto s = plain(src, n * dtype_size(st));
    cpu_->copy(dst, DType::F32, s.data(), st, n);
  }
  void download(void* host, const void* src, size_t bytes) override {
    auto s = plain(src, bytes);
    if (bytes) std::memcpy(host, s.data(), bytes);
  }
  void upload(void* dst, const void* host, size_t bytes) override { store(dst, host, bytes); }
  // Copies in flight as a GPU's are, so that the engine's use of them is checked: a download's bytes reach the
  // host buffer only at wait_transfer (until then it holds 0xFF bytes, NaN as floats: read early, the step goes
  // wrong); an upload reads the host buffer when queued (backend work after it sees the data, as in stream
  // order) and wait_transfer checks the host left that buffer alone meanwhile; a slot's next copy queued before
  // its wait is a contract error too.
  void download_async(int slot, void* host, const void* src, size_t bytes) override {
    Transfer& t = start(slot, "download_async");
    t = {true, true, host, plain(src, bytes)};
    if (bytes) std::memset(host, 0xFF, bytes);
  }
  void upload_async(int slot, void* dst, const void* host, size_t bytes) override {
    Transfer& t = start(slot, "upload_async");
    t = {true, false, const_cast<void*>(host), std::vector<char>(static_cast<const char*>(host), static_cast<const char*>(host) + bytes)};
    store(dst, host, bytes);
  }
  void wait_transfer(int slot) override {
    Transfer& t = transfer(slot, "wait_transfer");
    if (!t.busy) return;
    if (t.download && !t.bytes.empty()) std::memcpy(t.host, t.bytes.data(), t.bytes.size());
    ZERO_CHECK(t.download || t.bytes.empty() || std::memcmp(t.host, t.bytes.data(), t.bytes.size()) == 0,
               "scrambled backend: the staging of transfer slot {} was rewritten while its upload was in flight", slot);
    t.busy = false;
  }

 private:
  struct Transfer {
    bool busy = false, download = false;
    void* host = nullptr;
    std::vector<char> bytes;  // a download's data, or an upload's source as queued
  };
  Transfer& transfer(int slot, const char* op) {
    ZERO_CHECK(slot >= 0 && slot < kTransferSlots, "{}: transfer slot {} of {}", op, slot, kTransferSlots);
    return transfers_[slot];
  }
  Transfer& start(int slot, const char* op) {
    Transfer& t = transfer(slot, op);
    ZERO_CHECK(!t.busy, "{}: transfer slot {} still holds a copy not waited for (wait_transfer)", op, slot);
    return t;
  }
  Transfer transfers_[kTransferSlots];

  void add_to(double* acc, double x) {
    double a;
    download(&a, acc, sizeof a);
    a += x;
    upload(acc, &a, sizeof a);
  }
  std::unique_ptr<DeviceOps> cpu_ = make_cpu_ops();
};

// MPI on unscrambled copies of backend buffers; blocking (the copies must outlive the call).
class ScrambledComm final : public Communicator {
 public:
  explicit ScrambledComm(MPI_Comm c) : mpi_(c) {}
  int rank() const override { return mpi_.rank(); }
  int world() const override { return mpi_.world(); }
  const char* backend_name() const override { return "scrambled mpi"; }
  bool supports_reduction(DType t) const override { return mpi_.supports_reduction(t); }

 protected:
  CommHandle do_all_reduce(void* buf, size_t count, DType t, ReduceOp op) override {
    auto b = plain(buf, count * dtype_size(t));
    mpi_.all_reduce(b.data(), count, t, op);
    store(buf, b.data(), b.size());
    return completed_request();
  }
  CommHandle do_reduce_scatter(const void* send, void* recv, size_t recv_count, DType t, ReduceOp op) override {
    auto s = plain(send, recv_count * size_t(world()) * dtype_size(t));
    std::vector<char> r(recv_count * dtype_size(t));
    mpi_.reduce_scatter(s.data(), r.data(), recv_count, t, op);
    store(recv, r.data(), r.size());
    return completed_request();
  }
  CommHandle do_all_gather(const void* send, void* recv, size_t send_count, DType t) override {
    auto s = plain(send, send_count * dtype_size(t));
    std::vector<char> r(send_count * size_t(world()) * dtype_size(t));
    mpi_.all_gather(s.data(), r.data(), send_count, t);
    store(recv, r.data(), r.size());
    return completed_request();
  }
  void do_broadcast(void* buf, size_t count, DType t, int root) override {
    auto b = plain(buf, count * dtype_size(t));
    mpi_.broadcast(b.data(), count, t, root);
    store(buf, b.data(), b.size());
  }
  void do_barrier() override { mpi_.barrier(); }
  // Scalar reductions are on host memory by contract.
  void do_all_reduce_scalars(double* vals, size_t n, ReduceOp op) override { mpi_.all_reduce_scalars(vals, n, op); }

 private:
  MpiCommunicator mpi_;
};

}  // namespace

bool scrambled_backend() {
  const char* v = std::getenv("ZERO_TEST_BACKEND");
  return v && std::string_view(v) == "scrambled";
}
std::unique_ptr<DeviceOps> make_scrambled_ops() { return std::make_unique<ScrambledOps>(); }
std::unique_ptr<Communicator> make_scrambled_comm(MPI_Comm comm) { return std::make_unique<ScrambledComm>(comm); }
std::unique_ptr<DeviceOps> make_test_ops() { return scrambled_backend() ? make_scrambled_ops() : make_cpu_ops(); }
std::unique_ptr<Communicator> make_test_comm(MPI_Comm comm) {
  if (scrambled_backend()) return make_scrambled_comm(comm);
  return std::make_unique<MpiCommunicator>(comm);
}

}  // namespace zero::testing
