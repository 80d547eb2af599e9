// NcclCommunicator under mpirun (any world size; CI runs 2): all_reduce (sum, max, min; fp32, bf16),
// reduce_scatter, all_gather out of place and in place, broadcast, scalars, non-blocking handles,
// ordering after the producer (CudaOps) stream, and counters equal to the MPI backend's for the same
// calls. Several ranks on one GPU get NCCL_HOSTID=fakehost<rank> (cuda_test_util.h).
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "comm/hybrid_groups.h"
#include "comm/mpi_communicator.h"
#include "core/splitmix.h"
#include "cuda/cuda_ops.h"
#include "cuda/nccl_communicator.h"
#include "tests/cuda/cuda_test_util.h"

using namespace zero;
using namespace zero::testing;

namespace {

// Small integers (exact in fp32 and bf16 sums at any world size we run).
float int_value(size_t i, int rank) { return float(int((i * 7 + size_t(rank) * 13) % 61) - 30); }

uint16_t bf16_bits(float f) {
  const bf16 b(f);
  uint16_t u;
  std::memcpy(&u, &b, 2);
  return u;
}
float bf16_value(uint16_t u) { return std::bit_cast<float>(uint32_t(u) << 16); }

class NcclTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!all_ranks_have_cuda()) return;
    setup_mpi_device();
    ops_ = make_cuda_ops().release();
    // A set-up that hangs (NCCL's network choice) ends the test in a minute with NCCL's message, well inside
    // its ctest timeout (tests/cuda/CMakeLists.txt), instead of after the product's 300 s.
    comm_ = new NcclCommunicator(MPI_COMM_WORLD, ops_->stream(), /*setup_timeout_s=*/60);
  }
  static void TearDownTestSuite() {
    delete comm_;
    delete ops_;
    comm_ = nullptr;
    ops_ = nullptr;
  }
  void SetUp() override {
    if (!comm_) ZERO_GPU_SKIP("no CUDA device on some rank");
    comm_->reset_report();
    W = comm_->world();
    R = comm_->rank();
  }
  static NcclCommunicator* comm_;
  static CudaOps* ops_;
  int W = 1, R = 0;
};
NcclCommunicator* NcclTest::comm_ = nullptr;
CudaOps* NcclTest::ops_ = nullptr;

}  // namespace

TEST_F(NcclTest, AllReduceSumMaxMinFp32) {
  const size_t n = 100003;
  std::vector<float> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = int_value(i, R);
  DeviceBuffer d(n * 4);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    d.upload(h);
    comm_->all_reduce(d.get(), n, DType::F32, op);
    const auto got = d.download<float>(n);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      float want = int_value(i, 0);
      for (int r = 1; r < W; ++r) {
        const float x = int_value(i, r);
        want = op == ReduceOp::Sum ? want + x : op == ReduceOp::Max ? std::max(want, x) : std::min(want, x);
      }
      bad += got[i] != want;
    }
    EXPECT_EQ(bad, 0u) << "op " << int(op);
  }
}

