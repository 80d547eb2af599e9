#!/usr/bin/env bash
# The installed package as another repository meets it: `cmake --install` into a fresh prefix, then a
# consumer project outside this build (tests/install/consumer) configured against that prefix only,
# built, and run at 2 ranks (its stages 0-3 must match its own single-process reference, and a run saved
# halfway with the installed checkpointer and resumed at another stage must end on the same bits); pkg-config
# builds the same consumer from the prefix moved elsewhere. Every installed header is also compiled alone
# (ZERO_HEADERS_DIR). The component cuda: a CUDA-built install is configured with REQUIRED COMPONENTS cuda
# (and its CUDA headers compiled alone against zero::cuda); a CPU-only consumer of it must configure and
# build with CUDAToolkit hidden; asking cuda of a package built without CUDA must fail, saying so.
set -euo pipefail
BUILD=$1; shift; MPIRUN=("$@")  # the launcher and its options
SRC=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /tmp/zero_install.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" > "$TMP/install.log"
PKG=$TMP/prefix/lib/cmake/zero
CUDA=OFF COMPONENTS=  # the package's own word (zeroConfig.cmake's zero_CUDA)
if grep -qx 'set(zero_CUDA ON)' "$PKG/zeroConfig.cmake"; then CUDA=ON COMPONENTS=cuda; fi
cmake -S "$SRC/consumer" -B "$TMP/consumer" -DCMAKE_PREFIX_PATH="$TMP/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DZERO_COMPONENTS="$COMPONENTS" -DZERO_HEADERS_DIR="$TMP/prefix/include/zero" > "$TMP/configure.log" \
  || { cat "$TMP/configure.log"; echo "FAIL: configure against the installed package (components: '$COMPONENTS')"; exit 1; }
cmake --build "$TMP/consumer" -j 2 > "$TMP/build.log" 2>&1 || { cat "$TMP/build.log"; echo "FAIL: build"; exit 1; }
if [ $CUDA = ON ]; then
  n=$(find "$TMP/consumer" -name 'cuda_*_h.cpp.o' | wc -l)
  [ "$n" -gt 0 ] || { echo "FAIL: with COMPONENTS cuda no CUDA header was compiled alone"; exit 1; }
  echo "consumer: find_package(zero REQUIRED COMPONENTS cuda): configured, $n CUDA headers compiled alone against zero::cuda"
fi
# The consumer must not have seen this source tree's headers.
! grep -q -- "-I$(cd "$SRC/../.." && pwd)" "$TMP/consumer/CMakeFiles/zero_consumer.dir/flags.make" \
  || { echo "FAIL: the consumer compiled against the source tree"; exit 1; }
if [ $CUDA = ON ]; then
  # A CPU-only trainer (no components) of the CUDA-built install, with CUDAToolkit hidden from find_package:
  # it must neither look for CUDA nor link it.
  cmake -S "$SRC/consumer" -B "$TMP/consumer_cpu" -DCMAKE_PREFIX_PATH="$TMP/prefix" -DCMAKE_BUILD_TYPE=Release \
    --no-warn-unused-cli -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE > "$TMP/cpu_configure.log" 2>&1 \
    || { cat "$TMP/cpu_configure.log"; echo "FAIL: a CPU-only consumer cannot configure against the CUDA-built package with CUDAToolkit hidden"; exit 1; }
  cmake --build "$TMP/consumer_cpu" --target zero_consumer -j 2 > "$TMP/cpu_build.log" 2>&1 \
    || { cat "$TMP/cpu_build.log"; echo "FAIL: a CPU-only consumer cannot build with CUDAToolkit hidden"; exit 1; }
  ! grep -qE 'cudart|nccl|zero_cuda' "$TMP/consumer_cpu/CMakeFiles/zero_consumer.dir/link.txt" \
    || { echo "FAIL: the CPU-only consumer links CUDA: $(cat "$TMP/consumer_cpu/CMakeFiles/zero_consumer.dir/link.txt")"; exit 1; }
  echo "consumer: CPU-only (no components), CUDAToolkit hidden: configured and built against the CUDA-built package"
fi
# COMPONENTS cuda of a package built without CUDA fails, saying so. A CUDA-built install stands in for one:
# its package files with zero_CUDA OFF and without zeroCudaTargets, beside links to its libraries and headers.
NOCUDA=$TMP/prefix
if [ $CUDA = ON ]; then
  NOCUDA=$TMP/nocuda
  mkdir -p "$NOCUDA/lib/cmake/zero"
  ln -s "$TMP/prefix/include" "$NOCUDA/include"
  ln -s "$TMP/prefix/lib/"libzero_* "$NOCUDA/lib/"
  cp "$PKG/zeroConfigVersion.cmake" "$PKG"/zeroTargets*.cmake "$NOCUDA/lib/cmake/zero/"
  sed 's/^set(zero_CUDA ON)$/set(zero_CUDA OFF)/' "$PKG/zeroConfig.cmake" > "$NOCUDA/lib/cmake/zero/zeroConfig.cmake"
fi
if cmake -S "$SRC/consumer" -B "$TMP/consumer_nocuda" -DCMAKE_PREFIX_PATH="$NOCUDA" -DZERO_COMPONENTS=cuda \
  > "$TMP/nocuda.log" 2>&1; then
  echo "FAIL: find_package(zero REQUIRED COMPONENTS cuda) of a package built without CUDA succeeded"; exit 1
fi
grep -q "zero was built without CUDA" "$TMP/nocuda.log" \
  || { cat "$TMP/nocuda.log"; echo "FAIL: COMPONENTS cuda of a package built without CUDA did not say 'zero was built without CUDA'"; exit 1; }
echo "consumer: COMPONENTS cuda of a package built without CUDA refused: $(grep -m1 -o 'zero was built without CUDA.*' "$TMP/nocuda.log")"
"${MPIRUN[@]}" -np 2 "$TMP/consumer/zero_consumer" "$TMP/run"
# The same program built the pkg-config way, from the prefix moved elsewhere (zero.pc must name
# its prefix relative to itself, not where it was configured).
mv "$TMP/prefix" "$TMP/moved"
FLAGS=$(PKG_CONFIG_PATH=$TMP/moved/lib/pkgconfig pkg-config --cflags --libs zero) \
  || { echo "FAIL: pkg-config cannot resolve zero.pc"; exit 1; }
c++ -std=c++20 -O1 "$SRC/consumer/consumer.cpp" $FLAGS -o "$TMP/consumer_pc" > "$TMP/pc_build.log" 2>&1 \
  || { cat "$TMP/pc_build.log"; echo "FAIL: build with pkg-config --cflags --libs zero ($FLAGS)"; exit 1; }
"${MPIRUN[@]}" -np 2 "$TMP/consumer_pc" "$TMP/run_pc" > "$TMP/pc_run.log" \
  || { cat "$TMP/pc_run.log"; echo "FAIL: the pkg-config build"; exit 1; }
echo "consumer: built with pkg-config from a moved prefix: $(grep -c ': ok\|same bits' "$TMP/pc_run.log") checks ok"
