// Which bytes a rank reads on load. Each group's destination range (the new rank's optimizer shard of
// the new padded layout) is cut along the saved ranks' slices [q*shard, (q+1)*shard); each piece is one
// read per state array from rank_<q>.bin. Only real elements (< numel) are read; the rest of the
// destination is padding and is zero. Works for any old and new world size and stage. Pure arithmetic.
#pragma once
#include <cstddef>
#include <vector>

#include "checkpoint/manifest.h"

namespace zero::checkpoint {

struct DestRange {
  size_t begin = 0;  // first element of the group's padded range this rank holds
  size_t count = 0;
};

struct ReadSpan {
  int file = 0;         // saved rank q (rank_<q>.bin)
  int group = 0;
  size_t src_elem = 0;  // element inside file q's slice of the group
  size_t dst_elem = 0;  // element inside the destination range
  size_t count = 0;
};

// dest[g] for every group of `saved` (same group count); spans in group order, then file order.
std::vector<ReadSpan> plan_reads(const std::vector<GroupEntry>& saved, int saved_world, const std::vector<DestRange>& dest);
// What no span of group g covers in its destination [0, count) (the padding a load zeroes), ascending, as
// ranges of destination elements (begin relative to the destination range, like ReadSpan::dst_elem).
std::vector<DestRange> uncovered(const std::vector<ReadSpan>& spans, int group, size_t count);

}  // namespace zero::checkpoint
