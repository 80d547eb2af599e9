#!/usr/bin/env bash
# One-time (idempotent) set-up on Debian 12: install the Debian packages the build needs, run the
# optional hooks in launch/setup.d/, then configure and build into build/.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  g++ make cmake pkg-config
  libopenmpi-dev openmpi-bin
  libeigen3-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libpcre2-dev libutf8proc-dev libxxhash-dev zlib1g-dev
  libgtest-dev libbenchmark-dev
  pybind11-dev python3-dev python3-torch python3-jinja2
  protobuf-compiler python3-protobuf python3-crcmod python3-yaml
  gnuplot-nox
  slurmctld slurmd slurm-client munge
)
missing=()
# Node.js (for the Hugging Face `tokenizers` cross-check): any install that brings npm will do.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

for hook in launch/setup.d/*.sh; do
  [ -e "$hook" ] && bash "$hook"
done

BUILD_DIR=${BUILD_DIR:-build}
# Where nvcc is installed the CUDA backend must build: a configuration that silently drops it fails.
CUDA_ARG=""
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then CUDA_ARG="-DZERO_WITH_CUDA=ON"; fi
# CI keeps the build free of warnings (-Werror on our C++); a user's build only shows them.
WERROR_ARG=""
if [ "${CI:-}" = true ]; then WERROR_ARG="-DZERO_WERROR=ON"; fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release $CUDA_ARG $WERROR_ARG ${CMAKE_ARGS:-} >/dev/null
# nproc obeys OMP_NUM_THREADS (GNU coreutils): with OMP_NUM_THREADS=1, as MPI jobs and clusters set it, the
# build would run on one core. The build's parallelism is the machine's cores, not the ranks' threads.
cmake --build "$BUILD_DIR" -j "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
