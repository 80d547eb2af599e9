// model/cuda/attention_mma.cu compiled as host C++ under the SIMT emulator (see CMakeLists.txt here).
#include "tests/cuda/simt_emulator.h"  // first: the kernel file compiles against it
#include "model/cuda/attention_mma.cu"  // NOLINT: the kernel file itself
