#!/usr/bin/env bash
# The CUDA backend is a module pmtrain loads only for `backend: cuda` (pmtrain/cuda_backend_loader.h):
#  - pmtrain needs no CUDA library (ldd: no libcudart, libcublas, libcublasLt, libnccl), and a CPU training
#    run loads none (LD_DEBUG=files records every library the process opens, dlopen() included);
#  - `pmtrain --version` stays small: max RSS under 30 MiB (a build linking the CUDA libraries: ~220 MiB);
#  - a CUDA build loads the module for backend cuda, from the build tree and from an install tree
#    (cmake --install --component pmtrain), then stops in one line because no GPU is visible;
#  - a missing module and a stale one (tests/pmtrain/stale_cuda_backend.cpp, ABI 0) are one clear line;
#  - an error thrown inside a module (tests/pmtrain/throwing_cuda_backend.cpp: zero::InputError) reaches
#    pmtrain's handler for zero::Error by type ("error:", not "unexpected error:").
# Args: PMTRAIN MPIRUN BUILD_DIR STALE_MODULE THROWING_MODULE
source "$(dirname "$0")/common.sh"
BUILD=$3
STALE=$4
THROWING=$5
CUDA_LIBS='lib(cudart|cublas|cublasLt|nccl)\.so'
export CUDA_VISIBLE_DEVICES=  # no GPU, on the GPU machine too
built=false
[[ "$("$PMTRAIN" --version)" == *"CUDA backend: built"* ]] && built=true
echo "CUDA backend built: $built"

# 1. Linked libraries.
ldd "$PMTRAIN" > $TMP/ldd.txt
! grep -qE "$CUDA_LIBS" $TMP/ldd.txt || { grep -E "$CUDA_LIBS" $TMP/ldd.txt; fail "pmtrain links CUDA libraries"; }
grep -q "libmpi" $TMP/ldd.txt || fail "ldd output lacks libmpi: the check above would not see a library either"
echo "ldd: $(wc -l < $TMP/ldd.txt) libraries, none of CUDA"

# 2. --version: max RSS of the child (getrusage), and its wall time.
read -r rss_kib ms < <(python3 - "$PMTRAIN" <<'PY'
import resource, subprocess, sys, time
t = time.perf_counter()
subprocess.run([sys.argv[1], "--version"], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, int((time.perf_counter() - t) * 1000))
PY
)
echo "pmtrain --version: max RSS $((rss_kib / 1024)) MiB, $ms ms"
[ "$rss_kib" -lt $((30 * 1024)) ] || fail "pmtrain --version max RSS $rss_kib KiB, want < 30 MiB"

# 3. A CPU training run (2 steps, one process) opens no CUDA library and not the module.
LD_DEBUG=files LD_DEBUG_OUTPUT=$TMP/ld_cpu "$PMTRAIN" train configs/tiny_cpu.yaml --set run.steps=2 \
  --set run.dir=$TMP/run --set data.cache_dir=$TMP/cache > $TMP/cpu.out 2>&1 || { cat $TMP/cpu.out; fail "CPU run failed"; }
grep -q '"step":2' $TMP/run/metrics.jsonl || fail "the CPU run did not train 2 steps"
cat $TMP/ld_cpu.* > $TMP/ld_cpu.txt
grep -q "file=libmpi" $TMP/ld_cpu.txt || fail "LD_DEBUG recorded no libmpi: it would not record CUDA libraries either"
! grep -E "file=.*($CUDA_LIBS|pmtrain_cuda_backend)" $TMP/ld_cpu.txt \
  || fail "the CPU run opened the CUDA backend or a CUDA library"
echo "CPU run: $(grep -c "file=" $TMP/ld_cpu.txt) library opens, none of CUDA"

