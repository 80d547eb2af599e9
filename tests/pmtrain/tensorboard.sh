#!/usr/bin/env bash
# run.tensorboard: metrics.jsonl's records as a TensorBoard event file (pmtrain/tensorboard.h), read back as
# TensorBoard reads it (tensorboard_read.py: the frames' CRC-32Cs by python3-crcmod, the events decoded by
# python3-protobuf at TensorFlow's field numbers) and held to the run's config.resolved.yaml (the config text, and
# each key as a hyperparameter of the HParams tab) and its metrics.jsonl, record by record:
#  - 2 ranks, 2 epochs of 3 steps, an evaluation every 2 steps with two named test sets, stopped at step 4 and
#    resumed: one event file, each train step once (rebuilt from metrics.jsonl at the resume), and among the
#    scalars train/loss, train/lr, train/time_s/gemm, eval/loss, eval/sets/b/accuracy, epoch/loss;
#  - the session's end (the HParams tab's status): none at the stop, success at each end, failure for a run that
#    stops on an error (a diverged one);
#  - run.start_over in the same run.dir: the earlier run's file replaced by the new run's;
#  - without run.tensorboard, no tensorboard directory (a run.dir/tensorboard that is a file: run_files.sh).
source "$(dirname "$0")/common.sh"
PY=/usr/bin/python3  # Debian's, with python3-protobuf, python3-crcmod and python3-yaml (launch/setup.sh)
if ! command -v protoc > /dev/null || ! $PY -c "import google.protobuf, crcmod, yaml" 2> /dev/null; then
  echo "SKIPPED: needs protoc, python3-protobuf, python3-crcmod and python3-yaml (launch/setup.sh installs them)"; exit 77
fi
mkdir -p $TMP/pb
protoc -I tests/pmtrain --python_out=$TMP/pb tests/pmtrain/tensorboard_event.proto
HH=data/assets/hh-rlhf/harmless-base
zcat $HH/train.jsonl.gz | sed -n 1,12p > $TMP/train.jsonl
zcat $HH/test.jsonl.gz | sed -n 1,4p > $TMP/a.jsonl
zcat $HH/test.jsonl.gz | sed -n 5,10p > $TMP/b.jsonl
RUN=(configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set batch.global=4 --set "data.train_files=[$TMP/train.jsonl]"
  --set "data.test_files=[]" --set "data.test_sets={a: [$TMP/a.jsonl], b: [$TMP/b.jsonl]}" --set run.epochs=2
  --set run.eval_every=2 --set run.save_every=2 --set run.dir=$TMP/run --set run.tensorboard=true)
read_events() { $PY tests/pmtrain/tensorboard_read.py $TMP/pb "$@" || fail "the event file of $1 (above)"; }

$MPIRUN -np 2 "$PMTRAIN" train "${RUN[@]}" --set run.stop_at=4 > $TMP/cut.txt 2>&1 || { cat $TMP/cut.txt; fail "run to step 4 failed"; }
got=$(read_events $TMP/run --end=none train/loss)
[[ "$got" == *", 4 train steps, session end none" ]] || fail "stopped at step 4: $got"
echo "ok: stopped at step 4: $got"
$MPIRUN -np 2 "$PMTRAIN" train "${RUN[@]}" --resume auto > $TMP/resume.txt 2>&1 || { cat $TMP/resume.txt; fail "resume failed"; }
grep -q "resumed from .*step_4" $TMP/resume.txt || { cat $TMP/resume.txt; fail "did not resume from step 4"; }
got=$(read_events $TMP/run --end=success train/loss train/lr train/grad_norm train/time_s/gemm eval/loss eval/accuracy \
  eval/sets/a/loss eval/sets/b/accuracy epoch/loss)
[[ "$got" == *", 6 train steps, session end success" ]] || fail "resumed to step 6: $got"
echo "ok: resumed to step 6: $got"

"$PMTRAIN" train "${RUN[@]}" --set run.start_over=true --set run.epochs=1 > $TMP/over.txt 2>&1 || { cat $TMP/over.txt; fail "start_over failed"; }
got=$(read_events $TMP/run --end=success epoch/loss)
[[ "$got" == *", 3 train steps, session end success" ]] || fail "run.start_over: $got"
echo "ok: run.start_over replaced the event file: $got"

# A run that stops on an error (diverged: lr 1e30, stopped at the first skipped step) ends its session as failed.
! "$PMTRAIN" train "${RUN[@]}" --set run.dir=$TMP/diverged --set optim.lr=1e30 --set optim.max_skipped_steps=1 \
  > $TMP/diverged.txt 2>&1 || fail "the diverged run exited 0"
grep -q "optimizer steps\? in a row were skipped\|optimizer step in a row was skipped" $TMP/diverged.txt \
  || { cat $TMP/diverged.txt; fail "the diverged run did not stop for its skipped step"; }
got=$(read_events $TMP/diverged --end=failure train/loss)
echo "ok: a diverged run's session ended as failed: $got"

"$PMTRAIN" train "${RUN[@]}" --set run.dir=$TMP/plain --set run.tensorboard=false --set run.steps=1 > $TMP/plain.txt 2>&1 \
  || { cat $TMP/plain.txt; fail "a run without run.tensorboard failed"; }
[ ! -e $TMP/plain/tensorboard ] || fail "run.tensorboard false made $TMP/plain/tensorboard"
echo "ok: no tensorboard directory without run.tensorboard"
