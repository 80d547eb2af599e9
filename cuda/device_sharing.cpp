#include "cuda/device_sharing.h"

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

}  // namespace zero
