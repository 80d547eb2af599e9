#!/usr/bin/env bash
# pmtrain sweep on the tiny model: ranks 1,2 x stages 0,3, 2 steps each. Checked with its own parsing
# (python3, not pmtrain's): one CSV row per cell, each ok with finite positive tokens/s and peak memory,
# the markdown table lists the same cells, both PNGs are real PNGs, and the points gnuplot plotted (its
# `set table` output of the same plot command) are the CSV's rows. Then a grid where one cell cannot run
# (3 ranks do not divide the batch): those cells are failed rows with the reason, and the sweep goes on.
source "$(dirname "$0")/common.sh"
command -v gnuplot >/dev/null || fail "gnuplot is not installed (launch/setup.sh installs gnuplot-nox)"
COMMON=(--mpirun "$MPIRUN" --set data.cache_dir=$TMP/cache --set data.max_train_pairs=16 --set data.max_len=64)

OUT=$TMP/sweep
# The config as a user trains it (named test sets, an eval at the start, the best checkpoint kept): the
# cells still run without evaluation or checkpoints.
"$PMTRAIN" sweep configs/tiny_cpu.yaml --ranks 1,2 --stages 0,3 --steps 2 --out $OUT "${COMMON[@]}" \
  --set batch.global=4 --set run.keep_best=loss --set run.eval_at_start=true \
  --set "data.test_sets={a: [data/assets/hh-rlhf/harmless-base/test.jsonl.gz]}" > $TMP/out.txt 2>&1 \
  || { cat $TMP/out.txt; fail "sweep failed"; }
cat $TMP/out.txt
[ "$(grep -c '^sweep: \[[0-9]/4\]' $TMP/out.txt)" = 4 ] || fail "expected one progress line per cell"
! grep -l '"type":"eval"' $OUT/r*_s*/metrics.jsonl || fail "sweep cells evaluated"

# check_sweep DIR "R,S R,S ..." (the cells that must be ok) "R,S ..." (the cells that must have failed)
check_sweep() {
python3 - "$(dirname "$0")" "$@" <<'PY'
import csv, math, re, sys
sys.path.insert(0, sys.argv[1])
from gnuplot_points import check_png, check_points, fail, read_points
out, ok_cells, failed_cells = sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
rows = list(csv.DictReader(open(f"{out}/sweep.csv")))
cells = sorted(f"{r['ranks']},{r['stage']}" for r in rows)
if cells != sorted(ok_cells + failed_cells): fail(f"cells {cells}, expected {sorted(ok_cells + failed_cells)}")
for r in rows:
    cell = f"{r['ranks']},{r['stage']}"
    if cell in failed_cells:
        if r["status"] != "failed" or not r["reason"]: fail(f"cell {cell} should be failed with a reason: {r}")
        continue
    if r["status"] != "ok": fail(f"cell {cell} failed: {r['reason']}")
    for k in ("tokens_per_s", "peak_rss_mib", "step_s_median", "seconds"):
        v = float(r[k])
        if not (math.isfinite(v) and v > 0): fail(f"cell {cell}: {k} = {v}")
    if not math.isfinite(float(r["final_loss"])): fail(f"cell {cell}: final loss {r['final_loss']}")
    # The run's activation checkpointing (tiny_cpu.yaml: none), from its summary record.
    if r["activation_checkpointing"] != "none": fail(f"cell {cell}: activation_checkpointing {r['activation_checkpointing']!r}")
# The markdown table: one row per cell, the same (ranks, stage) pairs.
md = [l for l in open(f"{out}/sweep.md") if re.match(r"^\| \d+ \| \d \|", l)]
if sorted(",".join(l.split("|")[1:3]).replace(" ", "") for l in md) != cells: fail(f"sweep.md rows: {md}")
if ok_cells == []: sys.exit(0)
for name, col in (("tokens_per_s", "tokens_per_s"), ("peak_memory", "peak_rss_mib")):
    check_png(f"{out}/{name}.png")
    expected = {}
    for r in rows:
        if r["status"] == "ok": expected.setdefault(f"stage {r['stage']}", []).append((float(r["ranks"]), float(r[col])))
    expected = {t: sorted(p) for t, p in expected.items()}
    check_points(name, read_points(f"{out}/{name}.points.txt"), expected, "sweep.csv")
    print(f"{name}: {sum(len(p) for p in expected.values())} plotted points match sweep.csv")
PY
}
check_sweep $OUT "1,0 2,0 1,3 2,3" "" || fail "sweep output check"
cat $OUT/sweep.md

# Failed cells: 4 pairs per step do not split over 3 ranks x 2 pairs. The cell after the first failure
# (ranks 1, stage 3) must still run.
"$PMTRAIN" sweep configs/tiny_cpu.yaml --ranks 1,3 --stages 0,3 --steps 1 --out $TMP/partial "${COMMON[@]}" \
  --set batch.global=4 > $TMP/partial.txt 2>&1 && { cat $TMP/partial.txt; fail "a sweep with a failed cell exited 0"; }
