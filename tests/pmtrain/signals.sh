#!/usr/bin/env bash
# Preemption as Slurm does it: SIGTERM to every rank mid-run (what scancel and the time limit send to
# each task). Every rank stops at the same step boundary, a checkpoint of that step is saved, the exit
# code is 75, and `--resume auto` continues bit-exactly: the per-step losses of the stopped-and-resumed
# run equal an uninterrupted run's, to the last digit printed in metrics.jsonl.
source "$(dirname "$0")/common.sh"
# On the small model (common.sh SMALL) a step takes about 0.15 s here: 32 steps leave the signals below as
# many seconds of margin as 12 steps of the Qwen3-vocabulary model did.
N=32
RUN="$SMALL --set data.cache_dir=$TMP/cache --set run.steps=$N --set run.log_every=1 --set run.eval_every=0 --set run.save_final=false --set data.test_files=[]"
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.dir=$TMP/ref > $TMP/ref.log 2>&1 \
  || { cat $TMP/ref.log; fail "uninterrupted run failed"; }

$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.dir=$TMP/run > $TMP/stop.log 2>&1 &
launcher=$!
for _ in $(seq 1200); do grep -q "^step 3/$N" $TMP/stop.log && break; sleep 0.1; done
grep -q "^step 3/$N" $TMP/stop.log || { kill $launcher; cat $TMP/stop.log; fail "the run never reached step 3"; }
pkill -TERM -P $launcher  # the ranks, not the launcher: as Slurm signals each task
set +e; wait $launcher; rc=$?; set -e
[ $rc -eq 75 ] || { cat $TMP/stop.log; fail "exit code $rc after SIGTERM, expected 75"; }
step=$(sed -nE "s/^pmtrain: stopped by SIGTERM at step ([0-9]+) of $N.*/\1/p" $TMP/stop.log)
[ -n "$step" ] || { cat $TMP/stop.log; fail "no 'stopped by SIGTERM at step N' line"; }
[ "$step" -lt $N ] || fail "the signal arrived too late to test a resume (step $step)"
[ -f $TMP/run/checkpoints/step_$step/manifest.json ] || fail "no checkpoint step_$step after SIGTERM"
# The command the message gives, as it is: it must carry this run's --set overrides ($RUN), not just the file.
hint=$(sed -nE 's/^pmtrain: stopped by .* resume with: pmtrain (train .* --resume auto)$/\1/p' $TMP/stop.log)
[ -n "$hint" ] || { cat $TMP/stop.log; fail "the message does not say how to resume"; }
$MPIRUN -np 2 "$PMTRAIN" $hint > $TMP/resume.log 2>&1 || { cat $TMP/resume.log; fail "resume with '$hint' failed"; }
grep -q "resumed from .*step_$step" $TMP/resume.log || { cat $TMP/resume.log; fail "did not resume from step_$step"; }
diff <(last_losses $TMP/ref/metrics.jsonl) <(last_losses $TMP/run/metrics.jsonl) > $TMP/diff.txt \
  || { cat $TMP/diff.txt; fail "losses after stop + resume differ from the uninterrupted run"; }
# metrics.jsonl records the resume, once: a "resume" record at the step resumed from, naming its checkpoint and
# the world sizes (a fresh run has none).
! grep -q '"type":"resume"' $TMP/ref/metrics.jsonl || fail "a fresh run wrote a resume record"
resumes=$(grep '"type":"resume"' $TMP/run/metrics.jsonl || true)
[ "$(echo "$resumes" | grep -c .)" -eq 1 ] && echo "$resumes" | grep -q "\"step\":$step," \
  && echo "$resumes" | grep -q "checkpoints/step_$step\"" && echo "$resumes" | grep -q '"saved_world":2,' \
  || { cat $TMP/run/metrics.jsonl; fail "metrics.jsonl: not one resume record at step $step naming step_$step"; }
