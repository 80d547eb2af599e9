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

namespace {

// Calls fn(group, first element of the rank slice inside the optimizer shard, shard, byte offset in the file).
template <class F>
void for_each_rank_slice(const Engine& e, F&& fn) {
  const Partition& p = e.partition();
  const size_t rank = size_t(e.rank());
  uint64_t off = 0;
  for (int g = 0; g < int(p.groups.size()); ++g) {
    const OptimizerShard s = e.optimizer_shard(g);
    const size_t shard = p.groups[g].shard;
    const size_t first = rank * shard;  // stage 0 holds the whole padded range: take the rank's part
    ZERO_CHECK(first >= s.begin && first + shard <= s.begin + s.count,
               "group {}: rank slice [{}, {}) outside the optimizer shard [{}, {})", g, first, first + shard, s.begin,
               s.begin + s.count);
    fn(g, first - s.begin, shard, off);
    off += 3 * uint64_t(shard) * sizeof(float);
  }
}

}  // namespace

uint64_t rank_file_bytes(const Partition& p) {
  uint64_t n = 0;
  for (const GroupLayout& g : p.groups) n += 3 * uint64_t(g.shard) * sizeof(float);
  return n;
}

uint64_t rank_file_bytes(const Engine& e) { return rank_file_bytes(e.partition()); }

std::vector<char> read_rank_file(Engine& e) {
  std::vector<char> out(rank_file_bytes(e));
  for_each_rank_slice(e, [&](int g, size_t begin, size_t shard, uint64_t off) {
    float* base = reinterpret_cast<float*>(out.data() + off);
    e.read_optimizer_state(g, begin, shard, base, base + shard, base + 2 * shard);
  });
  return out;
}

std::optional<std::vector<Segment>> rank_file_segments(const Engine& e) {
  if (!e.optimizer_in_host_memory()) return std::nullopt;
  std::vector<Segment> out;
  for_each_rank_slice(e, [&](int g, size_t begin, size_t shard, uint64_t) {
    const OptimizerShard s = e.optimizer_shard(g);
    for (const float* a : {s.master, s.m, s.v}) out.push_back({a + begin, shard * sizeof(float)});
  });
  return out;
}

void write_rank_file(Engine& e, const std::vector<char>& bytes) {
  ZERO_CHECK(bytes.size() == rank_file_bytes(e), "write_rank_file: {} bytes for a file of {}", bytes.size(),
             rank_file_bytes(e));
  for_each_rank_slice(e, [&](int g, size_t begin, size_t shard, uint64_t off) {
    const float* base = reinterpret_cast<const float*>(bytes.data() + off);
    e.write_optimizer_state(g, begin, shard, base, base + shard, base + 2 * shard);
  });
}

}  // namespace zero::checkpoint
