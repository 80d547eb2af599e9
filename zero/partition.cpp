#include "zero/partition.h"

#include <algorithm>
#include <cstdint>

#include "core/check.h"

namespace zero {

namespace {
size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }
}  // namespace

size_t shard_elements(size_t numel, int world) {
  ZERO_CHECK(world >= 1, "shard_elements: world {} < 1", world);
  const size_t W = static_cast<size_t>(world);
  const size_t per_rank = numel / W + (numel % W != 0);  // ceil(numel / world), without overflow
  return per_rank > SIZE_MAX - (kShardAlign - 1) ? SIZE_MAX : round_up(per_rank, kShardAlign);
}

size_t GroupInfo::numel() const {
  size_t n = 0;
  for (const auto& t : tensors) n += t.numel;
  return n;
}

Partition make_partition(const std::vector<GroupInfo>& groups, int world, size_t bucket_elements) {
  ZERO_REQUIRE(world >= 1, ConfigError, "world size must be at least 1 (got {})", world);
  ZERO_REQUIRE(bucket_elements > 0, ConfigError, "zero.bucket_elements must be positive (got 0)");
  ZERO_REQUIRE(!groups.empty(), ConfigError, "the model declared no parameter groups");
  Partition p;
  p.world = world;
  const size_t W = static_cast<size_t>(world);
  for (const auto& g : groups) {
    GroupLayout L;
    for (const auto& t : g.tensors) {
      L.tensor_offsets.push_back(L.numel);
      L.numel += t.numel;
    }
    ZERO_REQUIRE(L.numel > 0, ConfigError, "parameter group '{}' is empty", g.name);
    L.shard = shard_elements(L.numel, world);
    L.padded = L.shard * W;
    L.piece = L.shard;
    if (g.splittable && L.padded > bucket_elements) {
      L.piece = std::max(kShardAlign, bucket_elements / W / kShardAlign * kShardAlign);
      L.pieces = int((L.shard + L.piece - 1) / L.piece);
      if (L.pieces == 1) L.piece = L.shard;
    }
    if (L.split()) p.max_piece = std::max(p.max_piece, L.piece);
    p.max_unit_padded = std::max(p.max_unit_padded, L.unit_padded());
    L.full_offset = p.total_padded;
    L.shard_offset = p.total_shard;
    p.total_numel += L.numel;
    p.total_padded += L.padded;
    p.total_shard += L.shard;
    p.max_group_padded = std::max(p.max_group_padded, L.padded);
    p.groups.push_back(std::move(L));
  }
  // Buckets in backward order: walk groups from the last to the first.
  Bucket cur;
  auto flush = [&] {
    if (cur.groups.empty()) return;
    std::sort(cur.groups.begin(), cur.groups.end());
    cur.shard = cur.padded / W;
    for (int g : cur.groups) p.groups[g].bucket = static_cast<int>(p.buckets.size());
    p.max_bucket_padded = std::max(p.max_bucket_padded, cur.padded);
    // A split group is a bucket of its own (larger than a bucket) and is staged one piece at a time.
    const GroupLayout& first = p.groups[cur.groups.front()];
    p.max_staged = std::max(p.max_staged, first.split() ? first.unit_padded() : cur.padded);
    p.buckets.push_back(std::move(cur));
    cur = Bucket{};
  };
  for (int g = static_cast<int>(groups.size()) - 1; g >= 0; --g) {
    const size_t n = p.groups[g].padded;
    if (!cur.groups.empty() && cur.padded + n > bucket_elements) flush();
    cur.groups.push_back(g);
    cur.padded += n;
  }
  flush();
  return p;
}

}  // namespace zero
