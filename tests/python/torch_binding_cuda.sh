#!/usr/bin/env bash
# zero_torch on the CUDA backend (the module _engine_cuda) under mpirun: torch_parity.py --backend cuda, the
# small torch model trained through the binding at stages 0-3 on 1 and 2 ranks against plain single-process
# torch with torch.optim.AdamW, within 1e-5; and in param_dtype bf16 (torch running the same mixed precision);
# hybrid sharding with an fp32 and a bf16 wire (reduce_dtype);
# checkpoints saved from the device and resumed (torch_resume.py); on a GPU, the device memory ZeRO-3 saves
# (torch_memory.py, memory_saving.py).
#   torch_binding_cuda.sh MODULE_DIR DEVICE PYTHON MPIRUN...
# DEVICE cuda: the model on this rank's GPU, the engine on CudaOps + NCCL (two ranks share one GPU on a
#   one-GPU machine: cuda/device_select.h). Without a GPU: exit 77, a failure under ZERO_REQUIRE_GPU=1.
# DEVICE cpu: MODULE_DIR holds the module built on the emulated CUDA runtime (tests/cuda/emulated); torch's
#   CPU tensors stand for device memory (lent to the fake runtime for each transfer).
set -euo pipefail
MODULE_DIR=$1 DEVICE=$2 PY=$3; shift 3; MPIRUN=("$@")
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$(dirname "$MODULE_DIR")
required() { [ -n "${ZERO_REQUIRE_GPU:-}" ] && [ "${ZERO_REQUIRE_GPU}" != 0 ]; }
skip() {
  if required; then echo "FAIL: cannot run: $* (ZERO_REQUIRE_GPU is set)"; exit 1; fi
  echo "SKIP: $*"; exit 77
}
"$PY" -c "import torch" 2>/dev/null || skip "$PY has no torch"
if [ "$DEVICE" = cuda ]; then
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || skip "torch sees no CUDA device"
fi
for n in 1 2; do "${MPIRUN[@]}" -np $n "$PY" "$HERE/torch_parity.py" --backend cuda --device "$DEVICE" --bf16 --schedule 0 1 2 3; done
# Hybrid sharding: 2 ranks in shard groups of 1, NCCL across them (the replicas' communicator); with reduce_dtype
# bf16 too (the replicas' all-reduce in bf16 through its own chunks) against torch summing as that wire does.
"${MPIRUN[@]}" -np 2 "$PY" "$HERE/torch_parity.py" --backend cuda --device "$DEVICE" --shard-ranks 1 --reduce-bf16 3
# Checkpoints saved from the device and resumed: the same world and stage bit for bit, resharded within 1e-5.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
RESUME=("$PY" "$HERE/torch_resume.py" --backend cuda --device "$DEVICE")
"${MPIRUN[@]}" -np 2 "${RESUME[@]}" save "$T/run" "$T/ref.pt" 3
"${MPIRUN[@]}" -np 2 "${RESUME[@]}" resume "$T/run" "$T/ref.pt" 3 0
"${MPIRUN[@]}" -np 1 "${RESUME[@]}" resume "$T/run" "$T/ref.pt" 1 1e-5
# What ZeRO-3 saves on the device (a GPU only: the emulated kernels are too slow for 33.6M parameters): each
# rank's peak, torch's allocations plus the engine's buffers, at 3 ranks sharing the GPU.
if [ "$DEVICE" = cuda ]; then
  s0=$("${MPIRUN[@]}" -np 3 "$PY" "$HERE/torch_memory.py" --device cuda 0 | tail -1)
  s3=$("${MPIRUN[@]}" -np 3 "$PY" "$HERE/torch_memory.py" --device cuda 3 | tail -1)
  echo "$s0"; echo "$s3"
  "$PY" "$HERE/memory_saving.py" "$s0" "$s3"
fi
