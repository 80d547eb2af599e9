# Sourced by launch/slurm/up.sh and down.sh: is a daemon running, and stopping Slurm's two.
running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
# Asks the controller to shut both down, then kills what is left (no RPC works once munge is gone) and waits.
stop_slurm() {
  scontrol shutdown >/dev/null 2>&1 || true
  for _ in $(seq 100); do running /run/slurmctld.pid || running /run/slurmd.pid || break; sleep 0.1; done
  for p in /run/slurmd.pid /run/slurmctld.pid; do running $p && kill "$(cat $p)"; done
  for _ in $(seq 100); do running /run/slurmctld.pid || running /run/slurmd.pid || break; sleep 0.1; done
  return 0
}
