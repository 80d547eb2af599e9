#!/usr/bin/env bash
# pmtrain against PyTorch + transformers on this GPU, in one run (the GPU-speed issue's table):
#   bash bench/gpu/speed.sh OUT_DIR          on the GPU machine (device run: carry [".gpudeps"])
#   SPEED_DRYRUN=1 bash bench/gpu/speed.sh OUT_DIR    on a CPU: the plumbing, tiny shapes, no baseline
# Builds pmtrain as launch/gpu_check.sh does (launch/gpu_build.sh), then per shape (Qwen3 0.6B, 1.7B, 4B)
# and checkpointing off/on: `pmtrain bench` (zero.stage 0 on the one GPU, seq 2048, 2 pairs = 4 sequences
# per step, median of steps 3-10) and bench/torch/hf_reward_baseline.py eager and with torch.compile, back to
# back, one process each; then 4B once more with full checkpointing on all but the last N layers, N the most
# selective layers `pmtrain plan` says this GPU holds (model.selective_layers). Then the real-data cell: `pmtrain train` on the bundled hh-rlhf pairs with
# batch.micro_tokens (real tokens/s from metrics.jsonl's answer_tokens, both answers whole as the baseline
# counts them though shared prompts run once, steps after the first 2) against the baseline's
# --real mode with the same budget, eager or compiled as was faster at 0.6B.
# Writes OUT_DIR/speed.md (the table: tokens/s, MFU, peak GiB, ours / best transformers), OUT_DIR/cells/*
# (every cell's JSON and stderr) and OUT_DIR/speed.log. Cells run in order of priority; once
# SPEED_BUDGET_S seconds (default 480, the build not counted) are spent the rest are not started and the
# table names them, and a cell started late is stopped at the budget (a minute at least). Expect the
# torch.compile cells (last: each compiles for a minute or more) and 4B without checkpointing (its
# activations do not fit the 80 GiB) to be dropped. pmtrain runs with threads = the host's cores, so the
# random init of 4B parameters on the host (about a minute on one core) takes seconds. SPEED_SHAPES (default
# "0.6b 1.7b 4b") picks the shapes, in order; the first runs the real-data cell, the last the largest cells.
# SPEED_ATTENTION sets pmtrain's model.attention in its cells (flash_wide: the wide tensor-core kernels, no rebuild).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: bench/gpu/speed.sh OUT_DIR}
mkdir -p "$OUT/cells"
OUT=$(realpath "$OUT")
exec > >(tee "$OUT/speed.log") 2>&1
source launch/mpi_env.sh
export OMP_NUM_THREADS=1  # whatever the caller set: the ranks' host threads (machine_cores counts the build's)
BUDGET=${SPEED_BUDGET_S:-480}
CELL_TIMEOUT=${SPEED_CELL_TIMEOUT_S:-240}
DRY=${SPEED_DRYRUN:-0}
echo "# speed: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(hostname), $(date -u)"

if [ "$DRY" = 1 ]; then
  PMTRAIN=${PMTRAIN:-build/pmtrain/pmtrain}
  SHAPES=(tiny)
  SEQ=64; PAIRS=2; STEPS=3; WARMUP=1; REAL_STEPS=3; REAL_PAIRS=8; REAL_TOKENS=2048
  BACKEND=cpu
  HOST_THREADS=1
  echo "# dry run: tiny shape on the CPU backend, the transformers baseline skipped"
