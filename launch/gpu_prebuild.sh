#!/usr/bin/env bash
# Run HERE (CUDA compiles on this machine), after launch/gpu_deps.sh and before a GPU session's device call:
# builds the programs the GPU tests run (sm_90a, Release, benches) into build-gpu-pre and packs them into
# .gpuprebuilt/ (git ignores it; the device call carries it: carry [".gpudeps", ".gpuprebuilt"]). On the
# GPU machine launch/gpu_check.sh then starts the tests at once instead of after its own build (242 s of a
# 900 s session on the H200 of 2026-11-28, 99 s on the next machine), and builds build-gpu beside them for
# what only that machine can build (zero_torch for its python3) and for gpu_rerun.sh's incremental builds.
# gpu_check.sh uses the pack only when it is what this tree builds and that machine can load it
# (gpu_prebuilt_use in launch/gpu_build.sh): every tracked file the build reads (all but bench/results, docs
# and *.md) with the sha256 it has here, the same checkout path (the test entries name absolute paths), the
# same Open MPI major version, every library found (in the versions the programs need); else it builds as
# before. So rerun this after any change to the code, right before the device call (about 8 minutes from
# nothing on 2 cores, 1-2 after a change; GPU_BUILD_JOBS: build jobs, default every core).
set -euo pipefail
cd "$(dirname "$0")/.."
source launch/gpu_build.sh
PRE=build-gpu-pre
START=$(date +%s)
ls .gpudeps/*.deb > /dev/null 2>&1 || { echo "gpu_prebuild: run launch/gpu_deps.sh first (the same libraries here and there)"; exit 1; }
EXCLUDE=$(git rev-parse --git-path info/exclude)
grep -qx '/.gpuprebuilt/' "$EXCLUDE" 2>/dev/null || echo '/.gpuprebuilt/' >> "$EXCLUDE"

# zero_torch is a module for one python3: this one is not the GPU machine's (3.12 with torch), so it is left
# out here and built there. Host code for any x86-64, not -march=native: this machine's instructions (AVX-512
# here) may be missing on that one's processor.
export GPU_CMAKE_ARGS="-DCMAKE_DISABLE_FIND_PACKAGE_pybind11=TRUE -DZERO_NATIVE_ARCH=OFF"
gpu_configure "$PRE" || exit 1
targets=$(gpu_test_targets "$PRE")
echo "# gpu_prebuild: building $targets"
gpu_build "$PRE" $targets || { echo "gpu_prebuild: build failed ($PRE.build.log)"; exit 1; }

gpu_prebuilt_pack || { echo "gpu_prebuild: packing failed"; exit 1; }
echo "# gpu_prebuild: $(du -sh .gpuprebuilt | cut -f1) in .gpuprebuilt ($(( $(date +%s) - START )) s); carry it:" \
  "[\".gpudeps\", \".gpuprebuilt\"] (the tree, .gpudeps and it travel in 64 MiB)"
cat .gpuprebuilt/stamp