# metrics.jsonl after stop + resume: each step and each epoch once, every record timestamped.
[ -z "$(json_field $TMP/run/metrics.jsonl train step | sort | uniq -d)" ] || fail "a train step appears twice in metrics.jsonl"
[ -z "$(json_field $TMP/run/metrics.jsonl epoch epoch | sort | uniq -d)" ] || fail "an epoch appears twice in metrics.jsonl"
[ "$(json_field $TMP/run/metrics.jsonl train step | wc -l)" -eq $N ] || fail "metrics.jsonl lacks train steps"
! grep -v '"time":' $TMP/run/metrics.jsonl | grep -q . || fail "a metrics record without a timestamp"
# SIGKILL after step 5 with checkpoints every 4 steps: the resumed run repeats step 5 from step_4, and
# metrics.jsonl keeps that step once (the killed run's records past the checkpoint are dropped).
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.save_every=4 --set run.dir=$TMP/kill > $TMP/kill.log 2>&1 &
launcher=$!
for _ in $(seq 1200); do grep -q "^step 5/$N" $TMP/kill.log && break; sleep 0.1; done
pkill -KILL -P $launcher
set +e; wait $launcher; set -e
kept=$(ls $TMP/kill/checkpoints | sed -n 's/^step_//p' | sort -n | tail -1)
last_logged=$(json_field $TMP/kill/metrics.jsonl train step | sort -n | tail -1)
[ "$last_logged" -gt "$kept" ] || fail "the kill did not leave logged steps past the checkpoint (logged $last_logged, kept $kept)"
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.save_every=4 --set run.dir=$TMP/kill --resume auto > $TMP/kill2.log 2>&1 \
  || { cat $TMP/kill2.log; fail "resume after SIGKILL failed"; }
[ -z "$(json_field $TMP/kill/metrics.jsonl train step | sort | uniq -d)" ] || fail "steps repeated in metrics.jsonl after SIGKILL + resume"
[ "$(grep '"type":"resume"' $TMP/kill/metrics.jsonl | grep -c "\"step\":$kept,")" -eq 1 ] \
  || { cat $TMP/kill/metrics.jsonl; fail "after SIGKILL + resume: not one resume record at step $kept"; }
diff <(last_losses $TMP/ref/metrics.jsonl) <(last_losses $TMP/kill/metrics.jsonl) \
  || fail "losses after SIGKILL + resume differ from the uninterrupted run"
# Training again in that run directory without --resume is refused, naming the ways on, before the data is
# read, and leaving the run's files as they were (its config.resolved.yaml is what the resume hint names).
cp $TMP/run/config.resolved.yaml $TMP/resolved.before
set +e; $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.seed=99 --set run.dir=$TMP/run > $TMP/again.log 2>&1; rc=$?; set -e
[ $rc -ne 0 ] && grep -q "already holds checkpoints" $TMP/again.log && grep -q "run.start_over=true" $TMP/again.log \
  || { cat $TMP/again.log; fail "a second run in a run directory with checkpoints was not refused"; }
! grep -q "train split" $TMP/again.log || { cat $TMP/again.log; fail "the refusal came only after the data was read"; }
cmp -s $TMP/resolved.before $TMP/run/config.resolved.yaml || fail "the refused run replaced the run's config.resolved.yaml"
# run.start_over: the new run's checkpoints and metrics alone, none of the earlier run's left beside them
# (retention and run.keep_best would rank those with its own).
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.steps=3 --set run.save_final=true --set run.dir=$TMP/run \
  --set run.start_over=true > $TMP/over.log 2>&1 || { cat $TMP/over.log; fail "run.start_over failed"; }
