// How the engine lays parameters out in memory: one flat region per group, each split into
// world-size shards of equal size (padded at the end, so every world size works, 3, 5 and 7 too),
// and the buckets that gradient reduction works in. Pure arithmetic: allocates nothing.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace zero {

struct TensorInfo {
  std::string name;
  size_t numel = 0;
  bool weight_decay = true;
};

struct GroupInfo {
  std::string name;
  std::vector<TensorInfo> tensors;
  size_t numel() const;
};

struct GroupLayout {
  size_t numel = 0;        // real elements (sum of its tensors)
  size_t shard = 0;        // elements per rank: ceil(numel / world)
  size_t padded = 0;       // shard * world
  size_t full_offset = 0;  // start in a full (all-groups, padded) flat buffer
  size_t shard_offset = 0; // start in a rank's shard flat buffer
  std::vector<size_t> tensor_offsets;  // start of each tensor inside the group
  int bucket = -1;
};

// A run of consecutive groups, formed in backward order up to bucket_elements (padded) elements;
// a group larger than that is a bucket of its own. Groups are kept in ascending order inside.
struct Bucket {
  std::vector<int> groups;  // ascending
  size_t padded = 0;        // sum of the groups' padded sizes
  size_t shard = 0;         // padded / world: what each rank receives from its reduce-scatter
  int first_group() const { return groups.front(); }
  int last_group() const { return groups.back(); }
};

struct Partition {
  int world = 1;
  std::vector<GroupLayout> groups;
  std::vector<Bucket> buckets;  // in backward (launch) order: bucket 0 holds the last groups
  size_t total_numel = 0;       // real parameters
  size_t total_padded = 0;      // Psi: sum of padded group sizes
  size_t total_shard = 0;       // sum of shard sizes (= total_padded / world)
  size_t max_bucket_padded = 0;
  size_t max_group_padded = 0;
};

Partition make_partition(const std::vector<GroupInfo>& groups, int world, size_t bucket_elements);

}  // namespace zero
