#include "checkpoint/shard_layout.h"

#include <algorithm>

#include "core/chunks.h"

namespace zero::checkpoint {

std::optional<FileLayout> FileLayout::checked(const std::vector<size_t>& shards) {
  FileLayout L;
  for (const size_t shard : shards) {
    L.section.push_back(L.bytes);
    L.shard.push_back(shard);
    uint64_t section_bytes = 0;
    if (__builtin_mul_overflow(uint64_t(shard), uint64_t(3 * sizeof(float)), &section_bytes) ||
        __builtin_add_overflow(L.bytes, section_bytes, &L.bytes))
      return std::nullopt;
  }
  return L;
}

std::optional<FileLayout> FileLayout::checked(const std::vector<GroupEntry>& groups) {
  std::vector<size_t> shards;
  for (const auto& g : groups) shards.push_back(g.shard);
  return checked(shards);
}

FileLayout FileLayout::of(const std::vector<GroupEntry>& groups) {
  std::optional<FileLayout> L = checked(groups);
  ZERO_CHECK(L, "a rank file of these {} groups passes 2^64 bytes (a manifest not validated?)", groups.size());
  return std::move(*L);
}

FileLayout FileLayout::of(const Partition& p) {
  std::vector<size_t> shards;
  for (const GroupLayout& g : p.groups) shards.push_back(g.shard);
  std::optional<FileLayout> L = checked(shards);
  ZERO_CHECK(L, "a rank file of this partition's {} groups passes 2^64 bytes", p.groups.size());
  return std::move(*L);
}

namespace {

// Calls fn(group, first element of the rank slice inside the optimizer shard, shard, byte offset in the file).
template <class F>
void for_each_rank_slice(const Engine& e, F&& fn) {
  const FileLayout L = FileLayout::of(e.partition());
  const size_t rank = size_t(e.rank());
  for (int g = 0; g < int(L.shard.size()); ++g) {
    const OptimizerShard s = e.optimizer_shard(g);
    const size_t shard = L.shard[g];
    const size_t first = rank * shard;  // stage 0 holds the whole padded range: take the rank's part
    ZERO_CHECK(first >= s.begin && first + shard <= s.begin + s.count,
               "group {}: rank slice [{}, {}) outside the optimizer shard [{}, {})", g, first, first + shard, s.begin,
               s.begin + s.count);
    fn(g, first - s.begin, shard, L.section[g]);
  }
}

}  // namespace

uint64_t rank_file_bytes(const Partition& p) { return FileLayout::of(p).bytes; }

uint64_t rank_file_bytes(const Engine& e) { return rank_file_bytes(e.partition()); }

HostVector<char> read_rank_file(Engine& e) {
  HostVector<char> out(rank_file_bytes(e));
  for_each_rank_slice(e, [&](int g, size_t begin, size_t shard, uint64_t off) {
    float* base = reinterpret_cast<float*>(out.data() + off);
    e.read_optimizer_state(g, begin, shard, base, base + shard, base + 2 * shard);
  });
  return out;
}

namespace {

// The one of three array pointers that is `a`: the others null, so the engine copies one array.
template <class T>
T* pick(StateArray want, StateArray a, T* p) {
  return a == want ? p : nullptr;
}

// Elements per piece of a streamed file: chunk_bytes' worth, at least one.
size_t chunk_elements(size_t chunk_bytes) { return std::max<size_t>(1, chunk_bytes / sizeof(float)); }

// Calls fn(group, array, first element in the optimizer shard, elements) for the file's pieces in file order,
// each at most chunk_elements(chunk_bytes).
template <class F>
void for_each_rank_chunk(const Engine& e, size_t chunk_bytes, F&& fn) {
  const size_t chunk = chunk_elements(chunk_bytes);
  for_each_rank_slice(e, [&](int g, size_t begin, size_t shard, uint64_t) {
    for (StateArray a : {StateArray::Master, StateArray::M, StateArray::V})
      for_each_chunk(shard, chunk, [&](size_t done, size_t n) { fn(g, a, begin + done, n); });
  });
}

// The host buffer of a streamed file: one piece, no larger than the whole file.
HostVector<float> chunk_buffer(const Engine& e, size_t chunk_bytes) {
  return HostVector<float>(std::min<uint64_t>(chunk_elements(chunk_bytes), rank_file_bytes(e) / sizeof(float) + 1));
}

}  // namespace

void stream_rank_file(Engine& e, const std::function<void(const void*, size_t)>& sink, size_t chunk_bytes) {
  HostVector<float> buf = chunk_buffer(e, chunk_bytes);
  for_each_rank_chunk(e, chunk_bytes, [&](int g, StateArray a, size_t begin, size_t n) {
    float* b = buf.data();
    e.read_optimizer_state(g, begin, n, pick(StateArray::Master, a, b), pick(StateArray::M, a, b),
                           pick(StateArray::V, a, b));
    sink(b, n * sizeof(float));
  });
}

void write_state_array(Engine& e, int g, StateArray a, size_t begin, size_t count, const float* src) {
  e.write_optimizer_state(g, begin, count, pick(StateArray::Master, a, src), pick(StateArray::M, a, src),
                          pick(StateArray::V, a, src));
}

void load_rank_file(Engine& e, const std::function<void(void*, size_t)>& source, size_t chunk_bytes) {
  HostVector<float> buf = chunk_buffer(e, chunk_bytes);
  for_each_rank_chunk(e, chunk_bytes, [&](int g, StateArray a, size_t begin, size_t n) {
    source(buf.data(), n * sizeof(float));
    write_state_array(e, g, a, begin, n, buf.data());
  });
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

}  // namespace zero::checkpoint
