// Where hybrid sharding's groups sit (comm/hybrid_groups.h), from literal node-of-rank tables (no MPI): block
// placement is recognised only when every node holds one block of the same size; a group holding ranks of two
// nodes is counted; srun's tasks per node read as one count or none.
#include <gtest/gtest.h>

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

// srun's SLURM_STEP_TASKS_PER_NODE (what a plan before MPI reads for zero.shard_ranks node): the count when every
// node has it, nothing otherwise.
TEST(HybridPlacement, SlurmTasksPerNodeIsOneCountOrNone) {
  EXPECT_EQ(parse_slurm_tasks_per_node("8"), 8);
  EXPECT_EQ(parse_slurm_tasks_per_node("8(x2)"), 8);
  EXPECT_EQ(parse_slurm_tasks_per_node("4(x3),4"), 4);
  EXPECT_EQ(parse_slurm_tasks_per_node("8,4"), std::nullopt);
  EXPECT_EQ(parse_slurm_tasks_per_node("8(x2),4"), std::nullopt);
  for (const char* bad : {"", "x", "8(2)", "8(x)", "8(x2", "0", "8,"}) EXPECT_EQ(parse_slurm_tasks_per_node(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace zero
