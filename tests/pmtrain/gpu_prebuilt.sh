#!/usr/bin/env bash
# The GPU session's prebuilt test programs (launch/gpu_prebuild.sh packs them here, launch/gpu_check.sh uses
# them on the GPU machine), on a checkout of its own: a pack of this tree's build is unpacked and used (also
# after prose and results changed); a source changed since, another checkout path, another Open MPI major
# version, or a program whose library is missing there each refuse it with the reason, so gpu_check.sh builds
# as before.
source "$(dirname "$0")/common.sh"
SRC=$PWD
CO=$TMP/checkout
mkdir -p $CO/launch $CO/build-gpu-pre/tests/cuda
cp launch/gpu_build.sh $CO/launch/
cd $CO
git init -q . && git config user.email t@t && git config user.name t
echo "int answer() { return 42; }" > source.cpp
echo "notes" > NOTES.md && mkdir -p bench/results && echo "a log" > bench/results/log.txt
git add source.cpp launch NOTES.md bench && git commit -qm tree
# Two programs: one on the C library alone, one on a library of its own (libfake.so, beside the checkout).
echo 'int main(void) { return 0; }' > $TMP/plain.c
gcc -o build-gpu-pre/tests/cuda/plain_test $TMP/plain.c
echo 'int fake(void) { return 0; }' > $TMP/fake.c
gcc -shared -fPIC -o $TMP/libfake.so $TMP/fake.c
echo 'int fake(void); int main(void) { return fake(); }' > $TMP/needs.c
gcc -o build-gpu-pre/tests/cuda/needs_fake_test $TMP/needs.c -L$TMP -lfake -Wl,-rpath,$TMP
echo "add_test(plain_test plain_test)" > build-gpu-pre/tests/cuda/CTestTestfile.cmake
mkdir -p build-gpu-pre/CMakeFiles && touch build-gpu-pre/CMakeFiles/obj.o build-gpu-pre/libzero.a
(source launch/gpu_build.sh && gpu_prebuilt_pack) || fail "gpu_prebuilt_pack failed"
[ -s .gpuprebuilt/build.tar.gz ] && [ -s .gpuprebuilt/sources.sha256 ] || fail "no pack written"
grep -qx "root $CO" .gpuprebuilt/stamp || { cat .gpuprebuilt/stamp; fail "the stamp does not name the checkout"; }
listing=$(tar tzf .gpuprebuilt/build.tar.gz)
grep -q "needs_fake_test$" <<< "$listing" && grep -q "CTestTestfile.cmake$" <<< "$listing" \
  || { echo "$listing"; fail "programs or ctest files left out of the pack"; }
! grep -qE "CMakeFiles|\.a$|\.o$" <<< "$listing" || { echo "$listing"; fail "objects packed"; }

use() {  # use: gpu_prebuilt_use's output and exit code in $out and $rc, from a fresh build-gpu-pre
  rm -rf build-gpu-pre
  set +e; out=$(source launch/gpu_build.sh && gpu_prebuilt_use 2>&1); rc=$?; set -e
}
use
[ $rc -eq 0 ] && [ -x build-gpu-pre/tests/cuda/needs_fake_test ] || { echo "$out"; fail "this tree's pack was not used"; }
grep -q "unpacked into build-gpu-pre" <<< "$out" || { echo "$out"; fail "no line saying the pack is used"; }
echo "ok: used: $out"

# Prose and results committed after the build leave it this tree's.
echo "more notes" >> NOTES.md && echo "a later log" > bench/results/log.txt
use
[ $rc -eq 0 ] || { echo "$out"; fail "a changed note or result refused the pack"; }

echo "int answer() { return 43; }" > source.cpp
use
[ $rc -ne 0 ] && grep -q "of another tree (source.cpp: FAILED" <<< "$out" || { echo "$out"; fail "a changed source was not refused"; }
[ ! -e build-gpu-pre ] || fail "a refused pack was unpacked"
echo "ok: changed source: $out"
git checkout -q source.cpp

cp .gpuprebuilt/stamp $TMP/stamp
sed -i "s|^root .*|root /elsewhere|" .gpuprebuilt/stamp
use
[ $rc -ne 0 ] && grep -q "built in /elsewhere" <<< "$out" || { echo "$out"; fail "another checkout path was not refused"; }
cp $TMP/stamp .gpuprebuilt/stamp
sed -i "s|^mpi .*|mpi 99|" .gpuprebuilt/stamp
use
[ $rc -ne 0 ] && grep -q "Open MPI 99 there" <<< "$out" || { echo "$out"; fail "another Open MPI was not refused"; }
cp $TMP/stamp .gpuprebuilt/stamp
echo "ok: other path, other MPI refused"

rm $TMP/libfake.so
use
[ $rc -ne 0 ] && grep -q "not loadable here: needs_fake_test: libfake.so => not found" <<< "$out" \
  || { echo "$out"; fail "a program missing its library was not refused"; }
[ ! -e build-gpu-pre ] || fail "an unloadable pack was left unpacked"
echo "ok: missing library: $out"
cd $SRC