grep -q "removed the earlier run's checkpoints .*step_$step" $TMP/over.log || { cat $TMP/over.log; fail "run.start_over did not say what it removed"; }
[ "$(ls $TMP/run/checkpoints | tr '\n' ' ')" = "latest step_3 " ] || fail "after run.start_over: checkpoints $(ls $TMP/run/checkpoints | tr '\n' ' ')"
[ "$(json_field $TMP/run/metrics.jsonl train step | tr '\n' ' ')" = "1 2 3 " ] || fail "after run.start_over: metrics of the earlier run remain"
# run.start_over acts once: the resolved config (what the resume hint names) says false, so running it again
# without --resume is refused like any fresh run there, and the checkpoints stay.
grep -q "^  start_over: false" $TMP/run/config.resolved.yaml || fail "config.resolved.yaml keeps run.start_over: true"
set +e; $MPIRUN -np 2 "$PMTRAIN" train $TMP/run/config.resolved.yaml > $TMP/again2.log 2>&1; rc=$?; set -e
[ $rc -ne 0 ] && grep -q "already holds checkpoints" $TMP/again2.log && [ -f $TMP/run/checkpoints/step_3/manifest.json ] \
  || { cat $TMP/again2.log; fail "running the resolved config of a run.start_over run again removed its checkpoints"; }
echo "ok: a fresh run in a used run.dir is refused before the data; run.start_over replaces the earlier run's checkpoints and metrics, once"
# Ctrl-C under mpirun: Open MPI's mpirun sends SIGCONT, waits odls_base_sigkill_timeout seconds, sends
# SIGTERM, waits as long again, then SIGKILL (the default 1 s is too short to finish the step and save
# on a loaded machine; README: give it 10 s; this model saves in well under a second, so 4 s here: the steps
# run in the first wait are steps the reference run below must run too). The run is long enough to still be
# going when the SIGTERM arrives; the resumed run stops at two steps past the checkpoint and is compared with
# an uninterrupted run cut at the same step.
LONG="$SMALL --set data.cache_dir=$TMP/cache --set run.steps=2000 --set run.log_every=1 --set run.eval_every=0 --set run.save_final=false --set data.test_files=[]"
OMPI_MCA_odls_base_sigkill_timeout=4 $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $LONG --set run.dir=$TMP/int \
  > $TMP/int.log 2>&1 &
launcher=$!
for _ in $(seq 1200); do grep -q "^step 3/2000" $TMP/int.log && break; sleep 0.1; done
kill -INT $launcher
set +e; wait $launcher; set -e
istep=$(sed -nE 's/^pmtrain: stopped by SIG[A-Z]+ at step ([0-9]+) of 2000.*/\1/p' $TMP/int.log)
[ -n "$istep" ] && [ -f $TMP/int/checkpoints/step_$istep/manifest.json ] \
  || { cat $TMP/int.log; fail "SIGINT to mpirun: no stop with a checkpoint"; }
cut=$((istep + 2))
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $LONG --set run.dir=$TMP/int --set run.stop_at=$cut --resume auto \
  > $TMP/int2.log 2>&1 || { cat $TMP/int2.log; fail "resume after SIGINT failed"; }
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $LONG --set run.dir=$TMP/intref --set run.stop_at=$cut \
  > $TMP/intref.log 2>&1 || { cat $TMP/intref.log; fail "uninterrupted run to step $cut failed"; }
[ "$(last_losses $TMP/int/metrics.jsonl | wc -l)" -eq $cut ] || fail "the resumed run did not reach step $cut"
diff <(last_losses $TMP/intref/metrics.jsonl) <(last_losses $TMP/int/metrics.jsonl) \
  || fail "losses after SIGINT + resume differ from the uninterrupted run"
echo "ok: SIGINT to mpirun at step $istep: checkpoint, resumed bit-exactly"
echo "ok: SIGTERM at step $step of $N: checkpoint, exit 75, resumed; all $N losses equal the uninterrupted run's"

