#!/usr/bin/env bash
# A Slurm job cancelled mid-run with scancel (the suite's single-node Slurm; KillWait 5 s): Slurm sends
# SIGTERM to every task, pmtrain stops all ranks after the same step, saves a checkpoint and exits; the job
# resubmitted with --resume auto continues bit-exactly (the 12 per-step losses equal an uncancelled run's).
source "$(dirname "$0")/common.sh"
[ "$(id -u)" = 0 ] || { echo "needs root to start slurmd; skipping"; exit 77; }
command -v slurmctld >/dev/null || fail "slurm is not installed (launch/setup.sh installs it)"
bash launch/slurm/up.sh 8 > /dev/null
export OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=1
RUN="--set data.cache_dir=$TMP/cache --set run.steps=12 --set run.log_every=1 --set run.eval_every=0 --set run.save_final=false"
srun_pm() { timeout 300 srun -n 2 --mpi=pmix -J "$1" "$PMTRAIN" train configs/tiny_cpu.yaml $RUN "${@:2}"; }
srun_pm zero_ref --set run.dir=$TMP/ref > $TMP/ref.log 2>&1 || { cat $TMP/ref.log; fail "uncancelled job failed"; }

srun_pm zero_cancel --set run.dir=$TMP/run > $TMP/cancel.log 2>&1 &
launcher=$!
for _ in $(seq 1200); do grep -q "^step 3/12" $TMP/cancel.log && break; sleep 0.1; done
grep -q "^step 3/12" $TMP/cancel.log || { kill $launcher; cat $TMP/cancel.log; fail "the job never reached step 3"; }
job=$(squeue -h -n zero_cancel -o %i | head -1)
[ -n "$job" ] || fail "no job zero_cancel in squeue"
scancel "$job"
set +e; wait $launcher; set -e
step=$(sed -nE 's/^pmtrain: stopped by SIGTERM at step ([0-9]+) of 12.*/\1/p' $TMP/cancel.log)
[ -n "$step" ] || { cat $TMP/cancel.log; fail "no 'stopped by SIGTERM at step N' after scancel"; }
[ -f $TMP/run/checkpoints/step_$step/manifest.json ] || fail "no checkpoint step_$step after scancel"
srun_pm zero_resume --set run.dir=$TMP/run --resume auto > $TMP/resume.log 2>&1 || { cat $TMP/resume.log; fail "resume failed"; }
diff <(last_losses $TMP/ref/metrics.jsonl) <(last_losses $TMP/run/metrics.jsonl) > $TMP/diff.txt \
  || { cat $TMP/diff.txt; fail "losses after scancel + resume differ from the uncancelled job"; }
echo "ok: scancel at step $step of 12: checkpoint saved, resumed, all 12 losses equal the uncancelled job's"
