// A CUDA backend module of this build (right ABI and compiler) with one device and no CUDA code, whose
// make_training throws zero::InputError (cuda_lazy_load.sh): pmtrain's main must catch it as a zero::Error
// ("error: ..."), not as an unknown std::exception ("unexpected error: ..."), so errors thrown inside the
// module keep their types across the boundary (pmtrain/cuda_backend_module.h).
#include "core/check.h"
#include "pmtrain/cuda_backend_module.h"

namespace {
using namespace zero::pmtrain;
int one_device() { return 1; }
BackendParts make_training(const CudaBackendOptions&, int rank) {
  throw zero::InputError(fmt::format("thrown in the test module by make_training (rank {})", rank));
}
// An 80 GiB device, free: the run passes the memory check and reaches make_training.
std::vector<DeviceMemory> probe_devices() { return {{0, 0, 1, size_t(80) << 30, size_t(80) << 30, "test module"}}; }
ScoringBackend make_scoring(const CudaBackendOptions&, const zero::model::DenseParams&) {
  throw zero::InputError("thrown in the test module by make_scoring");
}
}  // namespace

extern "C" __attribute__((visibility("default"))) const CudaBackendApi* ZERO_PMTRAIN_CUDA_BACKEND_ENTRY() {
  static const CudaBackendApi api{.device_count = one_device, .make_training = make_training, .make_scoring = make_scoring,
                                  .probe_devices = probe_devices};
  return &api;
}
