#include "checkpoint/load.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include "checkpoint/agree.h"
#include "checkpoint/file_io.h"
#include "checkpoint/reshard_plan.h"
#include "checkpoint/shard_layout.h"
#include "checkpoint/verify.h"
#include "core/chunks.h"
#include "core/memory.h"

namespace zero::checkpoint {

namespace {

std::unique_ptr<ReadFile> open_checked(const std::string& dir, const Manifest& m, int q, uint64_t expect) {
  const FileEntry& fe = m.files[q];
  auto f = std::make_unique<ReadFile>((std::filesystem::path(dir) / fe.name).string());
  ZERO_REQUIRE(fe.bytes == expect, InputError, "{}/{}: manifest lists {} bytes for {} but its groups need {}", dir,
               kManifestName, fe.bytes, fe.name, expect);
  ZERO_REQUIRE(f->size() >= fe.bytes, InputError,
               "checkpoint file {} is truncated: {} bytes, the manifest says {} (re-save or use an older checkpoint)",
               f->path(), f->size(), fe.bytes);
  ZERO_REQUIRE(f->size() == fe.bytes, InputError, "checkpoint file {} has {} bytes, the manifest says {} (corrupted?)",
               f->path(), f->size(), fe.bytes);
  return f;
}

void check_hash(const ReadFile& f, uint64_t got, uint64_t want) {
  ZERO_REQUIRE(got == want, InputError,
               "checkpoint file {} is corrupted: xxhash64 {} but the manifest says {} (use an older checkpoint)", f.path(),
               hex64(got), hex64(want));
}

}  // namespace

LoadResult load_checkpoint(Engine& e, const std::string& dir, bool verify, size_t chunk_bytes, Communicator* world,
                           const ReadProgress& on_read) {
  Communicator& comm = world ? *world : e.comm();  // agreement; the layout is the engine's (its shard group)
  ZERO_REQUIRE(comm.world() == e.data_world(), ConfigError,
               "loading a checkpoint into an engine sharded over groups of {} ranks needs the run's communicator over "
               "all {} ranks (given: {} ranks)", e.comm().world(), e.data_world(), comm.world());
  const int W = e.comm().world(), r = e.rank();
  Manifest m;
  run_agreed(comm, [&] {
    m = Manifest::read(dir);
    check_model_matches(m, e.groups(), dir);
  });
  const FileLayout fl = FileLayout::of(m.groups);
  const Partition& part = e.partition();
  std::vector<DestRange> dest;
  bool same_layout = m.world == W;
  for (int g = 0; g < int(part.groups.size()); ++g) {
    const OptimizerShard s = e.optimizer_shard(g);
    dest.push_back({s.begin, s.count});
    same_layout = same_layout && s.begin == size_t(r) * m.groups[g].shard && s.count == m.groups[g].shard;
  }
  LoadResult res;
  res.resharded = !same_layout;
  run_agreed(comm, [&] {
    if (same_layout) {
      // The inverse of the save: stream this rank's file into the same slices, hashing on the way.
      auto f = open_checked(dir, m, r, fl.bytes);
      Hasher h;
      uint64_t at = 0;
      load_rank_file(e, [&](void* dst, size_t bytes) {
        f->read_at(at, dst, bytes);
        if (verify) h.update(dst, bytes);
        at += bytes;
        if (on_read) on_read(bytes);
      }, chunk_bytes);
      if (verify) check_hash(*f, h.digest(), m.files[r].xxh64);  // before anything trains on it
      res.bytes_read = at;
      return;
    }
    const std::vector<ReadSpan> spans = plan_reads(m.groups, m.world, dest);
    std::map<int, std::unique_ptr<ReadFile>> files;
    auto file = [&](int q) -> ReadFile& {
      auto& f = files[q];
      if (!f) f = open_checked(dir, m, q, fl.bytes);
      return *f;
    };
    // Span by span and array by array through one host buffer; what no span covers is padding and is
    // zeroed, as in a fresh engine.
    size_t widest = 1;  // the largest destination range: no buffer beyond what one range needs
    for (const DestRange& d : dest) widest = std::max(widest, d.count);
    HostVector<float> buf(std::min(std::max<size_t>(1, chunk_bytes / sizeof(float)), widest));
    auto copy_in = [&](int g, StateArray a, size_t dst, size_t count, const std::function<void(float*, size_t, size_t)>& fill) {
      for_each_chunk(count, buf.size(), [&](size_t done, size_t n) {
        fill(buf.data(), done, n);
        write_state_array(e, g, a, dst + done, n, buf.data());
      });
    };
    for (const ReadSpan& sp : spans) {
      ReadFile& f = file(sp.file);
      for (StateArray a : {StateArray::Master, StateArray::M, StateArray::V})
        copy_in(sp.group, a, sp.dst_elem, sp.count, [&](float* dst, size_t done, size_t n) {
          f.read_at(fl.offset(sp.group, a, sp.src_elem + done), dst, n * sizeof(float));
          res.bytes_read += n * sizeof(float);
          if (on_read) on_read(n * sizeof(float));
        });
    }
    for (int g = 0; g < int(part.groups.size()); ++g)
      for (const DestRange& gap : uncovered(spans, g, dest[size_t(g)].count))
        for (StateArray a : {StateArray::Master, StateArray::M, StateArray::V})
          copy_in(g, a, gap.begin, gap.count, [](float* dst, size_t, size_t n) { std::fill(dst, dst + n, 0.0f); });
    const HashShare share{e.data_rank(), e.data_world()};  // over all shard groups: each saved file hashed once
    for (int q = 0; verify && q < m.world; ++q)
      if (share.mine(size_t(q))) {
        ReadFile& f = file(q);
        check_hash(f, hash_file(f, on_read), m.files[q].xxh64);
        res.bytes_read += f.size();
      }
  });
  e.set_optimizer_step(m.optimizer_step);
  e.sync_params();
  res.state = m.state;
  res.dir = dir;
  res.optimizer_step = m.optimizer_step;
  res.saved_world = m.world;
  res.saved_shard_groups = m.shard_groups;
  res.saved_stage = m.stage;
  res.config = m.config;
  return res;
}

}  // namespace zero::checkpoint
