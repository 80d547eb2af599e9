#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with apt), before a GPU session's device call: downloads the .debs of
# the build dependencies the GPU machine may lack (it has nvcc, NCCL, Open MPI and CMake, but no PCRE2,
# utf8proc or xxhash headers, and no guarantee of the rest) into .gpudeps/, which git ignores and the
# device call carries (`carry: [".gpudeps"]`). launch/gpu_check.sh unpacks them there with dpkg -x.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each -dev package comes with its runtime library, or its libX.so link would dangle in the unpacked root
# (zlib1g-dev's did: CMake then fell back to libz.a). pkgconf-bin: FindPkgConfig's program, if the machine lacks one.
DEPS=(
  libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libxxhash-dev libxxhash0 zlib1g-dev zlib1g
  libeigen3-dev libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libfmt-dev libfmt9 libgtest-dev libcli11-dev
  pkgconf-bin libpkgconf3
)
mkdir -p .gpudeps
EXCLUDE=$(git rev-parse --git-path info/exclude)  # .git/info/exclude, or the main checkout's in a worktree
grep -qx '/.gpudeps/' "$EXCLUDE" 2>/dev/null || { mkdir -p "$(dirname "$EXCLUDE")"; echo '/.gpudeps/' >> "$EXCLUDE"; }
[ -n "$(ls /var/lib/apt/lists/ 2>/dev/null | grep -v lock)" ] || apt-get update -qq
(cd .gpudeps && apt-get download "${DEPS[@]}" >/dev/null)
echo "gpu_deps: $(ls .gpudeps/*.deb | wc -l) packages, $(du -sh .gpudeps | cut -f1) in .gpudeps/"
