#!/usr/bin/env bash
# The GPU machine's check (issue "pmtrain on the GPU"): builds the CUDA targets from this tree and runs
# every GPU test with skips turned into failures (ZERO_REQUIRE_GPU=1), then prints "N passed, N failed".
#   here:       bash launch/gpu_deps.sh            (once: .debs of what that machine lacks)
#   device run: bash launch/gpu_check.sh $OUT/gpu_check.log     with carry [".gpudeps"]
# The log goes where the first argument says (default bench/results/gpu_check_<date>.log). Copy it under
# bench/results/ and commit it: a GPU claim counts only with a saved log.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${1:-bench/results/gpu_check_$(date +%Y%m%d_%H%M).log}
mkdir -p "$(dirname "$LOG")"
exec > >(tee "$LOG") 2>&1
START=$(date +%s)
echo "# gpu_check: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(hostname), $(date -u)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi failed"

# Dependencies the machine lacks, unpacked into a private root (never into /).
ROOT=$PWD/.gpudeps/root
if ls .gpudeps/*.deb >/dev/null 2>&1; then
  mkdir -p "$ROOT"
  for f in .gpudeps/*.deb; do dpkg -x "$f" "$ROOT"; done
  # Absolute links in the debs point at the machine's / (zlib1g-dev's libz.so -> /lib/x86_64-linux-gnu/
  # libz.so.1.2.13, absent on a machine with another zlib): point them into the root instead.
  find "$ROOT" -type l -lname '/*' | while read -r l; do
    t=$(readlink "$l"); [ -e "$ROOT$t" ] && ln -sfn "$ROOT$t" "$l"
  done
  ARCH_LIB=$ROOT/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH=$ROOT/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export PKG_CONFIG_PATH=$ARCH_LIB/pkgconfig:$ROOT/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$ROOT  # the .pc files say prefix=/usr
  export CPATH=$ROOT/usr/include${CPATH:+:$CPATH}
  export LIBRARY_PATH=$ARCH_LIB${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$ARCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # CMake's FindPkgConfig needs a pkg-config program; the machine may have none (pkgconf-bin is carried).
  if ! command -v pkg-config >/dev/null 2>&1 && [ -x "$ROOT/usr/bin/pkgconf" ]; then export PKG_CONFIG=$ROOT/usr/bin/pkgconf; fi
  echo "# dependencies from .gpudeps: $(ls .gpudeps/*.deb | wc -l) packages"
fi
source launch/mpi_env.sh  # root, oversubscription, no single-copy (as ctest's MPI entries set it)

BUILD=${BUILD_DIR:-build-gpu}
JOBS=$(nproc)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DZERO_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DZERO_BUILD_BENCH=ON > "$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log"; echo "0 passed, 1 failed"; exit 1; }
# Only what the gpu-labelled tests run (the build-tree programs their commands name) and the NCCL bench: half
# the build, and a target no GPU test needs (the python module, fuzz drivers) cannot fail the check.
KNOWN=$(cmake --build "$BUILD" --target help 2>/dev/null | sed -nE 's/^\.\.\. ([^ ]+).*/\1/p; s/^([^ :]+): phony$/\1/p')
TARGETS=nccl_collectives_bench
for t in $( (cd "$BUILD" && ctest -L gpu -N -V) | grep -oE "$(realpath "$BUILD")/[^ \"]+" | xargs -r -n1 basename | sort -u); do
  grep -qx -- "$t" <<< "$KNOWN" && TARGETS+=" $t"
done
[ "$TARGETS" = nccl_collectives_bench ] && TARGETS=all  # no test program found: build everything rather than nothing
echo "# building: $TARGETS"
cmake --build "$BUILD" -j "$JOBS" --target $TARGETS 2>&1 | grep -E "error|warning: unused|Error " | head -50
cmake --build "$BUILD" -j "$JOBS" --target $TARGETS > /dev/null 2>&1 || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }
echo "# built in $(( $(date +%s) - START )) s"

export ZERO_REQUIRE_GPU=1 OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# The transformers parity table (tests/cuda/hf_parity_4b.py) is saved next to the log.
export ZERO_PARITY_TABLE=$(realpath -m "${LOG%.log}")_hf_parity.txt
# Every ctest entry labelled gpu (tests/cuda/); with ZERO_REQUIRE_GPU a skip is a failure. -V for the two
# end-to-end checks prints their numbers (parity table, losses) into the log even when they pass.
(cd "$BUILD" && ctest -L gpu -E "^(hf_parity_4b|pmtrain_cuda)$" --timeout 300 --output-on-failure) | tee "$BUILD.ctest.log"
(cd "$BUILD" && ctest -R "^(hf_parity_4b|pmtrain_cuda)$" -V) | tee -a "$BUILD.ctest.log"
passed=$(grep -cE "Test +#[0-9]+: .* Passed" "$BUILD.ctest.log")
failed=$(grep -cE "Test +#[0-9]+: .* (\*\*\*Failed|\*\*\*Skipped|\*\*\*Timeout|Not Run|\*\*\*Exception)" "$BUILD.ctest.log")
timeout 120 mpirun -np 2 "$BUILD/bench/cuda/nccl_collectives_bench" 2>&1 | tail -30
[ -f "$ZERO_PARITY_TABLE" ] && echo "# transformers parity table: $ZERO_PARITY_TABLE"
echo "# gpu_check took $(( $(date +%s) - START )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
