#!/usr/bin/env bash
# The installed package as another repository meets it: `cmake --install` into a fresh prefix, then a
# consumer project outside this build (tests/install/consumer) configured against that prefix only,
# built, and run at 2 ranks (its stages 0-3 must match its own single-process reference, and a run saved
# halfway with the installed checkpointer and resumed at another stage must end on the same bits); pkg-config
# builds the same consumer from the prefix moved elsewhere. Every installed header is also compiled alone
# (ZERO_HEADERS_DIR).
set -euo pipefail
BUILD=$1; shift; MPIRUN=("$@")  # the launcher and its options
SRC=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /tmp/zero_install.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" > "$TMP/install.log"
cmake -S "$SRC/consumer" -B "$TMP/consumer" -DCMAKE_PREFIX_PATH="$TMP/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DZERO_HEADERS_DIR="$TMP/prefix/include/zero" > "$TMP/configure.log" \
  || { cat "$TMP/configure.log"; echo "FAIL: configure against the installed package"; exit 1; }
cmake --build "$TMP/consumer" -j 2 > "$TMP/build.log" 2>&1 || { cat "$TMP/build.log"; echo "FAIL: build"; exit 1; }
# The consumer must not have seen this source tree's headers.
! grep -q -- "-I$(cd "$SRC/../.." && pwd)" "$TMP/consumer/CMakeFiles/zero_consumer.dir/flags.make" \
  || { echo "FAIL: the consumer compiled against the source tree"; exit 1; }
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
