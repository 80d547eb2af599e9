// Fuzz target: the safetensors reader (checkpoint/safetensors.h) on an arbitrary file: header length,
// header JSON, dtypes, shapes, offsets. Bad files are an InputError naming the file; every tensor of a file
// that opens can be read (float dtypes as fp32, integer dtypes as int64) with numel() elements.
#include "checkpoint/safetensors.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zero;
  const std::string path = fuzz::write_scratch(".safetensors", data, size);
  fuzz::expect_clean_error(path, [&] {
    const checkpoint::SafetensorsReader reader(path);
    for (const checkpoint::SafetensorsTensor& t : reader.tensors()) {
      const bool integer = t.dtype == DType::I64 || t.dtype == DType::I32;
      const size_t n = integer ? reader.read_i64(t.name).size() : reader.read_f32(t.name).size();
      fuzz::require(int64_t(n) == t.numel(), "tensor '" + t.name + "' read a wrong element count");
    }
  });
  std::remove(path.c_str());
  return 0;
}
