#!/usr/bin/env bash
# `pmtrain plan` and `pmtrain calibrate`: the table's columns and rows, JSON that parses with every cell's
# peak per rank in bytes, ZeRO's arithmetic visible in it (stage 3 params = stage 0 / world), a model
# that fits only at stage 3, one that fits nowhere (exit 3 and what would fit), the sbatch script it
# writes (bash -n, its #SBATCH lines), and bad input: one clear line each, never an abort.
source "$(dirname "$0")/common.sh"

# The table: 4 stages x 3 worlds, every column, one recommendation per world.
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 1,2,4 > $TMP/table.txt || { cat $TMP/table.txt; fail "plan failed"; }
for col in stage ranks mem/rank params grads optim commbuf gathered activ runtime peak fits micro accum wire/step comm step epoch; do
  grep '^stage ' $TMP/table.txt | grep -qw -- "$col" || { cat $TMP/table.txt; fail "table lacks column $col"; }
done
[ $(grep -cE '^[0-3] +[124] ' $TMP/table.txt) = 12 ] || { cat $TMP/table.txt; fail "expected 12 rows (4 stages x 3 worlds)"; }
[ $(grep -c '^recommended: ' $TMP/table.txt) = 3 ] || { cat $TMP/table.txt; fail "expected one recommendation per world"; }
grep -q 'assumed' $TMP/table.txt || fail "the built-in profile is not marked assumed"
echo "ok: table"

# JSON: parses; peak per rank in bytes = the sum of its components; stage 3 holds a quarter of stage 0's
# parameters at 4 ranks (up to shard padding); the wire bytes follow ZeRO's 2 / 2 / (k+1) / 3k Psi.
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 4 --json > $TMP/plan.json
python3 - $TMP/plan.json <<'PY' || fail "plan --json: wrong content"
import json, sys
j = json.load(open(sys.argv[1]))
cells = {c["stage"]: c for c in j["cells"]}
assert sorted(cells) == [0, 1, 2, 3], cells.keys()
for c in cells.values():
    assert isinstance(c["peak_per_rank_bytes"], int) and c["peak_per_rank_bytes"] == sum(c["components_bytes"].values()), c
n = j["parameters"]
p0, p3 = cells[0]["components_bytes"]["params"], cells[3]["components_bytes"]["params"]
assert 4 * n <= p0 < 4 * n * 1.01 and abs(p3 * 4 - p0) <= 4 * 64 * 4 * 16, (n, p0, p3)
# Wire bytes per rank with a ring over W = 4: (W-1)/W of 2 Psi fp32 at stage 0 and stage 1 (rs + ag).
psi = p0 / 4
for s in (0, 1):
    assert abs(cells[s]["wire_bytes_per_step"] - 0.75 * 2 * psi * 4) < 1, (s, cells[s]["wire_bytes_per_step"], psi)
k = cells[2]["accum"]
assert abs(cells[2]["wire_bytes_per_step"] - 0.75 * (k + 1) * psi * 4) < 1, cells[2]
assert j["profile"]["assumed"] is True
print("ok: json: %d parameters, stage 0 params %d B, stage 3 %d B" % (n, p0, p3))
PY

# The epoch at the training data's own lengths: the tokens a pair computes equal what the bundled pairs hold
# by a count written here (render, tokenize, the end token, truncation to max_len keeping the end, the
# answers' common first tokens once), with and without shared prompts; the epoch prices a step at those
# lengths, cheaper than the max_len step the table shows.
"$PMTRAIN" render configs/tiny_cpu.yaml --data data/assets/hh-rlhf/harmless-base/train.jsonl.gz --out $TMP/render.jsonl \
  2> /dev/null || fail "render"
python3 -c "
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if 'chosen' in r:
        print(json.dumps({'text': r['chosen']})); print(json.dumps({'text': r['rejected']}))" $TMP/render.jsonl > $TMP/texts.jsonl
"$PMTRAIN" tokenize --tokenizer data/assets/qwen3/tokenizer.json < $TMP/texts.jsonl > $TMP/ids.jsonl || fail "tokenize"
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --json --set data.cache_dir=$TMP/cache > $TMP/shared.json || fail "plan"
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --json --set data.cache_dir=$TMP/cache --set data.share_prompt=false \
  > $TMP/whole.json || fail "plan, data.share_prompt=false"
python3 - $TMP/ids.jsonl $TMP/shared.json $TMP/whole.json <<'PY' || fail "plan: the data's lengths are wrong"
import json, math, sys
# <|im_end|> in the Qwen3 tokenizer; configs/tiny_cpu.yaml's data.max_len and data.max_train_pairs
END, MAX_LEN, PAIRS = 151645, 384, 240
seqs = [(json.loads(l)["ids"] + [END])[-MAX_LEN:] for l in open(sys.argv[1])]
pairs = list(zip(seqs[0::2], seqs[1::2]))[:PAIRS]
def common(c, r):
    n = 0
    while n < min(len(c), len(r)) - 1 and c[n] == r[n]: n += 1
    return n
whole = sum(len(c) + len(r) for c, r in pairs) / len(pairs)
shared = sum(len(c) + len(r) - common(c, r) for c, r in pairs) / len(pairs)
js, jw = (json.load(open(p)) for p in sys.argv[2:4])
assert js["dataset_pairs"] == len(pairs), (js["dataset_pairs"], len(pairs))
assert abs(js["data_tokens_per_pair"] - shared) < 1e-6 * shared, (js["data_tokens_per_pair"], shared)
assert abs(jw["data_tokens_per_pair"] - whole) < 1e-6 * whole, (jw["data_tokens_per_pair"], whole)
assert jw["data_shared_prompt_share"] == 0 and abs(js["data_shared_prompt_share"] - (1 - shared / whole)) < 1e-9
steps = math.ceil(js["dataset_pairs"] / js["global_batch"])
for a, b in zip(js["cells"], jw["cells"]):
    assert 0 < a["data_step_seconds"] < b["data_step_seconds"] < a["step_seconds"], (a, b)
    assert abs(a["epoch_seconds"] - steps * a["data_step_seconds"]) < 1e-9 * a["epoch_seconds"], a
print(f"ok: {len(pairs)} pairs, {shared:.1f} tokens a pair with shared prompts, {whole:.1f} without; "
      f"stage 0 step {js['cells'][0]['data_step_seconds']:.3f} s at the data's lengths, {js['cells'][0]['step_seconds']:.3f} s at max_len")