# 4. backend cuda: the module is loaded (with the CUDA libraries), then one line: no GPU.
cuda_run() {  # cuda_run NAME PMTRAIN: a backend-cuda run that must stop in one line before reading data
  local name=$1 bin=$2
  rm -f $TMP/ld_$name.*
  local rc=0
  LD_DEBUG=files LD_DEBUG_OUTPUT=$TMP/ld_$name "$bin" train configs/tiny_cpu.yaml --set backend=cuda \
    --set run.dir=$TMP/run_$name --set data.cache_dir=$TMP/cache_$name > $TMP/$name.out 2>&1 || rc=$?
  [ $rc -ne 0 ] || fail "$name: exit code 0 with backend cuda and no GPU"
  [ "$(wc -l < $TMP/$name.out)" -eq 1 ] || { cat $TMP/$name.out; fail "$name: want exactly one line"; }
  [ ! -e $TMP/cache_$name ] || fail "$name: the data was read before the backend was checked"
  cat $TMP/ld_$name.* > $TMP/ld_$name.txt
  echo "$name: $(cat $TMP/$name.out)"
}
if $built; then
  cuda_run build "$PMTRAIN"
  grep -q "backend cuda: no CUDA device is visible" $TMP/build.out || fail "build: not the no-GPU line"
  grep -qE "file=$(dirname "$PMTRAIN")/libpmtrain_cuda_backend\.so" $TMP/ld_build.txt || fail "build: module not loaded from the build tree"
  grep -qE "file=libnccl\.so" $TMP/ld_build.txt || fail "build: the module's libraries were not loaded"
  # The install tree: bin/pmtrain finds lib/libpmtrain_cuda_backend.so.
  cmake --install "$BUILD" --component pmtrain --prefix $TMP/prefix > $TMP/install.log
  cuda_run install $TMP/prefix/bin/pmtrain
  grep -q "backend cuda: no CUDA device is visible" $TMP/install.out || fail "install: not the no-GPU line"
  grep -qE "file=$TMP/prefix/bin/\.\./lib/libpmtrain_cuda_backend\.so|file=$TMP/prefix/lib/libpmtrain_cuda_backend\.so" \
    $TMP/ld_install.txt || fail "install: module not loaded from the install tree"
else
  cuda_run nocuda "$PMTRAIN"
  grep -q "not available in this build" $TMP/nocuda.out || fail "nocuda: not the no-backend line"
  ! grep -qE "file=.*($CUDA_LIBS|pmtrain_cuda_backend)" $TMP/ld_nocuda.txt || fail "nocuda: a CUDA library was opened"
fi

# 5. A module that is not there, and a stale one: one line each, naming the file.
export ZERO_PMTRAIN_CUDA_BACKEND=$TMP/none/libpmtrain_cuda_backend.so
bad missing_module "module is missing (looked for $ZERO_PMTRAIN_CUDA_BACKEND" train configs/tiny_cpu.yaml \
  --set backend=cuda --set run.dir=$TMP/run_bad --set data.cache_dir=$TMP/cache_bad
export ZERO_PMTRAIN_CUDA_BACKEND=$STALE
bad stale_module "$STALE is a stale CUDA backend module (ABI 0" train configs/tiny_cpu.yaml \
  --set backend=cuda --set run.dir=$TMP/run_bad --set data.cache_dir=$TMP/cache_bad
[ ! -e $TMP/cache_bad ] || fail "the data was read before the backend was checked"

# 6. Exceptions cross the boundary with their types (make_training runs after the data is read: its log
#    lines come first).
rc=0
ZERO_PMTRAIN_CUDA_BACKEND=$THROWING "$PMTRAIN" train configs/tiny_cpu.yaml --set backend=cuda \
  --set run.dir=$TMP/run_throw --set data.cache_dir=$TMP/cache_throw > $TMP/throw.out 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "module_throws: exit code 0"
! grep -qiE "unexpected error|terminate called|Aborted|Segmentation" $TMP/throw.out \
  || { cat $TMP/throw.out; fail "module_throws: not caught as a zero::Error"; }
grep -qx "pmtrain train: error: thrown in the test module by make_training (rank 0)" $TMP/throw.out \
  || { cat $TMP/throw.out; fail "module_throws: the module's error line is missing"; }
echo "module_throws: $(grep "thrown in the test module" $TMP/throw.out)"
echo "PASS"
