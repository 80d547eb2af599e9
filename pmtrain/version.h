// What `pmtrain --version` says: the git revision the binary was built from and whether the CUDA
// backend is built in.
#pragma once
#include <string>

namespace zero::pmtrain {

std::string version_text();  // e.g. "pmtrain 0.1.0 (git ed976d4-dirty), CUDA backend: not built"

}  // namespace zero::pmtrain
