// Deterministic fault injection for checkpoint writes (tests only). The spec comes from ZERO_FAULT
// (read through comm/launch_env.h, nowhere else) and is parsed once, by the Checkpointer.
//
//   ZERO_FAULT = entry[,entry...]        entry = name=VALUE[@rankR][@stepN]
//     ckpt_kill_after_bytes=B      raise(SIGKILL) once this rank has written B bytes of its shard file
//     ckpt_enospc_after_bytes=B    the write that would cross B bytes fails with errno ENOSPC
//     ckpt_kill_at=P               raise(SIGKILL) at publish step P of the save (rank 0 publishes):
//                                    manifest: half of manifest.json written; renamed: the temp dir is
//                                    step_<N>/ but `latest` not yet touched; latest: half of latest's temp
//                                    file written, before its rename over `latest`
//     ckpt_enospc_at=P             the write of manifest.json (P = manifest) or of latest's temp file
//                                    (P = latest, after the rename) fails halfway with errno ENOSPC
//   @rankR: only on rank R (default every rank); @stepN: only in the save of step N (default every save).
//   Bytes are counted per save, over the rank's rank_<r>.bin. Entries not starting with "ckpt_" are left
//   to other layers; an unknown "ckpt_" name or a malformed entry is a ConfigError.
// Example: ZERO_FAULT=ckpt_kill_after_bytes=4096@rank1   ZERO_FAULT=ckpt_enospc_at=latest@step8
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zero::checkpoint {

enum class FaultKind : uint8_t { KillAfterBytes, EnospcAfterBytes };
// Where in a save a fault fires: the rank's shard file, or one of rank 0's publish steps.
enum class FaultPoint : uint8_t { Shard, Manifest, Renamed, Latest };

struct Fault {
  FaultKind kind = FaultKind::KillAfterBytes;
  uint64_t after_bytes = 0;  // Shard only; the publish points fire halfway through their file
  int rank = -1;      // -1: any rank
  int64_t step = -1;  // -1: any save
  FaultPoint point = FaultPoint::Shard;
};

// The faults of one save's publish steps on this rank, as publish() and the manifest write apply them.
struct PublishFaults {
  std::vector<Fault> manifest;     // on manifest.json
  bool kill_after_rename = false;  // between the rename to step_<N>/ and the `latest` replacement
  std::vector<Fault> latest;       // on latest's temp file
};

struct FaultPlan {
  std::vector<Fault> faults;
  static FaultPlan parse(const std::string& spec);  // ConfigError on a malformed ckpt_ entry
  static FaultPlan from_env();                      // read_env(EnvVar::FaultInjection), empty if unset
  // The faults that apply to this rank's shard write in the save of `step`.
  std::vector<Fault> for_write(int rank, int64_t step) const;
  // The publish-step faults that apply to this rank in the save of `step`.
  PublishFaults for_publish(int rank, int64_t step) const;
};

// `faults` with their byte threshold set to half of a `bytes`-byte file (the publish points fire mid-file).
std::vector<Fault> midway(std::vector<Fault> faults, uint64_t bytes);

// Counts the bytes of one shard-file write and fires the faults that apply. before_write(n) (n > 0)
// returns how many of the next n bytes may be written now (the writer loops); 0 means "fail this write
// with ENOSPC". A kill fault whose threshold is reached raises SIGKILL and never returns.
class FaultCounter {
 public:
  explicit FaultCounter(std::vector<Fault> faults) : faults_(std::move(faults)) {}
  size_t before_write(size_t n);
  void after_write(size_t n) { written_ += n; }

 private:
  std::vector<Fault> faults_;
  uint64_t written_ = 0;
};

}  // namespace zero::checkpoint
