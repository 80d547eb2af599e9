// Hybrid sharding's two communicators (zero/engine.h): a world of W ranks as W / S shard groups of S
// consecutive ranks (a node each under Slurm's and mpirun's block placement), and, across them, the
// replica sets: the ranks at the same place in every group.
//
//   shard group of rank r:  ranks [S * (r / S), S * (r / S) + S)        its rank there: r % S
//   replicas of rank r:     ranks r % S, r % S + S, r % S + 2S, ...     its rank there: r / S
//
// so replicas.rank() * S + shard.rank() = r, the engine's data-parallel rank.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/peer_watch.h"

namespace zero {

// Whether `shard_ranks` asks for hybrid sharding at `world` ranks: 0, or the world or more, is one group of all.
inline bool hybrid_sharding(int shard_ranks, int world) { return shard_ranks > 0 && shard_ranks < world; }

// The MPI communicators of one rank's shard group and replica set; the caller frees both (MPI_Comm_free).
struct HybridComms {
  MPI_Comm shard = MPI_COMM_NULL;
  MPI_Comm replicas = MPI_COMM_NULL;
};

// Collective over `world`. Throws ConfigError, the same on every rank, unless 1 <= shard_ranks <= W and
// shard_ranks divides W.
HybridComms split_hybrid(MPI_Comm world, int shard_ranks);
// The elements per group checked as split_hybrid checks them, without MPI (a plan before any launch): shard_ranks
// itself, or `world` when it asks for no hybrid sharding (hybrid_sharding).
int shard_group_size(int shard_ranks, int world);

// Placement (no MPI; node_of_rank[r]: an id of rank r's node, LaunchInfo::node_of_rank, equal ids = one node).
// The ranks of a node when every node holds one block of that many consecutive ranks (block placement: srun's
// default and mpirun's --map-by slot/core), so shard groups of that size are the nodes; 0 when the nodes hold
// unequal counts or ranks round-robin (srun --distribution=cyclic, mpirun --map-by node).
int node_block_ranks(const std::vector<int>& node_of_rank);
// Collective over `comm`: node_of_rank for its ranks (index: rank in comm; value: the comm rank of the lowest rank
// on that rank's node, MPI_COMM_TYPE_SHARED), the table the two functions around it read.
std::vector<int> nodes_of_ranks(MPI_Comm comm);
// How many of the shard groups of `shard_ranks` consecutive ranks (split_hybrid's) hold ranks of more than one
// node: their gathers and reductions cross the network, the traffic hybrid sharding means to keep inside a node.
int shard_groups_spanning_nodes(const std::vector<int>& node_of_rank, int shard_ranks);
// The launchers' options for the two placements, in every message that names them.
inline constexpr const char* kBlockPlacement = "srun's default --distribution=block, mpirun --map-by slot";
inline constexpr const char* kRoundRobinPlacement = "srun --distribution=cyclic or mpirun --map-by node";
// The refusal of a group size that follows the nodes (`asked`: "zero.shard_ranks node") when node_block_ranks
// is 0; `key` takes a number instead.
std::string node_placement_error(const std::string& asked, const std::string& key);

// The shard group's and the replicas' communicators of type C, built as C(that MPI_Comm, args..., watch) (which
// duplicates it) from split_hybrid; the split's MPI communicators are freed. Collective over `world`.
// Both wait through one PeerWatch over `world` (comm/peer_watch.h): `watch`, the job's communicator's
// (Communicator::shared_peer_watch, over `world`), or a new one when null. So a rank that stops is named by its
// rank in the job, whichever ring the others are stuck in, and a rank waiting in one ring (or in the job's
// communicator) answers a question asked from another (with a watch each, over its own ring, a verdict named
// ring-local ranks, and called a live rank waiting elsewhere missing). Their waits say which ring: "(shard
// group)", "(replicas)".
template <class C, class... Args>
std::pair<std::unique_ptr<C>, std::unique_ptr<C>> make_hybrid_communicators(MPI_Comm world, int shard_ranks,
                                                                            std::shared_ptr<PeerWatch> watch,
                                                                            const Args&... args) {
  HybridComms h = split_hybrid(world, shard_ranks);
  if (!watch) watch = std::make_shared<PeerWatch>(world);
  std::pair<std::unique_ptr<C>, std::unique_ptr<C>> made{std::make_unique<C>(h.shard, args..., watch),
                                                         std::make_unique<C>(h.replicas, args..., watch)};
  MPI_Comm_free(&h.shard);
  MPI_Comm_free(&h.replicas);
  made.first->set_scope("shard group");
  made.second->set_scope("replicas");
  return made;
}

}  // namespace zero
