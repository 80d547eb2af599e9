#include "cuda/device_sharing.h"

#include <algorithm>
#include <set>

#include "core/check.h"

namespace zero {

int device_for_local_rank(int local_rank, int visible_devices) {
  ZERO_CHECK(local_rank >= 0 && visible_devices > 0, "device_for_local_rank({}, {})", local_rank, visible_devices);
  return local_rank % visible_devices;
}

bool any_gpu_shared(const std::vector<std::string>& uuids) {
  return std::set<std::string>(uuids.begin(), uuids.end()).size() < uuids.size();
}

int ranks_on_same_gpu(const std::vector<std::string>& uuids, int local_rank) {
  ZERO_CHECK(local_rank >= 0 && size_t(local_rank) < uuids.size(), "ranks_on_same_gpu: local rank {} of {}",
             local_rank, uuids.size());
  return int(std::count(uuids.begin(), uuids.end(), uuids[size_t(local_rank)]));
}

}  // namespace zero
