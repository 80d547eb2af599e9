// The element type (kernels.h's Elem) of a buffer's DType: one mapping for CudaOps' launches and the model's
// fp32 <-> bf16 conversions (model/cuda/cuda_model_ops.cpp), which call the same kernels. Host code only.
#pragma once
#include "core/check.h"
#include "core/dtype.h"
#include "cuda/kernels.h"

namespace zero::kernels {

// `op` names the caller in the error for a dtype the kernels do not take.
inline Elem elem_of(DType t, const char* op) {
  switch (t) {
    case DType::F32: return Elem::F32;
    case DType::BF16: return Elem::BF16;
    case DType::FX64: return Elem::FX64;
    default:
      throw ConfigError(fmt::format("the cuda backend does not support {} buffers in {} (use fp32 or bf16)",
                                    dtype_name(t), op));
  }
}

}  // namespace zero::kernels
