#!/usr/bin/env bash
# The files a training run writes into run.dir (metrics.jsonl, config.resolved.yaml, run.tensorboard's
# directory) with a path in the way, at 2 ranks: every rank stops at once (rank 0 printing the error they agree
# on, naming the path), before any data is read (no token cache written), with no MPI abort; nothing of an
# earlier run is lost. A failure that only rank 0's write finds later (a resume's metrics rewrite) ends them together too.
# Before, rank 0 alone found it after loading the data, and the job ended through MPI_Abort ~11 s later.
source "$(dirname "$0")/common.sh"
RUN=(configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set batch.global=4 --set data.max_train_pairs=8
  --set run.eval_pairs=4 --set run.steps=1)

# in_the_way [--late] NAME WANT ARGS...: 2 ranks stop, with one error line saying WANT, within 20 s, before the
# data (--late: a failure found only when the file is written, after the data and the resume).
in_the_way() {
  local late=0
  [ "$1" = --late ] && { late=1; shift; }
  local name=$1 want=$2; shift 2
  rm -rf $TMP/cache
  local t0=$SECONDS rc=0
  timeout 120 $MPIRUN -np 2 "$PMTRAIN" train "${RUN[@]}" "$@" > $TMP/out.txt 2>&1 || rc=$?
  local took=$((SECONDS - t0))
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat $TMP/out.txt; fail "$name: exit code $rc"; }
  ! grep -qE "terminate called|what\(\)|core dumped|MPI_ABORT|ORTE_ERROR_LOG|Aborted|Signal" $TMP/out.txt \
    || { cat $TMP/out.txt; fail "$name: crashed or aborted"; }
  local lines
  lines=$(grep "error" $TMP/out.txt | grep -cF -- "$want" || true)
  [ "$lines" = 1 ] || { cat $TMP/out.txt; fail "$name: $lines error lines say '$want', expected one"; }
  [ $took -le 20 ] || { cat $TMP/out.txt; fail "$name: took $took s"; }
  [ $late = 1 ] || [ ! -e $TMP/cache ] || { cat $TMP/out.txt; fail "$name: the data was read (a token cache in $TMP/cache)"; }
  echo "ok: $name in ${took} s: $(grep error $TMP/out.txt | head -1)"
}

mkdir -p $TMP/a/metrics.jsonl
in_the_way "metrics.jsonl a directory" "run.dir: cannot write $TMP/a/metrics.jsonl: a directory of that name is in the way" \
  --set run.dir=$TMP/a
mkdir -p $TMP/b/config.resolved.yaml
in_the_way "config.resolved.yaml a directory" \
  "run.dir: cannot write $TMP/b/config.resolved.yaml: a directory of that name is in the way" --set run.dir=$TMP/b
touch $TMP/file
in_the_way "run.dir a file" "run.dir: cannot create the directory $TMP/file: a file of that name is in the way" --set run.dir=$TMP/file
in_the_way "run.dir under a file" "run.dir: cannot create the directory $TMP/file/run" --set run.dir=$TMP/file/run
mkdir -p $TMP/c && touch $TMP/c/tensorboard
in_the_way "run.dir/tensorboard a file" \
  "run.tensorboard: cannot create the directory $TMP/c/tensorboard: a file of that name is in the way" \
  --set run.dir=$TMP/c --set run.tensorboard=true

# A resume into a run.dir whose tensorboard is in the way: refused before anything of the run is touched.
$MPIRUN -np 2 "$PMTRAIN" train "${RUN[@]}" --set run.dir=$TMP/d --set run.steps=2 --set run.save_every=1 > $TMP/d.txt 2>&1 \
  || { cat $TMP/d.txt; fail "the run to resume failed"; }
cp $TMP/d/metrics.jsonl $TMP/d_metrics.jsonl
touch $TMP/d/tensorboard
in_the_way "resume with run.dir/tensorboard a file" "run.tensorboard: cannot create the directory $TMP/d/tensorboard" \
  --set run.dir=$TMP/d --set run.steps=3 --set run.tensorboard=true --resume auto
cmp -s $TMP/d/metrics.jsonl $TMP/d_metrics.jsonl || fail "the refused resume changed $TMP/d/metrics.jsonl"
[ -d $TMP/d/checkpoints/step_2 ] || fail "the refused resume lost $TMP/d/checkpoints/step_2"
echo "ok: the refused resume left metrics.jsonl and step_2 as they were"

# A failure found late, on rank 0 alone (the metrics file's rewrite at a resume, its temp file in the way): the
# ranks still end together with its message, and the file is as it was.
rm $TMP/d/tensorboard && mkdir $TMP/d/metrics.jsonl.tmp
in_the_way --late "resume with metrics.jsonl.tmp a directory" "$TMP/d/metrics.jsonl.tmp: cannot rewrite the metrics file" \
  --set run.dir=$TMP/d --set run.steps=3 --resume auto
cmp -s $TMP/d/metrics.jsonl $TMP/d_metrics.jsonl || fail "the failed resume changed $TMP/d/metrics.jsonl"
echo "ok: the failed resume left metrics.jsonl as it was"
