#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with apt), before a GPU session's device call: downloads the .debs of
# the build dependencies the GPU machine may lack (it has nvcc, NCCL, Open MPI and CMake, but no PCRE2,
# utf8proc or xxhash headers, and no guarantee of the rest) into .gpudeps/, which git ignores and the
# device call carries (`carry: [".gpudeps"]`). launch/gpu_check.sh unpacks them there with dpkg -x.
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS=(
  libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 libxxhash-dev libxxhash0 zlib1g-dev
  libeigen3-dev libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev libfmt-dev libfmt9 libgtest-dev libcli11-dev
)
mkdir -p .gpudeps
grep -qx '/.gpudeps/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.gpudeps/' >> .git/info/exclude; }
[ -n "$(ls /var/lib/apt/lists/ 2>/dev/null | grep -v lock)" ] || apt-get update -qq
(cd .gpudeps && apt-get download "${DEPS[@]}" >/dev/null)
echo "gpu_deps: $(ls .gpudeps/*.deb | wc -l) packages, $(du -sh .gpudeps | cut -f1) in .gpudeps/"
