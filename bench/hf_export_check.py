#!/usr/bin/env python3
"""Check that an exported reward model scores the same in Hugging Face transformers as in pmtrain.

README
------
`pmtrain export` writes an HF model directory (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json, zero_export.json). This script loads it with
AutoModelForSequenceClassification in float32, tokenizes every pair of a data file exactly as
`pmtrain score --format raw` does, computes the rewards, and compares them with pmtrain's scores.

On the GPU machine (torch + transformers 5.x, no internet needed: everything is local files):

    pmtrain export runs/rm --to /tmp/rm_hf --dtype fp32          # or --dtype bf16
    pmtrain score --model /tmp/rm_hf --data pairs.jsonl --out /tmp/scores.jsonl
    python3 bench/hf_export_check.py /tmp/rm_hf --scores /tmp/scores.jsonl --data pairs.jsonl

Pass the same --max-len as to `pmtrain score` when it was not the default (4096). Prints the max abs
and relative difference over all chosen and rejected rewards and PASS or FAIL (exit code 0 / 1).

Tolerance (per reward): |hf - ours| <= tol * max(|ours|, rms(ours)), rms over all rewards of the run
(so that rewards near zero are judged on the run's scale). tol = 1e-4 for an fp32 export, 2e-2 for
bf16 (from zero_export.json's "dtype"; --tol overrides). Both sides compute in fp32 from the same
stored weights (a bf16 export is widened to fp32 by both), so even a bf16 export normally agrees to
about 1e-5; the bf16 tolerance also covers comparing against scores of the fp32 master.

How pmtrain tokenizes (data/pair_dataset.cpp, data/hh_rlhf.cpp) and how this script mirrors it:
  - lines: .jsonl or .jsonl.gz (gzip recognised by its magic bytes), split on "\\n", a trailing "\\r"
    dropped; lines of only spaces/tabs are skipped and not counted; a line that is not a JSON object,
    lacks "chosen"/"rejected", has a non-string or an all-whitespace field is skipped (pmtrain's default
    bad-line policy), so the i-th good line is pair index i of the score file;
  - each text is encoded with tokenizer.json (added tokens matched, no BOS, no special tokens added),
    then the end token <|im_end|> (id 151645) is appended; longer than max_len: the last max_len
    tokens are kept (truncate_keep_end);
  - the reward is the score head at the last real token (the end token). HF pools the rightmost token
    that is not config.pad_token_id; sequences are right-padded with that id, and the end token is
    never the pad id (pad 151643 <|endoftext|> for Qwen tokenizers), so HF pools the same token.
    If the config has no pad_token_id, sequences are run one at a time (no padding).
"""

import argparse
import gzip
import json
import math
import os
import sys


