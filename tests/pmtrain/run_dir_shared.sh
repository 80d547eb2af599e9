#!/usr/bin/env bash
# run.dir must be one directory for every rank (each writes its checkpoint file into it). A node-local path on a
# cluster (/tmp, a node's scratch disk) is a different directory on each node: the run stops at its start, every
# rank with one error naming run.dir, the first rank that does not see it and its host, before any step; not at
# the first save, hours in. Node-local storage is made here by running rank 1 in its own mount namespace with a
# tmpfs over run.dir: the same path, another directory. The same run with one directory trains.
source "$(dirname "$0")/common.sh"
unshare -m true 2> /dev/null || { echo "SKIP: unshare -m is not permitted here (needs root)"; exit 77; }
RUN=(configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set batch.global=4 --set data.max_train_pairs=8
  --set run.eval_pairs=4 --set run.steps=1 --set run.dir=$TMP/run)
mkdir -p $TMP/run
rc=0
timeout 120 $MPIRUN -np 1 "$PMTRAIN" train "${RUN[@]}" : \
  -np 1 unshare -m sh -c 'mount -t tmpfs none "$1" && shift && exec "$@"' sh $TMP/run "$PMTRAIN" train "${RUN[@]}" \
  > $TMP/out.txt 2>&1 || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat $TMP/out.txt; fail "exit code $rc"; }
! grep -qE "terminate called|what\(\)|core dumped|MPI_ABORT|Aborted|Signal" $TMP/out.txt \
  || { cat $TMP/out.txt; fail "crashed or aborted"; }
! grep -q "^step 1/" $TMP/out.txt || { cat $TMP/out.txt; fail "trained a step before the check"; }
want="rank 1: run.dir $TMP/run is not one directory for every rank: this rank, on host $(hostname), does not see the file rank 0 just wrote there"
[ "$(grep -c "error: .*$want" $TMP/out.txt)" = 1 ] || { cat $TMP/out.txt; fail "no single error line saying: $want"; }
[ -z "$(ls -A $TMP/run)" ] || { ls -la $TMP/run; fail "the check left a file in run.dir"; }
echo "ok: node-local run.dir refused at the start: $(grep error $TMP/out.txt)"

timeout 120 $MPIRUN -np 2 "$PMTRAIN" train "${RUN[@]}" > $TMP/ok.txt 2>&1 || { cat $TMP/ok.txt; fail "the run with a shared run.dir failed"; }
grep -q "^step 1/1" $TMP/ok.txt || { cat $TMP/ok.txt; fail "the run with a shared run.dir did not train"; }
! ls -A $TMP/run | grep -q pmtrain_shared_dir_check || fail "the check's file was left in run.dir"
echo "ok: the same run with one run.dir for both ranks trains"
