"""The PyTorch baseline of the GPU-speed issue: transformers' Qwen3ForSequenceClassification (num_labels 1,
random init from a Qwen3Config at the named shape), fp32 parameters under bf16 autocast, sdpa attention,
fused AdamW (lr 1e-5, betas 0.9/0.95, no weight decay, as configs/qwen3_*_bs128.yaml), gradient clipping at
1.0, the pairwise loss -log sigmoid(r_chosen - r_rejected); eager or torch.compile, with or without gradient
checkpointing. `pmtrain bench` measures our side with the same MFU formula (pmtrain/model_flops.h):
    flops = 6 x non-embedding parameters x tokens + 6 x layers x heads x head_dim x seq x tokens
Synthetic (default): --pairs pairs of --seq random tokens per step (2 x pairs sequences in one batch),
median step time of the steps after --warmup. --real: the bundled hh-rlhf pairs (the tiny config's data)
tokenized with the bundled tokenizer.json as pmtrain does (raw text + <|im_end|>, the last --seq tokens
kept), each step's pairs sorted by length and cut into micro-batches of at most --micro-tokens tokens (a pair
costs two rows of its longer answer, as batch.micro_tokens), padded per micro-batch; real (non-pad)
tokens/s over the steps after --warmup. An out-of-memory is a result row ("oom": true), not a crash.
usage: python3 hf_reward_baseline.py --shape 0.6b --ckpt off --compile off [--json]
       python3 hf_reward_baseline.py --shape 0.6b --real --steps 12 [--json]"""
import argparse
import gzip
import json
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Qwen3's HF config values (hidden, intermediate, layers, heads, kv heads); head_dim 128, vocab 151936,
# rope_theta 1e6, rms_norm_eps 1e-6, tied embeddings. "tiny" is configs/tiny_cpu.yaml's shape, for a quick try.
SHAPES = {
    "tiny": (64, 160, 2, 4, 2, 16),
    "0.6b": (1024, 3072, 28, 16, 8, 128),
    "1.7b": (2048, 6144, 28, 16, 8, 128),
    "4b": (2560, 9728, 36, 32, 8, 128),
}
VOCAB = 151936
PAD_ID = 151643  # <|endoftext|>, the tokenizer's pad token (HF pools the last non-pad token)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="0.6b")
    p.add_argument("--ckpt", choices=["on", "off"], default="off", help="gradient checkpointing")
    p.add_argument("--compile", choices=["on", "off"], default="off", help="torch.compile the model")
    p.add_argument("--seq", type=int, default=2048, help="tokens per sequence (--real: the most kept)")
    p.add_argument("--pairs", type=int, default=2, help="pairs per optimizer step")
    p.add_argument("--steps", type=int, default=10, help="steps run, warm-up included")
    p.add_argument("--warmup", type=int, default=2, help="first steps left out of the result")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="H100 SXM dense bf16")
    p.add_argument("--real", action="store_true", help="the bundled hh-rlhf pairs at their own lengths")
    p.add_argument("--micro-tokens", type=int, default=16384, help="--real: tokens per micro-batch")
    p.add_argument("--data", default=os.path.join(ROOT, "data/assets/hh-rlhf/harmless-base/train.jsonl.gz"))
    p.add_argument("--tokenizer", default=os.path.join(ROOT, "data/assets/qwen3/tokenizer.json"))
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if a.steps <= a.warmup or a.seq < 1 or a.pairs < 1:
        p.error("need --steps > --warmup, --seq >= 1 and --pairs >= 1")
    return a


def model_flops(nonemb, layers, heads, head_dim, seq, tokens):
    """The issue's formula; the same as pmtrain/model_flops.cpp training_model_flops."""
    return 6.0 * nonemb * tokens + 6.0 * layers * heads * head_dim * seq * tokens


def build_model(torch, a):
    from transformers import Qwen3Config, Qwen3ForSequenceClassification

    hidden, inter, layers, heads, kv, head_dim = SHAPES[a.shape]
    cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim, rope_theta=1e6,
                      rms_norm_eps=1e-6, tie_word_embeddings=True, num_labels=1, pad_token_id=PAD_ID,
                      max_position_embeddings=max(40960, a.seq), use_cache=False, attn_implementation="sdpa")
    torch.manual_seed(a.seed)
    with torch.device("cuda"):  # random init on the GPU (a 4B init on the host takes minutes)
        model = Qwen3ForSequenceClassification(cfg).to(dtype=torch.float32)
    if a.ckpt == "on":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    nonemb = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    params = sum(p.numel() for p in model.parameters())
    run = torch.compile(model) if a.compile == "on" else model
    return model, run, params, nonemb, (layers, heads, head_dim)


def synthetic_steps(torch, a):
    """Each step: pairs x 2 sequences of exactly seq random ids (never the pad id), one micro-batch."""
    g = torch.Generator().manual_seed(a.seed)
    for _ in range(a.steps):
        ids = torch.randint(0, PAD_ID, (2 * a.pairs, a.seq), generator=g)
        yield [(ids, None, 2 * a.pairs * a.seq)]


