#!/usr/bin/env bash
# A run's log is read as it is written (tail -f of a Slurm output file, mpirun's forwarded stdout): each line of
# rank 0 must reach stdout when it is printed, not when a 4 KiB block fills, or a job killed meanwhile (a time
# limit, a dead rank, an OOM kill) loses the lines said just before. Here stdout is a file, as under sbatch.
# The epoch line is printed before the final evaluation; it must be in the file before that evaluation's
# record lands in metrics.jsonl. Before (block-buffered), it came out only with the run's end.
source "$(dirname "$0")/common.sh"
RUN=(configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set batch.global=4 --set data.max_train_pairs=8
  --set run.steps=2 --set run.eval_every=0 --set run.eval_progress_s=1000 --set run.save_final=false
  --set data.test_files=[data/assets/hh-rlhf/harmless-base/train.jsonl.gz] --set run.eval_pairs=0)

for launch in "single" "mpirun"; do
  rm -rf $TMP/run $TMP/out.txt
  if [ $launch = single ]; then
    "$PMTRAIN" train "${RUN[@]}" --set run.dir=$TMP/run > $TMP/out.txt 2>&1 &
  else
    $MPIRUN -np 2 "$PMTRAIN" train "${RUN[@]}" --set run.dir=$TMP/run > $TMP/out.txt 2>&1 &
  fi
  pid=$!
  seen=""
  # Each poll reads the evaluation's record first, then the log: the line counts only when it is there while
  # the record is not yet (the evaluation of 2091 pairs takes seconds). Block-buffered, the line came out with the
  # run's end, after the record.
  for _ in $(seq 1 2400); do
    eval_done=$(grep -c '"type":"eval"' $TMP/run/metrics.jsonl 2>/dev/null || true)
    if grep -q "^epoch 0 done" $TMP/out.txt; then
      [ "${eval_done:-0}" -eq 0 ] && seen=yes
      break
    fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  wait $pid || { cat $TMP/out.txt; fail "$launch: the run failed"; }
  grep -q "^epoch 0 done" $TMP/out.txt || { cat $TMP/out.txt; fail "$launch: no epoch line at all"; }
  [ "$seen" = yes ] || { cat $TMP/out.txt; fail "$launch: the epoch line reached stdout only after the final evaluation's record"; }
  echo "ok: $launch: the epoch line was in stdout before the final evaluation ended"
done

# The model line says how the weights were made: the random init's time and host threads, the config's `threads`
# or the rank's share of the node's cores when that is more (init_threads: the CPUs it may run on, at most the
# node's cores over its ranks): one CPU under taskset, every core of this machine for one rank, the config's
# threads when that is more.
model_line() { "$PMTRAIN" train "${RUN[@]}" --set run.dir=$TMP/m$1 --set run.steps=1 --set data.test_files=[] "${@:2}" \
  > $TMP/log_$1.txt 2>&1; grep "^pmtrain: model" $TMP/log_$1.txt; }
cores=$(nproc --all)
expect_threads() {
  local want=$1 line=$2
  grep -qE "\(random init \(seed 7\), [0-9]+\.[0-9] s on $want threads?\)$" <<<"$line" \
    || fail "expected the init on $want thread(s): $line"
  echo "ok: $line"
}
expect_threads 1 "$(taskset -c 0 "$PMTRAIN" train "${RUN[@]}" --set run.dir=$TMP/mt --set run.steps=1 --set data.test_files=[] \
  2>&1 | grep "^pmtrain: model")"
expect_threads $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) "$(model_line b)"  # nproc: the affinity mask
expect_threads $((cores + 1)) "$(model_line c --set threads=$((cores + 1)))"

# The backend line says how many math threads a rank computes with and where the number came from: the config's
# `threads` (or --set), else OMP_NUM_THREADS (a Slurm script exports it from --cpus-per-task; launch/mpi.env sets
# 1 here), else the rank's share of the node's cores (its CPUs, at most the node's cores over its ranks there).
# More threads than the rank's CPUs is a warning at the start.
expect_line() {  # expect_line RUN PATTERN WHAT
  grep -qE "$2" $TMP/log_$1.txt || { cat $TMP/log_$1.txt; fail "$3: no line matching '$2'"; }
  echo "ok: $3: $(grep -E "$2" $TMP/log_$1.txt | head -1)"
}
expect_line c "^pmtrain: backend cpu \(host memory, MPI\); $((cores + 1)) math threads a rank$" "threads from --set"
expect_line c "^pmtrain: warning: $((cores + 1)) threads a rank on the $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) CPUs? this rank may run on: oversubscribed" \
  "more threads than CPUs"
OMP_NUM_THREADS=2 model_line d > /dev/null
expect_line d "^pmtrain: backend cpu \(host memory, MPI\); 2 math threads a rank \(OMP_NUM_THREADS\)$" "threads from OMP_NUM_THREADS"
expect_line d "^threads: 2$" "OMP_NUM_THREADS's threads in the resolved config"
OMP_NUM_THREADS=2 model_line e --set threads=1 > /dev/null
expect_line e "^pmtrain: backend cpu \(host memory, MPI\); 1 math thread a rank$" "--set threads over OMP_NUM_THREADS"
grep -q "^pmtrain: warning" $TMP/log_e.txt && { cat $TMP/log_e.txt; fail "a warning at one thread a rank"; }
(unset OMP_NUM_THREADS OMP_THREAD_LIMIT; model_line g > /dev/null)
share=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
expect_line g "^pmtrain: backend cpu \(host memory, MPI\); $share math threads? a rank \(its share of the node's cores\)$" \
  "threads left out everywhere: one rank takes its CPUs"
expect_line g "^threads: $share$" "the share in the resolved config"
grep -q "^pmtrain: warning" $TMP/log_g.txt && { cat $TMP/log_g.txt; fail "a warning for the share of the cores"; }
# Two ranks on this node: each takes half of its cores (at least one).
rm -rf $TMP/mh
env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT $MPIRUN -np 2 "$PMTRAIN" train "${RUN[@]}" --set run.dir=$TMP/mh --set run.steps=1 \
  --set data.test_files=[] > $TMP/log_h.txt 2>&1 || { cat $TMP/log_h.txt; fail "2 ranks, threads left out: the run failed"; }
half=$(( cores / 2 < share ? cores / 2 : share ))
half=$(( half > 0 ? half : 1 ))
expect_line h "^pmtrain: backend cpu \(host memory, MPI\); $half math threads? a rank \(its share of the node's cores\)$" \
  "threads left out everywhere: two ranks split the node's cores"
OMP_NUM_THREADS=x "$PMTRAIN" train "${RUN[@]}" --set run.dir=$TMP/mf > $TMP/log_f.txt 2>&1 && fail "OMP_NUM_THREADS=x ran"
expect_line f "error: OMP_NUM_THREADS=x \(taken as threads, which the config and --set leave out\): key 'threads'" \
  "a bad OMP_NUM_THREADS"
[ -e $TMP/mf ] && fail "OMP_NUM_THREADS=x left run.dir behind"
echo "ok: log_lines"
