#include "checkpoint/shared_dir.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "checkpoint/agree.h"
#include "checkpoint/file_io.h"
#include "core/check.h"
#include "core/host_name.h"

namespace zero::checkpoint {

void require_shared_dir(Communicator& comm, const std::string& dir, const std::string& what) {
  if (comm.world() == 1) return;
  // A nonce every rank learns through the reduction (rank 0's, the others add 0), exact in a double. It names the
  // file too: a name no rank looked up before, so no file system's cache of a lookup can answer for it, and no
  // file a run before left on a node's own disk can pass for it.
  double nonce = 0;
  if (comm.rank() == 0)
    nonce = double(uint64_t(std::chrono::steady_clock::now().time_since_epoch().count() ^ uint64_t(getpid())) >> 12);
  comm.all_reduce_scalars(&nonce, 1, ReduceOp::Sum);
  const std::string tag = fmt::format("{}", uint64_t(nonce));
  const std::string file = (std::filesystem::path(dir) / (".pmtrain_shared_dir_check_" + tag)).string();
  run_agreed(comm, [&] {
    if (comm.rank() == 0) replace_file_atomic(file, tag + "\n");
  });
  const std::optional<Failure> failed = agree(comm, capture([&] {
    std::string seen;
    // A network file system may show another client's new file a moment late: a few tries over about 2 s.
    for (int attempt = 0; attempt < 8 && seen.empty(); ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(250));
      try {
        seen = read_small_file(file);
      } catch (const Error&) {
        seen.clear();
      }
    }
    ZERO_REQUIRE(seen == tag + "\n", InputError,
                 "{} {} is not one directory for every rank: this rank, on host {}, does not see the file rank 0 "
                 "just wrote there ({}). Each rank writes its checkpoint file into it: put it on a file system every "
                 "node shares, not a node-local disk (/tmp, a node's scratch)",
                 what, dir, host_name(), file);
  }));
  std::error_code ec;  // gone whatever the ranks saw
  if (comm.rank() == 0) std::filesystem::remove(file, ec);
  if (failed) rethrow(*failed);
}

}  // namespace zero::checkpoint
