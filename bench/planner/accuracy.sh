#!/usr/bin/env bash
# The planner's predictions against measured runs on the CPU backend: for every cell of a grid (models,
# stages, ranks, micro-batch, checkpointing) `pmtrain train` runs a few steps under mpirun and reports
# its peak resident memory (VmHWM of the largest rank: the operating system's count, independent of the
# planner's arithmetic) and its step times; `pmtrain plan --json` predicts both for the same settings.
# Prints predicted / measured per cell; targets: memory within 10%, step time within 20%.
#   bash bench/planner/accuracy.sh [PMTRAIN] [OUT]     (from the repository root; GRID=ci for two cells,
#   GRID=threads for 1-rank cells at 1 and 2 math threads: the profile is measured at 1, the plan scales it)
# Sequences are truncated to data.max_len (64; the hh-rlhf sample's pairs are longer), so the planner's
# worst case (every sequence at max_len) is what runs. The compute profile is measured first
# (pmtrain calibrate, and under mpirun at 2 and 4 ranks for the collectives); the process baseline comes from a run of a 1-layer, hidden-32 model with small
# buckets (its peak RSS less its planned bytes, nearly all model states), written into the profile.
set -euo pipefail
PMTRAIN=${1:-build/pmtrain/pmtrain}
OUT=${2:-bench/results/planner_accuracy.txt}
GRID=${GRID:-full}
source launch/mpi_env.sh
MPIRUN=${MPIRUN:-mpirun}
export OMP_NUM_THREADS=1
TMP=$(mktemp -d /tmp/planner_acc.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
STEPS=${STEPS:-10}
REPEATS=${REPEATS:-3}
[ "$GRID" = ci ] && REPEATS=1

# model NAME -> --set options: ~42M (hidden 256) and ~90M (hidden 512) parameters, embedding-heavy as
# small Qwen3 shapes are (vocabulary 151936).
model() {
  case $1 in
    base) echo "--set zero.bucket_elements=65536 --set model.hidden_size=32 --set model.intermediate_size=64 --set model.num_layers=1 --set model.num_heads=1 --set model.num_kv_heads=1 --set model.head_dim=32" ;;
    m42) echo "--set zero.bucket_elements=4194304 --set model.hidden_size=256 --set model.intermediate_size=1024 --set model.num_layers=3 --set model.num_heads=4 --set model.num_kv_heads=2 --set model.head_dim=64" ;;
    m90) echo "--set zero.bucket_elements=4194304 --set model.hidden_size=512 --set model.intermediate_size=1536 --set model.num_layers=4 --set model.num_heads=8 --set model.num_kv_heads=4 --set model.head_dim=64" ;;
  esac
}
common() {  # STAGE MICRO CKPT RANKS THREADS
  echo "--set threads=$5 --set zero.stage=$1 --set batch.micro=$2 --set model.activation_checkpointing=$3 --set batch.global=$(($2 * $4 * 2))" \
       "--set data.max_len=64 --set data.max_train_pairs=$(($2 * $4 * 2 * STEPS)) --set run.epochs=1" \
       "--set run.eval_every=0 --set run.save_final=false --set run.eval_pairs=8" \
       "--set run.log_every=100"
}
# measure NAME MODEL STAGE MICRO CKPT RANKS THREADS -> "peak_rss_bytes step_s compute_s elementwise_s comm_s": the cell
# run REPEATS times (this VM's ranks lose their cores to its host now and then, for a whole run at times),
# medians over the steps after the first of every run, the components from metrics.jsonl's time_s breakdown
# (rank 0's), the largest peak of the runs.
measure() {
  local files=()
  for r in $(seq $REPEATS); do
    local dir=$TMP/$1.$r
    nice -n 10 $MPIRUN -np $6 "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$dir --set data.cache_dir=$TMP/cache \
      $(model $2) $(common $3 $4 $5 $6 $7) > $TMP/$1.log 2>&1 || { cat $TMP/$1.log >&2; echo "run $1 failed" >&2; exit 1; }
    files+=("$dir/metrics.jsonl")
  done
  python3 - "${files[@]}" <<'PY'
import json, sys
peak, later = 0, []
for f in sys.argv[1:]:
    recs = [json.loads(l) for l in open(f)]
    train = [r for r in recs if r.get("type") == "train"]
    peak = max(peak, [r["peak_rss_bytes_max_rank"] for r in recs if r.get("type") == "summary"][-1])
    later += train[1:] or train          # the first step pays for first touches and warm-up
med = lambda f: sorted(f(r) for r in later)[len(later) // 2]
t = lambda *k: (lambda r: sum(r["time_s"][x] for x in k))
print(peak, med(lambda r: r["step_s"]), med(t("gemm", "attention")), med(t("elementwise", "grad_buckets", "optimizer")),
      med(t("comm")))
PY
}
predict() {  # MODEL STAGE MICRO CKPT RANKS THREADS -> "peak_bytes step_s micro compute_s elementwise_s comm_s"
  "$PMTRAIN" plan configs/tiny_cpu.yaml --json --world $5 --micro $3 --profile $TMP/profile.json $(model $1) $(common $2 $3 $4 $5 $6) \
    | python3 -c "import json,sys; j=json.load(sys.stdin); c=[c for c in j['cells'] if c['stage']==$2][0]; print(c['peak_per_rank_bytes'], c['step_seconds'], c['micro'], c['compute_seconds'], c['elementwise_seconds'], c['comm_seconds'])"
}

"$PMTRAIN" calibrate --out $TMP/profile.json > $TMP/calibrate.txt
for w in 2 4; do  # the collectives at each world size of the grid (1 rank: the run above)
  $MPIRUN -np $w "$PMTRAIN" calibrate --out $TMP/profile.json > $TMP/calibrate_$w.txt || { cat $TMP/calibrate_$w.txt >&2; exit 1; }
done
# The process baseline: a negligible model's peak less what the planner counts for it (baseline 0).
python3 - $TMP/profile.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["process_baseline_bytes"] = 1; json.dump(p, open(sys.argv[1], "w"))
PY
base_m=$(measure base base 0 1 false 1 1) && base_p=$(predict base 0 1 false 1 1) || exit 1
read -r base_meas _ <<< "$base_m"
read -r base_pred _ <<< "$base_p"
baseline=$((base_meas - base_pred + 1))
python3 - $TMP/profile.json $baseline <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["process_baseline_bytes"] = int(sys.argv[2]); json.dump(p, open(sys.argv[1], "w"))
PY

if [ "$GRID" = ci ]; then
  cells="m42:2:1:false:2 m42:3:2:true:2"
elif [ "$GRID" = threads ]; then
  cells="m42:0:2:false:1:1 m42:0:2:false:1:2 m90:0:2:false:1:1 m90:0:2:false:1:2 m90:3:2:true:1:2"
else
  cells=""   # 20 cells: the whole stage x ranks grid for the 42M model, a subset for the 90M one (2 shared cores)
  for s in 0 1 2 3; do for r in 1 2 4; do cells+=" m42:$s:2:false:$r"; done; done
  for s in 0 3; do for r in 1 2; do cells+=" m90:$s:2:false:$r"; done; done
  cells+=" m90:3:2:false:4 m42:2:1:false:2 m42:2:2:true:2 m90:2:2:true:2"
fi

{
  echo "# planner accuracy (CPU backend, $(date -u +%F), $(getconf _NPROCESSORS_ONLN) cores, $STEPS steps per cell x $REPEATS runs, max_len 64)"
  echo "# $(head -1 $TMP/calibrate.txt | sed 's/calibrate: //'); $(sed -n 2p $TMP/calibrate.txt | sed 's/^ *//'); $(sed -n 3p $TMP/calibrate.txt | sed 's/^ *//')"
  echo "# process baseline (1-layer hidden-32 run's VmHWM less its planned bytes): $((baseline / 1048576)) MiB"
  echo "# step time and its parts, predicted / measured (s): compute = GEMMs + attention; elem = model element-wise +"
  echo "# engine gradient work + optimizer step; comm = collectives started and waited (the run's time_s breakdown)"
  printf "%-5s %-5s %5s %3s %5s %5s %10s %10s %7s %8s %8s %7s  %-13s %-13s %-13s\n" model stage ranks thr micro ckpt "pred MiB" "meas MiB" "mem p/m" "pred s" "meas s" "time p/m" "compute p/m" "elem p/m" "comm p/m"
} > $TMP/table.txt
cat $TMP/table.txt
worst_mem=0; worst_time=0
for c in $cells; do
  IFS=: read -r m s mi ck r th <<< "$c"
  th=${th:-1}
  p=$(predict $m $s $mi $ck $r $th) && me=$(measure $m-$s-$mi-$ck-$r-$th $m $s $mi $ck $r $th) || exit 1
  read -r pm pt pmicro pc pe pk <<< "$p"
  read -r mm mt mc meas_e mk <<< "$me"
  [ "$pmicro" = "$mi" ] || { echo "cell $c: the planner chose micro $pmicro" >&2; exit 1; }
  line=$(python3 -c "
pm, mm, pt, mt = $pm, $mm, $pt, $mt
parts = ' '.join('%-13s' % ('%.3f/%.3f' % (p, m)) for p, m in (($pc, $mc), ($pe, $meas_e), ($pk, $mk)))
print('%-5s %-5s %5s %3s %5s %5s %10.0f %10.0f %7.3f %8.3f %8.3f %7.3f  %s' % ('$m', $s, $r, $th, $mi, '$ck', pm/2**20, mm/2**20, pm/mm, pt, mt, pt/mt, parts))")
  echo "$line" | tee -a $TMP/table.txt
done
python3 - $TMP/table.txt <<'PY' | tee -a $TMP/table.txt
import sys
rows = [l.split() for l in open(sys.argv[1]) if l[0] != '#' and not l.startswith('model')]
mem = [abs(float(r[8]) - 1) for r in rows]; tim = [abs(float(r[11]) - 1) for r in rows]
print("# worst memory error %.1f%% (target 10%%), cells within 10%%: %d/%d; worst step-time error %.1f%% (target 20%%), within 20%%: %d/%d"
      % (100 * max(mem), sum(m <= 0.10 for m in mem), len(mem), 100 * max(tim), sum(t <= 0.20 for t in tim), len(tim)))
PY
mkdir -p "$(dirname "$OUT")"
cp $TMP/table.txt "$OUT"
cp $TMP/profile.json "${OUT%.txt}_profile.json"   # the speeds and baseline the predictions used
echo "wrote $OUT and ${OUT%.txt}_profile.json"
