#!/usr/bin/env bash
# The main job: set up (idempotent), build, and train the default tiny config on CPU with 4 MPI ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup.sh
source launch/mpi_env.sh
NP=${NP:-4}
if [ -x build/pmtrain/pmtrain ] && [ -f configs/tiny_cpu.yaml ]; then
  # The demo starts over each time (a real run would continue with --resume auto).
  exec mpirun -np "$NP" build/pmtrain/pmtrain train configs/tiny_cpu.yaml --set run.start_over=true "$@"
fi
echo "run.sh: build/pmtrain/pmtrain was not built" >&2
exit 1