def real_pairs(a):
    """The bundled pairs tokenized as pmtrain's raw format: text + <|im_end|>, the last --seq ids kept."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=a.tokenizer)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    pairs = []
    with gzip.open(a.data, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            j = json.loads(line)
            c, r = (tok(j[k], add_special_tokens=False)["input_ids"] + [end] for k in ("chosen", "rejected"))
            pairs.append((c[-a.seq:], r[-a.seq:]))
    return pairs


def real_steps(torch, a, pairs):
    """Each step: a.pairs shuffled pairs, sorted by length, cut into micro-batches of <= micro_tokens."""
    order = list(range(len(pairs)))
    random.Random(a.seed).shuffle(order)
    for s in range(a.steps):
        ids = [order[(s * a.pairs + i) % len(order)] for i in range(a.pairs)]
        ids.sort(key=lambda i: -max(len(pairs[i][0]), len(pairs[i][1])))
        micro, cur = [], []
        for i in ids:
            longest = max([max(len(x) for x in pairs[j]) for j in cur + [i]])
            if cur and 2 * (len(cur) + 1) * longest > a.micro_tokens:
                micro.append(cur)
                cur = []
            cur.append(i)
        micro.append(cur)
        batches = []
        for m in micro:
            seqs = [x for i in m for x in pairs[i]]  # chosen, rejected, chosen, ...
            width = max(len(x) for x in seqs)
            ids_t = torch.full((len(seqs), width), PAD_ID, dtype=torch.long)
            mask = torch.zeros((len(seqs), width), dtype=torch.long)
            for row, x in enumerate(seqs):  # right padding: HF pools the last non-pad token
                ids_t[row, :len(x)] = torch.tensor(x)
                mask[row, :len(x)] = 1
            batches.append((ids_t, mask, sum(len(x) for x in seqs)))
        yield batches


def run(a):
    import torch
    import torch.nn.functional as F

    row = {"side": "transformers", "shape": a.shape, "ckpt": a.ckpt, "compile": a.compile, "seq": a.seq,
           "pairs_per_step": a.pairs, "steps": a.steps, "warmup": a.warmup, "mode": "real" if a.real else "synthetic",
           "torch": torch.__version__}
    try:
        import transformers
        row["transformers"] = transformers.__version__
    except ImportError:
        row["error"] = "transformers is not installed"
        return row
    if not torch.cuda.is_available():
        row["error"] = "no CUDA device"
        return row
    row["device"] = torch.cuda.get_device_name()
    model = opt = None
    try:
        pairs = real_pairs(a) if a.real else None
        model, run_model, params, nonemb, (layers, heads, head_dim) = build_model(torch, a)
        row.update(parameters=params, non_embedding_parameters=nonemb)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.95), weight_decay=0.0, fused=True)
        torch.cuda.reset_peak_memory_stats()
        times, tokens, flops = [], [], []
        steps = real_steps(torch, a, pairs) if a.real else synthetic_steps(torch, a)
        for batches in steps:
            batches = [(i.cuda(non_blocking=True), None if m is None else m.cuda(non_blocking=True), n)
                       for i, m, n in batches]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            n_pairs = sum(i.shape[0] // 2 for i, _, _ in batches)
            step_flops = 0.0
            for ids, mask, n in batches:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    r = run_model(input_ids=ids, attention_mask=mask).logits.float().view(-1)
                # The mean over the step's pairs, as pmtrain divides by the global pair count.
                loss = -F.logsigmoid(r[0::2] - r[1::2]).sum() / n_pairs
                loss.backward()
                step_flops += model_flops(nonemb, layers, heads, head_dim, ids.shape[1], n)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            tokens.append(sum(n for _, _, n in batches))
            flops.append(step_flops)
        w = a.warmup
        if a.real:  # steps differ in tokens: the measured steps' totals
            t = sum(times[w:])
            row.update(tokens_per_s=sum(tokens[w:]) / t, mfu=sum(flops[w:]) / (t * a.peak_tflops * 1e12),
                       real_tokens=sum(tokens[w:]), seconds=t)
        else:
            med = statistics.median(times[w:])
            row.update(median_step_s=med, tokens_per_step=tokens[-1], tokens_per_s=tokens[-1] / med,
                       mfu=flops[-1] / (med * a.peak_tflops * 1e12))
        row.update(step_s=times, peak_memory_bytes=torch.cuda.max_memory_allocated(), oom=False)
    except torch.cuda.OutOfMemoryError as e:
        row.update(oom=True, error="out of memory: " + str(e).split("\n")[0])
    finally:
        del model, opt
        torch.cuda.empty_cache()
    return row


def main(argv):
    a = parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        row = {"side": "transformers", "shape": a.shape, "error": "torch is not installed"}
    else:
        row = run(a)
    if a.json:
        print(json.dumps(row))
    elif "tokens_per_s" in row:
        print(f"transformers {row.get('transformers')} torch {row['torch']}, {a.shape} {row['mode']}, ckpt {a.ckpt}, "
              f"compile {a.compile}: {row['tokens_per_s']:.0f} tokens/s, MFU {100 * row['mfu']:.1f}%, "
              f"peak {row['peak_memory_bytes'] / 2**30:.2f} GiB")
    else:
        print(f"transformers, {a.shape}, ckpt {a.ckpt}, compile {a.compile}: {row.get('error')}")
    return 0 if "tokens_per_s" in row or row.get("oom") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
