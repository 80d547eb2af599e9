#!/usr/bin/env bash
# model.activation_checkpointing none, selective and full (given as the old boolean `true`; and full with
# model.recompute_attention, its attention recomputed instead of kept) train to the same numbers bit for bit: every step's loss and gradient norm in metrics.jsonl is the same text (the
# JSON writer prints the shortest text that reads back to the double). The resolved config names the
# mode, and a misspelt mode is a one-line error naming the key. auto (the least recompute whose plan fits
# this node's memory: none for this tiny model) says what it chose, trains to the same numbers, and its
# resolved config still says auto; auto with selective_layers or recompute_attention set is refused in one
# line, and so is recompute_attention under a mode other than full.
source "$(dirname "$0")/common.sh"
ref=""
for mode in none selective true auto attention; do
  set_mode="--set model.activation_checkpointing=$mode"
  [ $mode = attention ] && set_mode="--set model.activation_checkpointing=full --set model.recompute_attention=true"
  $MPIRUN -np 2 "$PMTRAIN" train configs/tiny_cpu.yaml --set run.dir=$TMP/$mode --set data.cache_dir=$TMP/cache \
    $set_mode --set run.steps=3 --set batch.global=4 --set batch.micro=2 \
    --set data.max_len=96 --set run.eval_every=0 --set run.save_final=false > $TMP/out_$mode.txt 2>&1 \
    || { cat $TMP/out_$mode.txt; fail "$mode: training failed"; }
  curve=$(paste -d' ' <(json_field $TMP/$mode/metrics.jsonl train loss) <(json_field $TMP/$mode/metrics.jsonl train grad_norm) | tr '\n' ' ')
  echo "$mode: loss grad_norm per step: $curve"
  [ $(wc -w <<<"$curve") = 6 ] || fail "$mode: expected 3 steps of loss and grad_norm"
  if [ -z "$ref" ]; then ref=$curve; else [ "$curve" = "$ref" ] || fail "$mode differs from none: $curve vs $ref"; fi
done
grep -q "activation_checkpointing: selective" $TMP/selective/config.resolved.yaml || fail "resolved config lacks selective"
grep -q "activation_checkpointing: full" $TMP/true/config.resolved.yaml || fail "true did not read as full"
grep -q "recompute_attention: true" $TMP/attention/config.resolved.yaml || fail "resolved config lacks recompute_attention"
grep -q "^pmtrain: activation checkpointing auto: none (model.activation_checkpointing auto" $TMP/out_auto.txt \
  || { grep checkpointing $TMP/out_auto.txt; fail "auto did not say that it chose none"; }
grep -q "activation_checkpointing: auto" $TMP/auto/config.resolved.yaml || fail "auto's resolved config does not say auto"
bad "misspelt mode" "model.activation_checkpointing: unknown value 'partial' (expected auto, none, selective, full)" \
  train configs/tiny_cpu.yaml --set model.activation_checkpointing=partial
bad "auto with selective_layers" "model.selective_layers 2 is chosen by model.activation_checkpointing: auto" \
  train configs/tiny_cpu.yaml --set model.activation_checkpointing=auto --set model.selective_layers=2
bad "auto with recompute_attention" "model.recompute_attention is chosen by model.activation_checkpointing: auto" \
  train configs/tiny_cpu.yaml --set model.activation_checkpointing=auto --set model.recompute_attention=true
bad "selective with recompute_attention" "model.activation_checkpointing is selective: set it to full" \
  train configs/tiny_cpu.yaml --set model.activation_checkpointing=selective --set model.recompute_attention=true
echo "checkpointing modes agree"