# SIGTERM while the rank is still starting (MPI start-up, the tokenizer, the data): it stops after the first step
# with a checkpoint and exit 75, as at any other time (it was killed at once, rc 143 and no word).
"$PMTRAIN" train configs/tiny_cpu.yaml $RUN --set run.dir=$TMP/early > $TMP/early.log 2>&1 &
early=$!
# As soon as its handler is in (SigCgt bit 14 = SIGTERM), long before MPI and the data are up: a fixed sleep
# could land before main() on a loaded machine, and the default action would kill it.
for _ in $(seq 400); do
  cgt=$(awk '/^SigCgt/ {print $2}' /proc/$early/status 2>/dev/null || true)
  [ -n "$cgt" ] && (( (0x$cgt >> 14) & 1 )) && break
  sleep 0.02
done
kill -TERM $early
set +e; wait $early; rc=$?; set -e
[ $rc -eq 75 ] || { cat $TMP/early.log; fail "SIGTERM during start-up: exit code $rc, expected 75"; }
grep -q "^pmtrain: stopped by SIGTERM at step 1 of $N" $TMP/early.log || { cat $TMP/early.log; fail "SIGTERM during start-up: no stop line"; }
echo "ok: SIGTERM during start-up: stopped after step 1 with a checkpoint, exit 75"

# SIGTERM during an evaluation (a long one: 1200 of the training pairs as the test set, about 2 s at 2 ranks
# here): the ranks stop within an evaluation batch instead of finishing it, past the grace before SIGKILL; the
# checkpoint of that step is saved and exit 75. The resumed run first runs the evaluation the stop cut, so its record, run.keep_best's ranking
# and the checkpoint's own evaluation are the uninterrupted run's.
# (a) The final evaluation: training is complete, the resumed run only evaluates, once, and step_2 gets it.
EVAL="--set data.cache_dir=$TMP/cache --set run.steps=2 --set run.log_every=1 --set run.eval_every=0 --set run.save_final=false"
EVAL="$EVAL --set data.test_files=[data/assets/hh-rlhf/harmless-base/train.jsonl.gz] --set run.eval_pairs=1200 --set run.keep_best=loss"
# evals METRICS: "step loss" of each evaluation record
evals() { grep '"type":"eval"' $1 | sed -E 's/.*"loss":([^,]+).*"step":([0-9]+).*/\2 \1/'; }
stop_after() {  # stop_after LINE LOG ARGS...: train, SIGTERM to the ranks once LINE is printed; exit code 75 expected
  local line=$1 log=$2; shift 2
  $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml "$@" > $log 2>&1 &
  local launcher=$!
  for _ in $(seq 1200); do grep -q "^$line" $log && break; sleep 0.1; done
  pkill -TERM -P $launcher
  set +e; wait $launcher; local rc=$?; set -e
  [ $rc -eq 75 ] || { cat $log; fail "SIGTERM after '$line': exit code $rc, expected 75"; }
}
stop_after "step 2/2" $TMP/feval.log $EVAL --set run.dir=$TMP/feval
grep -q "^pmtrain: stopped by SIGTERM at step 2 of 2 (its final evaluation cut short" $TMP/feval.log \
  || { cat $TMP/feval.log; fail "SIGTERM during the final evaluation: no stop line"; }
[ -f $TMP/feval/checkpoints/step_2/manifest.json ] || fail "SIGTERM during the final evaluation: no checkpoint step_2"
! grep -q '"type":"eval"' $TMP/feval/metrics.jsonl || fail "the cut evaluation was recorded"
# (run.start_over beside --resume, as `bash launch/run.sh --resume auto` gives: resuming wins, nothing removed)
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $EVAL --set run.dir=$TMP/feval --set run.start_over=true --resume auto \
  > $TMP/feval2.log 2>&1 || { cat $TMP/feval2.log; fail "resume after a stop in the final evaluation failed"; }
grep -q "^pmtrain: run.start_over is ignored: this run resumes (run.resume auto), and removes nothing" $TMP/feval2.log \
  && grep -q "resumed from .*step_2" $TMP/feval2.log || { cat $TMP/feval2.log; fail "run.start_over with --resume: not resumed, or no word"; }
