#!/usr/bin/env bash
# Stops what launch/slurm/up.sh started.
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
scontrol shutdown >/dev/null 2>&1 || true
for _ in $(seq 100); do running /run/slurmctld.pid || running /run/slurmd.pid || break; sleep 0.1; done
for p in /run/slurmd.pid /run/slurmctld.pid; do running $p && kill "$(cat $p)"; done
# munged removes its socket as it exits: wait for that, so no launch after this one finds a socket without a
# daemon (Open MPI's PMIx would retry it for 2.3 s per launch where launch/mpi.env does not turn munge off).
if running /run/munge/munged.pid; then
  kill "$(cat /run/munge/munged.pid)"
  for _ in $(seq 50); do running /run/munge/munged.pid || break; sleep 0.1; done
fi
echo "slurm down"
