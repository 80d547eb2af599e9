#include "checkpoint/reshard_plan.h"

#include <algorithm>

#include "core/check.h"

namespace zero::checkpoint {

std::vector<ReadSpan> plan_reads(const std::vector<GroupEntry>& saved, int saved_world, const std::vector<DestRange>& dest) {
  ZERO_CHECK(saved.size() == dest.size(), "plan_reads: {} saved groups but {} destination ranges", saved.size(), dest.size());
  std::vector<ReadSpan> spans;
  for (size_t g = 0; g < saved.size(); ++g) {
    const GroupEntry& G = saved[g];
    const size_t lo = dest[g].begin, hi = std::min(dest[g].begin + dest[g].count, G.numel);  // real elements only
    if (lo >= hi) continue;
    for (int q = int(lo / G.shard); q < saved_world && size_t(q) * G.shard < hi; ++q) {
      const size_t q0 = size_t(q) * G.shard, q1 = q0 + G.shard;
      const size_t a = std::max(lo, q0), b = std::min(hi, q1);
      if (a >= b) continue;
      spans.push_back({q, int(g), a - q0, a - lo, b - a});
    }
  }
  return spans;
}

std::vector<DestRange> uncovered(const std::vector<ReadSpan>& spans, int group, size_t count) {
  std::vector<DestRange> covered;
  for (const ReadSpan& sp : spans)
    if (sp.group == group) covered.push_back({sp.dst_elem, sp.count});
  std::sort(covered.begin(), covered.end(), [](const DestRange& a, const DestRange& b) { return a.begin < b.begin; });
  std::vector<DestRange> gaps;
  size_t at = 0;
  for (const DestRange& c : covered) {
    if (c.begin > at) gaps.push_back({at, c.begin - at});
    at = std::max(at, c.begin + c.count);
  }
  if (at < count) gaps.push_back({at, count - at});
  return gaps;
}

}  // namespace zero::checkpoint
