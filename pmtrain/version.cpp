#include "pmtrain/version.h"

#include <fmt/format.h>

#include "pmtrain/build_info.h"  // generated (pmtrain/build_info.cmake)

namespace zero::pmtrain {

std::string version_text() {
  return fmt::format("pmtrain {} (git {}), CUDA backend: {}", ZERO_PROJECT_VERSION, ZERO_GIT_REVISION,
                     ZERO_CUDA_BUILT ? "built" : "not built");
}

}  // namespace zero::pmtrain
