#include "comm/mpi_communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "comm/mpi_check.h"
#include "core/check.h"

namespace zero {

void throw_mpi_error(const char* file, int line, const char* call, int code) {
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, msg, &len);
  int rank = -1, inited = 0;
  MPI_Initialized(&inited);
  if (inited) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw Error(fmt::format("{}:{}: rank {}: {} failed: {}", file, line, rank, call, msg));
}

namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::BF16: return MPI_UINT16_T;  // summed by our own op
    case DType::F16: return MPI_UINT16_T;   // moved, never summed on the CPU backend
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::FX64: return MPI_INT64_T;  // fixed point: summed as the integers it is
  }
  return MPI_DATATYPE_NULL;
}

// inout[i] = bf16(float(in[i]) + float(inout[i])), round to nearest even.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const bf16* a = static_cast<const bf16*>(in);
  bf16* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = bf16(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

int as_int_count(size_t n) {
  ZERO_CHECK(n <= size_t(INT32_MAX), "MPI count {} exceeds INT_MAX; split the collective", n);
  return static_cast<int>(n);
}

// A started collective, run as `pieces` MPI collectives one after another (start(k) starts piece k), waited
// through the communicator's PeerWatch. Most collectives are one piece; see kPieceBytes for the others.
// Only wait() starts a later piece: MPI needs every rank to start a communicator's collectives in the same
// order, and the ranks call wait() in the same program order, whereas whether test() finds a piece done
// differs between ranks. So test() drives the piece in flight and says false while pieces remain.
class PiecewiseRequest final : public CommRequest {
 public:
  PiecewiseRequest(MpiCommunicator& comm, size_t pieces, std::function<MPI_Request(size_t)> start, WaitInfo info)
      : comm_(comm), pieces_(pieces), start_(std::move(start)), info_(std::move(info)) {
    if (pieces_ > 0) req_ = start_(next_++);
  }
  ~PiecewiseRequest() override {
    try {
      wait();
    } catch (const std::exception& e) {  // an MPI error while unwinding: say it, do not terminate
      fprintf(stderr, "rank %d: %s\n", comm_.rank(), e.what());
    }
  }
  void wait() override {
    for (;;) {
      if (req_ != MPI_REQUEST_NULL) comm_.wait_request(req_, info_);
      if (next_ == pieces_) return;
      req_ = start_(next_++);
    }
  }
  bool test() override {
    if (req_ != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_CHECK(MPI_Test(&req_, &done, MPI_STATUS_IGNORE));
      if (!done) return false;
    }
    return next_ == pieces_;
  }

 private:
  MpiCommunicator& comm_;
  size_t pieces_, next_ = 0;
  std::function<MPI_Request(size_t)> start_;
  WaitInfo info_;
  MPI_Request req_ = MPI_REQUEST_NULL;
};
}  // namespace

void MpiCommunicator::wait_request(MPI_Request& req, const WaitInfo& info) {
  watch_->wait(
      [&] {
        int done = 0;
        MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        return done != 0;
      },
      info, peer_timeout());
}

CommHandle MpiCommunicator::started(size_t pieces, std::function<MPI_Request(size_t)> start) {
  return std::make_unique<PiecewiseRequest>(*this, pieces, std::move(start), WaitInfo{op_sequence(), op_description()});
}

