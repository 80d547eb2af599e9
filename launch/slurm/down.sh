#!/usr/bin/env bash
# Stops what launch/slurm/up.sh started.
source "$(dirname "${BASH_SOURCE[0]}")/daemons.sh"  # running, stop_slurm
stop_slurm
# munged removes its socket as it exits: wait for that, so no launch after this one finds a socket without a
# daemon (Open MPI's PMIx would retry it for 2.3 s per launch where launch/mpi.env does not turn munge off).
if running /run/munge/munged.pid; then
  kill "$(cat /run/munge/munged.pid)"
  for _ in $(seq 50); do running /run/munge/munged.pid || break; sleep 0.1; done
fi
echo "slurm down"
