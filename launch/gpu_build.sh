# Sourced, not run: the GPU machine's build, shared by launch/gpu_check.sh and bench/gpu/speed.sh.
#   gpu_configure BUILD_DIR           configures (Release, CUDA on, sm_90a, benches on, $GPU_CMAKE_ARGS); 1 when
#                                     it failed (the configure log is printed)
#   gpu_test_targets BUILD_DIR        the programs the gpu-labelled tests run (named on their command lines)
#                                     and the NCCL and attention benches: a target no GPU test needs (the
#                                     fuzz drivers) cannot fail the check; "all" when none is found
#   gpu_build BUILD_DIR [TARGET...]   configures and builds TARGETs (default: everything) with $GPU_BUILD_JOBS jobs
#                                     (default: every core); 0 when built, 1 when configuring failed, 2 when the
#                                     build failed (its errors are printed)
#   gpu_prebuilt_pack                 packs build-gpu-pre into .gpuprebuilt (launch/gpu_prebuild.sh)
#   gpu_prebuilt_use                  unpacks .gpuprebuilt (launch/gpu_prebuild.sh, built on the CPU machine) into
#                                     build-gpu-pre when it is this tree's build and loads here; 1 (and why) if not
#   gpu_test_env                      the environment of the GPU tests (ZERO_REQUIRE_GPU, MPI as root, libraries)
#   machine_cores                     the machine's cores, whatever OMP_NUM_THREADS says
#   ctest_counts CTEST_LOG            "PASSED FAILED": the tests ctest's log reports passed, and failed, skipped,
#                                     timed out, not run or crashed (checked in tests/pmtrain/speed_script.sh)
# Dependencies the machine lacks (.gpudeps/*.deb from launch/gpu_deps.sh) are unpacked into a private root
# (never into /) and put on the compiler's, CMake's and the loader's paths, which stay exported for what runs
# next (the tests and benches load the same libraries).
gpu_deps_env() {
  local root=$PWD/.gpudeps/root
  ls .gpudeps/*.deb >/dev/null 2>&1 || return 0
  mkdir -p "$root"
  for f in .gpudeps/*.deb; do dpkg -x "$f" "$root"; done
  # Absolute links in the debs point at the machine's / (zlib1g-dev's libz.so -> /lib/x86_64-linux-gnu/
  # libz.so.1.2.13, absent on a machine with another zlib): point them into the root instead.
  find "$root" -type l -lname '/*' | while read -r l; do
    local t
    t=$(readlink "$l"); [ -e "$root$t" ] && ln -sfn "$root$t" "$l"
  done
  local arch_lib=$root/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH=$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export PKG_CONFIG_PATH=$arch_lib/pkgconfig:$root/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$root  # the .pc files say prefix=/usr
  export CPATH=$root/usr/include${CPATH:+:$CPATH}
  export LIBRARY_PATH=$arch_lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$arch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # CMake's FindPkgConfig needs a pkg-config program; the machine may have none (pkgconf-bin is carried).
  if ! command -v pkg-config >/dev/null 2>&1 && [ -x "$root/usr/bin/pkgconf" ]; then export PKG_CONFIG=$root/usr/bin/pkgconf; fi
  echo "# dependencies from .gpudeps: $(ls .gpudeps/*.deb | wc -l) packages"
}

# zero_torch's modules for the python3 on PATH (the GPU machine's has torch, and pybind11 as a pip package,
# whose CMake files it names); without pybind11 there, the modules and their GPU test are left out (the
# configure log's "zero: zero_torch" line says which).
gpu_configure() {
  local build=$1 py pybind python_args=()
  [ -n "${GPU_DEPS_DONE:-}" ] || { gpu_deps_env; GPU_DEPS_DONE=1; }
  py=$(command -v python3 || true)
  if [ -n "$py" ] && pybind=$("$py" -m pybind11 --cmakedir 2>/dev/null); then
    python_args=(-DPython3_EXECUTABLE="$py" -Dpybind11_DIR="$pybind")
  fi
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DZERO_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DZERO_BUILD_BENCH=ON "${python_args[@]}" ${GPU_CMAKE_ARGS:-} > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; return 1; }
  grep -E "^-- zero: zero_torch" "$build.configure.log" || true
}

gpu_test_targets() {
  local build=$1 known benches="nccl_collectives_bench attention_bench elementwise_bench" targets t
  targets=$benches
  known=$(cmake --build "$build" --target help 2>/dev/null | sed -nE 's/^\.\.\. ([^ ]+).*/\1/p; s/^([^ :]+): phony$/\1/p')
  for t in $( (cd "$build" && ctest -L gpu -N -V) | grep -oE "$(realpath "$build")/[^ \"]+" | xargs -r -n1 basename | sort -u); do
    grep -qx -- "$t" <<< "$known" && targets+=" $t"
  done
  [ "$targets" = "$benches" ] && targets=all  # no test program found: everything rather than nothing
  echo "$targets"
}

# The machine's cores. nproc obeys OMP_NUM_THREADS, which launch/mpi_env.sh and speed.sh set to 1 for the ranks
# before building (on the H200, 2026-11-27, the build took 565 s on one of 16 cores:
# bench/results/gpu_20261127_h200/gpu_check.log).
machine_cores() { env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc; }

