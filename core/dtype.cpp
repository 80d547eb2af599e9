#include "core/dtype.h"

#include "core/check.h"

namespace zero {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::F16: return "fp16";
    case DType::F64: return "fp64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::FX64: return "fixed64";
  }
  return "?";
}

DType parse_dtype(std::string_view s, std::string_view what) {
  if (s == "fp32" || s == "float32" || s == "f32") return DType::F32;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp16" || s == "float16" || s == "f16") return DType::F16;
  throw ConfigError(fmt::format("{}: unknown dtype '{}' (expected fp32, bf16 or fp16)", what, s));
}

void throw_internal(const char* file, int line, const char* expr, const std::string& msg) {
  throw InternalError(fmt::format("{}:{}: check failed: {}: {}", file, line, expr, msg));
}

}  // namespace zero
