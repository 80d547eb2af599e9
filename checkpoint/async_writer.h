// Writes one shard file on a background thread from a host snapshot, so training goes on meanwhile.
// The thread only does file I/O (write, hash, fsync): no MPI, no engine access. The snapshot buffer is
// held until the write is done (one rank file's worth of host memory).
#pragma once
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/agree.h"
#include "checkpoint/fault.h"
#include "checkpoint/file_io.h"
#include "core/memory.h"

namespace zero::checkpoint {

class AsyncWriter {
 public:
  AsyncWriter() = default;
  ~AsyncWriter();  // waits for a running write
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // Takes the host snapshot of a rank file (filled on the caller's thread) and starts writing it to `path`.
  void start(const std::string& path, HostVector<char> snapshot, std::vector<Fault> faults);
  bool busy() const { return thread_.joinable(); }
  bool done() const { return done_.load(std::memory_order_acquire); }  // the write finished (or failed)

  struct Result {
    WrittenFile file;
    std::optional<Failure> error;
  };
  Result wait();  // joins the thread; call once per start()

 private:
  HostVector<char> snapshot_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  Result result_;
};

}  // namespace zero::checkpoint