gpu_build() {
  local build=$1; shift
  local targets=() t0 jobs
  for t in "$@"; do targets+=(--target "$t"); done
  t0=$(date +%s)
  gpu_configure "$build" || return 1
  jobs=${GPU_BUILD_JOBS:-$(machine_cores)}
  echo "# configured in $(( $(date +%s) - t0 )) s; building with -j $jobs"
  # One build into a log, its errors printed from the log (a build piped into head dies of SIGPIPE).
  if ! cmake --build "$build" -j "$jobs" "${targets[@]}" > "$build.build.log" 2>&1; then
    grep -E "error|Error " "$build.build.log" | head -50
    echo "build failed (the whole log: $build.build.log)"
    return 2
  fi
  grep -E "warning: unused" "$build.build.log" | head -20
  return 0
}

# The pack of build-gpu-pre: what ctest and the tests read from the build tree (programs, modules, the ctest
# files, configured files), without objects, static libraries, CMake's own files and zero_torch (a module for
# one python3: built on the GPU machine for its own), beside the sha256 of the tracked files and a stamp.
gpu_prebuilt_pack() {
  local dir=build-gpu-pre
  rm -rf .gpuprebuilt && mkdir -p .gpuprebuilt || return 1
  tar -czf .gpuprebuilt/build.tar.gz --exclude=CMakeFiles --exclude='*.a' --exclude='*.o' --exclude=Makefile \
    --exclude=cmake_install.cmake --exclude=CMakeCache.txt --exclude='*.log' --exclude="$dir/python" "$dir" || return 1
  # Every tracked file the build can read: not the results, the docs and other prose committed after it.
  git ls-files -z -- . ':!:bench/results' ':!:docs' ':!:*.md' | xargs -0 sha256sum > .gpuprebuilt/sources.sha256 || return 1
  {
    echo "root $(realpath .)"
    echo "mpi $(mpi_major)"
    echo "built $(date -u +%FT%TZ) from $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + changes')"
  } > .gpuprebuilt/stamp
}
mpi_major() { mpirun --version 2>/dev/null | sed -nE '1s/.* ([0-9]+)\.[0-9.]+$/\1/p'; }

gpu_prebuilt_use() {
  local dir=build-gpu-pre root mpi here_mpi changed f missing bad=""
  [ -f .gpuprebuilt/stamp ] && [ -f .gpuprebuilt/build.tar.gz ] || { echo "# prebuilt: none carried"; return 1; }
  [ -n "${GPU_DEPS_DONE:-}" ] || { gpu_deps_env; GPU_DEPS_DONE=1; }
  root=$(sed -n 's/^root //p' .gpuprebuilt/stamp)
  mpi=$(sed -n 's/^mpi //p' .gpuprebuilt/stamp)
  here_mpi=$(mpi_major)
  [ "$root" = "$(realpath .)" ] || { echo "# prebuilt: built in $root, this checkout is $(realpath .)"; return 1; }
  [ "$mpi" = "$here_mpi" ] || { echo "# prebuilt: Open MPI $mpi there, ${here_mpi:-none} here"; return 1; }
  changed=$(sha256sum --quiet -c .gpuprebuilt/sources.sha256 2>&1) ||
    { echo "# prebuilt: of another tree ($(head -3 <<< "$changed" | tr '\n' ' '))"; return 1; }
  rm -rf "$dir" && tar -xzf .gpuprebuilt/build.tar.gz || { echo "# prebuilt: unpacking failed"; return 1; }
  # Every library found in the versions each program needs (ldd names a missing one, and a C++ runtime older
  # than this machine's: "version `GLIBCXX_...' not found").
  for f in $(find "$dir" -type f -perm -u+x); do
    [ "$(head -c 4 "$f" | tail -c 3)" = ELF ] || continue
    missing=$(ldd "$f" 2>&1 | grep "not found" | head -2 | sed -E 's/^[[:space:]]+//' | paste -sd,)
    [ -z "$missing" ] || bad+=" $(basename "$f"): $missing;"
  done
  [ -z "$bad" ] || { echo "# prebuilt: not loadable here:$bad"; rm -rf "$dir"; return 1; }
  echo "# prebuilt: $(sed -n 's/^built //p' .gpuprebuilt/stamp), unpacked into $dir"
}

# What the GPU tests run under (gpu_check.sh, gpu_rerun.sh): a skip is a failure, MPI as root with more ranks
# than cores, one math thread per rank; the carried libraries stay on the loader's path (gpu_deps_env).
gpu_test_env() {
  [ -n "${GPU_DEPS_DONE:-}" ] || { gpu_deps_env; GPU_DEPS_DONE=1; }
  source launch/mpi_env.sh
  export ZERO_REQUIRE_GPU=1 OMP_NUM_THREADS=1
}

ctest_counts() {
  # ctest writes "12/15 Test #23: name ......***Failed  0.34 sec" (no space before the stars) and
  # "  Passed" (spaces): one line per test that ran to an end.
  local passed failed
  passed=$(grep -cE "Test +#[0-9]+: .*[. ] +Passed +[0-9.]+ sec" "$1")
  failed=$(grep -cE "Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Skipped|\*\*\*Timeout|\*\*\*Not Run|\*\*\*Exception)" "$1")
  echo "$passed $failed"
}
