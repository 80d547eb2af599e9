// dlopen() of the CUDA backend module, once, with its ABI checked before anything else of it is used.
#include "pmtrain/cuda_backend_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include <fmt/format.h>

namespace fs = std::filesystem;

// Set by pmtrain/CMakeLists.txt when the CUDA backend is built: the module's file name and the install's
// bin -> lib path.
#define ZERO_STRINGIFY2(x) #x
#define ZERO_STRINGIFY(x) ZERO_STRINGIFY2(x)

namespace zero::pmtrain {
namespace {

const char* module_override() {
  const char* env = std::getenv("ZERO_PMTRAIN_CUDA_BACKEND");
  return env && *env ? env : nullptr;
}

std::vector<fs::path> candidates(std::string& why_none) {
  if (const char* env = module_override()) return {fs::path(env)};
#ifdef ZERO_PMTRAIN_CUDA_MODULE
  std::error_code ec;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) {
    why_none = fmt::format("cannot locate pmtrain's CUDA backend module: /proc/self/exe: {}", ec.message());
    return {};
  }
  return {exe_dir / ZERO_PMTRAIN_CUDA_MODULE, (exe_dir / ZERO_PMTRAIN_BIN_TO_LIB / ZERO_PMTRAIN_CUDA_MODULE).lexically_normal()};
#else
  why_none = "pmtrain's CUDA backend is not available in this build (configured without nvcc and NCCL)";
  return {};
#endif
}

CudaBackendLoad load() {
  CudaBackendLoad r;
  const std::vector<fs::path> paths = candidates(r.error);
  if (paths.empty()) return r;
  std::error_code ec;
  for (const fs::path& p : paths)
    if (fs::exists(p, ec)) {
      r.path = p.string();
      break;
    }
  if (r.path.empty()) {
    std::string tried;
    for (const fs::path& p : paths) tried += (tried.empty() ? "" : ", ") + p.string();
    r.error = module_override()
                  ? fmt::format("pmtrain's CUDA backend module is missing (looked for {}, named by "
                                "ZERO_PMTRAIN_CUDA_BACKEND)", tried)
                  : fmt::format("pmtrain's CUDA backend module is missing (looked for {}; ZERO_PMTRAIN_CUDA_BACKEND "
                                "may name another)", tried);
    return r;
  }
  // RTLD_NOW: a library the module needs (cuBLAS, NCCL, ...) or a symbol it expects from pmtrain that is
  // missing fails here, in one line, not at the first call. Never dlclose()d: objects it made outlive
  // any scope here.
  void* handle = dlopen(r.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    r.error = fmt::format("cannot load pmtrain's CUDA backend module: {}", dlerror());
    return r;
  }
  const auto entry = reinterpret_cast<CudaBackendEntry>(dlsym(handle, ZERO_STRINGIFY(ZERO_PMTRAIN_CUDA_BACKEND_ENTRY)));
  if (!entry) {
    r.error = fmt::format("{} is not a pmtrain CUDA backend module (no {})", r.path,
                          ZERO_STRINGIFY(ZERO_PMTRAIN_CUDA_BACKEND_ENTRY));
    return r;
  }
  const CudaBackendApi* api = entry();
  // abi first: it sits at offset 0 in every version, so a stale module's other fields are never read.
  if (!api || api->abi != kCudaBackendAbi) {
    r.error = fmt::format("{} is a stale CUDA backend module (ABI {}, this pmtrain needs ABI {}): rebuild it with "
                          "this pmtrain", r.path, api ? api->abi : -1, kCudaBackendAbi);
    return r;
  }
  if (!api->compiler || std::strcmp(api->compiler, __VERSION__) != 0) {
    r.error = fmt::format("{} was built by another compiler ({}; this pmtrain: {}): rebuild it with this pmtrain",
                          r.path, api->compiler ? api->compiler : "unknown", __VERSION__);
    return r;
  }
  r.api = api;
  return r;
}

}  // namespace

const CudaBackendLoad& load_cuda_backend() {
  static const CudaBackendLoad loaded = load();
  return loaded;
}

}  // namespace zero::pmtrain