grep -q "^final eval | .* | 1200 pairs" $TMP/feval2.log || { cat $TMP/feval2.log; fail "the resumed run did not evaluate"; }
grep -q "^done: 2 steps; this run resumed at the end" $TMP/feval2.log || { cat $TMP/feval2.log; fail "the resumed run's last line"; }
[ "$(grep -c '"type":"eval"' $TMP/feval/metrics.jsonl)" -eq 1 ] || fail "metrics.jsonl should hold one evaluation"
grep -q '"eval": {' $TMP/feval/checkpoints/step_2/manifest.json && ! grep -q eval_owed $TMP/feval/checkpoints/step_2/manifest.json \
  || fail "step_2 did not get the evaluation the resumed run made"
[ "$(readlink $TMP/feval/checkpoints/best)" = step_2 ] || fail "run.keep_best: best is not step_2"
echo "ok: SIGTERM during the final evaluation: stopped within it, step_2 saved, the resumed run evaluated it"
# (b) A periodic evaluation (step 2 of 4): the resumed run's evaluation records equal an uninterrupted run's.
PER="${EVAL/run.steps=2/run.steps=4} --set run.eval_every=2 --set run.save_every=2"
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $PER --set run.dir=$TMP/pref > $TMP/pref.log 2>&1 \
  || { cat $TMP/pref.log; fail "uninterrupted run with evaluations failed"; }
stop_after "step 2/4" $TMP/peval.log $PER --set run.dir=$TMP/peval
grep -q "^pmtrain: stopped by SIGTERM at step 2 of 4 (its evaluation cut short" $TMP/peval.log \
  || { cat $TMP/peval.log; fail "SIGTERM during the evaluation at step 2: no stop line"; }
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $PER --set run.dir=$TMP/peval --resume auto > $TMP/peval2.log 2>&1 \
  || { cat $TMP/peval2.log; fail "resume after a stop in the evaluation at step 2 failed"; }
[ "$(evals $TMP/peval/metrics.jsonl | cut -d' ' -f1 | tr '\n' ' ')" = "2 4 " ] || fail "evaluations at steps $(evals $TMP/peval/metrics.jsonl | cut -d' ' -f1)"
diff <(evals $TMP/pref/metrics.jsonl) <(evals $TMP/peval/metrics.jsonl) || fail "the evaluations differ from the uninterrupted run's"
grep -q '"eval": {' $TMP/peval/checkpoints/step_2/manifest.json || fail "step_2 lacks its evaluation"
echo "ok: SIGTERM during the evaluation at step 2: the resumed run evaluated it first, as the uninterrupted run"
# (c) The evaluation of the starting weights (run.eval_at_start): step_0 is saved, and the resumed run evaluates
# them before its first step (it trained a step after the signal, and the step-0 evaluation was never made).
stop_after "---$" $TMP/seval.log $EVAL --set run.eval_at_start=true --set run.dir=$TMP/seval
grep -q "^pmtrain: stopped by SIGTERM at step 0 of 2 (its evaluation of the starting weights cut short" $TMP/seval.log \
  || { cat $TMP/seval.log; fail "SIGTERM during the evaluation at the start: no stop line at step 0"; }
$MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml $EVAL --set run.eval_at_start=true --set run.dir=$TMP/seval --resume auto \
  > $TMP/seval2.log 2>&1 || { cat $TMP/seval2.log; fail "resume after a stop in the evaluation at the start failed"; }
[ "$(evals $TMP/seval/metrics.jsonl | cut -d' ' -f1 | tr '\n' ' ')" = "0 2 " ] || fail "evaluations at steps $(evals $TMP/seval/metrics.jsonl | cut -d' ' -f1)"
echo "ok: SIGTERM during the evaluation at the start: step_0 saved, the resumed run evaluated the starting weights"
