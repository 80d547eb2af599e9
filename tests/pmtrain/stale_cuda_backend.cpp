// A CUDA backend module from before the first ABI (cuda_lazy_load.sh): it exports the entry point of
// pmtrain/cuda_backend_module.h but reports ABI 0, which no pmtrain has. The loader must refuse it in one line
// after reading the ABI alone (offset 0 in every version), never calling anything else of it.
struct StaleApi {
  int abi;
};

extern "C" __attribute__((visibility("default"))) const StaleApi* zero_pmtrain_cuda_backend() {
  static const StaleApi api{0};
  return &api;
}