TEST_F(NcclTest, AllReduceBf16SumNative) {
  // Values in [1/16, 16) with 8 significant bits: the fp32 sum of two is exact, so at 2 ranks NCCL's
  // bf16 sum and the MPI backend's (fp32 add, round to nearest even) agree bit for bit. More ranks sum
  // in NCCL's order: within (world - 1) bf16 ulps.
  const size_t n = 65537;
  auto value = [](size_t i, int r) {
    uint64_t s = i * 1315423911ull + uint64_t(r) * 2654435761ull;
    const uint64_t x = splitmix64(s);
    const float mag = std::ldexp(1.0f + float(x & 0x7f) / 128.0f, int((x >> 7) % 8) - 4);
    return (x >> 12) & 1 ? -mag : mag;
  };
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = bf16_bits(value(i, R));
  DeviceBuffer d(n * 2);
  d.upload(h);
  comm_->all_reduce(d.get(), n, DType::BF16, ReduceOp::Sum);
  const auto got = d.download<uint16_t>(n);
  // The MPI backend on the same data (host buffers).
  MpiCommunicator mpi(MPI_COMM_WORLD);
  std::vector<uint16_t> want = h;
  mpi.all_reduce(want.data(), n, DType::BF16, ReduceOp::Sum);
  size_t bad = 0, exact = 0;
  for (size_t i = 0; i < n; ++i) {
    exact += got[i] == want[i];
    const float g = bf16_value(got[i]), w = bf16_value(want[i]);
    bad += !(std::abs(g - w) <= float(W - 1) * std::ldexp(std::abs(w), -7));
  }
  EXPECT_EQ(bad, 0u);
  if (W == 2) {
    EXPECT_EQ(exact, n);
  }
  // The integer grid is exact at every world size.
  for (size_t i = 0; i < n; ++i) h[i] = bf16_bits(int_value(i, R));
  d.upload(h);
  comm_->all_reduce(d.get(), n, DType::BF16, ReduceOp::Sum);
  const auto got2 = d.download<uint16_t>(n);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    float s = 0;
    for (int r = 0; r < W; ++r) s += int_value(i, r);
    wrong += bf16_value(got2[i]) != s;
  }
  EXPECT_EQ(wrong, 0u);
}

TEST_F(NcclTest, ReduceScatterFp32AndBf16) {
  const size_t shard = 12345;
  for (DType t : {DType::F32, DType::BF16}) {
    const size_t esz = dtype_size(t);
    std::vector<uint8_t> h(shard * W * esz);
    for (size_t i = 0; i < shard * W; ++i) {
      const float x = int_value(i, R);
      if (t == DType::F32) std::memcpy(h.data() + i * 4, &x, 4);
      else { const uint16_t u = bf16_bits(x); std::memcpy(h.data() + i * 2, &u, 2); }
    }
    DeviceBuffer send(h.size()), recv(shard * esz);
    send.upload(h);
    comm_->reduce_scatter(send.get(), recv.get(), shard, t, ReduceOp::Sum);
    const auto got = recv.download<uint8_t>(shard * esz);
    size_t bad = 0;
    for (size_t i = 0; i < shard; ++i) {
      float want = 0;
      for (int r = 0; r < W; ++r) want += int_value(size_t(R) * shard + i, r);
      float g;
      if (t == DType::F32) std::memcpy(&g, got.data() + i * 4, 4);
      else { uint16_t u; std::memcpy(&u, got.data() + i * 2, 2); g = bf16_value(u); }
      bad += g != want;
    }
    EXPECT_EQ(bad, 0u) << dtype_name(t);
  }
}

TEST_F(NcclTest, AllGatherOutOfPlaceAndInPlace) {
  const size_t shard = 4097;
  std::vector<float> mine(shard);
  for (size_t i = 0; i < shard; ++i) mine[i] = float(R * 100000 + int(i));
  auto check = [&](const std::vector<float>& got, const char* what) {
    size_t bad = 0;
    for (int r = 0; r < W; ++r)
      for (size_t i = 0; i < shard; ++i) bad += got[size_t(r) * shard + i] != float(r * 100000 + int(i));
    EXPECT_EQ(bad, 0u) << what;
  };
  DeviceBuffer send(shard * 4), recv(shard * W * 4);
  send.upload(mine);
  comm_->all_gather(send.get(), recv.get(), shard, DType::F32);
  check(recv.download<float>(shard * W), "out of place");
  // In place: this rank's part already sits at recv + rank * shard.
  DeviceBuffer full(shard * W * 4);
  float* slot = full.as<float>() + size_t(R) * shard;
  upload(slot, mine.data(), shard);
  comm_->all_gather(slot, full.get(), shard, DType::F32);
  check(full.download<float>(shard * W), "in place");
}

