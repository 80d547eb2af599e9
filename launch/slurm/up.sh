#!/usr/bin/env bash
# Starts a single-node Slurm (slurmctld + slurmd + munge) on this machine, for CI and for trying
# `srun -n N pmtrain ...` locally. Idempotent; root only; no systemd needed.
# Usage: launch/slurm/up.sh [CPUS=8]   (CPUs may exceed the real cores: config_overrides)
set -euo pipefail
CPUS=${1:-8}
NODE=$(hostname -s)
[ "$(id -u)" = 0 ] || { echo "launch/slurm/up.sh: run as root" >&2; exit 1; }
source "$(dirname "${BASH_SOURCE[0]}")/daemons.sh"  # running, stop_slurm

# munge: one key, one daemon.
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || head -c 1024 /dev/urandom > /etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
fresh_munge=0
if ! (munge -n | unmunge) >/dev/null 2>&1; then
  fresh_munge=1
  runuser -u munge -- /usr/sbin/munged --force
  for _ in $(seq 50); do (munge -n | unmunge) >/dev/null 2>&1 && break; sleep 0.1; done
fi

# slurm.conf: PMIx for Open MPI (Debian's Open MPI has no PMI2), cons_tres, everything local.
install -d -m 0755 /etc/slurm /var/lib/slurm/ctld /var/lib/slurm/d /var/log/slurm
conf=$(cat <<CONF
ClusterName=zero-ci
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=/var/lib/slurm/ctld
SlurmdSpoolDir=/var/lib/slurm/d
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
InactiveLimit=0
KillWait=5
MinJobAge=30
MailProg=/bin/true
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${CPUS} State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
)
# Daemons left running are restarted on a changed config, after munge had died under them, or when they hold
# the node down (it stopped answering once: the controller would wait minutes before asking again).
start_slurm() {
  running /run/slurmctld.pid || slurmctld -c   # -c: forget saved state (old jobs, drained nodes)
  running /run/slurmd.pid || slurmd
}
node_state() { sinfo -h -n "$NODE" -o '%T' 2>/dev/null || true; }
changed=0
if [ "$(cat /etc/slurm/slurm.conf 2>/dev/null)" != "$conf" ]; then echo "$conf" > /etc/slurm/slurm.conf; changed=1; fi
if [ $changed = 1 ] || [ $fresh_munge = 1 ]; then stop_slurm; fi
case "$(node_state)" in down*|drain*|fail*) stop_slurm;; esac
start_slurm
for _ in $(seq 300); do
  state=$(node_state)
  case "$state" in idle*|mixed*|allocated*) echo "slurm: node $NODE $state, $CPUS CPUs"; exit 0;; esac
  sleep 0.2
done
echo "slurm did not come up (node state '$state')" >&2
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2
exit 1
