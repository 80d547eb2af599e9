# Sourced, not run: the GPU machine's build, shared by launch/gpu_check.sh and bench/gpu/speed.sh.
#   gpu_build BUILD_DIR [TARGET...]   configures (Release, CUDA on, sm_90a, benches on) and builds TARGETs
#                                     (default: everything); 0 when built, 1 when configuring failed (the
#                                     configure log is printed), 2 when the build failed (its errors are).
# Dependencies the machine lacks (.gpudeps/*.deb from launch/gpu_deps.sh) are unpacked into a private root
# (never into /) and put on the compiler's, CMake's and the loader's paths, which stay exported for what runs
# next (the tests and benches load the same libraries).
gpu_deps_env() {
  local root=$PWD/.gpudeps/root
  ls .gpudeps/*.deb >/dev/null 2>&1 || return 0
  mkdir -p "$root"
  for f in .gpudeps/*.deb; do dpkg -x "$f" "$root"; done
  local arch_lib=$root/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH=$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export PKG_CONFIG_PATH=$arch_lib/pkgconfig:$root/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$root  # the .pc files say prefix=/usr
  export CPATH=$root/usr/include${CPATH:+:$CPATH}
  export LIBRARY_PATH=$arch_lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$arch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "# dependencies from .gpudeps: $(ls .gpudeps/*.deb | wc -l) packages"
}

gpu_build() {
  local build=$1; shift
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  gpu_deps_env
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DZERO_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DZERO_BUILD_BENCH=ON > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; return 1; }
  cmake --build "$build" -j "$(nproc)" "${targets[@]}" 2>&1 | grep -E "error|warning: unused|Error " | head -50
  cmake --build "$build" -j "$(nproc)" "${targets[@]}" > /dev/null 2>&1 || { echo "build failed"; return 2; }
}