def read_lines(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    if path.endswith(".gz") and magic != b"\x1f\x8b":
        sys.exit(f"{path}: named .gz but not gzip data")
    with opener(path, "rb") as f:
        data = f.read()
    for raw in data.split(b"\n"):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        yield raw.decode("utf-8", errors="replace")


def read_pairs(path, chosen_field="chosen", rejected_field="rejected"):
    """The pairs pmtrain keeps, in order (raw mode, bad lines skipped)."""
    pairs, skipped = [], 0
    for line in read_lines(path):
        if line.strip(" \t") == "":
            continue
        try:
            j = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if not isinstance(j, dict):
            skipped += 1
            continue
        texts = []
        for field in (chosen_field, rejected_field):
            v = j.get(field)
            if not isinstance(v, str) or v.strip(" \t\r\n") == "":
                break
            texts.append(v)
        if len(texts) != 2:
            skipped += 1
            continue
        pairs.append((texts[0], texts[1]))
    return pairs, skipped


def read_scores(path):
    """Pair index -> (chosen, rejected). `pmtrain score` writes one row per input line ({"line": N, "chosen", "rejected"}
    or {"line": N, "skipped": why}): the k-th scored row is pair k of read_pairs. Rows with an "index" field (an
    older format) say their pair index themselves."""
    scores = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            j = json.loads(line)
            if "skipped" in j:
                continue
            scores[int(j["index"]) if "index" in j else len(scores)] = (float(j["chosen"]), float(j["rejected"]))
    return scores


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", help="directory written by `pmtrain export`")
    ap.add_argument("--scores", required=True, help="JSONL from `pmtrain score --model MODEL_DIR --data DATA --out ...`")
    ap.add_argument("--data", required=True, help="the data file given to pmtrain score (.jsonl or .jsonl.gz, raw format)")
    ap.add_argument("--max-len", type=int, default=4096, help="pmtrain score's --max-len (default 4096)")
    ap.add_argument("--end-token", default="<|im_end|>")
    ap.add_argument("--tol", type=float, default=None, help="relative tolerance (default: 1e-4 fp32, 2e-2 bf16 export)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--max-tokens", type=int, default=16384, help="padded tokens per forward batch")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--limit", type=int, default=0, help="check only the first N pairs (0: all)")
    args = ap.parse_args()

    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForSequenceClassification

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    info_path = os.path.join(args.model_dir, "zero_export.json")
    export_dtype = "fp32"
    if os.path.exists(info_path):
        with open(info_path) as f:
            export_dtype = json.load(f).get("dtype", "fp32")
    tol = args.tol if args.tol is not None else (1e-4 if export_dtype == "fp32" else 2e-2)

    tok_path = os.path.join(args.model_dir, "tokenizer.json")
    if not os.path.exists(tok_path):
        sys.exit(f"{tok_path} is missing: export with --tokenizer PATH/tokenizer.json")
    tok = Tokenizer.from_file(tok_path)
    end_id = tok.token_to_id(args.end_token)
    if end_id is None:
        sys.exit(f"{tok_path}: end token {args.end_token!r} is unknown")

    pairs, skipped = read_pairs(args.data)
    scores = read_scores(args.scores)
    if args.limit > 0:
        pairs = pairs[: args.limit]
    missing = [i for i in range(len(pairs)) if i not in scores]
    if missing:
        sys.exit(f"{args.scores}: no score for pair index {missing[0]} ({len(missing)} missing; {len(pairs)} pairs "
                 f"read from {args.data}, {skipped} bad lines skipped): was it scored from the same file?")
    if args.limit == 0 and len(scores) != len(pairs):
        sys.exit(f"{args.scores} has {len(scores)} pairs but {args.data} yields {len(pairs)}: not the same data?")

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        model = AutoModelForSequenceClassification.from_pretrained(args.model_dir, dtype=torch.float32)
    except TypeError:  # transformers 4.x before the `dtype` argument
        model = AutoModelForSequenceClassification.from_pretrained(args.model_dir, torch_dtype=torch.float32)
    model.to(device).eval()
    cfg = model.config
    if cfg.num_labels != 1:
        sys.exit(f"{args.model_dir}: num_labels is {cfg.num_labels}, expected 1")
    pad_id = cfg.pad_token_id
    if pad_id is not None and pad_id == end_id:
        sys.exit(f"pad_token_id {pad_id} is the end token: HF would pool the wrong token")
    max_batch = args.max_batch if pad_id is not None else 1

    # Sequences in pair order: 2i chosen, 2i+1 rejected.
    seqs = []
    for chosen, rejected in pairs:
        for text in (chosen, rejected):
            ids = tok.encode(text, add_special_tokens=False).ids + [end_id]
            if len(ids) > args.max_len:
                ids = ids[-args.max_len:]
            seqs.append(ids)

    rewards = [None] * len(seqs)
    order = sorted(range(len(seqs)), key=lambda s: len(seqs[s]))
    batch = []

    def flush():
        if not batch:
            return
        width = max(len(seqs[s]) for s in batch)
        ids = torch.full((len(batch), width), pad_id if pad_id is not None else 0, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for b, s in enumerate(batch):
            ids[b, : len(seqs[s])] = torch.tensor(seqs[s], dtype=torch.long)
            mask[b, : len(seqs[s])] = 1
        with torch.no_grad():
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
        for b, s in enumerate(batch):
            rewards[s] = float(logits[b, 0].float().cpu())
        batch.clear()

    for s in order:
        width = max([len(seqs[x]) for x in batch] + [len(seqs[s])])
        if batch and (len(batch) + 1 > max_batch or (len(batch) + 1) * width > args.max_tokens):
            flush()
        batch.append(s)
    flush()

    ours = []
    for i in range(len(pairs)):
        ours.extend(scores[i])
    rms = math.sqrt(sum(r * r for r in ours) / len(ours)) if ours else 0.0
    worst_abs, worst_rel, worst = 0.0, 0.0, None
    for s, (h, o) in enumerate(zip(rewards, ours)):
        d = abs(h - o)
        rel = d / max(abs(o), rms, 1e-30)
        worst_abs = max(worst_abs, d)
        if rel >= worst_rel:
            worst_rel, worst = rel, (s // 2, "chosen" if s % 2 == 0 else "rejected", h, o, len(seqs[s]))
    ok = worst_rel <= tol
    print(f"model {args.model_dir} ({export_dtype} export), transformers on {device}, {len(pairs)} pairs "
          f"({skipped} bad lines skipped), {sum(len(s) for s in seqs)} tokens, reward rms {rms:.6g}")
    print(f"max abs diff {worst_abs:.3e}, max relative diff {worst_rel:.3e} (tolerance {tol:g} of max(|ours|, rms))")
    if worst is not None:
        print(f"worst: pair {worst[0]} {worst[1]} ({worst[4]} tokens): transformers {worst[2]:.8g}, pmtrain {worst[3]:.8g}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
