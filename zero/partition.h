// How the engine lays parameters out in memory: one flat region per group, each split into
// world-size shards of equal size (padded at the end, so every world size works, 3, 5 and 7 too),
// and the buckets that gradient reduction works in. Pure arithmetic: allocates nothing.
//
// Shards are whole multiples of kShardAlign elements, so every rank's slice starts 256 bytes (fp32)
// or 128 bytes (bf16) aligned at any world size: vector loads and NCCL's fast paths need no tail.
//
// A splittable group (the model reads and writes it in pieces: an embedding) larger than a bucket is
// handed out in pieces, so no buffer is ever sized by it. Piece k of such a group is, on every rank r,
// the shard elements [k*c, min((k+1)*c, shard)), i.e. the flat runs [r*shard + k*c, ...) for r = 0..W-1:
// exactly one chunk of a reduce-scatter, and one all-gather of the shards' k-th slices.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace zero {

constexpr size_t kShardAlign = 64;  // elements

// The shard rule: elements per rank of a group of `numel` elements at `world` (>= 1) ranks, ceil(numel / world)
// rounded up to kShardAlign. Never overflows: SIZE_MAX where the rounding would pass it (no model's group comes
// near; a damaged manifest's numel may, and the checkpoint reader checks those against this rule too).
size_t shard_elements(size_t numel, int world);

struct TensorInfo {
  std::string name;
  size_t numel = 0;
  bool weight_decay = true;
};

struct GroupInfo {
  std::string name;
  std::vector<TensorInfo> tensors;
  bool splittable = false;  // the model can consume it in pieces (see above)
  size_t numel() const;
};

struct GroupLayout {
  size_t numel = 0;        // real elements (sum of its tensors)
  size_t shard = 0;        // elements per rank: shard_elements(numel, world)
  size_t padded = 0;       // shard * world
  size_t full_offset = 0;  // start in a full (all-groups, padded) flat buffer
  size_t shard_offset = 0; // start in a rank's shard flat buffer
  std::vector<size_t> tensor_offsets;  // start of each tensor inside the group
  int bucket = -1;
  // Pieces (a splittable group larger than a bucket): c = piece elements per rank, the largest multiple
  // of kShardAlign not above bucket_elements / world, but at least kShardAlign (so with buckets under
  // 64 elements a rank, a piece is larger than the bucket's share); pieces = ceil(shard / c). Whole groups: 1 piece, c = shard.
  size_t piece = 0;
  int pieces = 1;
  bool split() const { return pieces > 1; }
  size_t piece_begin(int k) const { return size_t(k) * piece; }  // in shard elements
  size_t piece_len(int k) const { return std::min(piece, shard - piece_begin(k)); }
  // What is staged or gathered at once: one piece of every rank (a whole group is its single piece).
  size_t unit_padded() const { return piece * size_t(padded / shard); }
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
  // The largest run of gradient staged at once (a bucket, or one piece of a split group), and the
  // largest unit gathered at once at stage 3 (a whole group, or one piece): the sizes of the engine's
  // bucket slots and gather ring slots.
  size_t max_staged = 0;
  size_t max_unit_padded = 0;
  // The largest piece of a split group, elements per rank (0 without one): a piece is reduce-scattered
  // whole, so the engine's reduction chunk (buffer_plan) is never smaller.
  size_t max_piece = 0;
};

Partition make_partition(const std::vector<GroupInfo>& groups, int world, size_t bucket_elements);

}  // namespace zero
