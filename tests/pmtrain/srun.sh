#!/usr/bin/env bash
# srun -n 8 pmtrain train ... on a single-node Slurm that this test starts itself; the run must see
# world size 8 (one 8-rank job, not 8 separate one-rank runs).
source "$(dirname "$0")/common.sh"
[ "$(id -u)" = 0 ] || { echo "needs root to start slurmd; skipping"; exit 77; }
command -v slurmctld >/dev/null || fail "slurm is not installed (launch/setup.sh installs it)"
bash launch/slurm/up.sh 8
source launch/mpi_env.sh  # the ranks srun starts inherit it
timeout 600 srun -n 8 --mpi=pmix "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/run \
  --set data.cache_dir=$TMP/cache --set run.steps=2 --set batch.micro=1 --set run.eval_every=0 \
  --set data.test_files=[] > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; tail -20 /var/log/slurm/slurmd.log; fail "srun failed"; }
grep -E '^pmtrain: .*world' $TMP/out.txt
grep -q 'world 8 (1 nodes), stage 2, srun' $TMP/out.txt || fail "the run did not see world size 8 under srun"
[ $(grep -c '^done:' $TMP/out.txt) = 1 ] || fail "expected exactly one rank-0 summary (one 8-rank job)"
grep -q '^done: .*, world 8, peak RSS' $TMP/out.txt || fail "summary did not report world 8"
