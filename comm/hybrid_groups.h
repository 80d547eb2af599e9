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

namespace zero {

// The MPI communicators of one rank's shard group and replica set; the caller frees both (MPI_Comm_free).
struct HybridComms {
  MPI_Comm shard = MPI_COMM_NULL;
  MPI_Comm replicas = MPI_COMM_NULL;
};

// Collective over `world`. Throws ConfigError, the same on every rank, unless 1 <= shard_ranks <= W and
// shard_ranks divides W.
HybridComms split_hybrid(MPI_Comm world, int shard_ranks);

}  // namespace zero