PY
grep -q "^epoch at the training data's own lengths: " <("$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --set data.cache_dir=$TMP/cache) \
  || fail "the table does not say the epoch is at the data's lengths"

# An 8B model on 8 GPUs of 24 GiB: only stage 3 fits.
"$PMTRAIN" plan configs/qwen3_8b_bs128.yaml --world 8 --gpu-mem 24GiB --json > $TMP/4b.json
python3 - $TMP/4b.json <<'PY' || fail "qwen3-8b on 8 x 24 GiB: expected a fit at stage 3 only"
import json, sys
j = json.load(open(sys.argv[1]))
fits = {c["stage"]: c["fits"] for c in j["cells"]}
assert fits == {0: False, 1: False, 2: False, 3: True}, fits
assert "stage 3" in j["recommendations"][0], j["recommendations"]
print("ok: qwen3-8b, 8 x 24 GiB:", j["recommendations"][0])
PY

# Collectives hidden behind compute on GPUs (pmtrain/plan_command.cpp exposed_comm_on_gpu), 4B on 8 x 80 GiB
# over NVLink: a step pays compute + element-wise + the exposed comm; never more than all of it; stages 1-2
# pay at least their all-gather after the step (bf16 params, fp32 reductions: 2 / (4 k + 2) of the wire's
# bytes); stage 3 hides most of its 3 k Psi behind the micro-steps' compute. On the CPU nothing is hidden.
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --world 8 --gpu-mem 80GiB --dataset-pairs 1000 --json > $TMP/overlap.json \
  || fail "plan 4b on 8 x 80 GiB"
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --json --set data.cache_dir=$TMP/cache > $TMP/overlap_cpu.json \
  || fail "plan tiny_cpu at 2 ranks"
python3 - $TMP/overlap.json $TMP/overlap_cpu.json <<'PY' || fail "plan: collectives hidden behind compute"
import json, sys
gpu, cpu = (json.load(open(f))["cells"] for f in sys.argv[1:])
for c in gpu + cpu:
    for pre in ("", "data_"):
        step, parts = c[pre + "step_seconds"], c[pre + "compute_seconds"] + c[pre + "elementwise_seconds"] + c[pre + "exposed_comm_seconds"]
        assert abs(step - parts) <= 1e-9 * step, (pre, c)
        assert 0 <= c[pre + "exposed_comm_seconds"] <= c[pre + "comm_seconds"] * (1 + 1e-12), (pre, c)
for c in cpu:
    assert c["exposed_comm_seconds"] == c["comm_seconds"], c
by_stage = {c["stage"]: c for c in gpu}
for st in (1, 2):
    c = by_stage[st]
    k = c["accum"] if st == 2 else 1
    assert c["exposed_comm_seconds"] >= c["comm_seconds"] * 2 / (4 * k + 2) * (1 - 1e-9), c
c3 = by_stage[3]
assert c3["comm_seconds"] > 0 and c3["exposed_comm_seconds"] < 0.5 * c3["comm_seconds"], c3
print("ok: 4b on 8 x 80 GiB, exposed / all comm by stage:",
      {s: f'{c["exposed_comm_seconds"]:.3f} / {c["comm_seconds"]:.3f} s' for s, c in sorted(by_stage.items())})
PY

# Hybrid sharding (zero.shard_ranks), 4B on 16 x 80 GiB (2 nodes of 8): in groups of 8 every stage plans the
# memory and the in-group wire bytes of 8 plain ranks, plus an all-reduce of each rank's shard across the 2
# groups: 2 x (2 - 1) / 2 x shard x 4 bytes (fp32 accumulator) = 2x stage 3's bf16 params (stage 0: of the whole
# model). Its collectives stay on NVLink but that one, so stages 1-3 spend less time in comm than 16 plain
# ranks, whose rings cross the network; the plain plan's recommendation advises it.
plan16() { "$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --gpu-mem 80GiB --dataset-pairs 1000 --json "$@"; }
plan16 --world 16 --set zero.shard_ranks=8 > $TMP/hybrid.json && plan16 --world 8 > $TMP/plain8.json && plan16 --world 16 > $TMP/plain16.json \
  || fail "plan 4b in groups of 8"
python3 - $TMP/hybrid.json $TMP/plain8.json $TMP/plain16.json <<'PY' || fail "plan: hybrid sharding"
import json, sys
hy, p8, p16 = ({c["stage"]: c for c in json.load(open(f))["cells"]} for f in sys.argv[1:])
for st in range(4):
    h = hy[st]
    assert h["world"] == 16 and h["peak_per_rank_bytes"] == p8[st]["peak_per_rank_bytes"], (st, h, p8[st])
    # The same per micro-step, at half the micro-steps a step (half the pairs a rank): stage 2 reduce-scatters k
    # times in fp32 and all-gathers once in bf16, stage 3 does everything per micro-step.
    kh, k8 = h["accum"], p8[st]["accum"]
    scale = {0: 1, 1: 1, 2: (4 * kh + 2) / (4 * k8 + 2), 3: kh / k8}[st]
    assert abs(h["wire_bytes_per_step"] - p8[st]["wire_bytes_per_step"] * scale) <= 1e-9 * h["wire_bytes_per_step"], (st, h, p8[st])
    params = hy[0 if st == 0 else 3]["components_bytes"]["params"]
    assert abs(h["replica_wire_bytes_per_step"] - 2 * params) <= 1e-6 * params, (st, h["replica_wire_bytes_per_step"], params)
    assert p16[st]["replica_wire_bytes_per_step"] == 0, p16[st]
    assert "across 2 groups" in h["link"], h["link"]
    if st >= 1:
        assert h["comm_seconds"] < p16[st]["comm_seconds"], (st, h["comm_seconds"], p16[st]["comm_seconds"])
print("ok: 4b on 16 x 80 GiB in groups of 8: comm s by stage (hybrid / plain 16):",
      {s: f'{hy[s]["comm_seconds"]:.2f} / {p16[s]["comm_seconds"]:.2f}' for s in range(4)})
PY
# zero.shard_ranks node is the plan's ranks per node: groups of 8 at 8 a node, of 4 at --ranks-per-node 4.
plan16 --world 16 --set zero.shard_ranks=node > $TMP/node.json || fail "plan 4b with zero.shard_ranks node"
plan16 --world 16 --ranks-per-node 4 --set zero.shard_ranks=node > $TMP/node4.json \
  && plan16 --world 16 --ranks-per-node 4 --set zero.shard_ranks=4 > $TMP/four.json || fail "plan 4b, 4 ranks a node"
python3 - $TMP/node.json $TMP/hybrid.json $TMP/node4.json $TMP/four.json <<'PY' || fail "plan: zero.shard_ranks node is not the ranks per node"
import json, sys
node, eight, node4, four = (json.load(open(f))["cells"] for f in sys.argv[1:])
assert node == eight, "node at 8 a node differs from zero.shard_ranks=8"
assert node4 == four, "node at 4 a node differs from zero.shard_ranks=4"
assert node4 != node, "4 a node plans as 8 a node"
PY
echo "ok: zero.shard_ranks node plans as the ranks per node (8, and 4 with --ranks-per-node 4)"
# (Output into a file, then grep: `pmtrain ... | grep -q` under pipefail fails whenever grep's early exit cuts the
# rest of the output off, pmtrain then dying of SIGPIPE: a flake that depends on the machine's timing.)
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --gpu-mem 80GiB --dataset-pairs 1000 --world 16 > $TMP/hybrid16.txt
grep -q "^recommended: .*; with zero.shard_ranks=node (hybrid sharding: each node's 8 ranks" $TMP/hybrid16.txt \
  || fail "plan 4b on 16 x 80 GiB: no hybrid sharding advice"
echo "ok: the plain 16-GPU plan advises zero.shard_ranks=node"
# An fp32 wire across nodes on a slow link: the recommendation names zero.reduce_dtype=bf16 with the epoch the bf16
# plan recommends (8B at 8 nodes of 8 in node groups over InfiniBand 100 Gb/s: stage 3 either way); not once bf16
# is set, nor on one GPU (1.7B: nothing on a wire).
wire() { "$PMTRAIN" plan "$@" --gpu-mem 80GiB --dataset-pairs 160800 --set zero.shard_ranks=node | grep "^recommended:"; }
wire configs/qwen3_8b_bs128.yaml --world 64 --inter-link ib100 > $TMP/wire64.txt \
  && wire configs/qwen3_8b_bs128.yaml --world 64 --inter-link ib100 --set zero.reduce_dtype=bf16 > $TMP/wirebf.txt \
  && wire configs/qwen3_1_7b_bs128.yaml --world 1 > $TMP/wire1.txt || fail "plan 8b (64 GPUs, fp32 and bf16 wires), 1.7b (1 GPU)"
advised=$(grep -oE "; with zero.reduce_dtype=bf16 \(gradients on the wire in bf16, half the bytes\) ~[0-9.]+ [a-z]+/epoch" $TMP/wire64.txt | grep -oE "~[0-9.]+ [a-z]+" || true)  # none: the check below says so
[ -n "$advised" ] && grep -q "stage 3, .*$advised/epoch" $TMP/wirebf.txt \
  || { cat $TMP/wire64.txt $TMP/wirebf.txt; fail "8b at 64 GPUs over ib100: no bf16 wire advice, or not the bf16 plan's epoch"; }
! grep -q "reduce_dtype=bf16" $TMP/wirebf.txt $TMP/wire1.txt || { cat $TMP/wirebf.txt $TMP/wire1.txt; fail "bf16 wire advised with bf16 set or on one GPU"; }
echo "ok: across nodes on ib100 the plan advises zero.reduce_dtype=bf16 ($advised/epoch, the bf16 plan's)"
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --gpu-mem 80GiB --world 16 --set zero.shard_ranks=8 --sbatch $TMP/hybrid.sbatch > /dev/null
grep -qE "^srun .* train configs/qwen3_4b_bs128.yaml --set 'zero.shard_ranks=8' --set zero.stage=[0-3] " $TMP/hybrid.sbatch \
  || { cat $TMP/hybrid.sbatch; fail "the sbatch script of a plan in groups of 8 does not set zero.shard_ranks"; }
echo "ok: its sbatch script sets zero.shard_ranks=8"

# Full checkpointing with memory to spare: the recommendation names the most model.selective_layers that
# fit, and planning with them agrees (same stage and micro, fits, that peak); one more layer does not fit.
# These plans search micro-batches of pairs (the shipped config's token budget set off).
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --world 1 --gpu-mem 80GiB --global-batch 2 --set batch.micro_tokens=0 --set data.max_len=2048 \
  --dataset-pairs 1000 --set model.activation_checkpointing=full > $TMP/sel.txt || { cat $TMP/sel.txt; fail "plan 4b on one GPU"; }
sel=$(grep -oE 'model.selective_layers=[0-9]+' $TMP/sel.txt | head -1 | cut -d= -f2)
[ -n "$sel" ] || { cat $TMP/sel.txt; fail "no model.selective_layers advice under full checkpointing"; }
peak=$(grep -oE 'model.selective_layers=[0-9]+ .*peak [0-9.]+ GiB' $TMP/sel.txt | grep -oE '[0-9.]+ GiB$')
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --world 1 --gpu-mem 80GiB --global-batch 2 --set batch.micro_tokens=0 --set data.max_len=2048 \
  --dataset-pairs 1000 --set model.activation_checkpointing=full --set model.selective_layers=$sel > $TMP/sel2.txt || { cat $TMP/sel2.txt; fail "plan with the advice"; }
grep -qE "^0 +1 .* $peak +yes +2 +1 " $TMP/sel2.txt || { cat $TMP/sel.txt $TMP/sel2.txt; fail "the advised selective_layers=$sel: not a stage-0 fit at micro 2 with peak $peak"; }
! grep -q "selective_layers=" $TMP/sel2.txt || fail "advice repeated when selective_layers is set"
set +e
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --world 1 --gpu-mem 80GiB --global-batch 2 --set batch.micro_tokens=0 --set data.max_len=2048 \
  --dataset-pairs 1000 --set model.activation_checkpointing=full --set model.selective_layers=$((sel + 1)) > $TMP/sel3.txt 2>&1
set -e
grep -qE "^0 +1 .* yes +2 +1 " $TMP/sel3.txt && { cat $TMP/sel3.txt; fail "selective_layers=$((sel + 1)) fits too: the advice is not the most"; }
echo "ok: selective_layers advice: $sel layers, peak $peak"

# activation_checkpointing auto (the shipped configs'): each cell the least recompute within 90% of the GPU at
# its micro-batch, the fastest of those; here the cell at stage 0: a choice named in the table, the JSON and the
# recommendation, its peak within 0.9 x 80 GiB and no larger than full checkpointing's at the same micro.
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --world 1 --gpu-mem 80GiB --global-batch 2 --set batch.micro_tokens=0 --set data.max_len=2048 \
  --dataset-pairs 1000 --json > $TMP/auto.json || fail "plan 4b with auto"
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --world 1 --gpu-mem 80GiB --global-batch 2 --set batch.micro_tokens=0 --set data.max_len=2048 \
  --dataset-pairs 1000 > $TMP/auto.txt || fail "plan 4b with auto"
grep -qE "^recommended: 1 x 80.0 GiB: stage [0-3], micro [12], accum [12], checkpointing auto: " $TMP/auto.txt \
  || { cat $TMP/auto.txt; fail "auto: the recommendation does not name the checkpointing"; }
[ "$(grep -c '^      checkpointing auto: ' $TMP/auto.txt)" = 4 ] || { cat $TMP/auto.txt; fail "auto: not one choice per cell"; }
python3 - $TMP/auto.json <<'PY' || fail "plan --json under auto"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["activation_checkpointing"] == "auto", j["activation_checkpointing"]
c = [c for c in j["cells"] if c["stage"] == 0][0]
assert c["fits"] and c["activation_checkpointing"].startswith("auto: "), c
assert c["peak_per_rank_bytes"] <= 0.9 * 80 * 2**30, c["peak_per_rank_bytes"]
print("ok: auto on 4b, 1 x 80 GiB, stage 0: micro %d, %s, peak %.1f GiB" % (c["micro"], c["activation_checkpointing"], c["peak_per_rank_bytes"] / 2**30))
PY

# Fits nowhere: exit 3, and the message says what would fit (more GPUs or larger ones).
set +e
"$PMTRAIN" plan configs/qwen3_8b_bs128.yaml --world 1 --gpu-mem 24GiB --set batch.micro_tokens=0 > $TMP/nowhere.txt 2> $TMP/nowhere.err
rc=$?
"$PMTRAIN" plan configs/qwen3_8b_bs128.yaml --world 1 --gpu-mem 24GiB > $TMP/nowhere_tokens.txt 2> $TMP/nowhere_tokens.err
rc_tokens=$?
set -e
# Its token budget (one pair at max_len: the least a budget plans for) is not what to shrink.
[ $rc_tokens = 3 ] && grep -q "with micro_tokens 4096 needs .*; needs stage 3 and .* GPUs of 24.0 GiB" $TMP/nowhere_tokens.err \
  || { cat $TMP/nowhere_tokens.err; fail "fits nowhere with the config's token budget"; }
[ $rc = 3 ] || { cat $TMP/nowhere.txt $TMP/nowhere.err; fail "fits nowhere: exit $rc, expected 3"; }
grep -q "needs stage 3 and .* GPUs of 24.0 GiB" $TMP/nowhere.err || { cat $TMP/nowhere.err; fail "fits nowhere: no advice"; }
! grep -q "higher zero.stage\|stage 4" $TMP/nowhere.err || fail "advice names a stage above 3"
# ... and the need it names is micro 1's at the least memory (activation_checkpointing auto: full with attention
# recomputed): 8B's parameters, gradients and optimizer state and one pair's activations, ~124 GiB, not the
# largest micro-batch's.
need=$(sed -n 's/.*stage 3, micro 1 needs \([0-9.]*\) GiB per rank.*/\1/p' $TMP/nowhere.err)
python3 -c "import sys; sys.exit(not (120 < float('${need:-0}') < 130))" || { cat $TMP/nowhere.err; fail "fits nowhere: needs ${need} GiB"; }
echo "ok: fits nowhere: $(cat $TMP/nowhere.err)"

# sbatch: 2 nodes x 8 GPUs (16 x 24 GiB) with srun; one CPU node with mpirun.
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --world 16 --gpu-mem 24GiB --sbatch $TMP/job.sbatch > /dev/null
bash -n $TMP/job.sbatch || fail "sbatch script: syntax"
for want in "--nodes=2" "--ntasks-per-node=8" "--gpus-per-node=8" "--cpus-per-task=8" "--job-name=pmtrain-qwen3_4b_bs128" \
    "--signal=TERM@300" "--requeue" "--open-mode=append"; do
  grep -q "^#SBATCH $want\$" $TMP/job.sbatch || { cat $TMP/job.sbatch; fail "sbatch lacks $want"; }
done
grep -qE '^#SBATCH --time=[0-9]{2,}:[0-5][0-9]:00$' $TMP/job.sbatch || { cat $TMP/job.sbatch; fail "sbatch: --time"; }
grep -qE '^#SBATCH --mem=[0-9]+G$' $TMP/job.sbatch || fail "sbatch: --mem"
grep -qE '^srun --mpi=pmix --distribution=block "\$PMTRAIN" train configs/qwen3_4b_bs128.yaml --set zero.stage=[0-3] --set batch.global=128 ' $TMP/job.sbatch || { cat $TMP/job.sbatch; fail "sbatch: srun line"; }
# A GPU rank's CPUs: 8, or the config's threads when more (an offloaded AdamW's cores).
"$PMTRAIN" plan configs/qwen3_4b_bs128.yaml --world 16 --gpu-mem 24GiB --set threads=12 --sbatch $TMP/job12.sbatch > /dev/null
grep -q "^#SBATCH --cpus-per-task=12$" $TMP/job12.sbatch || { grep cpus $TMP/job12.sbatch; fail "sbatch: threads 12 on 8 CPUs"; }
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 4 --sbatch $TMP/cpu.sbatch --launcher mpirun > /dev/null
bash -n $TMP/cpu.sbatch || fail "cpu sbatch: syntax"
! grep -q "gpus-per-node" $TMP/cpu.sbatch || fail "cpu sbatch asks for GPUs"
grep -q '^mpirun -np 4 --map-by ppr:4:node --rank-by slot ' $TMP/cpu.sbatch || { cat $TMP/cpu.sbatch; fail "cpu sbatch: mpirun line"; }
# Open MPI's own map of the line's placement on two (named, never contacted) nodes of 2 slots: ranks 0-1 on the
# first, 2-3 on the second, in blocks as the plan and zero.shard_ranks node assume, even where a site's default
# ranks round-robin (OMPI_MCA_rmaps_base_ranking_policy=node, which the line's --rank-by slot overrides).
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 4 --ranks-per-node 2 --sbatch $TMP/two.sbatch --launcher mpirun > /dev/null
opts=$(sed -nE 's/^mpirun (-np 4 --map-by ppr:2:node .*)"\$PMTRAIN" train .*/\1/p' $TMP/two.sbatch)
[ -n "$opts" ] || { cat $TMP/two.sbatch; fail "two-node sbatch: mpirun line"; }
OMPI_MCA_rmaps_base_ranking_policy=node timeout 60 mpirun $opts --host nodeA:2,nodeB:2 --bind-to none --display-map \
  --do-not-launch true > $TMP/map.txt 2>&1 || true  # it stops after the map: not launching is an error to it
map=$(awk '/Data for node:/ { node = $4 } /Process rank:/ { printf "%s:%s ", $9, node }' $TMP/map.txt)
[ "$map" = "0:nodeA 1:nodeA 2:nodeB 3:nodeB " ] || { cat $TMP/map.txt; fail "Open MPI places the sbatch's ranks as '$map'"; }
echo "ok: sbatch scripts; Open MPI maps the mpirun line's ranks in blocks: $map"

# An offloaded AdamW (zero.offload) runs on the rank's host threads: the config's `threads`, else the 8 CPUs the
# --sbatch script gives a GPU rank (exported as OMP_NUM_THREADS, which the run takes as threads). At an assumed
# 200 M elements a second a core and the host-bound side of its overlap with the link (5e9 elements/s at one rank),
# 1 thread against 8 adds psi x (1 / 2e8 - 1 / 1.6e9) seconds a step: 1.7B's psi from its parameters' bytes.
off() { "$PMTRAIN" plan configs/qwen3_1_7b_bs128.yaml --world 1 --gpu-mem 80GiB --dataset-pairs 1000 --json \
  --set zero.offload=optimizer "$@"; }
off > $TMP/off8.json && off --set threads=1 > $TMP/off1.json || fail "plan 1.7b with zero.offload"
python3 - $TMP/off8.json $TMP/off1.json <<'PY' || fail "plan: offload threads"
import json, sys
c8, c1 = ({c["stage"]: c for c in json.load(open(f))["cells"]}[0] for f in sys.argv[1:])
psi = c8["components_bytes"]["params"] / 2  # bf16 params
want = psi * (1 / 2e8 - 1 / 1.6e9)
got = c1["step_seconds"] - c8["step_seconds"]
assert c1["micro"] == c8["micro"] and c1["accum"] == c8["accum"], (c1, c8)
assert abs(got - want) <= 0.01 * want, (got, want, c8["step_seconds"], c1["step_seconds"])
print(f"ok: offloaded AdamW at stage 0: {c8['step_seconds']:.2f} s a step on 8 threads, {c1['step_seconds']:.2f} on 1 "
      f"(+{got:.2f} s, {want:.2f} worked by hand)")
PY

# A token-budget config: the plan keeps the budget (no micro of its own), says how many pairs of max_len it
# holds and the most micro-steps a step takes, and its sbatch line is one `train` accepts as the shell reads
# it (batch.micro would clash with batch.micro_tokens), the plan's own --set overrides in it.
TOK=(--set batch.micro_tokens=1024 --set batch.micro=0 --set batch.accum=0 --set batch.global=16 --set data.max_len=256)
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 "${TOK[@]}" --sbatch $TMP/tok.sbatch --launcher mpirun > $TMP/tok.txt
grep -q "^recommended: .*stage [0-3], micro_tokens 1024 (2 pairs at max_len), at most 4 micro-steps" $TMP/tok.txt \
  || { cat $TMP/tok.txt; fail "token-budget plan: recommendation"; }
! grep -qE "batch.micro=[1-9]" $TMP/tok.sbatch || { cat $TMP/tok.sbatch; fail "token-budget sbatch sets batch.micro"; }
line=$(grep '^mpirun ' $TMP/tok.sbatch | sed -E 's/^mpirun -np 2 --map-by ppr:2:node --rank-by slot "\$PMTRAIN" train //; s/ \$RESUME "\$@"$//')
eval "\"\$PMTRAIN\" train $line --dry-run" > $TMP/tok_dry.txt 2>&1 \
  || { cat $TMP/tok.sbatch $TMP/tok_dry.txt; fail "the token-budget sbatch's train line is refused"; }
grep -q "^  micro_tokens: 1024$" $TMP/tok_dry.txt && grep -q "^  max_len: 256$" $TMP/tok_dry.txt \
  || { cat $TMP/tok.sbatch $TMP/tok_dry.txt; fail "the token-budget sbatch's train line lacks the plan's --set overrides"; }
bad "--micro with a token budget" "drop --micro" plan configs/tiny_cpu.yaml "${TOK[@]}" --micro 2
echo "ok: token-budget plan"

# batch.micro_tokens auto (the Qwen3 configs'): each cell takes the most tokens its plan fits within 90% of the
# GPU, from one pair at max_len (4096) to the rank's share (16 pairs at 8 ranks: 65536); 1.7B at 8 x 80 GiB holds
# more than one pair and less than the share at every stage, each peak within 90% of 80 GiB, the choice below
# each row and in the recommendation.
"$PMTRAIN" plan configs/qwen3_1_7b_bs128.yaml --world 8 --gpu-mem 80GiB --dataset-pairs 160800 --json > $TMP/auto.json \
  || fail "plan of micro_tokens auto"
python3 - $TMP/auto.json <<'PY' || fail "micro_tokens auto cells"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["micro_tokens"] == "auto", j["micro_tokens"]
for c in j["cells"]:
    assert 4096 < c["micro_tokens"] < 65536 and c["micro_tokens"] % 64 == 0, (c["stage"], c["micro_tokens"])
    assert c["fits"] and c["peak_per_rank_bytes"] <= 0.9 * 80 * 2**30, (c["stage"], c["peak_per_rank_bytes"])
    assert c["micro"] == c["micro_tokens"] // 4096, (c["micro"], c["micro_tokens"])
print("ok: micro_tokens auto per cell:", [c["micro_tokens"] for c in j["cells"]])
PY
"$PMTRAIN" plan configs/qwen3_1_7b_bs128.yaml --world 8 --gpu-mem 80GiB --dataset-pairs 160800 > $TMP/auto.txt
grep -qE "^      micro_tokens auto: [0-9]+$" $TMP/auto.txt && grep -qE "^recommended: .*micro_tokens auto: [0-9]+ \(" $TMP/auto.txt \
  || { cat $TMP/auto.txt; fail "plan text of micro_tokens auto"; }

# Pair batching on data far shorter than max_len: the recommendation also names the token budget that fits
# (k pairs at max_len, k at most the rank's pairs a step) when its epoch is faster, and planning with that
# budget agrees: the same stage fits, with that epoch and peak.
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --micro 1 --set data.cache_dir=$TMP/cache > $TMP/budget.txt \
  || { cat $TMP/budget.txt; fail "plan at micro 1"; }
advice=$(grep -oE 'with batch.micro_tokens=[0-9]+ \(micro-batches by tokens, micro 0\) ~[0-9.]+ s/epoch, peak [0-9.]+ [MG]iB' $TMP/budget.txt)
[ -n "$advice" ] || { cat $TMP/budget.txt; fail "no batch.micro_tokens advice at micro 1 on short pairs"; }
budget=$(echo "$advice" | grep -oE 'micro_tokens=[0-9]+' | cut -d= -f2)
epoch=$(echo "$advice" | grep -oE '~[0-9.]+ s' | tr -d '~')
peak=$(echo "$advice" | grep -oE '[0-9.]+ [MG]iB$')
stage=$(grep -oE '^recommended: .*: stage [0-3]' $TMP/budget.txt | grep -oE '[0-3]$')
[ $((budget % 768)) = 0 ] && [ $((budget / 768)) -le 12 ] || fail "budget $budget is not k x 2 x max_len (384), k <= 12 pairs a rank"
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --set data.cache_dir=$TMP/cache --set batch.micro=0 \
  --set batch.micro_tokens=$budget > $TMP/budget2.txt || { cat $TMP/budget2.txt; fail "plan with the advised budget"; }
# (A CPU plan's peak holds this process's resident bytes, which vary by a MiB or so from run to run.)
row=$(grep -E "^$stage +2 .* yes .* $epoch\$" $TMP/budget2.txt) \
  || { cat $TMP/budget.txt $TMP/budget2.txt; fail "the advised budget $budget: not a stage-$stage fit at $epoch"; }
awk -v want="${peak% MiB}" '{ got = $19 + 0; d = got - want; if ($20 != "MiB" || d > 3 || d < -3) exit 1 }' <<< "$row" \
  || { cat $TMP/budget.txt $TMP/budget2.txt; fail "the advised budget $budget: peak not $peak"; }
! grep -q "with batch.micro_tokens=" $TMP/budget2.txt || fail "budget advice repeated under the best budget"
# Under a smaller budget (one pair at max_len, as the Qwen3 configs have): the same advice, the same epoch.
if [ "$budget" != 768 ]; then
  "$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --set data.cache_dir=$TMP/cache --set batch.micro=0 \
    --set batch.micro_tokens=768 > $TMP/budget3.txt || { cat $TMP/budget3.txt; fail "plan with a 768-token budget"; }
  grep -qE "^recommended: .*micro_tokens 768 .*; with batch.micro_tokens=$budget ~$epoch/epoch" $TMP/budget3.txt \
    || { cat $TMP/budget3.txt; fail "no advice of the $budget-token budget under 768 tokens"; }
fi
echo "ok: token-budget advice: $advice"

# calibrate: a profile the planner reads and names as measured (--quick here: a tenth of the time, as it says).
"$PMTRAIN" calibrate --quick --out $TMP/prof.json > $TMP/cal1.txt || { cat $TMP/cal1.txt; fail "calibrate --quick"; }
grep -q "^calibrate: measured on .*, --quick$" $TMP/cal1.txt || { cat $TMP/cal1.txt; fail "calibrate --quick: the profile does not say it is rough"; }
python3 -c "import json,sys; p=json.load(open('$TMP/prof.json')); assert p['gemm_flops'] > 1e8 and p['elementwise_bytes'] > 1e8 and p['attention_flops'] > 1e7 and not p['assumed'], p"
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --profile $TMP/prof.json > $TMP/plan_prof.txt  # a file: see hybrid16.txt
grep -q "compute measured on" $TMP/plan_prof.txt || fail "plan --profile: not used"
# Attention is priced at its measured rate: a profile whose attention runs at the GEMMs' rate plans what one
# without an attention rate does (priced at the GEMMs'), and a four times slower attention costs more.
python3 -c "
import json; p=json.load(open('$TMP/prof.json'))
for name, rate in (('same', p['gemm_flops']), ('none', 0), ('slow', p['gemm_flops'] / 4)):
    q = dict(p, attention_flops=rate)
    if name == 'none': del q['attention_flops']
    json.dump(q, open('$TMP/prof_' + name + '.json', 'w'))"
compute_s() { "$PMTRAIN" plan configs/tiny_cpu.yaml --world 1 --json --profile $1 --set data.cache_dir=$TMP/cache \
  | python3 -c "import json,sys; print(json.load(sys.stdin)['cells'][0]['compute_seconds'])"; }
python3 -c "same, none, slow = $(compute_s $TMP/prof_same.json), $(compute_s $TMP/prof_none.json), $(compute_s $TMP/prof_slow.json)
assert abs(same / none - 1) < 1e-12 and slow > same * 1.01, (same, none, slow)" || fail "plan: attention not priced at its rate"
# The engine's gradient work (each micro-step's non-finite counts and adds into the accumulator) at the profile's
# gradient_bytes where it has one (calibrate measures it on a GPU), else at elementwise_bytes: equal rates price
# alike, and halving the rate adds the same seconds again as halving it once more adds twice over.
python3 -c "import json
for name, rate in (('same', 1e10), ('half', 5e9), ('quarter', 2.5e9), ('none', 0)):
    q = {'source': 'hand-written', 'gemm_flops': 2e10, 'elementwise_bytes': 1e10, 'threads': 1, 'cores': 1}
    if rate: q['gradient_bytes'] = rate
    json.dump(q, open('$TMP/prof_grad_' + name + '.json', 'w'))"
elem_s() { "$PMTRAIN" plan configs/tiny_cpu.yaml --world 1 --json --profile $TMP/prof_grad_$1.json --set threads=1 \
  --set data.cache_dir=$TMP/cache | python3 -c "import json,sys; print(json.load(sys.stdin)['cells'][0]['elementwise_seconds'])"; }
python3 -c "none, same, half, quarter = $(elem_s none), $(elem_s same), $(elem_s half), $(elem_s quarter)
assert abs(same / none - 1) < 1e-12 and half > same * 1.001, (none, same, half)
assert abs((quarter - same) / (half - same) - 3) < 1e-9, (same, half, quarter)
print('ok: gradient work at gradient_bytes: + %.3g s at half the rate' % (half - same))" \
  || fail "plan: the gradient work not priced at gradient_bytes"
# A CPU rank's compute is priced at the profile's speed x the rank's math threads / the profile's threads
# (assumed linear), ranks whose threads outnumber the node's cores sharing them; `threads` left out (and no
# OMP_NUM_THREADS): a rank's share of the profile's cores, as a run takes its node's. A profile of 1 thread on 8
# cores, written here; the stage-0 cell's rank_threads, compute and element-wise seconds, against threads=1's.
python3 -c "import json; json.dump({'source': 'hand-written', 'gemm_flops': 2e10, 'elementwise_bytes': 1e10, \
'threads': 1, 'cores': 8}, open('$TMP/prof_8c.json', 'w'))"
cpu_cell() {  # WORLD [--set ...] -> "rank_threads compute_s elementwise_s"
  env -u OMP_NUM_THREADS "$PMTRAIN" plan configs/tiny_cpu.yaml --world "$@" --json --profile $TMP/prof_8c.json \
    --set data.cache_dir=$TMP/cache | python3 -c "import json,sys
c = [c for c in json.load(sys.stdin)['cells'] if c['stage'] == 0][0]
print(c['rank_threads'], c['compute_seconds'], c['elementwise_seconds'])"; }
python3 - "$(cpu_cell 1 --set threads=1)" "$(cpu_cell 1 --set threads=2)" "$(cpu_cell 1)" "$(cpu_cell 4 --set threads=1)" \
  "$(cpu_cell 4)" "$(cpu_cell 4 --set threads=4)" <<'PY' || fail "plan: a CPU rank's threads"
import sys
one, two, auto1, four1, auto4, over4 = ([float(x) for x in a.split()] for a in sys.argv[1:])
def speedup(cell, base, want_threads, want):
    assert cell[0] == want_threads, (cell, want_threads)
    for k in (1, 2):
        assert abs(base[k] / cell[k] - want) < 1e-9, (k, cell, base, want)
speedup(two, one, 2, 2.0)     # 2 threads on 8 cores: twice the profile's speed
speedup(auto1, one, 8, 8.0)   # threads left out at 1 rank: the node's 8 cores
speedup(auto4, four1, 2, 2.0)  # at 4 ranks on the node: 2 threads each
speedup(over4, four1, 4, 2.0)  # 4 ranks x 4 threads on 8 cores: each thread at half a core
print("ok: a CPU rank's threads: 2 -> x%.2f, left out at 1 rank -> %d threads x%.2f, at 4 ranks -> %d, 4 x 4 on 8 cores x%.2f"
      % (one[1] / two[1], auto1[0], one[1] / auto1[1], auto4[0], four1[1] / over4[1]))
PY
env -u OMP_NUM_THREADS "$PMTRAIN" plan configs/tiny_cpu.yaml --world 4 --profile $TMP/prof_8c.json --launcher mpirun \
  --set data.cache_dir=$TMP/cache --sbatch $TMP/cpu4.sbatch > /dev/null
grep -q "^#SBATCH --cpus-per-task=2$" $TMP/cpu4.sbatch || { grep cpus $TMP/cpu4.sbatch; fail "sbatch: a CPU rank's CPUs"; }
# Ranks of more threads than the profile measured: the table says the speed is scaled up, and how to measure it.
plan_8c() { env -u OMP_NUM_THREADS "$PMTRAIN" plan configs/tiny_cpu.yaml --world 1 --profile $TMP/prof_8c.json \
  --set data.cache_dir=$TMP/cache "$@"; }
plan_8c > $TMP/cpu1.txt && plan_8c --set threads=1 > $TMP/cpu1t1.txt
grep -q "^note: ranks of 8 threads: the profile's speed for 1 scaled up linearly, .*pmtrain calibrate --threads 8$" \
  $TMP/cpu1.txt || { cat $TMP/cpu1.txt; fail "plan: no note on threads beyond the profile's"; }
! grep -q "^note: ranks of" $TMP/cpu1t1.txt || { cat $TMP/cpu1t1.txt; fail "plan: a note at the profile's threads"; }
echo "ok: sbatch --cpus-per-task=2 at 4 ranks on 8 cores; $(grep '^note: ranks' $TMP/cpu1.txt | cut -c1-60)..."
# Under mpirun calibrate measures the collectives at that world size and keeps the 1-rank ones already in the
# file; the plan then takes a CPU cell's comm time from them: doubling every rate halves it.
$MPIRUN -np 2 "$PMTRAIN" calibrate --quick --out $TMP/prof.json > $TMP/cal2.txt || { cat $TMP/cal2.txt; fail "calibrate under mpirun"; }
python3 - $TMP/prof.json <<'PY2' || fail "calibrate: collective rates"
import json, sys
c = json.load(open(sys.argv[1]))["collective_elements_per_s"]
assert sorted(c) == ["1", "2"], c
assert all(r[k] > 0 for r in c.values() for k in ("all_reduce", "reduce_scatter", "all_gather")), c
PY2
comm_s() { "$PMTRAIN" plan configs/tiny_cpu.yaml --world 2 --json --profile $1 \
  | python3 -c "import json,sys; c=[c for c in json.load(sys.stdin)['cells'] if c['stage']==1][0]; assert c['link']=='MPI, measured at 2 ranks', c['link']; print(c['comm_seconds'])"; }
python3 -c "
import json; p=json.load(open('$TMP/prof.json'))
for r in p['collective_elements_per_s'].values():
    for k in r: r[k] *= 2
json.dump(p, open('$TMP/prof2.json', 'w'))"
python3 -c "a, b = $(comm_s $TMP/prof.json), $(comm_s $TMP/prof2.json); assert a > 0 and abs(b / a - 0.5) < 1e-9, (a, b)" \
  || fail "plan: comm time not from the measured collectives"
# A profile is for the device it was measured on; calibrate reads a config (its backend, dtype, threads) like
# every command, errors naming the key.
bad "a CPU profile for a cuda config" "was measured on the CPU" plan configs/qwen3_4b_bs128.yaml --profile $TMP/prof.json
bad "calibrate: unknown key" "backendd" calibrate --set backendd=cuda
# calibrate CONFIG also measures the config's own projections (q/k/v and gate/up fused, o, down) at 256, 1024
# and 4096 tokens, each of its three GEMMs (forward, input grad, weight grad); the planner prices each GEMM at
# its shape's and pass's rate, interpolated in log tokens: rates of the GEMMs' one rate at 4096 tokens and
# twice it at 256 price a 768-token micro-batch (micro 1, max_len 384) at the rate log-interpolated between
# them, against the one rate everywhere without gemm_rates; a weight gradient at half the rate costs a third more.
SHAPE="--set model.hidden_size=128 --set model.intermediate_size=384 --set model.num_heads=4 --set model.num_kv_heads=2 --set model.head_dim=32"
"$PMTRAIN" calibrate configs/tiny_cpu.yaml --quick --set threads=1 $SHAPE --out $TMP/prof_shapes.json > $TMP/cal_shapes.txt \
  || { cat $TMP/cal_shapes.txt; fail "calibrate CONFIG"; }
grep -q "linear forward, 1024 tokens x 1024 -> 1024, fp32" $TMP/cal_shapes.txt || { cat $TMP/cal_shapes.txt; fail "calibrate CONFIG: GEMM line"; }
grep -q "GEMM 128 -> 768 (the config's projection), GFLOP/s forward / input grad / weight grad by tokens: 256: " $TMP/cal_shapes.txt || { cat $TMP/cal_shapes.txt; fail "calibrate CONFIG: projection lines"; }
python3 - $TMP/prof_shapes.json $TMP <<'PY2' || fail "calibrate: gemm_rates"
import json, sys
p = json.load(open(sys.argv[1]))
got = {(r["in"], r["out"], r["tokens"]) for r in p["gemm_rates"]}
# hidden 128, 4 heads and 2 kv heads of 32, intermediate 384
want = {(i, o, t) for i, o in ((128, 256), (128, 128), (128, 768), (384, 128)) for t in (256, 1024, 4096)}
assert got == want and len(p["gemm_rates"]) == 12, sorted(got)
assert all(r[k] > 1e7 for r in p["gemm_rates"] for k in ("flops", "input_grad_flops", "weight_grad_flops")), p["gemm_rates"]
base = dict(p, attention_flops=1e30)  # attention free: compute is the GEMMs
R = base["gemm_flops"]
json.dump(dict(base, gemm_rates=[]), open(sys.argv[2] + "/prof_one.json", "w"))
json.dump(dict(base, gemm_rates=[{"in": i, "out": o, "tokens": t, "flops": 2 * R if t == 256 else R,
                                  "input_grad_flops": 2 * R if t == 256 else R, "weight_grad_flops": 2 * R if t == 256 else R}
                                 for i, o in ((128, 256), (128, 128), (128, 768), (384, 128)) for t in (256, 4096)]),
          open(sys.argv[2] + "/prof_interp.json", "w"))
json.dump(dict(base, gemm_rates=[{"in": i, "out": o, "tokens": 256, "flops": R, "input_grad_flops": R, "weight_grad_flops": R / 2}
                                 for i, o in ((128, 256), (128, 128), (128, 768), (384, 128))]),
          open(sys.argv[2] + "/prof_wgrad.json", "w"))
PY2
gemm_s() { "$PMTRAIN" plan configs/tiny_cpu.yaml --world 1 --micro 1 --json --profile $1 $SHAPE --set data.max_len=384 \
  --set model.activation_checkpointing=false --dataset-pairs 24 | python3 -c "import json,sys; c=json.load(sys.stdin)['cells'][0]; assert c['micro'] == 1; print(c['compute_seconds'])"; }
python3 -c "
import math
one, interp, wgrad = $(gemm_s $TMP/prof_one.json), $(gemm_s $TMP/prof_interp.json), $(gemm_s $TMP/prof_wgrad.json)
f = math.log(768 / 256) / math.log(4096 / 256)
rate = 2 + f * (1 - 2)  # in units of the one rate
assert abs(interp / one - 1 / rate) < 1e-9, (one, interp, 1 / rate)
# No recompute: forward, input grad and weight grad, 1 + 1 + 1 units of time; the weight grad at half rate: 1 + 1 + 2.
assert abs(wgrad / one - 4 / 3) < 1e-9, (one, wgrad)
print(f'ok: GEMMs at 768 tokens priced at {rate:.4f} x the one rate')" || fail "plan: GEMMs not priced at their shapes' rates"
echo "ok: calibrate"

# The built-in GPU profile against a GPU: pmtrain's Qwen3-1.7B step at 4 x 2048 tokens with checkpointing, stage 0
# at one rank, measured 0.399 s on an H200 (bench/results/gpu_20261128_h200, speed.md). An H100 is no faster, so
# the assumed H100's prediction must not fall far below it: priced at the GEMMs' rate, attention (our kernels ran
# it at 80 TFLOP/s) made it 0.25 s. The upper bound keeps the assumption from swinging the other way.
"$PMTRAIN" plan configs/qwen3_1_7b_bs128.yaml --world 1 --json --gpu-mem 80GiB --global-batch 2 --micro 2 \
  --dataset-pairs 2 --set backend=cuda --set zero.stage=0 --set batch.micro_tokens=0 --set data.max_len=2048 \
  --set model.activation_checkpointing=true > $TMP/h100.json || fail "plan of the 1.7B GPU cell failed"
python3 - $TMP/h100.json <<'PY' || fail "plan: the assumed GPU profile's 1.7B step is far from the H200's measured 0.399 s"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["profile"]["assumed"] is True
step = [c for c in j["cells"] if c["stage"] == 0][0]["step_seconds"]
measured = 0.399  # s, pmtrain on an H200, bench/results/gpu_20261128_h200
assert 0.75 * measured <= step <= 1.5 * measured, (step, measured)
print(f"ok: the assumed H100 prices the 1.7B step at {step:.3f} s ({step / measured:.2f} x the H200's measured)")
PY

bad "--world abc" "--world 'abc'" plan configs/tiny_cpu.yaml --world abc
bad "--world 4,x" "'x' is not a whole number" plan configs/tiny_cpu.yaml --world 4,x
bad "--gpu-mem 24XB" "--gpu-mem '24XB' is not a size" plan configs/tiny_cpu.yaml --gpu-mem 24XB
bad "--gpu-mem -8GiB" "is not a size" plan configs/tiny_cpu.yaml --gpu-mem=-8GiB
bad "--global-batch 0" "--global-batch" plan configs/tiny_cpu.yaml --global-batch 0
bad "--global-batch 100 over 8" "use 96 or 104" plan configs/tiny_cpu.yaml --world 8 --global-batch 100
bad "--profile missing" "--profile $TMP/none.json" plan configs/tiny_cpu.yaml --profile $TMP/none.json
bad "--intra-link" "known: pcie4" plan configs/qwen3_4b_bs128.yaml --world 8 --gpu-mem 24GiB --intra-link warp
bad "--sbatch two worlds" "one --world" plan configs/tiny_cpu.yaml --world 1,2 --sbatch $TMP/x.sbatch

# zero.world_invariant keeps the config's batch.micro (2) in every cell instead of searching one, and a world
# size it does not divide is refused naming it.
"$PMTRAIN" plan configs/tiny_cpu.yaml --world 1,2,4 --set zero.world_invariant=true --json > $TMP/wi.json \
  || fail "plan with zero.world_invariant failed"
python3 - $TMP/wi.json <<'PY' || fail "plan with zero.world_invariant: micro not kept"
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
assert cells and all(c["micro"] == 2 for c in cells), sorted({c["micro"] for c in cells})
assert all(c["accum"] * c["micro"] * c["world"] == 24 for c in cells), [(c["world"], c["accum"]) for c in cells]
print("ok: world_invariant plan keeps micro 2 in all %d cells" % len(cells))
PY
bad "world_invariant micro" "batch.micro (kept: zero.world_invariant) 2" plan configs/tiny_cpu.yaml --world 5 --set zero.world_invariant=true --global-batch 25
