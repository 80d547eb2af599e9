// Element types of engine buffers and their conversions. Does not allocate or compute.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <Eigen/Core>  // Eigen::bfloat16: round-to-nearest-even storage type for the CPU backend

namespace zero {

// FX64: an int64 counting units of 2^-32, the engine's gradient sums under zero.world_invariant
// (core/math/fixed_point.h): exact, so the same in any order.
enum class DType : uint8_t { F32, BF16, F16, F64, I32, I64, FX64 };
using bf16 = Eigen::bfloat16;

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::F64: return 8;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::FX64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t);
// Accepts "fp32"/"float32"/"f32", "bf16"/"bfloat16", "fp16"/"float16"; throws ConfigError naming `what`.
DType parse_dtype(std::string_view s, std::string_view what);

}  // namespace zero
