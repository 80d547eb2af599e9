#!/usr/bin/env bash
# The command line as users meet it: `--help` on every command names each of its options; --version;
# help and version print once under mpirun; bad values exit non-zero with one clear line (never an
# uncaught exception); `pmtrain tokenize` reproduces the golden tokenizations, `pmtrain plan` plans,
# `train --dry-run` prints the resolved config (numbers as written) and the plan, and trains nothing.
source "$(dirname "$0")/common.sh"

# help CMD OPTION...: `pmtrain CMD --help` exits 0 and lists every OPTION, with an example.
help() {
  local cmd=$1; shift
  "$PMTRAIN" $cmd --help > $TMP/help.txt 2>&1 || { cat $TMP/help.txt; fail "$cmd --help: exit code $?"; }
  for opt in "$@"; do
    grep -qF -- "$opt" $TMP/help.txt || { cat $TMP/help.txt; fail "$cmd --help does not list $opt"; }
  done
  grep -q "^Example" $TMP/help.txt || fail "$cmd --help has no example"
  echo "ok: $cmd --help lists $# options: $*"
}
help train CONFIG --set --resume --dry-run --help
help eval CONFIG --set --checkpoint --model --init
help plan CONFIG --set --world --ranks-per-node
help export RUN_DIR --step --to --dtype --tokenizer --no-verify
help score CONFIG --set --checkpoint --model --init --data --out --tokenizer
help render CONFIG --set --data --out
help tokenize --tokenizer
help "" train eval plan export score render tokenize --version

"$PMTRAIN" --version > $TMP/version.txt
grep -qE '^pmtrain [0-9.]+ \(git [0-9a-f]+(-dirty)?\), CUDA backend: (built|not built)$' $TMP/version.txt \
  || { cat $TMP/version.txt; fail "--version: unexpected text"; }
if git rev-parse --git-dir > /dev/null 2>&1; then
  rev=$(sed -E 's/.*\(git ([0-9a-f]+).*/\1/' $TMP/version.txt)
  git cat-file -e "$rev^{commit}" || fail "--version names $rev, not a commit of this repository"
fi
echo "ok: $(cat $TMP/version.txt)"

# Under a launcher, help and version need no MPI and print once (rank 0).
$MPIRUN -np 2 "$PMTRAIN" train --help > $TMP/help2.txt 2>&1 || fail "mpirun train --help failed"
[ $(grep -c -- '--dry-run' $TMP/help2.txt) = 1 ] || { cat $TMP/help2.txt; fail "train --help under mpirun -np 2 not printed once"; }
$MPIRUN -np 2 "$PMTRAIN" --version > $TMP/version2.txt 2>&1 || fail "mpirun --version failed"
[ $(wc -l < $TMP/version2.txt) = 1 ] || { cat $TMP/version2.txt; fail "--version under mpirun -np 2 not printed once"; }
echo "ok: help and version print once under mpirun -np 2"

bad "no command" "subcommand"
bad "unknown command" "bogus" bogus
bad "plan --world abc" "--world" plan configs/tiny_cpu.yaml --world abc
bad "plan --world 0" "--world" plan configs/tiny_cpu.yaml --world 0
bad "export --step -1" "--step" export runs/x --to $TMP/x --step -1
bad "export --dtype fp16" "--dtype" export runs/x --to $TMP/x --dtype fp16
bad "export without --to" "--to" export runs/x
bad "train without CONFIG" "CONFIG" train
bad "unknown option" "--bogus" train configs/tiny_cpu.yaml --bogus 1
bad "two weight sources" "excludes" eval configs/tiny_cpu.yaml --init --model $TMP
bad "score without weights" "which weights" score --data x.jsonl
bad "render a missing file" "$TMP/none.jsonl" render --data $TMP/none.jsonl
bad "render with a bad key" "did you mean 'data.prompt_field'" render --set data.promt_field=p --data x.jsonl
bad "misplaced section" "did you mean 'optim'" plan <(printf 'optimizer:\n  lr: 0.1\n')
bad "train --dry-run, bad --set value" "zero.stage" train configs/tiny_cpu.yaml --dry-run --set zero.stage=abc

# Output that does not land (a full disk: /dev/full) fails the command with a message, never exit 0.
HH=data/assets/hh-rlhf/harmless-base/test.jsonl.gz
bad "render --out on a full disk" "--out: writing /dev/full failed" render --data $HH --out /dev/full
for cmd in "render --data $HH" "config-doc"; do
  ! "$PMTRAIN" $cmd > /dev/full 2> $TMP/full.txt || fail "$cmd > /dev/full: exit code 0"
  grep -q "error: .*writing the standard output failed" $TMP/full.txt || { cat $TMP/full.txt; fail "$cmd > /dev/full: no message"; }
