#!/usr/bin/env bash
# Hybrid sharding (zero.shard_ranks), in new processes on the tiny config with zero.world_invariant (fixed-point
# gradient sums: the same bits whatever the layout, so every comparison below is exact):
#  - 4 ranks in shard groups of 2 (stage 3) and of 1 (stage 1) give 1 rank's grad norms, pairs, metrics and
#    final weights, and the log names the layout;
#  - a run stopped at step 2 in groups of 2 holds one checkpoint file per rank of a group and resumes, bit for bit
#    as the uninterrupted run, in the same groups and on 3 plain ranks (resharded);
#  - zero.shard_ranks node on one node is one group of all, and is written back as node; a --dry-run under srun's
#    variables takes its tasks per node;
#  - the memory plan of 4 ranks in groups of 2 is that of 2 ranks;
#  - out of memory in groups of 2, the advice names larger shard groups;
#  - a group size that does not divide the world is refused in one line naming the key.
source "$(dirname "$0")/common.sh"
COMMON="configs/tiny_cpu.yaml $SMALL --set data.cache_dir=$TMP/cache --set run.steps=4 --set batch.global=24 --set batch.micro=2
  --set run.eval_every=2 --set run.eval_pairs=20 --set run.log_every=1 --set zero.world_invariant=true"
train() { local np=$1; shift; $MPIRUN -np $np "$PMTRAIN" train $COMMON "$@" > $TMP/out.txt 2>&1 || { cat $TMP/out.txt; fail "run failed: $*"; }; }

train 1 --set zero.stage=0 --set run.dir=$TMP/one
for cell in "2 3" "1 1"; do
  set -- $cell
  train 4 --set zero.shard_ranks=$1 --set zero.stage=$2 --set run.dir=$TMP/g$1
  grep -q "stage $2 in shard groups of $1 rank.*, replicated $((4 / $1))x" $TMP/out.txt || { cat $TMP/out.txt; fail "groups of $1: the log does not name the layout"; }
  diff <(fields $TMP/one/metrics.jsonl) <(fields $TMP/g$1/metrics.jsonl) || fail "groups of $1, stage $2: grad norms, pairs or metrics differ from 1 rank"
  cmp -s <(weights $TMP/one one) <(weights $TMP/g$1 g$1) || fail "groups of $1, stage $2: the final weights differ from 1 rank's"
  echo "4 ranks in groups of $1, stage $2: 1 rank's grad norms, metrics and final weights ($(fields $TMP/g$1/metrics.jsonl | tail -1))"
done

# zero.shard_ranks node: these 4 ranks share one node, so one group of all (plain stage 1), written back as node.
train 4 --set zero.shard_ranks=node --set zero.stage=1 --set run.dir=$TMP/node
grep -q "world 4 (1 nodes), stage 1, " $TMP/out.txt || { cat $TMP/out.txt; fail "node, 4 ranks on one node: not one group of all"; }
grep -q "shard_ranks: node" $TMP/node/config.resolved.yaml || fail "node: config.resolved.yaml does not say node"
diff <(fields $TMP/one/metrics.jsonl) <(fields $TMP/node/metrics.jsonl) || fail "node on one node: differs from 1 rank"
echo "zero.shard_ranks node, 4 ranks on one node: one group of all, 1 rank's metrics, written back as node"
# --dry-run under srun (before MPI) takes srun's tasks per node: 2 nodes of 2 are groups of 2.
SLURM_STEP_TASKS_PER_NODE='2(x2)' SLURM_STEP_NUM_TASKS=4 "$PMTRAIN" train configs/tiny_cpu.yaml --dry-run \
  --set zero.shard_ranks=node > $TMP/dry.txt 2>&1 || { cat $TMP/dry.txt; fail "--dry-run with node under srun's variables"; }
grep -q "world 4 (2 per node), stage 2 in shard groups of 2 ranks, replicated 2x (zero.shard_ranks node)" $TMP/dry.txt \
  || { cat $TMP/dry.txt; fail "--dry-run under srun, 2 tasks a node: node is not groups of 2"; }
echo "ok: --dry-run under srun's 2(x2) tasks a node: zero.shard_ranks node = groups of 2"
# Unequal nodes (3,1) refuse node in --dry-run as the run's start does; groups of 4 over 2(x4) are said to span nodes.
set +e
SLURM_STEP_TASKS_PER_NODE='3,1' SLURM_STEP_NUM_TASKS=4 "$PMTRAIN" train configs/tiny_cpu.yaml --dry-run \
  --set zero.shard_ranks=node > $TMP/uneven.txt 2>&1; rc=$?
set -e
[ $rc -ne 0 ] && grep -q "zero.shard_ranks node needs every node to hold the same number of ranks" $TMP/uneven.txt \
  || { cat $TMP/uneven.txt; fail "--dry-run under srun's 3,1 tasks a node took zero.shard_ranks node (rc $rc)"; }