else
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi failed"
  source launch/gpu_build.sh  # gpu_build: the same dependencies, flags and build as gpu_check.sh
  BUILD=${BUILD_DIR:-build-gpu}
  T0=$(date +%s)
  gpu_build "$BUILD" pmtrain || exit 1
  echo "# built pmtrain in $(( $(date +%s) - T0 )) s"
  PMTRAIN=$BUILD/pmtrain/pmtrain
  read -r -a SHAPES <<< "${SPEED_SHAPES:-0.6b 1.7b 4b}"  # the first also runs the real-data cell
  # The real-data cell's steps hold the shipped configs' batch.global (128 pairs, about 36k real tokens at hh-rlhf's
  # lengths, 3 micro-steps of 16384): at 16 pairs a step (11-28, 1.7B) the optimizer step (once a step) and the
  # gradient buckets (once a micro-step) took 21% of pmtrain's time; at a user's 128 my estimate from those parts is
  # about 6%. Both sides run the same steps.
  SEQ=2048; PAIRS=2; STEPS=10; WARMUP=2; REAL_STEPS=8; REAL_PAIRS=128; REAL_TOKENS=16384
  BACKEND=cuda
  HOST_THREADS=$(machine_cores)  # one rank: the random init of a model's parameters on every core (gpu_build.sh)
fi
[ -x "$PMTRAIN" ] || { echo "speed: no pmtrain at $PMTRAIN"; exit 1; }
ATTENTION=${SPEED_ATTENTION:-}  # pmtrain's model.attention in its cells (empty: the config's)
echo "# pmtrain's attention: ${ATTENTION:-as configured}"
config_of() {  # the repository's config of a shape
  case $1 in
    tiny) echo configs/tiny_cpu.yaml ;;
    0.6b) echo configs/qwen3_0_6b_bs128.yaml ;;
    1.7b) echo configs/qwen3_1_7b_bs128.yaml ;;
    4b) echo configs/qwen3_4b_bs128.yaml ;;
  esac
}
bool() { [ "$1" = on ] && echo true || echo false; }

START=$(date +%s)
# cell NAME COMMAND...: runs COMMAND (which prints one JSON object on stdout) into cells/NAME.json, or
# records why there is none: the time budget, a timeout, an out-of-memory, another error (its last line).
cell() {
  local name=$1; shift
  local json=$OUT/cells/$name.json err=$OUT/cells/$name.err
  if [ $(( $(date +%s) - START )) -ge "$BUDGET" ]; then
    echo "{\"skipped\": \"time budget ($BUDGET s) spent\"}" > "$json"
    echo "cell $name: skipped (time budget)"
    return
  fi
  local t=$(date +%s) limit=$CELL_TIMEOUT
  # A cell started late gets what is left of the budget (at least a minute), so the whole run stays near it.
  local left=$(( BUDGET - (t - START) ))
  [ $left -lt $limit ] && limit=$(( left > 60 ? left : 60 ))
  timeout "$limit" "$@" > "$json" 2> "$err"
  local rc=$?
  if ! python3 -c 'import json, sys; json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])' "$json" 2>/dev/null; then
    local why
    why=$(tail -1 "$err" | tr -d '"\\' | cut -c1-200)
    [ -n "$why" ] || why="exit code $rc, no JSON"
    [ $rc = 124 ] && why="timed out after $limit s"
    grep -qi "out of memory" "$err" && why="out of memory"
    grep -q "cannot hold the run" "$err" && why="out of memory (the memory plan: does not fit)"
    echo "{\"error\": \"$why\", \"oom\": $(case $why in "out of memory"*) echo true ;; *) echo false ;; esac)}" > "$json"
  fi
  echo "cell $name: $(( $(date +%s) - t )) s: $(tail -c 300 "$json")"
}