done
echo "ok: output to a full disk fails with a message (render --out, render and config-doc to stdout)"
# A run.dir that cannot be a directory names the key (it was a bare filesystem_error).
: > $TMP/afile
! "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/afile --set data.cache_dir=$TMP/cache > $TMP/afile.txt 2>&1 \
  || fail "run.dir a file: exit code 0"
grep -q "error: run.dir: cannot create the directory $TMP/afile" $TMP/afile.txt || { cat $TMP/afile.txt; fail "run.dir a file: no message"; }
bad "sweep --ranks 0" "--ranks: '0' is not a whole number >= 1" sweep configs/tiny_cpu.yaml --ranks 0

# A diverged run (lr 1e30: the weights after step 1 give non-finite gradients, every later step is skipped) stops
# after optim.max_skipped_steps skipped steps in a row (it ran to the end and saved NaN weights). Saves are held
# back while steps are skipped, and the error names the newest checkpoint older than the diverged weights: none
# in a fresh run, step_2 in a run resumed from a sound step_2 whose step 3 diverges (step_3 holds those weights).
DIV="configs/tiny_cpu.yaml --set data.cache_dir=$TMP/cache --set run.steps=30 --set optim.max_skipped_steps=3 --set run.save_every=1"
! "$PMTRAIN" train $DIV --set run.dir=$TMP/div --set optim.lr=1e30 > $TMP/div.txt 2>&1 || fail "diverged run: exit code 0"
grep -q "error: .*: 3 optimizer steps in a row were skipped for a non-finite gradient (up to step 4;.*The weights after step 1 gave the first non-finite gradient; lower optim.lr or check the data, and start over: no checkpoint of this run is older" $TMP/div.txt \
  || { tail -3 $TMP/div.txt; fail "diverged run: no stop message saying no checkpoint is older"; }
grep -q "checkpoint: step_3 held back after 2 skipped steps in a row" $TMP/div.txt || { cat $TMP/div.txt; fail "diverged run: no held-back save"; }
[ "$(ls $TMP/div/checkpoints | tr '\n' ' ')" = "latest step_1 " ] || fail "diverged run: it saved $(ls $TMP/div/checkpoints | tr '\n' ' ')"
"$PMTRAIN" train $DIV --set run.dir=$TMP/div2 --set run.stop_at=2 > $TMP/div2.txt 2>&1 || { cat $TMP/div2.txt; fail "sound run to step 2 failed"; }
! "$PMTRAIN" train $DIV --set run.dir=$TMP/div2 --set optim.lr=1e30 --resume auto > $TMP/div3.txt 2>&1 || fail "diverged resumed run: exit code 0"
grep -q "error: .*up to step 6;.*The weights after step 3 gave the first non-finite gradient; lower optim.lr or check the data, and resume from $TMP/div2/checkpoints/step_2, the newest checkpoint before them" $TMP/div3.txt \
  || { tail -3 $TMP/div3.txt; fail "diverged resumed run: no stop message naming step_2"; }
echo "ok: a diverged run stops after optim.max_skipped_steps skipped steps in a row, naming the checkpoint before it diverged"

# A metrics.jsonl line cut short when a run stopped is dropped when the run resumes (it stopped `pmtrain plot`).
"$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/torn --set run.steps=2 --set data.cache_dir=$TMP/cache \
  --set run.eval_every=0 --set run.eval_at_start=false > /dev/null 2>&1 || fail "torn metrics: the first run failed"
printf '{"type": "train", "st' >> $TMP/torn/metrics.jsonl
"$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/torn --set run.steps=3 --set data.cache_dir=$TMP/cache \
  --set run.eval_every=0 --set run.eval_at_start=false --resume auto > $TMP/torn.txt 2>&1 || { cat $TMP/torn.txt; fail "torn metrics: the resumed run failed"; }
grep -q "metrics.jsonl:[0-9]*: dropping a line that is not a JSON record" $TMP/torn.txt || { cat $TMP/torn.txt; fail "torn metrics: not reported"; }
python3 -c "import json, sys; [json.loads(l) for l in open(sys.argv[1])]" $TMP/torn/metrics.jsonl || fail "torn metrics: a bad line is left"
echo "ok: a torn metrics.jsonl line is dropped on resume"