SLURM_STEP_TASKS_PER_NODE='2(x4)' SLURM_STEP_NUM_TASKS=8 "$PMTRAIN" train configs/tiny_cpu.yaml --dry-run \
  --set zero.shard_ranks=4 --set batch.global=16 > $TMP/span.txt 2>&1 || { cat $TMP/span.txt; fail "--dry-run, groups of 4 over nodes of 2"; }
grep -q "^warning: 2 of 2 shard groups of 4 consecutive ranks (zero.shard_ranks 4) hold ranks of more than one node" $TMP/span.txt \
  || { cat $TMP/span.txt; fail "--dry-run: no warning for groups of 4 over nodes of 2"; }
echo "ok: --dry-run refuses node over nodes of 3 and 1 ranks, and warns of groups of 4 over nodes of 2"

# Stop at step 2 in groups of 2; the first group wrote the checkpoint, one file per rank of a group.
train 4 --set zero.shard_ranks=2 --set zero.stage=3 --set run.dir=$TMP/cut --set run.stop_at=2
[ $(ls $TMP/cut/checkpoints/step_2/*.bin | wc -l) = 2 ] || { ls -l $TMP/cut/checkpoints/step_2; fail "groups of 2: not 2 checkpoint files"; }
cp -r $TMP/cut $TMP/cut_plain
train 4 --set zero.shard_ranks=2 --set zero.stage=3 --set run.dir=$TMP/cut --set run.resume=auto
grep -q "saved at world 4 (shard groups of 2) stage 3" $TMP/out.txt || { cat $TMP/out.txt; fail "the resume does not name the saved layout"; }
cmp -s <(weights $TMP/g2 g2) <(weights $TMP/cut cut) || fail "resumed in groups of 2: the final weights differ"
train 3 --set zero.stage=2 --set run.dir=$TMP/cut_plain --set run.resume=auto
grep -q "resharded" $TMP/out.txt || { cat $TMP/out.txt; fail "groups of 2 -> 3 plain ranks: not resharded"; }
diff <(fields $TMP/g2/metrics.jsonl) <(fields $TMP/cut_plain/metrics.jsonl) || fail "groups of 2 -> 3 plain ranks: the resumed steps differ"
cmp -s <(weights $TMP/g2 g2) <(weights $TMP/cut_plain cut_plain) || fail "groups of 2 -> 3 plain ranks: the final weights differ"
echo "stopped at step 2 in groups of 2 (2 files): resumed in the same groups and on 3 plain ranks, the uninterrupted run's bits"

# (The shipped tiny model: its 9.8M parameters show in the plan's GiB figures; SMALL's would not.)
plan() { "$PMTRAIN" train configs/tiny_cpu.yaml --dry-run --set zero.stage=3 "$@" | grep "^per rank:" | sed 's/; .*//'; }
[ "$(plan --set batch.world=4 --set zero.shard_ranks=2)" = "$(plan --set batch.world=2)" ] || fail "the plan of 4 ranks in groups of 2 is not 2 ranks'"
[ "$(plan --set batch.world=4 --set zero.shard_ranks=2)" != "$(plan --set batch.world=4)" ] || fail "the plan of 4 ranks in groups of 2 is 4 plain ranks'"
echo "memory plan, 4 ranks in groups of 2: $(plan --set batch.world=4 --set zero.shard_ranks=2)"

# Out of memory under hybrid sharding: more ranks hold no less each, larger groups do; the advice says so (8B in
# groups of 2 at 4 ranks plans ~250 GiB on this node: more than any CI machine has).
set +e; "$PMTRAIN" train configs/qwen3_8b_bs128.yaml --dry-run --set backend=cpu --set batch.world=4 --set zero.shard_ranks=2 > $TMP/oom.txt 2>&1; rc=$?; set -e
[ $rc -ne 0 ] && grep -q "does not fit on this node (above); try larger shard groups (zero.shard_ranks 2: each rank holds 1/2 of the state however many ranks run; 0 = over all 4)" $TMP/oom.txt \
  || { cat $TMP/oom.txt; fail "8B on the CPU in groups of 2: the out-of-memory advice does not name larger shard groups"; }
echo "ok: out of memory in groups of 2: $(grep -o 'try larger shard groups[^)]*)' $TMP/oom.txt)"

set +e; $MPIRUN -np 4 "$PMTRAIN" train $COMMON --set zero.shard_ranks=3 --set run.dir=$TMP/bad > $TMP/bad.txt 2>&1; rc=$?; set -e
[ $rc -ne 0 ] && [ "$(grep -c 'error:' $TMP/bad.txt)" -eq 1 ] \
  && grep -q "^pmtrain train: error: .*zero.shard_ranks 3 does not divide the world of 4 ranks" $TMP/bad.txt \
  || { cat $TMP/bad.txt; fail "groups of 3 at 4 ranks: not one error line naming zero.shard_ranks"; }
echo "ok: groups of 3 at 4 ranks: $(grep 'error:' $TMP/bad.txt)"
echo "PASS"