ours() {  # ours SHAPE CKPT [SELECTIVE_LAYERS]: CKPT off, on, or mix (on with the last N layers selective)
  local ck=$2 sel=()
  [ "$ck" = mix ] && ck=on sel=(--set model.selective_layers=$3)
  cell "ours_$1_ckpt$2${OURS_SUFFIX:-}" "$PMTRAIN" bench "$(config_of "$1")" --set backend=$BACKEND --set zero.stage=0 \
    --set batch.micro_tokens=0 --set threads=$HOST_THREADS --set model.activation_checkpointing=$(bool "$ck") \
    "${sel[@]}" \
    ${ATTENTION:+--set model.attention=$ATTENTION} --seq $SEQ \
    --pairs-per-step $PAIRS --steps $STEPS --warmup $WARMUP --json
}
# The most layers of full checkpointing the planner lets this GPU keep selective at the bench's batch (none
# when it names all or none): model.selective_layers from `pmtrain plan`'s recommendation.
mix_layers() {  # mix_layers SHAPE
  local mib
  mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
  [ -n "$mib" ] || return 0
  "$PMTRAIN" plan "$(config_of "$1")" --world 1 --gpu-mem "${mib}MiB" --global-batch $PAIRS --micro $PAIRS \
    --dataset-pairs $PAIRS --set backend=$BACKEND --set zero.stage=0 --set batch.micro_tokens=0 \
    --set data.max_len=$SEQ --set model.activation_checkpointing=true 2>/dev/null \
    | grep -oE 'model.selective_layers=[0-9]+' | head -1 | cut -d= -f2
}
theirs() {  # theirs SHAPE CKPT COMPILE
  if [ "$DRY" = 1 ]; then
    echo '{"skipped": "dry run"}' > "$OUT/cells/hf_$1_ckpt$2_compile$3.json"
    return
  fi
  cell "hf_$1_ckpt$2_compile$3" python3 bench/torch/hf_reward_baseline.py --shape "$1" --ckpt "$2" --compile "$3" \
    --seq $SEQ --pairs $PAIRS --steps $STEPS --warmup $WARMUP --json
}

# The planner's profile of this device (pmtrain calibrate: the model's GEMM, element-wise and AdamW speed
# through the backend, a few seconds; a dry run's --quick takes a tenth), for the planner-beside-measurement
# table at the end.
QUICK=(); [ "$DRY" = 1 ] && QUICK=(--quick)
"$PMTRAIN" calibrate "$(config_of "${SHAPES[0]}")" "${QUICK[@]}" --set backend=$BACKEND --out "$OUT/profile.json" > "$OUT/calibrate.txt" 2>&1 \
  || echo "calibrate failed: $(tail -1 "$OUT/calibrate.txt")"
cat "$OUT/calibrate.txt"