#if defined(ZERO_EMULATED_CUDA)
// The emulated NCCL holds our collectives to NCCL's buffer rule (in place exactly, or apart), which the
// real library does not check: overlapping buffers give undefined results there. Raw calls on the
// communicator's own NCCL handle; the engine's buffers pass (every other test here and the engine suites).
// Not built against the real NCCL (no skip either: under gpu_check a skipped test fails the check).
TEST_F(NcclTest, EmulatedNcclRefusesOverlapOutsideTheInPlaceForms) {
  const size_t n = 64;
  DeviceBuffer buf(n * size_t(W + 1) * 4);
  float* b = buf.as<float>();
  ncclComm_t nc = comm_->nccl_comm();
  cudaStream_t s = comm_->stream();
  // reduce-scatter: in place is recv = send + rank * n; recv one element further overlaps.
  EXPECT_EQ(ncclReduceScatter(b, b + size_t(R) * n, n, ncclFloat32, ncclSum, nc, s), ncclSuccess);
  EXPECT_EQ(ncclReduceScatter(b, b + size_t(R) * n + 1, n, ncclFloat32, ncclSum, nc, s), ncclInvalidArgument);
  EXPECT_EQ(ncclReduceScatter(b, b + size_t(W) * n, n, ncclFloat32, ncclSum, nc, s), ncclSuccess);  // apart
  // all-gather: in place is send = recv + rank * n.
  EXPECT_EQ(ncclAllGather(b + size_t(R) * n, b, n, ncclFloat32, nc, s), ncclSuccess);
  EXPECT_EQ(ncclAllGather(b + size_t(R) * n + 1, b, n, ncclFloat32, nc, s), ncclInvalidArgument);
  // all-reduce: the same buffer, or none shared.
  EXPECT_EQ(ncclAllReduce(b, b, n, ncclFloat32, ncclSum, nc, s), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(b, b + n / 2, n, ncclFloat32, ncclSum, nc, s), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(b, b + n, n, ncclFloat32, ncclSum, nc, s), ncclSuccess);
}
#endif

TEST_F(NcclTest, BroadcastAndBarrier) {
  const size_t n = 1000;
  std::vector<double> h(n, double(R));
  DeviceBuffer d(n * 8);
  d.upload(h);
  const int root = W - 1;
  comm_->broadcast(d.get(), n, DType::F64, root);
  const auto got = d.download<double>(n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], double(root));
  comm_->barrier();
  EXPECT_EQ(comm_->report().barriers, 1u);
}

TEST_F(NcclTest, ScalarsOnHostValues) {
  double two[2] = {double(R) + 0.5, R == 0 ? 1.0 : 0.0};
  comm_->all_reduce_scalars(two, 2, ReduceOp::Sum);
  EXPECT_EQ(two[0], double(W) * (W - 1) / 2 + 0.5 * W);
  EXPECT_EQ(two[1], 1.0);
  // More values than the device scratch holds (64): chunked.
  std::vector<double> many(150);
  for (size_t i = 0; i < many.size(); ++i) many[i] = double(i) * (R + 1);
  comm_->all_reduce_scalars(many.data(), many.size(), ReduceOp::Max);
  for (size_t i = 0; i < many.size(); ++i) ASSERT_EQ(many[i], double(i) * W);
  double lo = R + 3.0;
  comm_->all_reduce_scalars(&lo, 1, ReduceOp::Min);
  EXPECT_EQ(lo, 3.0);
}

TEST_F(NcclTest, NonBlockingHandles) {
  const size_t n = 1 << 20;
  std::vector<float> h(n, 1.0f);
  DeviceBuffer a(n * 4), b(n * 4);
  a.upload(h);
  b.upload(h);
  CommHandle ha = comm_->all_reduce_async(a.get(), n, DType::F32, ReduceOp::Sum, "a");
  CommHandle hb = comm_->all_reduce_async(b.get(), n, DType::F32, ReduceOp::Sum, "b");
  while (!hb->test()) {
  }
  EXPECT_TRUE(ha->test());  // stream order: a finished before b
  ha->wait();
  hb->wait();
  EXPECT_EQ(a.download<float>(1)[0], float(W));
  EXPECT_EQ(b.download<float>(n)[n - 1], float(W));
  // A handle destroyed unfinished waits for its collective.
  a.upload(h);
  comm_->all_reduce_async(a.get(), n, DType::F32, ReduceOp::Sum).reset();
  EXPECT_EQ(a.download<float>(n)[n / 2], float(W));
}

