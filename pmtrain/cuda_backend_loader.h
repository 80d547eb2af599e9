// Finds and loads pmtrain's CUDA backend module (cuda_backend_module.h) the first time `backend: cuda` asks
// for it, so nothing of CUDA is mapped before. Where it looks, in order:
//   $ZERO_PMTRAIN_CUDA_BACKEND   a module file (and nothing else), when set;
//   <dir of pmtrain>/libpmtrain_cuda_backend.so   the build tree;
//   <dir of pmtrain>/../lib/libpmtrain_cuda_backend.so   an install tree (cmake/install.cmake; the relative
//                                path is the install's bin -> lib dir).
// A build without the CUDA backend has no module and looks only at the environment variable.
#pragma once
#include <string>

#include "pmtrain/cuda_backend_module.h"

namespace zero::pmtrain {

struct CudaBackendLoad {
  const CudaBackendApi* api = nullptr;  // null: not loaded, see `error`
  std::string path;                     // the module file tried last (empty: none was found)
  std::string error;                    // why not, one line
};

// Loads once per process (later calls return the first result). Never throws.
const CudaBackendLoad& load_cuda_backend();

}  // namespace zero::pmtrain
