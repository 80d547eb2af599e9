#!/usr/bin/env bash
# A Slurm job cancelled mid-run with scancel (the suite's single-node Slurm; KillWait 5 s): Slurm sends
# SIGTERM to every task, pmtrain stops all ranks after the same step, saves a checkpoint and exits; the job
# resubmitted with --resume auto continues bit-exactly (the 12 per-step losses equal an uncancelled run's).
# The batch script of `pmtrain plan --sbatch` does that by itself at its time limit (below).
source "$(dirname "$0")/common.sh"
[ "$(id -u)" = 0 ] || { echo "needs root to start slurmd; skipping"; exit 77; }
command -v slurmctld >/dev/null || fail "slurm is not installed (launch/setup.sh installs it)"
bash launch/slurm/up.sh 8 > /dev/null
source launch/mpi_env.sh  # the ranks srun starts inherit it
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

# The batch script `pmtrain plan --sbatch` writes, at its time limit: Slurm's --signal=TERM@N signals the
# job's steps but not its batch shell, as `scancel -s TERM` does here. The ranks save and exit 75, the
# script requeues the job, and the requeued job (SLURM_RESTART_COUNT 1) resumes from the checkpoint and
# finishes: its 12 losses equal those of the same script run without a stop. Slurm holds a requeued job
# for about two minutes; the test lets it start at once (scontrol update StartTime=now).
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --sbatch $TMP/job.sbatch > /dev/null
submit() {  # submit NAME: the job id; its output in $TMP/NAME.out, its run in $TMP/NAME
  PMTRAIN=$PMTRAIN sbatch --parsable -J "zero_$1" --output=$TMP/$1.out --mem=0 $TMP/job.sbatch $RUN --set run.dir=$TMP/$1
}
# job_done JOB: waits (at most 300 s) until the job has left the queue, starting it early if Slurm holds it.
job_done() {
  local state=""
  for _ in $(seq 600); do
    state=$(scontrol show job "$1" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2)
    case "$state" in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|"") echo "$state"; return;;
      PENDING) scontrol show job "$1" | grep -q 'Reason=BeginTime' && scontrol update JobId="$1" StartTime=now;;
    esac
    sleep 0.5
  done
  echo "$state (still, after 300 s)"
}
ref_job=$(submit sb_ref)
stop_job=$(submit sb_stop)
for _ in $(seq 1200); do grep -q "^step 3/12" $TMP/sb_stop.out 2>/dev/null && break; sleep 0.1; done
grep -q "^step 3/12" $TMP/sb_stop.out || { cat $TMP/sb_stop.out; fail "the sbatch job never reached step 3"; }
scancel -s TERM "$stop_job"
[ "$(job_done $ref_job)" = COMPLETED ] || { cat $TMP/sb_ref.out; fail "the sbatch job without a stop did not complete"; }
state=$(job_done $stop_job)
[ "$state" = COMPLETED ] || { cat $TMP/sb_stop.out; fail "the stopped sbatch job ended $state, not COMPLETED after its requeue"; }
grep -q "requeueing job $stop_job to resume" $TMP/sb_stop.out && grep -q "^pmtrain: resumed from $TMP/sb_stop/checkpoints/step_" $TMP/sb_stop.out \
  || { cat $TMP/sb_stop.out; fail "the stopped sbatch job was not requeued and resumed"; }
diff <(last_losses $TMP/sb_ref/metrics.jsonl) <(last_losses $TMP/sb_stop/metrics.jsonl) > $TMP/diff.txt \
  || { cat $TMP/diff.txt; fail "losses of the requeued sbatch job differ from the uninterrupted one's"; }
echo "ok: plan's sbatch job stopped at $(sed -nE 's/^pmtrain: stopped by SIGTERM at step ([0-9]+) of 12.*/\1/p' $TMP/sb_stop.out) of 12, requeued itself, resumed; all 12 losses equal the uninterrupted job's"
