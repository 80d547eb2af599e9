# NCCL's header and library (NCCL_INCLUDE_DIR, NCCL_LIBRARY; NCCL_HOME or the cache variables point
# elsewhere): one lookup for the build (cmake/cuda.cmake) and for the installed package's component cuda
# (zeroConfig.cmake, beside which this file is installed).
find_path(NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include /usr/include ENV NCCL_HOME PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu ENV NCCL_HOME PATH_SUFFIXES lib lib64)
