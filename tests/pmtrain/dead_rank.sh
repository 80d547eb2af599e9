#!/usr/bin/env bash
# A dead or stopped rank never hangs the job: 4 ranks of the tiny config with run.collective_timeout_s=10.
#  - SIGKILL of one rank mid-step (rank 2, then rank 0): every rank is gone within the bound and stderr
#    names the rank (mpirun's own notice, or our verdict, whichever comes first).
#  - SIGSTOP of rank 1 mid-step: the others find it missing after the timeout, the lowest live rank prints
#    "rank 1 did not reach ...", every process is gone within timeout + a few seconds, exit code 76.
source "$(dirname "$0")/common.sh"
TIMEOUT=10
RUN="--set data.cache_dir=$TMP/cache --set run.steps=100000 --set run.log_every=1 --set run.eval_every=0
     --set run.save_final=false --set run.collective_timeout_s=$TIMEOUT"
stopped_pid=""
cleanup() {
  [ -z "$stopped_pid" ] || { kill -CONT $stopped_pid 2>/dev/null || true; kill -KILL $stopped_pid 2>/dev/null || true; }
  rm -rf "$TMP"
}
trap cleanup EXIT

# pid_of_rank LAUNCHER RANK: the process of that rank (mpirun's child whose environment names it).
pid_of_rank() {
  local p
  for p in $(pgrep -P $1); do
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo $p; return; }
  done
}

# run_and_hit NAME SIGNAL RANK BOUND_S [SETTINGS...]: start a run (with those extra --set ...), send SIGNAL to
# RANK at step 3, then require that the launcher and every rank are gone within BOUND_S seconds. Leaves the log
# in $TMP/NAME.log, rc in $rc.
run_and_hit() {
  local name=$1 sig=$2 rank=$3 bound=$4
  shift 4
  $MPIRUN -np 4 "$PMTRAIN" train configs/tiny_cpu.yaml $RUN "$@" --set run.dir=$TMP/$name > $TMP/$name.log 2>&1 &
  local launcher=$!
  for _ in $(seq 3000); do grep -q "^step 3/" $TMP/$name.log && break; sleep 0.1; done
  grep -q "^step 3/" $TMP/$name.log || { kill $launcher; cat $TMP/$name.log; fail "$name: the run never reached step 3"; }
  local ranks="" r
  for r in 0 1 2 3; do ranks="$ranks $(pid_of_rank $launcher $r)"; done
  [ $(echo $ranks | wc -w) -eq 4 ] || { kill $launcher; fail "$name: did not find the 4 rank processes ($ranks)"; }
  local target=$(pid_of_rank $launcher $rank)
  [ "$sig" != STOP ] || stopped_pid=$target
  local t0
  t0=$(date +%s%N)
  kill -$sig $target
  # The launcher must end by itself; `timeout` only keeps a broken build from hanging CI.
  set +e
  for _ in $(seq $((bound * 10))); do kill -0 $launcher 2>/dev/null || break; sleep 0.1; done
  kill -0 $launcher 2>/dev/null && { kill -KILL $launcher $ranks 2>/dev/null; wait $launcher; cat $TMP/$name.log; \
    fail "$name: the job was still running ${bound} s after SIGSTOP/SIGKILL of rank $rank (a hang)"; }
  wait $launcher; rc=$?
  set -e
  # mpirun may return before its children are reaped: they too must go within the bound.
  local left=""
  while :; do
    left=""
    for r in $ranks; do kill -0 $r 2>/dev/null && left="$left $r"; done
    [ -n "$left" ] && [ $((($(date +%s%N) - t0) / 1000000)) -lt $((bound * 1000)) ] || break
    sleep 0.1
  done
  took_ms=$((($(date +%s%N) - t0) / 1000000))
  [ -z "$left" ] || { kill -KILL $left 2>/dev/null; fail "$name: rank processes left behind:$left"; }
  stopped_pid=""
  [ $rc -ne 0 ] || { cat $TMP/$name.log; fail "$name: exit code 0"; }
  echo "ok: $name: SIG$sig to rank $rank: every rank gone after $took_ms ms, exit code $rc"
}

run_and_hit kill2 KILL 2 $((TIMEOUT + 20))
grep -qE "rank 2( |,|$)" $TMP/kill2.log || { cat $TMP/kill2.log; fail "kill2: no message names rank 2"; }
echo "   $(grep -E "rank 2( |,|$)" $TMP/kill2.log | head -1 | cut -c1-200)"

run_and_hit kill0 KILL 0 $((TIMEOUT + 20))
grep -qE "rank 0( |,|$)" $TMP/kill0.log || { cat $TMP/kill0.log; fail "kill0: no message names rank 0"; }
echo "   $(grep -E "rank 0( |,|$)" $TMP/kill0.log | head -1 | cut -c1-200)"

# A stopped rank is alive to the operating system and to mpirun: only the deadline can find it.
run_and_hit stop1 STOP 1 $((TIMEOUT + 15))
grep -q "rank 0: rank 1 did not reach .* within [0-9.]* s (stopped, dead, or busy elsewhere)" $TMP/stop1.log \
  || { cat $TMP/stop1.log; fail "stop1: rank 0 did not name the stopped rank 1"; }
[ $rc -eq 76 ] || { cat $TMP/stop1.log; fail "stop1: exit code $rc, expected 76"; }
echo "   $(grep "did not reach" $TMP/stop1.log | head -1 | cut -c1-200)"
[ $took_ms -ge $((TIMEOUT * 1000)) ] || fail "stop1: ended after $took_ms ms, before the $TIMEOUT s timeout"
# Hybrid sharding (groups {0, 1} {2, 3}, replicas {0, 2} {1, 3}): the others wait in different rings (rank 2 in
# its group's, ranks 0 and 1 in the replicas', or the run's own reduction), and the verdict must still name the
# stopped rank as the job numbers it (a watch per ring named ring-local ranks: "rank 1" for rank 3).
run_and_hit stop3hybrid STOP 3 $((TIMEOUT + 15)) --set zero.shard_ranks=2 --set zero.stage=3
grep -q "rank 0: rank 3 did not reach .* within [0-9.]* s (stopped, dead, or busy elsewhere)" $TMP/stop3hybrid.log \
  || { cat $TMP/stop3hybrid.log; fail "stop3hybrid: rank 0 did not name the stopped rank 3"; }
[ $rc -eq 76 ] || { cat $TMP/stop3hybrid.log; fail "stop3hybrid: exit code $rc, expected 76"; }
echo "   $(grep "did not reach" $TMP/stop3hybrid.log | head -1 | cut -c1-200)"
echo "all dead and stopped ranks ended the job with a message naming them"
