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
#include <utility>

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

// The shard group's and the replicas' communicators of type C, built as C(that MPI_Comm, args...) (which
// duplicates it) from split_hybrid; the split's MPI communicators are freed. Collective over `world`.
template <class C, class... Args>
std::pair<std::unique_ptr<C>, std::unique_ptr<C>> make_hybrid_communicators(MPI_Comm world, int shard_ranks,
                                                                            const Args&... args) {
  HybridComms h = split_hybrid(world, shard_ranks);
  std::pair<std::unique_ptr<C>, std::unique_ptr<C>> made{std::make_unique<C>(h.shard, args...),
                                                         std::make_unique<C>(h.replicas, args...)};
  MPI_Comm_free(&h.shard);
  MPI_Comm_free(&h.replicas);
  return made;
}

}  // namespace zero
