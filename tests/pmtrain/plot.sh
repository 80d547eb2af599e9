#!/usr/bin/env bash
# pmtrain plot on two short runs (different learning rates, train and eval records, named test and training
# sets): six PNGs, each a real PNG, and the points gnuplot plotted (its `set table` output) equal to the
# records of each run's metrics.jsonl, parsed here on their own (python3). A step recorded twice is plotted with
# its last record. Bad run directories get a clear error naming the file (and line).
source "$(dirname "$0")/common.sh"
command -v gnuplot >/dev/null || fail "gnuplot is not installed (launch/setup.sh installs gnuplot-nox)"
run() {  # run NAME LR [--set ...]
  local name=$1 lr=$2; shift 2
  "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/$name --set data.cache_dir=$TMP/cache --set run.steps=4 \
    --set data.max_train_pairs=32 --set data.max_len=128 --set batch.global=4 --set run.eval_every=2 \
    --set run.eval_pairs=8 --set run.save_final=false --set optim.lr=$lr "$@" > $TMP/$name.txt 2>&1 \
    || { cat $TMP/$name.txt; fail "run $name"; }
}
# lr_a evaluates two named test sets as well: a curve each beside its eval curve.
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz | sed -n 1,6p > $TMP/first.jsonl
zcat data/assets/hh-rlhf/harmless-base/test.jsonl.gz | sed -n 7,16p > $TMP/second.jsonl
run lr_a 3e-3 --set "data.test_sets={first: [$TMP/first.jsonl], second: [$TMP/second.jsonl]}"
# lr_b trains on a mix of two sets: a train curve each beside its train curve.
zcat data/assets/hh-rlhf/harmless-base/train.jsonl.gz | sed -n 1,16p > $TMP/x.jsonl
zcat data/assets/hh-rlhf/harmless-base/train.jsonl.gz | sed -n 17,32p > $TMP/y.jsonl
run lr_b 1e-4 --set "data.train_files=[]" --set "data.train_sets={x: [$TMP/x.jsonl], y: [$TMP/y.jsonl]}"
# A step written twice (as an old resumed run left it): the plot must keep the later record.
cp -r $TMP/lr_b $TMP/dup
echo '{"type":"train","step":1,"loss":0.125,"accuracy":0.5,"margin":0.25,"grad_norm":2.5,"lr":1e-4,"tokens_per_s":99}' \
  >> $TMP/dup/metrics.jsonl

"$PMTRAIN" plot $TMP/lr_a $TMP/lr_b $TMP/dup --out $TMP/plots > $TMP/plot.txt 2>&1 || { cat $TMP/plot.txt; fail "plot failed"; }
cat $TMP/plot.txt
python3 - $TMP "$(dirname "$0")" <<'PY' || fail "plot check"
import json, sys
tmp = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from gnuplot_points import check_png, check_points, fail, read_points
runs = {}
for name in ("lr_a", "lr_b", "dup"):
    recs = [json.loads(l) for l in open(f"{tmp}/{name}/metrics.jsonl") if l.strip()]
    for kind in ("train", "eval"):
        last = {}
        for r in recs:
            if r.get("type") == kind: last[r["step"]] = r  # the last record of a step counts
        runs[(name, kind)] = last
if runs[("dup", "train")][1]["loss"] != 0.125: fail("test setup: duplicate record not last")
if not runs[("lr_a", "eval")]: fail("the runs have no eval records")
for field, has_eval in (("loss", 1), ("accuracy", 1), ("margin", 1), ("grad_norm", 0), ("lr", 0), ("tokens_per_s", 0)):
    check_png(f"{tmp}/plots/{field}.png")
    expected = {}
    for (name, kind), recs in runs.items():
        if kind == "eval" and not has_eval: continue
        title = f"{name} {kind}" if has_eval else name
        pts = [(float(s), float(r[field])) for s, r in sorted(recs.items()) if field in r]
        if pts: expected[title] = pts
        if has_eval:  # the named sets: test sets in eval records, training sets in train records
            for set_name in sorted({n for r in recs.values() for n in r.get("sets", {})}):
                expected[f"{title} {set_name}"] = [(float(s), float(r["sets"][set_name][field]))
                                                   for s, r in sorted(recs.items()) if set_name in r.get("sets", {})]
    if has_eval and not any(t.endswith(" eval first") for t in expected): fail("no curve of the named test sets")
    if has_eval and not any(t.endswith(" train y") for t in expected): fail("no curve of the named training sets")
    check_points(field, read_points(f"{tmp}/plots/{field}.points.txt"), expected, "metrics.jsonl")
    print(f"{field}: {len(expected)} curves, {sum(map(len, expected.values()))} points match metrics.jsonl")
PY

# Clear errors: no metrics.jsonl, an empty one, a malformed line (file:line).
expect_error() {  # expect_error PATTERN RUN_DIR
  if "$PMTRAIN" plot "$2" --out $TMP/bad > $TMP/err.txt 2>&1; then fail "plot of $2 succeeded"; fi
  grep -qE "$1" $TMP/err.txt || { cat $TMP/err.txt; fail "expected '$1' for $2"; }
  cat $TMP/err.txt
}
mkdir -p $TMP/none $TMP/empty $TMP/broken
expect_error "none/metrics.jsonl: no such file" $TMP/none
: > $TMP/empty/metrics.jsonl
expect_error "empty/metrics.jsonl: empty" $TMP/empty
{ head -1 $TMP/lr_a/metrics.jsonl; echo '{"type":"train","step":'; tail -n +2 $TMP/lr_a/metrics.jsonl; } > $TMP/broken/metrics.jsonl
expect_error "broken/metrics.jsonl:2: malformed line" $TMP/broken
expect_error "not a directory" $TMP/missing_dir
echo "plot ok"