cat $TMP/partial.txt
grep -q '^sweep: \[2/4\] ranks 3 stage 0: FAILED: .*batch' $TMP/partial.txt || fail "the failed cell's reason is not shown"
grep -q '^sweep: \[3/4\] ranks 1 stage 3: [0-9]* tokens/s' $TMP/partial.txt || fail "the sweep did not go on after a failed cell"
check_sweep $TMP/partial "1,0 1,3" "3,0 3,3" || fail "partial sweep output check"
grep -q 'batch' <(grep ',failed,' $TMP/partial/sweep.csv) || fail "the failed row does not give the reason"
# Token budgets (--micro-tokens): a cell per budget in DIR/r<R>_s<S>_t<T>, each run with that batch.micro_tokens
# (its own resolved config says so), the CSV's micro_tokens column, the table's micro column "T tokens";
# --micro with it is refused. Under activation_checkpointing auto each cell's CSV row and table row say what its run
# chose (the tiny model fits without: "auto: none").
"$PMTRAIN" sweep configs/tiny_cpu.yaml --ranks 1 --stages 0 --micro-tokens 256,512 --steps 1 --out $TMP/tok "${COMMON[@]}" \
  --set batch.global=4 --set model.activation_checkpointing=auto > $TMP/tok.txt 2>&1 \
  || { cat $TMP/tok.txt; fail "sweep --micro-tokens failed"; }
python3 - $TMP/tok <<'PY' || fail "sweep --micro-tokens"
import csv, re, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/sweep.csv")))
assert [r["micro_tokens"] for r in rows] == ["256", "512"] and all(r["status"] == "ok" for r in rows), rows
for t in (256, 512):
    resolved = open(f"{out}/r1_s0_t{t}/config.resolved.yaml").read()
    assert re.search(rf"^  micro_tokens: {t}$", resolved, re.M), f"r1_s0_t{t}: batch.micro_tokens not {t}"
    assert re.search(rf"^\| 1 \| 0 \| {t} tokens \| ok \|.*\| auto: none \|$", open(f"{out}/sweep.md").read(), re.M), \
        f"sweep.md: no {t}-token row with auto's choice"
assert all(r["activation_checkpointing"] == "auto: none" for r in rows), [r["activation_checkpointing"] for r in rows]
print("sweep --micro-tokens: cells", [r["run_dir"].rsplit("/", 1)[1] for r in rows], "ok")
PY
bad "sweep --micro with --micro-tokens" "sweep one of them" sweep configs/tiny_cpu.yaml --micro 1 --micro-tokens 256
# A config with a token budget (as the Qwen3 configs have): without --micro its cell keeps the budget (the CSV and
# table say so); --micro 2 runs micro-batches of 2 pairs (the budget set off for that cell).
"$PMTRAIN" sweep configs/tiny_cpu.yaml --ranks 1 --stages 0 --steps 1 --out $TMP/budget "${COMMON[@]}" --set batch.global=4 \
  --set batch.micro=0 --set batch.micro_tokens=256 > $TMP/budget.txt 2>&1 || { cat $TMP/budget.txt; fail "sweep of a budget config"; }
"$PMTRAIN" sweep configs/tiny_cpu.yaml --ranks 1 --stages 0 --micro 2 --steps 1 --out $TMP/pairs "${COMMON[@]}" --set batch.global=4 \
  --set batch.micro=0 --set batch.micro_tokens=256 > $TMP/pairs.txt 2>&1 || { cat $TMP/pairs.txt; fail "sweep --micro of a budget config"; }
# batch.micro_tokens auto: the cell runs auto (no budget set over it) and its row shows the run's choice (the
# summary's): the whole share of a 4-pair step at one rank, 4 pairs of two 64-token answers = 512 tokens, on
# this host.
"$PMTRAIN" sweep configs/tiny_cpu.yaml --ranks 1 --stages 0 --steps 1 --out $TMP/auto "${COMMON[@]}" --set batch.global=4 \
  --set batch.micro=0 --set batch.micro_tokens=auto > $TMP/auto.txt 2>&1 || { cat $TMP/auto.txt; fail "sweep of an auto budget config"; }
python3 - $TMP/budget $TMP/pairs $TMP/auto <<'PY' || fail "sweep of a config with a token budget"
import csv, re, sys
budget, pairs, auto = (list(csv.DictReader(open(f"{d}/sweep.csv")))[0] for d in sys.argv[1:])
assert auto["status"] == "ok" and auto["micro_tokens"] == "512", auto
assert re.search(r"^  micro_tokens: auto$", open(f"{sys.argv[3]}/r1_s0/config.resolved.yaml").read(), re.M), "auto r1_s0"
assert "512 tokens" in open(f"{sys.argv[3]}/sweep.md").read(), "sweep.md: no 512-token row"
assert budget["status"] == "ok" and budget["micro_tokens"] == "256" and budget["micro"] == "", budget
assert pairs["status"] == "ok" and pairs["micro"] == "2" and pairs["micro_tokens"] == "", pairs
resolved = open(f"{sys.argv[2]}/r1_s0_m2/config.resolved.yaml").read()
assert re.search(r"^  micro: 2$", resolved, re.M) and re.search(r"^  micro_tokens: 0$", resolved, re.M), "r1_s0_m2 batch"
print("sweep of a budget config: the budget kept, --micro 2 as pairs: ok")
PY
echo "sweep ok"