void MpiCommunicator::wait_started(MPI_Request req) { wait_request(req, WaitInfo{op_sequence(), op_description()}); }

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::shared_ptr<PeerWatch> watch) {
  watch_ = std::move(watch);
  MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &world_));
  MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_sum_));
  if (!watch_) watch_ = std::make_shared<PeerWatch>(comm_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  watch_.reset();
  if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

bool MpiCommunicator::supports_reduction(DType t) const {
  return t == DType::F32 || t == DType::BF16 || t == DType::F64 || t == DType::FX64;
}

MPI_Op MpiCommunicator::mpi_op(ReduceOp op, DType t) const {
  ZERO_REQUIRE(supports_reduction(t), ConfigError,
               "reduction dtype {} is not supported by the {} backend (use fp32 or bf16)", dtype_name(t),
               backend_name());
  if (t == DType::BF16) {
    ZERO_REQUIRE(op == ReduceOp::Sum, ConfigError, "bf16 reductions support sum only");
    return bf16_sum_;
  }
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

// One rank: the collectives are local copies (nothing at all in place) done here, not by MPI, whose
// single-rank paths go through temporary buffers: a 4M-float reduce-scatter ran at 1.5 GB/s where a
// copy runs at ~8. The dtype and op are still checked, so one rank refuses what many would.
CommHandle MpiCommunicator::do_all_reduce(void* buf, size_t count, DType t, ReduceOp op) {
  const MPI_Op mop = mpi_op(op, t);
  if (world_ == 1) return started(0, {});
  const size_t esz = dtype_size(t), piece = std::max<size_t>(1, kPieceBytes / esz);
  return started((count + piece - 1) / piece, [=, this](size_t k) {
    const size_t first = k * piece, n = std::min(piece, count - first);
    MPI_Request r;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(buf) + first * esz, as_int_count(n), mpi_type(t), mop,
                             comm_, &r));
    return r;
  });
}

// Piece k reduces elements [k c, k c + n) of every rank's block: those W slices are packed into a buffer of the
// request's, one piece at a time (a copy of the piece, cheap beside what the whole message costs).
CommHandle MpiCommunicator::do_reduce_scatter(const void* send, void* recv, size_t recv_count, DType t,
                                              ReduceOp op) {
  const MPI_Op mop = mpi_op(op, t);
  if (world_ == 1) {
    if (send != recv) std::memmove(recv, send, recv_count * dtype_size(t));
    return started(0, {});
  }
  const size_t W = world_, esz = dtype_size(t), c = std::max<size_t>(1, kPieceBytes / (W * esz));
  const size_t pieces = (recv_count + c - 1) / c;
  std::vector<char> packed(pieces > 1 ? W * c * esz : 0);
  return started(pieces, [=, this, packed = std::move(packed)](size_t k) mutable {
    const size_t first = k * c, n = std::min(c, recv_count - first);
    const void* from = send;
    if (pieces > 1) {
      for (size_t i = 0; i < W; ++i)
        std::memcpy(packed.data() + i * n * esz, static_cast<const char*>(send) + (i * recv_count + first) * esz,
                    n * esz);
      from = packed.data();
    }
    MPI_Request r;
    MPI_CHECK(MPI_Ireduce_scatter_block(from, static_cast<char*>(recv) + first * esz, as_int_count(n), mpi_type(t),
                                        mop, comm_, &r));
    return r;
  });
}

CommHandle MpiCommunicator::do_all_gather(const void* send, void* recv, size_t send_count, DType t) {
  const size_t esz = dtype_size(t);
  const bool in_place = send == static_cast<const char*>(recv) + size_t(rank_) * send_count * esz;
  if (world_ == 1) {
    if (!in_place) std::memmove(recv, send, send_count * esz);
    return started(0, {});
  }
  return started(1, [=, this](size_t) {
    MPI_Request r;
    MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, as_int_count(send_count), mpi_type(t), recv,
                             as_int_count(send_count), mpi_type(t), comm_, &r));
    return r;
  });
}

void MpiCommunicator::do_broadcast(void* buf, size_t count, DType t, int root) {
  if (world_ == 1) return;
  MPI_Request r;
  MPI_CHECK(MPI_Ibcast(buf, as_int_count(count), mpi_type(t), root, comm_, &r));
  wait_started(r);
}

void MpiCommunicator::do_barrier() {
  if (world_ == 1) return;
  MPI_Request r;
  MPI_CHECK(MPI_Ibarrier(comm_, &r));
  wait_started(r);
}

void MpiCommunicator::do_all_reduce_scalars(double* vals, size_t n, ReduceOp op) {
  if (world_ == 1) return;
  MPI_Request r;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, vals, as_int_count(n), MPI_DOUBLE, mpi_op(op, DType::F64), comm_, &r));
  wait_started(r);
}

}  // namespace zero
