#!/usr/bin/env bash
# Stops what launch/slurm/up.sh started.
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
scontrol shutdown >/dev/null 2>&1 || true
for _ in $(seq 100); do running /run/slurmctld.pid || running /run/slurmd.pid || break; sleep 0.1; done
for p in /run/slurmd.pid /run/slurmctld.pid; do running $p && kill "$(cat $p)"; done
running /run/munge/munged.pid && kill "$(cat /run/munge/munged.pid)"
echo "slurm down"
