#include "checkpoint/async_writer.h"

#include <cstring>

#include "core/check.h"

namespace zero::checkpoint {

AsyncWriter::~AsyncWriter() {
  if (thread_.joinable()) thread_.join();
}

void AsyncWriter::start(const std::string& path, HostVector<char> snapshot, std::vector<Fault> faults) {
  ZERO_CHECK(!busy(), "AsyncWriter::start while a write is running");
  snapshot_ = std::move(snapshot);
  done_.store(false, std::memory_order_release);
  result_ = {};
  thread_ = std::thread([this, path, faults = std::move(faults)]() mutable {
    FaultCounter counter(std::move(faults));
    result_.error = capture([&] { result_.file = write_file(path, {Segment{snapshot_.data(), snapshot_.size()}}, &counter); });
    done_.store(true, std::memory_order_release);
  });
}

AsyncWriter::Result AsyncWriter::wait() {
  ZERO_CHECK(busy(), "AsyncWriter::wait without a running write");
  thread_.join();
  return result_;
}

}  // namespace zero::checkpoint
