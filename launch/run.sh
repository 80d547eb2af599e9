#!/usr/bin/env bash
# The main job: set up (idempotent), build, and train the default tiny config on CPU with 4 MPI ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh
source launch/mpi_env.sh
NP=${NP:-4}
if [ -x build/pmtrain/pmtrain ] && [ -f configs/tiny_cpu.yaml ]; then
  exec mpirun -np "$NP" build/pmtrain/pmtrain train configs/tiny_cpu.yaml "$@"
fi
# Until pmtrain lands, the main job is the example trainer on the engine's test model.
exec mpirun -np "$NP" build/examples/mlp_trainer --stage 3 --steps 20 "$@"
