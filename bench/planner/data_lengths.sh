#!/usr/bin/env bash
# The planner's step time at the training data's own lengths (what `pmtrain plan` prices the epoch with)
# against measured CPU runs on real hh-rlhf lengths: one epoch of configs/tiny_cpu.yaml's 240 pairs at its
# data.max_len 384, a 42M-parameter model, with shared prompts (data.share_prompt, the default) and without,
# at stages 0 (1 rank), 2 and 3 (2 ranks).
# Per cell: the planner's data step and max_len step, the measured mean step (every step after the first,
# all lengths as they come), and their ratios; target: the data step within 20%. The compute profile is
# measured first, in the same run (pmtrain calibrate, and at 2 ranks for the collectives).
#   bash bench/planner/data_lengths.sh [PMTRAIN] [OUT]     (from the repository root)
set -euo pipefail
PMTRAIN=${1:-build/pmtrain/pmtrain}
OUT=${2:-bench/results/planner_data_lengths.txt}
source launch/mpi_env.sh
MPIRUN=${MPIRUN:-mpirun}
export OMP_NUM_THREADS=1
TMP=$(mktemp -d /tmp/planner_len.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
MODEL="--set zero.bucket_elements=4194304 --set model.hidden_size=256 --set model.intermediate_size=1024
  --set model.num_layers=3 --set model.num_heads=4 --set model.num_kv_heads=2 --set model.head_dim=64"
common() {  # STAGE RANKS SHARE
  echo "--set zero.stage=$1 --set batch.global=8 --set batch.micro=$((8 / $2)) --set data.share_prompt=$3" \
       "--set run.epochs=1 --set run.eval_every=0 --set run.save_final=false --set run.log_every=100" \
       "--set data.cache_dir=$TMP/cache"
}

# Calibrated with the cells' config and model: its projections' GEMMs are measured at their own shapes.
"$PMTRAIN" calibrate configs/tiny_cpu.yaml $MODEL --set threads=1 --out $TMP/profile.json > $TMP/calibrate.txt
$MPIRUN -np 2 "$PMTRAIN" calibrate configs/tiny_cpu.yaml $MODEL --set threads=1 --out $TMP/profile.json > $TMP/calibrate_2.txt \
  || { cat $TMP/calibrate_2.txt >&2; exit 1; }
{
  echo "# planner step time at the data's own lengths (CPU backend, $(date -u +%F), $(getconf _NPROCESSORS_ONLN) cores): tiny_cpu's 240 hh-rlhf pairs, max_len 384, 42M parameters, global batch 8, one epoch (30 steps)"
  echo "# $(head -1 $TMP/calibrate.txt | sed 's/calibrate: //'); $(sed -n 2p $TMP/calibrate.txt | sed 's/^ *//'); $(sed -n 3p $TMP/calibrate.txt | sed 's/^ *//')"
  grep "^  GEMM .* (the config's projection)" $TMP/calibrate.txt | sed 's/^ */# /'
  printf "%-5s %-5s %-6s %10s %12s %10s %9s %12s %9s\n" stage ranks share "tok/pair" "pred data s" "meas s" "data p/m" "pred maxlen" "maxlen p/m"
} > $TMP/table.txt
cat $TMP/table.txt
CELLS="0:1:true 0:1:false 2:2:true 2:2:false 3:2:true"  # stage:ranks:share_prompt
for cell in $CELLS; do
  IFS=: read -r s r share <<< "$cell"
  "$PMTRAIN" plan configs/tiny_cpu.yaml --json --world $r --profile $TMP/profile.json $MODEL $(common $s $r $share) \
    > $TMP/plan_${s}_${r}_${share}.json
  pred=$(python3 -c "import json,sys; j=json.load(sys.stdin); c=[c for c in j['cells'] if c['stage']==$s][0]; print(j['data_tokens_per_pair'], c['data_step_seconds'], c['step_seconds'], c['micro'])" < $TMP/plan_${s}_${r}_${share}.json)
  read -r tpp pdata pmax pmicro <<< "$pred"
  [ "$pmicro" = "$((8 / r))" ] || { echo "cell $cell: the planner chose micro $pmicro" >&2; exit 1; }
  nice -n 10 $MPIRUN -np $r "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/run_${s}_${r}_${share} $MODEL \
    $(common $s $r $share) > $TMP/run.log 2>&1 || { cat $TMP/run.log >&2; exit 1; }
  meas=$(python3 -c "
import json, sys
train = [json.loads(l) for l in open(sys.argv[1]) if '\"type\":\"train\"' in l]
later = train[1:]
print(sum(r['step_s'] for r in later) / len(later))" $TMP/run_${s}_${r}_${share}/metrics.jsonl)
  python3 -c "print('%-5s %-5s %-6s %10.1f %12.3f %10.3f %9.3f %12.3f %9.2f' % ($s, $r, '$share', $tpp, $pdata, $meas, $pdata / $meas, $pmax, $pmax / $meas))" \
    | tee -a $TMP/table.txt
done
python3 - $TMP/table.txt <<'PY' | tee -a $TMP/table.txt
import sys
rows = [l.split() for l in open(sys.argv[1]) if l[0] != '#' and not l.startswith('stage')]
err = [abs(float(r[6]) - 1) for r in rows]
print("# worst data-step error %.1f%% (target 20%%), cells within 20%%: %d/%d; the max_len step overestimates %.1f-%.1fx"
      % (100 * max(err), sum(e <= 0.20 for e in err), len(err), min(float(r[8]) for r in rows), max(float(r[8]) for r in rows)))
PY
# Where the time goes: the data step's parts as predicted against the measured step clock (rank 0, mean of
# every step after the first): compute = gemm + attention, element-wise = elementwise + grad_buckets +
# optimizer, comm; other is host work the planner does not price.
python3 - $TMP ${CELLS//:/_} <<'PY' | tee -a $TMP/table.txt
import json, sys
tmp = sys.argv[1]
print("# parts, predicted / measured seconds a step:")
print("%-5s %-5s %-6s %17s %17s %17s %8s" % ("stage", "ranks", "share", "compute", "element-wise", "comm", "other"))
for cell in sys.argv[2:]:
    s, r, share = cell.split("_")
    c = [c for c in json.load(open(f"{tmp}/plan_{cell}.json"))["cells"] if c["stage"] == int(s)][0]
    train = [json.loads(l) for l in open(f"{tmp}/run_{cell}/metrics.jsonl") if '"type":"train"' in l][1:]
    m = {k: sum(t["time_s"][k] for t in train) / len(train) for k in train[0]["time_s"]}
    parts = ((c["data_compute_seconds"], m["gemm"] + m["attention"]),
             (c["data_elementwise_seconds"], m["elementwise"] + m["grad_buckets"] + m["optimizer"]),
             (c["data_comm_seconds"], m["comm"]))
    print("%-5s %-5s %-6s " % (s, r, share) + " ".join("%7.3f / %7.3f" % p for p in parts) + " %8.3f" % m["other"])
PY
mkdir -p "$(dirname "$OUT")"
cp $TMP/table.txt "$OUT"
echo "wrote $OUT"
