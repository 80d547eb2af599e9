// The CPU backend's collectives cut into pieces (MpiCommunicator::kPieceBytes), checked against sums
// computed here in closed form (every term a small integer, exact in fp32 and bf16) and against the calls
// counted at the MPI boundary (tests/common/pmpi_counter.h). The last test keeps two pieced collectives in
// flight and polls them at rank-dependent times: a later piece started by test() (timing) rather than by
// wait() (program order) would start the ranks' collectives in different orders, which MPI forbids.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.h"
#include "core/dtype.h"
#include "tests/common/pmpi_counter.h"

namespace zero {
namespace {

using testing::pmpi_count;
using testing::pmpi_reset;

// Rank r's term at element i: a small integer; the sum over W ranks, W * (i % 31) + W (W - 1) / 2, stays under
// 256 for W <= 4, so every partial sum is exact in bf16 too.
float term(size_t i, int r) { return float(i % 31 + size_t(r)); }
float total(size_t i, int W) { return float(size_t(W) * (i % 31) + size_t(W * (W - 1) / 2)); }

TEST(MpiCommunicatorPieces, AllReduceAcrossPieces) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int W = comm.world(), R = comm.rank();
  const size_t piece = MpiCommunicator::kPieceBytes / sizeof(float), count = 3 * piece + 17;
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = term(i, R);
  pmpi_reset();
  comm.all_reduce(buf.data(), count, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(pmpi_count("MPI_Iallreduce").calls, 4u);
  EXPECT_EQ(pmpi_count("MPI_Iallreduce").max_count_arg, piece);
  EXPECT_EQ(pmpi_count("MPI_Iallreduce").count_args, count);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += buf[i] != total(i, W);
  EXPECT_EQ(wrong, 0u);
}

// recv_count = 2 c + 5 with c the elements of one rank's slice of a piece: three pieces, the last short.
template <class T>
void reduce_scatter_across_pieces(DType t) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int W = comm.world(), R = comm.rank();
  const size_t c = MpiCommunicator::kPieceBytes / (size_t(W) * sizeof(T)), recv_count = 2 * c + 5;
  std::vector<T> send(W * recv_count), recv(recv_count, T(-1.0f));
  for (int j = 0; j < W; ++j)  // rank j's block: element i of it is term(j * 31 + i, R)
    for (size_t i = 0; i < recv_count; ++i) send[j * recv_count + i] = T(term(j * 31 + i, R));
  pmpi_reset();
  comm.reduce_scatter(send.data(), recv.data(), recv_count, t, ReduceOp::Sum);
  EXPECT_EQ(pmpi_count("MPI_Ireduce_scatter_block").calls, 3u);
  EXPECT_EQ(pmpi_count("MPI_Ireduce_scatter_block").max_count_arg, c);
  EXPECT_EQ(pmpi_count("MPI_Ireduce_scatter_block").count_args, recv_count);
  size_t wrong = 0;
  for (size_t i = 0; i < recv_count; ++i) wrong += float(recv[i]) != total(R * 31 + i, W);
  EXPECT_EQ(wrong, 0u);
}

TEST(MpiCommunicatorPieces, ReduceScatterAcrossPiecesF32) { reduce_scatter_across_pieces<float>(DType::F32); }
TEST(MpiCommunicatorPieces, ReduceScatterAcrossPiecesBf16) { reduce_scatter_across_pieces<bf16>(DType::BF16); }

TEST(MpiCommunicatorPieces, SmallAndEmptyAreOneCallOrNone) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int W = comm.world(), R = comm.rank();
  std::vector<float> buf(100);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = term(i, R);
  pmpi_reset();
  comm.all_reduce(buf.data(), buf.size(), DType::F32, ReduceOp::Sum);
  comm.all_reduce(buf.data(), 0, DType::F32, ReduceOp::Sum);
  EXPECT_EQ(pmpi_count("MPI_Iallreduce").calls, 1u);
  for (size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], total(i, W)) << i;
}

TEST(MpiCommunicatorPieces, TwoInFlightPolledAtDifferentTimes) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  comm.set_peer_timeout(30);  // a mismatched order that hangs ends the job (exit 76) instead
  const int W = comm.world(), R = comm.rank();
  const size_t piece = MpiCommunicator::kPieceBytes / sizeof(float), count = 4 * piece + 3;
  const size_t c = MpiCommunicator::kPieceBytes / (size_t(W) * sizeof(float)), recv_count = 4 * c + 1;
  std::vector<float> a(count), send(W * recv_count), recv(recv_count);
  for (size_t i = 0; i < count; ++i) a[i] = term(i, R);
  for (size_t i = 0; i < send.size(); ++i) send[i] = term(i, R);
  auto ha = comm.all_reduce_async(a.data(), count, DType::F32, ReduceOp::Sum, "a");
  auto hb = comm.reduce_scatter_async(send.data(), recv.data(), recv_count, DType::F32, ReduceOp::Sum, "b");
  // The ranks poll at different rates and in opposite orders (rank 0: a then b, the others b then a): had
  // test() started the next piece of whichever it found done, the ranks would start those pieces in
  // different orders.
  for (int k = 0; k < 200; ++k) {
    if (R > 0) std::this_thread::sleep_for(std::chrono::microseconds(200 * R));
    if (R == 0) ha->test();
    EXPECT_FALSE(hb->test()) << "pieces remain to be started by wait()";
    if (R != 0) ha->test();
  }
  hb->wait();  // the reverse of the start order, on every rank
  ha->wait();
  EXPECT_TRUE(ha->test());
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += a[i] != total(i, W);
  for (size_t i = 0; i < recv_count; ++i) wrong += recv[i] != total(R * recv_count + i, W);
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace zero
