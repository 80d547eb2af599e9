#!/usr/bin/env bash
# zero_torch (the PyTorch binding) under mpirun with Debian's python3 and torch:
#  1. a small torch model trained through the binding at stages 0-3 on 1, 2 and 3 ranks matches plain
#     single-process torch with torch.optim.AdamW within 1e-5 (torch_parity.py); in param_dtype bf16, plain
#     torch running the same mixed precision (fp32 master, bf16 model); a cosine schedule with warmup against
#     torch's LambdaLR; checkpoints saved and resumed at the same and another world size and stage
#     (torch_resume.py); at 2 ranks in hybrid shard groups of 1 (shard_ranks=1), stages 1 and 3; reduce_dtype bf16
#     (a bf16 wire) at 2 ranks, plain and in groups of 1, against torch summing its gradients as that wire does;
#  2. a 33.6M-parameter model at 3 ranks: the peak RSS of a rank at stage 3 is below stage 0's by at
#     least 80% of what ZeRO-3 should save of the engine's model states, 20 bytes a parameter (compute
#     params, fp32 gradient accumulator, master, m, v) times (1 - 1/3); the modules hold no parameter
#     storage of their own at either stage (torch_memory.py reports it).
set -euo pipefail
MODULE_DIR=$1; shift; MPIRUN=("$@")
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$(dirname "$MODULE_DIR")
$PY -c "import torch" 2>/dev/null || { echo "SKIP: $PY has no torch (apt-get install python3-torch)"; exit 77; }
for n in 1 2 3; do "${MPIRUN[@]}" -np $n $PY "$HERE/torch_parity.py" --bf16 --schedule 0 1 2 3; done
# Hybrid sharding (shard_ranks): 2 ranks in groups of 1 (the replicas' all-reduce), the same parity; with
# reduce_dtype bf16 (the shard group's reductions, or the replicas' all-reduce, in bf16) against torch summing as
# that wire does.
"${MPIRUN[@]}" -np 2 $PY "$HERE/torch_parity.py" --reduce-bf16 0 2
"${MPIRUN[@]}" -np 2 $PY "$HERE/torch_parity.py" --shard-ranks 1 --reduce-bf16 1 3
# Checkpoints: saved at step 4 of 8 at 2 ranks, stage 3; resumed in new processes, the end equals the
# uninterrupted run's: bit for bit at the same world and stage, within 1e-5 resharded to 3 ranks, stage 1.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"${MPIRUN[@]}" -np 2 $PY "$HERE/torch_resume.py" save "$T/run" "$T/ref.pt" 3
"${MPIRUN[@]}" -np 2 $PY "$HERE/torch_resume.py" resume "$T/run" "$T/ref.pt" 3 0
"${MPIRUN[@]}" -np 3 $PY "$HERE/torch_resume.py" resume "$T/run" "$T/ref.pt" 1 1e-5
# shard_ranks="node": these 2 ranks share one node, so one group of both (no hybrid sharding); a bad value, or
# "node" for a plan before any launch, is a ValueError saying what it takes.
cat > "$T/node.py" <<'PYEOF'
import torch
import zero_torch
zm = zero_torch.ZeroModel(torch.nn.Linear(3, 2), shard_ranks="node")
assert zm.world == 2 and "hybrid" not in zm.engine.description, (zm.world, zm.engine.description)
for bad in ("nodes", -1):
    try:
        zero_torch.ZeroModel(torch.nn.Linear(3, 2), shard_ranks=bad)
        raise SystemExit(f"FAIL: shard_ranks={bad!r} was accepted")
    except ValueError as e:
        assert "expected a number of ranks (0 = one group of all) or 'node'" in str(e), e
try:
    zero_torch.estimate_memory(torch.nn.Linear(3, 2), 2, shard_ranks="node")
    raise SystemExit("FAIL: estimate_memory took shard_ranks='node'")
except ValueError as e:
    assert "cannot know the ranks of a node" in str(e), e
if zm.rank == 0:
    print(f"torch_binding: shard_ranks='node', 2 ranks on one node: {zm.engine.description}")
PYEOF
"${MPIRUN[@]}" -np 2 $PY "$T/node.py"  # (a file: mpirun gives stdin to rank 0 only)
# The engine's errors reach Python as zero_torch.ZeroError (one class for both compiled modules); a second
# backend in the same process is refused (the modules would bind each other's symbols).
"${MPIRUN[@]}" -np 1 $PY - <<'PYEOF'
import torch
import zero_torch
try:
    zero_torch.ZeroModel(torch.nn.Linear(3, 2), stage=7)
    raise SystemExit("FAIL: stage 7 was accepted")
except zero_torch.ZeroError as e:
    assert "unknown stage 7" in str(e), e
try:
    zero_torch.ZeroModel(torch.nn.Linear(3, 2), reduce_dtype=torch.float16)
    raise SystemExit("FAIL: reduce_dtype float16 was accepted")
except ValueError as e:
    assert "reduce_dtype torch.float16: expected torch.float32 or torch.bfloat16" in str(e), e
try:
    zero_torch.ZeroModel(torch.nn.Linear(3, 2), backend="cuda")
    raise SystemExit("FAIL: a second backend was accepted")
except ValueError as e:
    assert "one backend a process" in str(e), e
print("torch_binding: errors ok")
PYEOF
# A fixed mmap threshold: glibc's adaptive one (raised after each large free) lets freed blocks stay in the
# heap or not from run to run, which moved the high-water marks by +-50 MiB (a 76% run on an idle machine);
# fixed, every large block goes back to the system when freed and the marks repeat to the byte.
export MALLOC_MMAP_THRESHOLD_=1048576
s0=$("${MPIRUN[@]}" -np 3 $PY "$HERE/torch_memory.py" 0 | tail -1)
s3=$("${MPIRUN[@]}" -np 3 $PY "$HERE/torch_memory.py" 3 | tail -1)
echo "$s0"; echo "$s3"
$PY "$HERE/memory_saving.py" "$s0" "$s3"
