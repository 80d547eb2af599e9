// Deterministic fault injection for checkpoint writes (tests only). The spec comes from ZERO_FAULT
// (read through comm/launch_env.h, nowhere else) and is parsed once, by the Checkpointer.
//
//   ZERO_FAULT = entry[,entry...]        entry = name=BYTES[@rankR][@stepN]
//     ckpt_kill_after_bytes=B      raise(SIGKILL) once this rank has written B bytes of its shard file
//     ckpt_enospc_after_bytes=B    the write that would cross B bytes fails with errno ENOSPC
//   @rankR: only on rank R (default every rank); @stepN: only in the save of step N (default every save).
//   Bytes are counted per save, over the rank's rank_<r>.bin. Entries not starting with "ckpt_" are left
//   to other layers; an unknown "ckpt_" name or a malformed entry is a ConfigError.
// Example: ZERO_FAULT=ckpt_kill_after_bytes=4096@rank1   ZERO_FAULT=ckpt_enospc_after_bytes=0@step8
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zero::checkpoint {

enum class FaultKind : uint8_t { KillAfterBytes, EnospcAfterBytes };

struct Fault {
  FaultKind kind = FaultKind::KillAfterBytes;
  uint64_t after_bytes = 0;
  int rank = -1;      // -1: any rank
  int64_t step = -1;  // -1: any save
};

struct FaultPlan {
  std::vector<Fault> faults;
  static FaultPlan parse(const std::string& spec);  // ConfigError on a malformed ckpt_ entry
  static FaultPlan from_env();                      // read_env(EnvVar::FaultInjection), empty if unset
  // The faults that apply to this rank's shard write in the save of `step`.
  std::vector<Fault> for_write(int rank, int64_t step) const;
};

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
