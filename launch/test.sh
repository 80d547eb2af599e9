#!/usr/bin/env bash
# Set up (idempotent), build, and run the whole test suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh
source launch/mpi_env.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900 "$@"
