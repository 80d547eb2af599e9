// The byte layout of a rank file rank_<r>.bin, independent of the stage that wrote it: for each group in
// order, three arrays of `shard` fp32 (master, m, v) holding elements [r*shard, (r+1)*shard) of the
// group's padded range (padding included, zero). Stage 0 keeps the full state on every rank; it writes
// the same slice a sharded stage would, so files never depend on the stage. No I/O.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "checkpoint/file_io.h"
#include "checkpoint/manifest.h"
#include "core/memory.h"
#include "zero/engine.h"

namespace zero::checkpoint {

using StateArray = OptimArray;  // file order within a group section: master, m, v

struct FileLayout {
  std::vector<uint64_t> section;  // byte offset of each group's section
  std::vector<size_t> shard;      // elements per array of each group
  uint64_t bytes = 0;             // file size: 3 x sizeof(float) x the sum of the groups' shards

  // The one place the layout is computed, from each group's shard. nullopt where the file would pass 2^64
  // bytes (no model's groups do; a damaged manifest's may): Manifest::validate holds every listed file size
  // to `bytes` of this.
  static std::optional<FileLayout> checked(const std::vector<size_t>& shards);
  static std::optional<FileLayout> checked(const std::vector<GroupEntry>& groups);
  // The layout of a validated manifest's groups (checked() of them, which never fails), or of a partition's.
  static FileLayout of(const std::vector<GroupEntry>& groups);
  static FileLayout of(const Partition& p);
  uint64_t offset(int g, StateArray a, size_t elem) const {
    return section[g] + (uint64_t(a) * shard[g] + elem) * sizeof(float);
  }
};

// This rank's file, engine -> host bytes in file order: for each group, this rank's slice
// [rank*shard, (rank+1)*shard) of master, m and v. Goes through the engine's backend copies
// (Engine::read_optimizer_state), so it works on device memory as on host memory. A whole host image:
// what an async save hands its writer thread.
HostVector<char> read_rank_file(Engine& e);

// The host bytes a streamed rank file passes through at a time: all the host memory a synchronous save or
// a load of a device-resident optimizer needs, whatever the model's size (too small for the planner to
// count beside a tensor's init scratch).
inline constexpr size_t kRankFileChunkBytes = size_t(64) << 20;
// The same bytes as read_rank_file, through one host buffer of at most chunk_bytes: sink(data, bytes) gets
// consecutive pieces of the file (data valid during the call only).
void stream_rank_file(Engine& e, const std::function<void(const void*, size_t)>& sink,
                      size_t chunk_bytes = kRankFileChunkBytes);
// The inverse, into the engine: source(dst, bytes) fills dst with the file's next bytes.
void load_rank_file(Engine& e, const std::function<void(void*, size_t)>& source,
                    size_t chunk_bytes = kRankFileChunkBytes);
// Elements [begin, begin + count) of one state array of group g's optimizer shard (shard coordinates, as
// Engine::write_optimizer_state), from host floats; the other two arrays are left alone.
void write_state_array(Engine& e, int g, StateArray a, size_t begin, size_t count, const float* src);
uint64_t rank_file_bytes(const Engine& e);
// The same from a partition alone (every rank's file has this size): for plans made before any engine exists.
uint64_t rank_file_bytes(const Partition& p);
// The same bytes as read_rank_file, as segments pointing into the engine's own arrays, when they are fp32 in
// host memory (Engine::optimizer_in_host_memory): a synchronous save writes them with no
// copy, so an offloaded optimizer (or the CPU backend's) needs no second host-memory image to be saved.
// Valid until the engine's next step. nullopt when the arrays are not in host memory (device memory, or a
// split master): the caller streams them out with stream_rank_file instead.
std::optional<std::vector<Segment>> rank_file_segments(const Engine& e);

}  // namespace zero::checkpoint
