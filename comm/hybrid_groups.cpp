#include "comm/hybrid_groups.h"

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
