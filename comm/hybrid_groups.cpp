#include "comm/hybrid_groups.h"

#include <algorithm>

#include "comm/mpi_check.h"
#include "core/check.h"

namespace zero {

namespace {
void require_divides(int shard_ranks, int W) {
  ZERO_REQUIRE(shard_ranks >= 1 && shard_ranks <= W && W % shard_ranks == 0, ConfigError,
               "shard groups of {} ranks do not divide a world of {} ranks (a divisor of {} is needed)", shard_ranks,
               W, W);
}
}  // namespace

int shard_group_size(int shard_ranks, int world) {
  if (!hybrid_sharding(shard_ranks, world)) return world;
  require_divides(shard_ranks, world);
  return shard_ranks;
}

int node_block_ranks(const std::vector<int>& node_of_rank) {
  const int W = int(node_of_rank.size());
  int L = 0;  // the first node's block
  while (L < W && node_of_rank[size_t(L)] == node_of_rank[0]) ++L;
  if (L == 0 || W % L != 0) return 0;
  for (int r = 0; r < W; ++r)
    if (node_of_rank[size_t(r)] != node_of_rank[size_t(L * (r / L))]) return 0;  // a block holds two nodes
  // A node in two blocks (A A B B A A) is not one block a node: each id once.
  std::vector<int> firsts;
  for (int r = 0; r < W; r += L) firsts.push_back(node_of_rank[size_t(r)]);
  std::sort(firsts.begin(), firsts.end());
  return std::adjacent_find(firsts.begin(), firsts.end()) == firsts.end() ? L : 0;
}

std::string node_placement_error(const std::string& asked, const std::string& key) {
  return asked + " needs every node to hold the same number of ranks, placed in blocks of consecutive ranks (" +
         kBlockPlacement + "); these ranks are not (placed round-robin: " + kRoundRobinPlacement +
         "? or nodes with different counts). Place them in blocks, or give " + key + " a number";
}

std::vector<int> nodes_of_ranks(MPI_Comm comm) {
  int rank = 0, W = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &W));
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  int node_id = rank;  // the node's lowest rank (split keyed by rank: its local rank 0)
  MPI_CHECK(MPI_Bcast(&node_id, 1, MPI_INT, 0, local));
  MPI_CHECK(MPI_Comm_free(&local));
  std::vector<int> nodes(size_t(W), 0);
  MPI_CHECK(MPI_Allgather(&node_id, 1, MPI_INT, nodes.data(), 1, MPI_INT, comm));
  return nodes;
}

int shard_groups_spanning_nodes(const std::vector<int>& node_of_rank, int shard_ranks) {
  const int W = int(node_of_rank.size());
  int spanning = 0;
  for (int first = 0; shard_ranks > 0 && first < W; first += shard_ranks) {
    bool one_node = true;
    for (int r = first; r < std::min(W, first + shard_ranks); ++r)
      one_node = one_node && node_of_rank[size_t(r)] == node_of_rank[size_t(first)];
    spanning += one_node ? 0 : 1;
  }
  return spanning;
}

HybridComms split_hybrid(MPI_Comm world, int shard_ranks) {
  int rank = 0, W = 1;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &W));
  require_divides(shard_ranks, W);
  HybridComms c;
  MPI_CHECK(MPI_Comm_split(world, rank / shard_ranks, rank % shard_ranks, &c.shard));
  MPI_CHECK(MPI_Comm_split(world, rank % shard_ranks, rank / shard_ranks, &c.replicas));
  return c;
}

}  // namespace zero