TEST_F(NcclTest, CollectivesFollowTheProducerStream) {
  // CudaOps writes the send buffer on its stream and the collective starts at once, without a host
  // synchronisation: the event ordering must make NCCL read the new values. Big enough that a race
  // would show.
  const size_t n = size_t(1) << 24;
  DeviceBuffer src(n * 4), buf(n * 4);
  std::vector<float> h(n, float(R + 1));
  src.upload(h);
  for (int rep = 0; rep < 3; ++rep) {
    ops_->zero(buf.get(), DType::F32, n);
    ops_->add(buf.get(), DType::F32, src.get(), DType::F32, n);  // buf = R + 1, queued on the ops stream
    comm_->all_reduce(buf.get(), n, DType::F32, ReduceOp::Sum);
    const auto got = buf.download<float>(n);
    const float want = float(W) * (W + 1) / 2;
    size_t bad = 0;
    for (size_t i = 0; i < n; i += 997) bad += got[i] != want;
    bad += got[n - 1] != want;
    EXPECT_EQ(bad, 0u) << "rep " << rep;
  }
}

TEST_F(NcclTest, CountersEqualTheMpiBackend) {
  MpiCommunicator mpi(MPI_COMM_WORLD);
  mpi.set_logging(true);
  comm_->set_logging(true);
  const size_t shard = 1000, full = shard * W;
  DeviceBuffer d1(full * 4), d2(full * 4);
  std::vector<float> h1(full, 1.0f), h2(full, 0.0f);
  auto run = [&](Communicator& c, void* a, void* b) {
    c.all_reduce(a, full, DType::F32, ReduceOp::Sum);
    c.reduce_scatter_async(a, b, shard, DType::F32, ReduceOp::Sum, "rs")->wait();
    c.all_gather_async(b, a, shard, DType::F32, "ag")->wait();
    c.broadcast(a, 10, DType::F32, 0);
    double s[2] = {1, 2};
    c.all_reduce_scalars(s, 2, ReduceOp::Sum);
    c.barrier();
  };
  run(*comm_, d1.get(), d2.get());
  run(mpi, h1.data(), h2.data());
  const CommReport &a = comm_->report(), &b = mpi.report();
  for (size_t k = 0; k < size_t(Collective::Count); ++k) {
    EXPECT_EQ(a.by[k].calls, b.by[k].calls) << collective_name(Collective(k));
    EXPECT_EQ(a.by[k].elements, b.by[k].elements) << collective_name(Collective(k));
  }
  EXPECT_EQ(a.barriers, b.barriers);
  EXPECT_EQ(a.bulk_elements(), uint64_t(2 * full + full + full));
  ASSERT_EQ(comm_->log().size(), mpi.log().size());
  for (size_t i = 0; i < mpi.log().size(); ++i) {
    EXPECT_EQ(comm_->log()[i].op, mpi.log()[i].op);
    EXPECT_EQ(comm_->log()[i].elements, mpi.log()[i].elements);
    EXPECT_EQ(comm_->log()[i].label, mpi.log()[i].label);
  }
  EXPECT_STREQ(comm_->backend_name(), "nccl");
  EXPECT_TRUE(comm_->supports_reduction(DType::BF16));
  EXPECT_FALSE(comm_->supports_reduction(DType::I32));
}

