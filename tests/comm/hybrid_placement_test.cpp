// Where hybrid sharding's groups sit (comm/hybrid_groups.h), from literal node-of-rank tables (no MPI): block
// placement is recognised only when every node holds one block of the same size; a group holding ranks of two
// nodes is counted; srun's tasks per node read node by node, and the launch's table before MPI from them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "comm/hybrid_groups.h"
#include "comm/launch_env.h"

namespace zero {
namespace {

TEST(HybridPlacement, NodeBlocksAreEqualRunsOfConsecutiveRanks) {
  EXPECT_EQ(node_block_ranks({7}), 1);
  EXPECT_EQ(node_block_ranks({0, 0, 0, 0}), 4);                 // one node
  EXPECT_EQ(node_block_ranks({0, 0, 2, 2, 4, 4}), 2);           // srun's block distribution, 3 nodes of 2
  EXPECT_EQ(node_block_ranks({5, 5, 5, 0, 0, 0}), 3);           // ids need not be ordered
  EXPECT_EQ(node_block_ranks({0, 1, 0, 1}), 0);                 // round-robin (--map-by node, cyclic)
  EXPECT_EQ(node_block_ranks({0, 0, 0, 3, 3, 5}), 0);           // unequal nodes: 3, 2, 1
  EXPECT_EQ(node_block_ranks({0, 0, 2, 2, 2, 2}), 0);           // 2 then 4
  EXPECT_EQ(node_block_ranks({0, 0, 2, 2, 0, 0}), 0);           // a node in two blocks
  EXPECT_EQ(node_block_ranks({}), 0);
}

TEST(HybridPlacement, GroupsSpanningNodesAreCounted) {
  const std::vector<int> blocks = {0, 0, 0, 0, 4, 4, 4, 4};    // 2 nodes of 4
  EXPECT_EQ(shard_groups_spanning_nodes(blocks, 4), 0);
  EXPECT_EQ(shard_groups_spanning_nodes(blocks, 2), 0);
  EXPECT_EQ(shard_groups_spanning_nodes(blocks, 8), 1);          // one group over both nodes
  const std::vector<int> cyclic = {0, 1, 0, 1, 0, 1, 0, 1};
  EXPECT_EQ(shard_groups_spanning_nodes(cyclic, 4), 2);
  EXPECT_EQ(shard_groups_spanning_nodes(cyclic, 1), 0);
  const std::vector<int> three = {0, 0, 0, 3, 3, 3};             // 2 nodes of 3, groups of 2: {0,1} {2,3} {4,5}
  EXPECT_EQ(shard_groups_spanning_nodes(three, 2), 1);
}

// srun's SLURM_STEP_TASKS_PER_NODE (what a plan before MPI reads for zero.shard_ranks node): each node's count.
TEST(HybridPlacement, SlurmTasksPerNodeIsEachNodesCount) {
  using V = std::vector<int>;
  EXPECT_EQ(parse_slurm_tasks_per_node("8", 64), V({8}));
  EXPECT_EQ(parse_slurm_tasks_per_node("8(x2)", 64), V({8, 8}));
  EXPECT_EQ(parse_slurm_tasks_per_node("4(x3),4", 64), V({4, 4, 4, 4}));
  EXPECT_EQ(parse_slurm_tasks_per_node("8,4", 64), V({8, 4}));
  EXPECT_EQ(parse_slurm_tasks_per_node("2(x2),1", 64), V({2, 2, 1}));
  for (const char* bad : {"", "x", "8(2)", "8(x)", "8(x2", "0", "8,"}) EXPECT_EQ(parse_slurm_tasks_per_node(bad, 64), std::nullopt) << bad;
  // More tasks than the step has (a corrupt K or N) is refused before anything is expanded.
  EXPECT_EQ(parse_slurm_tasks_per_node("8(x2),4", 20), V({8, 8, 4}));
  for (const char* big : {"8(x2),4", "21", "1(x21)", "1(x999999999999999)", "99999999999999(x1)"})
    EXPECT_EQ(parse_slurm_tasks_per_node(big, 19), std::nullopt) << big;
}

// The launch's node table before MPI, read as the run reads MPI's: srun's counts in blocks (8,4: no block size, so
// zero.shard_ranks node is refused as at the run's start), mpirun's local size in blocks; nothing that does not
// add up to the world.
TEST(HybridPlacement, TheLauncherNodeTableIsBlocksOfItsCounts) {
  using V = std::vector<int>;
  setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2)", 1);
  unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(launcher_node_of_rank(4), V({0, 0, 1, 1}));
  EXPECT_EQ(node_block_ranks(*launcher_node_of_rank(4)), 2);
  EXPECT_EQ(launcher_node_of_rank(5), std::nullopt);
  setenv("SLURM_STEP_TASKS_PER_NODE", "3,1", 1);
  EXPECT_EQ(launcher_node_of_rank(4), V({0, 0, 0, 1}));
  EXPECT_EQ(node_block_ranks(*launcher_node_of_rank(4)), 0);
  unsetenv("SLURM_STEP_TASKS_PER_NODE");
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  EXPECT_EQ(launcher_node_of_rank(6), V({0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(launcher_node_of_rank(4), std::nullopt);
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_EQ(launcher_node_of_rank(4), std::nullopt);
}

}  // namespace
}  // namespace zero
