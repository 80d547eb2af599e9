#include "checkpoint/shard_layout.h"

namespace zero::checkpoint {

FileLayout FileLayout::of(const std::vector<GroupEntry>& groups) {
  FileLayout L;
  for (const auto& g : groups) {
    L.section.push_back(L.bytes);
    L.shard.push_back(g.shard);
    L.bytes += 3 * uint64_t(g.shard) * sizeof(float);
  }
  return L;
}

std::vector<RankSlice> engine_rank_slices(Engine& e) {
  const Partition& p = e.partition();
  const size_t rank = size_t(e.comm().rank());
  std::vector<RankSlice> out;
  for (int g = 0; g < int(p.groups.size()); ++g) {
    const OptimizerShard s = e.optimizer_shard(g);
    const size_t shard = p.groups[g].shard;
    const size_t first = rank * shard;  // stage 0 holds the whole padded range: take the rank's part
    ZERO_CHECK(first >= s.begin && first + shard <= s.begin + s.count,
               "group {}: rank slice [{}, {}) outside the optimizer shard [{}, {})", g, first, first + shard, s.begin,
               s.begin + s.count);
    const size_t o = first - s.begin;
    out.push_back({s.master + o, s.m + o, s.v + o, shard});
  }
  return out;
}

std::vector<Segment> engine_file_segments(Engine& e) {
  std::vector<Segment> segs;
  for (const RankSlice& s : engine_rank_slices(e))
    for (const float* a : {s.master, s.m, s.v}) segs.push_back({a, s.count * sizeof(float)});
  return segs;
}

}  // namespace zero::checkpoint