sed -E 's/,"ids":\[[^]]*\]//' tests/data/golden_dev.jsonl > $TMP/texts.jsonl
"$PMTRAIN" tokenize --tokenizer data/assets/qwen3/tokenizer.json < $TMP/texts.jsonl > $TMP/ids.jsonl
sed -E 's/.*("ids":\[[^]]*\]).*/\1/' tests/data/golden_dev.jsonl > $TMP/want.txt
sed -E 's/.*("ids":\[[^]]*\]).*/\1/' $TMP/ids.jsonl > $TMP/got.txt
[ $(wc -l < $TMP/want.txt) -gt 10 ] || fail "golden file too small"
cmp $TMP/want.txt $TMP/got.txt || { diff $TMP/want.txt $TMP/got.txt | head; fail "pmtrain tokenize differs from golden"; }
echo "tokenize: $(wc -l < $TMP/got.txt) golden cases equal"
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 4 | tee $TMP/plan.txt
grep -q '^recommended: 4 ranks (4 per node): stage' $TMP/plan.txt || fail "tiny config should fit"

# train --dry-run: resolved config with numbers as written (lr 3.0e-3 -> 0.003) and the plan; no run dir.
"$PMTRAIN" train configs/tiny_cpu.yaml --dry-run --set run.dir=$TMP/dry --set data.cache_dir=$TMP/cache > $TMP/dry.txt
grep -qE '^  lr: 0\.003$' $TMP/dry.txt || { cat $TMP/dry.txt; fail "dry run: lr not printed as 0.003"; }
grep -qE '^  warmup_ratio: 0\.05$' $TMP/dry.txt || fail "dry run: warmup_ratio not printed as 0.05"
grep -q '^fits$' $TMP/dry.txt || fail "dry run: no memory plan"
[ ! -e $TMP/dry ] || fail "dry run created the run directory"
echo "ok: train --dry-run printed the resolved config and the plan, wrote nothing"
# backend cuda: the host holds the process only (checkpoints are saved, but a synchronous save streams the
# GPU's optimizer state through a 64 MiB buffer), the model's 1.72e9 parameters go on the GPU (2 bytes each in
# bf16: 3.20 GiB), which a dry run prints and does not check. Before, this 24 GiB machine was asked for the
# whole plan in host memory (67 GiB), then for a save's host copy of the optimizer state (19.2 GiB).
"$PMTRAIN" train configs/qwen3_1_7b_bs128.yaml --dry-run --set backend=cuda --set batch.world=1 \
  --set data.cache_dir=$TMP/cache > $TMP/dry_cuda.txt \
  || { tail -3 $TMP/dry_cuda.txt; fail "dry run (cuda): the host share did not fit"; }
grep -q '^host memory per rank: params 0.00 GiB, grads 0.00 GiB, optimizer 0.00 GiB, .*; 1 ranks on this node need' \
  $TMP/dry_cuda.txt || { cat $TMP/dry_cuda.txt | tail -3; fail "dry run (cuda): no host plan"; }
grep -q '^GPU memory per rank on its GPU: params 3.20 GiB, .*(checked against the GPUs when the run starts)$' \
  $TMP/dry_cuda.txt || { tail -3 $TMP/dry_cuda.txt; fail "dry run (cuda): no GPU plan"; }
echo "ok: train --dry-run on cuda: $(grep '^GPU memory' $TMP/dry_cuda.txt | cut -c1-120)"
# An async save does copy the rank's optimizer state into host memory (12 bytes a parameter: 0.596e9 of
# Qwen3-0.6B's, 6.66 GiB, more than its largest tensor's 0.58 GiB of init scratch), and the plan says so.
"$PMTRAIN" train configs/qwen3_0_6b_bs128.yaml --dry-run --set backend=cuda --set batch.world=1 \
  --set run.async_save=true --set data.cache_dir=$TMP/cache > $TMP/dry_async.txt \
  || { tail -3 $TMP/dry_async.txt; fail "dry run (cuda, async save): the host share did not fit"; }
grep -qE '^host memory per rank: params 0.00 GiB, grads 0.00 GiB, optimizer 6\.6[6-9] GiB' $TMP/dry_async.txt \
  || { tail -3 $TMP/dry_async.txt; fail "dry run (cuda, async save): the snapshot is not in the host plan"; }
echo "ok: an async save's snapshot is in the cuda host plan: $(grep '^host memory' $TMP/dry_async.txt | cut -c1-90)"