// A rank that never joins a collective while the others' compute stream waits behind it (enqueue_wait, as
// the engine completes a reduce-scatter): their host wait on that stream (CudaOps::download, as the step
// reads its norm) must end in a verdict naming the missing rank, not block for ever in a stream
// synchronisation. Own communicator and ops (the verdict aborts NCCL on the waiting ranks). Needs real
// streams: the emulated NCCL completes each collective inside its call.
namespace {
struct VerdictThrown {
  PeerVerdict v;
};

// Rank 1 never joins an all-reduce on `ring` that the compute stream of `ops` waits behind (the others' wait is
// guarded through `guarded`, whose peer timeout and watch apply): rank 0's download must end within 3.5 s in a
// verdict naming rank 1, waiting "the compute stream behind <what>"; the others only answer. Everything is left
// to the process: after the verdict the waiting ranks' NCCL is aborted and their stream waits on its event.
void expect_lost_peer_named(CudaOps* ops, NcclCommunicator* guarded, NcclCommunicator* ring, int R,
                            const std::string& what) {
  const int stuck = 1;
  guarded->peer_watch().set_verdict_handler([](const PeerVerdict& v) { throw VerdictThrown{v}; });
  guarded->peer_watch().set_grace(1.0);
  guarded->set_peer_timeout(R == 0 ? 1.0 : 0.0);  // rank 0 asks; the others only answer
  DeviceBuffer buf(4 * 1024);
  if (R == stuck) {
    std::this_thread::sleep_for(std::chrono::seconds(4));  // past rank 0's deadline and the grace period
    return;
  }
  CommHandle h = ring->all_reduce_async(buf.get(), 1024, DType::F32, ReduceOp::Sum, "probe");
  h->enqueue_wait();  // the compute stream now waits on the all-reduce
  const auto t0 = std::chrono::steady_clock::now();
  double norm = 0;
  bool thrown = false;
  try {
    ops->download(&norm, buf.get(), sizeof norm);
  } catch (const VerdictThrown& t) {
    thrown = true;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.5);
    EXPECT_EQ(t.v.missing, std::vector<int>{stuck});
    EXPECT_EQ(t.v.waiting.what, "the compute stream behind " + what);
  }
  EXPECT_TRUE(thrown) << "the download returned although rank " << stuck << " never joined";
  (void)h.release();  // unfinished: destroying it would wait on the aborted collective
}
}  // namespace

TEST_F(NcclTest, AHostWaitBehindALostPeerNamesIt) {
#if defined(ZERO_EMULATED_CUDA)
  GTEST_SKIP() << "emulated streams finish each call before it returns: no stream is ever left waiting";
#endif
  if (W < 2) GTEST_SKIP() << "needs 2 ranks";
  CudaOps* ops = make_cuda_ops().release();
  auto* nccl = new NcclCommunicator(MPI_COMM_WORLD, ops->stream());
  ops->waiter().set_guard(nccl->host_wait_guard());
  expect_lost_peer_named(ops, nccl, nccl, R, "all_reduce 'probe'");
}

// Hybrid sharding (comm/hybrid_groups.h) in groups of 1 rank: the compute stream waits behind the replicas'
// ring, not the shard group's (which holds no one else). The guard of both rings must end the host wait in a
// verdict naming the missing rank and the replicas' all-reduce it never joined; a guard of the shard group's
// ring alone described it as waiting behind nothing and left the replicas' NCCL kernels stuck.
TEST_F(NcclTest, AHostWaitBehindALostReplicaNamesIt) {
#if defined(ZERO_EMULATED_CUDA)
  GTEST_SKIP() << "emulated streams finish each call before it returns: no stream is ever left waiting";
#endif
  if (W != 2) GTEST_SKIP() << "needs 2 ranks (groups of 1)";
  CudaOps* ops = make_cuda_ops().release();
  auto made = make_hybrid_communicators<NcclCommunicator>(MPI_COMM_WORLD, 1, nullptr, ops->stream(), 60.0);
  NcclCommunicator* shard = made.first.release();
  NcclCommunicator* replicas = made.second.release();
  ops->waiter().set_guard(shard->host_wait_guard(replicas));
  expect_lost_peer_named(ops, shard, replicas, R, "all_reduce 'probe' (replicas)");
}