# Priority: ours and eager per shape and setting (4B without checkpointing, the likeliest out-of-memory on 80
# GiB for both, after the real-data cell); then torch.compile.
LAST=${SHAPES[${#SHAPES[@]}-1]}
for shape in "${SHAPES[@]}"; do
  for ckpt in off on; do
    [ "$shape/$ckpt" = "$LAST/off" ] && [ "$DRY" != 1 ] && continue
    ours "$shape" "$ckpt"
    theirs "$shape" "$ckpt" off
  done
done
# The largest shape between full and selective recompute, as much selective as this GPU holds (the
# issue's "selective recompute where it fits"); compared with the baseline's checkpointing-on cells.
MIX=$([ "$DRY" = 1 ] || mix_layers "$LAST")
[ -n "$MIX" ] && ours "$LAST" mix "$MIX"

# Real data: pmtrain train on the bundled pairs with a token budget per micro-batch (the first shape, or
# SPEED_REAL_SHAPE; tiny in the dry run). Without checkpointing on both sides, except at 4B, whose activations
# do not fit one 80 GiB GPU without it: there transformers checkpoints and pmtrain takes the config's
# activation_checkpointing auto (the least recompute that fits).
REAL_SHAPE=${SPEED_REAL_SHAPE:-${SHAPES[0]}}
REAL_CKPT=$([ "$REAL_SHAPE" = 4b ] && echo on || echo off)
real_ours() {
  local dir=$OUT/cells/real_run
  rm -rf "$dir"
  "$PMTRAIN" train "$(config_of "$REAL_SHAPE")" --set backend=$BACKEND --set zero.stage=0 --set run.dir="$dir" \
    --set threads=$HOST_THREADS ${ATTENTION:+--set model.attention=$ATTENTION} ${STEP_CLOCK:+--set run.step_clock=$STEP_CLOCK} \
    --set run.steps=$REAL_STEPS --set run.eval_every=0 --set run.save_every=0 \
    --set run.save_final=false --set data.test_files=[] --set data.test_sets={} --set data.cache_dir="$OUT/cells/cache" \
    --set batch.world=0 --set batch.global=$REAL_PAIRS --set batch.micro=0 --set batch.accum=0 \
    --set batch.micro_tokens=$REAL_TOKENS --set model.activation_checkpointing=$([ $REAL_CKPT = on ] && echo auto || echo false) \
    --set run.log_every=0 >&2 || return 1
  python3 - "$dir/metrics.jsonl" "$WARMUP" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"type":"train"' in l.replace(" ", "")]
w = int(sys.argv[2])
t = sum(r["step_s"] for r in rows[w:])
# Real tokens as the baseline counts them: both answers whole (answer_tokens; with data.share_prompt a
# shared prompt is computed once, so "tokens", what ran, is fewer).
n = sum(r["answer_tokens"] for r in rows[w:])
measured_time_s = {k: sum(r["time_s"][k] for r in rows[w:]) for k in rows[-1]["time_s"]}  # as bench's cells
host = None  # the host's seconds in the same scopes: a device clock's only
if "host_time_s" in rows[-1]:
    host = {k: sum(r["host_time_s"][k] for r in rows[w:]) for k in rows[-1]["host_time_s"]}
print(json.dumps({"side": "pmtrain", "mode": "real", "tokens_per_s": n / t, "real_tokens": n, "seconds": t,
                  "computed_tokens": sum(r["tokens"] for r in rows[w:]), "steps": len(rows),
                  "measured_time_s": measured_time_s, "measured_host_time_s": host}))
PY
}
export -f real_ours config_of  # cell runs it under timeout, in a child bash
export PMTRAIN BACKEND ATTENTION OUT REAL_SHAPE REAL_CKPT REAL_STEPS REAL_PAIRS REAL_TOKENS WARMUP HOST_THREADS
export STEP_CLOCK=  # the step clock the config says (device: events on the stream) unless a cell sets it
cell "ours_real" bash -c real_ours
if [ "$DRY" = 1 ]; then
  echo '{"skipped": "dry run"}' > "$OUT/cells/hf_real.json"
else
  # The baseline's faster setting at this shape and checkpointing: eager unless compile was measured faster.
  REAL_COMPILE=$(python3 - "$OUT/cells" "$REAL_SHAPE" "$REAL_CKPT" <<'PY'
import json, sys
def tps(name):
    try:
        return json.loads(open(f"{sys.argv[1]}/{name}.json").read().strip().splitlines()[-1]).get("tokens_per_s", 0)
    except Exception:
        return 0
s, c = sys.argv[2], sys.argv[3]
print("on" if tps(f"hf_{s}_ckpt{c}_compileon") > tps(f"hf_{s}_ckpt{c}_compileoff") else "off")
PY
)
  cell "hf_real" python3 bench/torch/hf_reward_baseline.py --shape "$REAL_SHAPE" --real --ckpt $REAL_CKPT \
    --compile "$REAL_COMPILE" --seq $SEQ --pairs $REAL_PAIRS --micro-tokens $REAL_TOKENS --steps $REAL_STEPS \
    --warmup $WARMUP --json
fi
# The real-data cell again with run.step_clock host (no events on the stream, the host's clock alone): host / device
# clock tokens/s is what the per-op events cost a step of small micro-batches.
STEP_CLOCK=host cell "ours_real_hostclock" bash -c real_ours

# The wide tensor-core attention kernels (model.attention flash_wide: FlashAttention-2's 128-row blocks, the same
# bits), not Auto's until timed: the first shape's checkpointing-on cell again with them, wide / default end to end.
[ -z "$ATTENTION" ] && OURS_SUFFIX=_wide ATTENTION=flash_wide ours "${SHAPES[0]}" on
if [ "$DRY" != 1 ]; then
  ours "$LAST" off
  theirs "$LAST" off off
fi
for shape in "${SHAPES[@]}"; do
  for ckpt in off on; do theirs "$shape" "$ckpt" on; done
done

# The table.
python3 - "$OUT" "$BACKEND" "$REAL_SHAPE" "$REAL_CKPT" "${SHAPES[@]}" <<'PY'
import json, os, sys
out, backend, real_shape, real_ckpt, shapes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def load(name):
    try:
        return json.loads(open(f"{out}/cells/{name}.json").read().strip().splitlines()[-1])
    except Exception as e:
        return {"error": f"no result ({e.__class__.__name__})"}
def tps(r):
    if "tokens_per_s" in r:
        return f"{r['tokens_per_s']:,.0f}"
    if r.get("oom"):
        return "OOM"
    return r.get("skipped") or r.get("error", "?")
def mfu(r):
    return f"{100 * r['mfu']:.1f}%" if isinstance(r.get("mfu"), (int, float)) else "-"
def gib(r):
    return f"{r['peak_memory_bytes'] / 2**30:.1f}" if "peak_memory_bytes" in r else "-"
lines = ["| shape | ckpt | pmtrain tokens/s | MFU | peak GiB | HF eager tokens/s | MFU | peak GiB | "
         "HF compile tokens/s | MFU | peak GiB | pmtrain / best HF |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
skipped, versions = [], set()
for s in shapes:
    for ck in ("off", "on", "mix"):
        if ck == "mix" and not os.path.exists(f"{out}/cells/ours_{s}_ckptmix.json"):
            continue
        hf = "on" if ck == "mix" else ck  # mix: full recompute on the first layers only; against HF's checkpointing
        o, e, c = load(f"ours_{s}_ckpt{ck}"), load(f"hf_{s}_ckpt{hf}_compileoff"), load(f"hf_{s}_ckpt{hf}_compileon")
        best = max([r.get("tokens_per_s", 0) for r in (e, c)])
        ratio = f"{o['tokens_per_s'] / best:.2f}" if best and "tokens_per_s" in o else "-"
        lines.append(f"| {s} | {ck} | {tps(o)} | {mfu(o)} | {gib(o)} | {tps(e)} | {mfu(e)} | {gib(e)} | "
                     f"{tps(c)} | {mfu(c)} | {gib(c)} | {ratio} |")
        for name, r in ((f"pmtrain {s} ckpt {ck}", o), (f"HF eager {s} ckpt {ck}", e), (f"HF compile {s} ckpt {ck}", c)):
            if "skipped" in r:
                skipped.append(f"{name} ({r['skipped']})")
            if "torch" in r:
                versions.add(f"torch {r['torch']}, transformers {r.get('transformers')}")
ro, rh = load("ours_real"), load("hf_real")
skipped += [f"{name} real data ({r['skipped']})" for name, r in (("pmtrain", ro), ("HF", rh)) if "skipped" in r]
ratio = f"{ro['tokens_per_s'] / rh['tokens_per_s']:.2f}" if "tokens_per_s" in ro and "tokens_per_s" in rh else "-"
lines += ["", "Real data (bundled hh-rlhf pairs at their own lengths, token-budget micro-batches; real tokens/s):", "",
          "| shape | ckpt | pmtrain train tokens/s | HF tokens/s (compile " + str(rh.get("compile", "-")) + ") | pmtrain / HF |",
          "|---|---|---|---|---|",
          f"| {real_shape} | {'off' if real_ckpt == 'off' else 'HF on, pmtrain auto'} | {tps(ro)} | {tps(rh)} | {ratio} |"]
rc = load("ours_real_hostclock")
if "tokens_per_s" in rc or "skipped" in rc:
    ratio = f"{rc['tokens_per_s'] / ro['tokens_per_s']:.3f}" if "tokens_per_s" in rc and "tokens_per_s" in ro else "-"
    lines += ["", f"pmtrain {real_shape} real data with run.step_clock host (no events on the stream): {tps(rc)} "
              f"real tokens/s, host clock / device clock {ratio} (above 1: what the per-op events cost)"]
# The wide attention kernels' cell beside the default's (same shape, checkpointing on, same bits).
wide, default = load(f"ours_{shapes[0]}_ckpton_wide"), load(f"ours_{shapes[0]}_ckpton")
if "tokens_per_s" in wide or "skipped" in wide:
    both = "tokens_per_s" in wide and "tokens_per_s" in default
    ratio = f"{wide['tokens_per_s'] / default['tokens_per_s']:.3f}" if both else "-"
    lines += ["", f"pmtrain {shapes[0]} ckpt on with model.attention flash_wide (the wide tensor-core attention "
              f"kernels): {tps(wide)} tokens/s, wide / default {ratio}"]
# pmtrain's profile: where its measured steps went, by the step clock's categories (rank 0), per cell.
cats = ("gemm", "attention", "elementwise", "grad_buckets", "optimizer", "comm", "other")
prof = [f"| {name} | " + " | ".join(f"{100 * r['measured_time_s'][k] / sum(r['measured_time_s'].values()):.1f}%" for k in cats) + " |"
        for name, r in [(f"{s} ckpt {ck}", load(f"ours_{s}_ckpt{ck}")) for s in shapes for ck in ("off", "on", "mix")]
        + [(f"{real_shape} real data", ro)] if sum(r.get("measured_time_s", {}).values()) > 0]
# The event clock's host half: the host's time inside each category's scopes (issuing its work), as a share of the
# same steps; a category whose host share comes near its share above was waiting on its launches.
def host_row(name, r):
    total = sum(r["measured_time_s"].values())
    shares = [f"{100 * r['measured_host_time_s'].get(k, 0) / total:.1f}%" for k in cats[:-1]]
    return f"| {name} | " + " | ".join(shares) + " | - |"
host = [host_row(name, r)
        for name, r in [(f"{s} ckpt {ck}", load(f"ours_{s}_ckpt{ck}")) for s in shapes for ck in ("off", "on", "mix")]
        + [(f"{real_shape} real data", ro)]
        if r.get("measured_host_time_s") and sum(r.get("measured_time_s", {}).values()) > 0]
if prof:
    lines += ["", "pmtrain's steps after warm-up by category (rank 0's step clock; other = host work and gaps):", "",
              "| cell | " + " | ".join(cats) + " |", "|---" * (len(cats) + 1) + "|"] + prof
if host:
    lines += ["", "The host's time issuing each category's work in the same steps (inside its scopes; near the share "
              "above: launch-bound):", "", "| cell | " + " | ".join(cats) + " |", "|---" * (len(cats) + 1) + "|"] + host
# By op, the model's and the engine's step's, in milliseconds a measured step, the slowest first, each at the rate
# its declared work makes (TFLOP/s of GEMMs and attention against the 989 peak; GB/s of the memory-bound ops against
# the HBM's ~4.3 TB/s a device copy moves): the ops furthest from their roof are the kernels to work on (bench cells).
def rate(v):
    if v["s"] <= 0: return "-"
    if v.get("flops"): return f"{v['flops'] / v['s'] / 1e12:.1f} TFLOP/s"
    return f"{v['bytes'] / v['s'] / 1e9:.0f} GB/s" if v.get("bytes") else "-"
for name, r in [(f"{s} ckpt {ck}", load(f"ours_{s}_ckpt{ck}")) for s in shapes for ck in ("off", "on", "mix")] + \
        [(f"{shapes[0]} ckpt on, flash_wide", wide)]:
    ops, n = r.get("measured_op_s"), r.get("steps", 0) - r.get("warmup", 0)
    if ops and n > 0:
        top = sorted(ops.items(), key=lambda kv: -kv[1]["s"])
        lines += ["", f"pmtrain {name}, by op (ms a measured step; host: the host's ms issuing it; launches: the "
                  "kernels, copies and GEMM calls it queued a step):", "",
                  "| op | category | ms | host ms | calls | launches | rate |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {k} | {v.get('category', '-')} | {1e3 * v['s'] / n:.2f} | "
                  + (f"{1e3 * v['host_s'] / n:.2f}" if "host_s" in v else "-") + f" | {v['calls'] / n:g} | "
                  + (f"{v['launches'] / n:g}" if "launches" in v else "-") + f" | {rate(v)} |"
                  for k, v in top]
head = [f"# pmtrain vs PyTorch + transformers ({backend})", "",
        "Synthetic: seq, pairs per step and median of the steps after warm-up as in bench/gpu/speed.sh; "
        "MFU = (6 N_non-embedding T + 6 L H d s T) / (t x peak); pmtrain's peak is its tracked bytes "
        "(engine buffers + activations), transformers' torch.cuda.max_memory_allocated.",
        "Versions: " + ("; ".join(sorted(versions)) or "-"), ""]
tail = ["", "Cells not run: " + ("; ".join(skipped) if skipped else "none")]
open(f"{out}/speed.md", "w").write("\n".join(head + lines + tail) + "\n")
print("\n".join(head + lines + tail))
PY
# The planner beside pmtrain's measured cells (one rank, stage 0, the bench's batch: PAIRS pairs of SEQ
# tokens in one micro-batch), with the profile calibrated above: predicted / measured step time and peak.
# The measured peak is what the plan's counts: the device's bytes in use on cuda (the CUDA context and pool
# included, as the plan's runtime line), the process's VmHWM on the CPU.
planner_rows() {
  echo; echo "Planner (pmtrain plan --world 1 with the profile calibrated here) beside the measured cells:"; echo
  echo "| shape | ckpt | predicted step s | measured step s | pred / meas | predicted peak GiB | measured peak GiB | pred / meas |"
  echo "|---|---|---|---|---|---|---|---|"
  local shape ckpt mem=()
  [ "$BACKEND" = cuda ] && mem=(--gpu-mem 80GiB)
  for shape in "${SHAPES[@]}"; do
    for ckpt in off on; do
      local json=$OUT/cells/ours_${shape}_ckpt$ckpt.json
      grep -q '"median_step_s"' "$json" 2>/dev/null || continue
      "$PMTRAIN" plan "$(config_of "$shape")" --world 1 --json --profile "$OUT/profile.json" "${mem[@]}" \
        --global-batch $PAIRS --micro $PAIRS --dataset-pairs $PAIRS --set backend=$BACKEND --set zero.stage=0 \
        --set batch.micro_tokens=0 --set data.max_len=$SEQ --set model.activation_checkpointing=$(bool "$ckpt") \
        > "$OUT/cells/plan_${shape}_ckpt$ckpt.json" 2> "$OUT/cells/plan_${shape}_ckpt$ckpt.err" \
        || { echo "| $shape | $ckpt | plan failed: $(tail -1 "$OUT/cells/plan_${shape}_ckpt$ckpt.err" | cut -c1-120) |"; continue; }
      python3 - "$OUT/cells/plan_${shape}_ckpt$ckpt.json" "$json" "$shape" "$ckpt" <<'PY'
import json, sys
plan = [c for c in json.load(open(sys.argv[1]))["cells"] if c["stage"] == 0][0]
meas = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
ps, ms = plan["step_seconds"], meas["median_step_s"]
pm, mm = plan["peak_per_rank_bytes"] / 2**30, meas.get("device_in_use_bytes", meas["peak_memory_bytes"]) / 2**30
print(f"| {sys.argv[3]} | {sys.argv[4]} | {ps:.3f} | {ms:.3f} | {ps / ms:.2f} | {pm:.1f} | {mm:.1f} | {pm / mm:.2f} |")
PY
    done
  done
}
if [ -s "$OUT/profile.json" ]; then planner_rows | tee -a "$OUT/speed.md"; fi

echo "# speed took $(( $(date +%s) - START )) s of measurement (budget $BUDGET s); table: $OUT/speed.md"
