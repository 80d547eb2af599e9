// The error for device memory running out (the CUDA model's activation pool). A core type, not a CUDA one, so
// pmtrain, which loads the CUDA code as a module, catches it by type without linking that code.
#pragma once
#include "core/check.h"

namespace zero {

struct OutOfMemory : Error {
  using Error::Error;
};

}  // namespace zero
