// The trainer's handle on sharded checkpoints of one run: save (sync or async), the per-step
// finish_pending() that publishes a finished async save, resume lookup and load. All calls are
// collective (every rank, same order, same arguments) and run on the main thread; the async writer's
// background thread does file I/O only, never MPI.
//
//   Checkpointer ckpt(engine, {.run_dir = dir, .async = true, .config_text = yaml});
//   if (auto p = ckpt.resume_path("auto")) state = ckpt.load(*p).state;
//   for (...) { ...train step...; ckpt.finish_pending(); if (step % every == 0) ckpt.save(state); }
//   ckpt.save(final_state); ckpt.wait();
//
// Save protocol: rank 0 creates <run>/checkpoints/.tmp_step_<N>/ (removing stale temp dirs); every rank
// writes and fsyncs rank_<r>.bin (sync: now; async: from a host snapshot on a background thread); at the
// publish point the ranks agree on success (one all-reduce, which is also the barrier), gather sizes and
// hashes, rank 0 writes manifest.json, fsyncs, renames the dir to step_<N>/, replaces `latest`, applies
// retention, and the ranks agree again. A failed save (e.g. ENOSPC) throws SaveError on every rank, removes
// the temp dir and leaves the previous checkpoint and `latest` untouched.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/agree.h"
#include "checkpoint/async_writer.h"
#include "checkpoint/fault.h"
#include "checkpoint/file_io.h"
#include "checkpoint/load.h"
#include "checkpoint/manifest.h"
#include "checkpoint/publish.h"
#include "zero/engine.h"

namespace zero::checkpoint {

struct CheckpointOptions {
  std::string run_dir;           // checkpoints go to <run_dir>/checkpoints/
  Retention retention;           // keep the last K, and every M-th
  bool async = false;            // write shard files on a background thread
  bool verify_checksums = true;  // on load: xxhash64 of every file (each hashed by one rank)
  std::string config_text;       // the resolved config, stored verbatim in the manifest
  // The host buffer a synchronous save or a load streams a device-resident optimizer through (tests
  // make it small to cross chunk boundaries).
  size_t chunk_bytes = kRankFileChunkBytes;
  // Every rank of the run, where the engine's own communicator is not (hybrid sharding: the engine's is one
  // shard group, and this is required); null: the engine's. The ranks agree over it and its rank 0 does the
  // directory work; a shard group's files are written by the first group only (replicas().rank() 0), named by
  // the rank in the group, and the manifest's world is the group's size.
  Communicator* world = nullptr;
  // Each rank's checkpoint reads as they go (resume_path's hashing, load's reads): a long read's progress.
  ReadProgress on_read = {};
};

class Checkpointer {
 public:
  // Reads the fault-injection spec (ZERO_FAULT) once. Not collective.
  Checkpointer(Engine& engine, CheckpointOptions opts);
  // Waits for a running background write but publishes nothing (no collectives in a destructor):
  // call wait() first. An unpublished temp dir is removed by the next save.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Saves the engine's optimizer state and `state` as step_<state.step>. Completes a pending async save
  // first. Sync: returns once published. Async: returns after the host snapshot; publish happens in a
  // later finish_pending() or wait(). Throws SaveError (same on every rank) when the save failed.
  void save(const TrainState& state);
  // Call once per training step in async mode (cheap when nothing is pending: no collective). When every
  // rank's background write has finished, publishes it and returns true; else returns false at once
  // (one scalar all-reduce). Throws SaveError if the write failed.
  bool finish_pending();
  // Blocks until a pending async save is published (or throws SaveError). No-op when none is pending.
  void wait();
  bool pending() const { return pending_.has_value(); }
  int64_t last_published_step() const { return last_published_; }  // -1 before the first

  // "auto": the newest sound checkpoint of run_dir (at most `latest`), nullopt when the run has none; otherwise
  // the given directory. Sound: its files there at their sizes (rank 0) and, with verify_checksums, at their
  // xxhash64s (each file hashed by one rank). Collective and agreed across ranks.
  std::optional<std::string> resume_path(const std::string& spec);
  // Completes a pending save, then load_checkpoint(engine, dir) (which hashes the files again unless dir is the
  // one resume_path just checked).
  LoadResult load(const std::string& dir);
  // Amends the trainer's extra state of the published step_<step> by a JSON merge patch (RFC 7386: a null
  // member removes the key), its shard files untouched: an evaluation finished after its checkpoint was saved
  // (a stop cut it short). manifest.json is replaced atomically by rank 0, then retention runs again (the
  // `best` link may move). Collective; throws the same error on every rank.
  void amend_extra(int64_t step, const nlohmann::json& patch);

  const RunPaths& paths() const { return paths_; }

 private:
  struct Pending {
    int64_t step = 0;
    Manifest manifest;  // everything but the files
  };
  Manifest describe(const TrainState& state) const;
  void finalize(Pending p, const WrittenFile& mine, const std::optional<Failure>& local);
  [[noreturn]] void fail_save(int64_t step, const Failure& f);

  Engine& engine_;
  Communicator& comm_;  // CheckpointOptions::world, else the engine's
  int files_ = 1;       // rank files a checkpoint holds: the engine's (shard group's) world
  bool writes_ = true;  // this rank writes its shard's file (the first shard group's ranks)
  CheckpointOptions opts_;
  RunPaths paths_;
  FaultPlan faults_;
  AsyncWriter writer_;
  std::optional<Pending> pending_;
  std::string verified_;  // the checkpoint resume_path last found sound, its files hashed
  int64_t last_published_ = -1;
};

}  // namespace zero::checkpoint
