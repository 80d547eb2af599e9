#!/usr/bin/env python3
"""Parity of our reward model on the GPU with Hugging Face transformers at Qwen3-4B layer shapes (issue 10).

A random-init Qwen3ForSequenceClassification (num_labels 1, pad_token_id set; Qwen3-4B's hidden 2560, 32/8 heads,
head_dim 128, intermediate 9728, full vocabulary 151936, tied embeddings; 2 layers by default) on one batch of
pairs: one 2048-token sequence and short ones (pair order: sequence 2i chosen, 2i+1 rejected). The loss is
pmtrain's: the SUM over pairs of softplus(r_rejected - r_chosen), each reward the score head at the last token
(no pad inside a sequence, so HF pools that token too). Steps:

  1. transformers on the GPU: the model (HF init under a seed; RMSNorm weights := 1 + 0.1 randn so a wrong
     norm shows; every parameter then rounded to the bf16 grid, so that our bf16 mode, which stores bf16
     parameters, and transformers' autocast, which rounds at each op, start from the very same weights; fp32
     runs are unaffected), saved as an HF directory, and the batch; forward/backward per sequence in fp32
     (TF32 off) and under torch.autocast(bfloat16), rewards, loss and every parameter gradient kept on the host.
  2. hf_parity_driver (C++): our HF importer and the model on CudaModelOps, in fp32 mode and in bf16 mode.
  3. Per tensor relative L2 against transformers' fp32 run: ours fp32 <= 1e-4; ours bf16 <= 1.5 x the error of
     transformers' bf16 autocast run. Prints a table (and writes it to --table / $ZERO_PARITY_TABLE), then
     PASS or FAIL with the failing tensors.

Exit codes: 0 pass, 1 fail, 77 skipped (no GPU, or python3 lacks torch / transformers / safetensors) unless
ZERO_REQUIRE_GPU is set (then 1). Smaller shapes for a quick look: --layers 1 --vocab 4096 --lens 256,8.
"""
import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

FP32_BOUND = 1e-4
BF16_FACTOR = 1.5


def skip(why):
    req = os.environ.get("ZERO_REQUIRE_GPU", "")
    if req and req != "0":
        print("hf_parity_4b: cannot run: %s (ZERO_REQUIRE_GPU is set, so this is a failure)" % why, flush=True)
        sys.exit(1)
    print("hf_parity_4b: SKIPPED: %s" % why, flush=True)
    sys.exit(77)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--driver", required=True, help="the hf_parity_driver binary")
    p.add_argument("--workdir", required=True, help="scratch directory (HF dir, batch, driver outputs; ~10 GB)")
    p.add_argument("--table", default=os.environ.get("ZERO_PARITY_TABLE", ""), help="also write the table here")
    p.add_argument("--keep", action="store_true", help="keep the workdir's files")
    p.add_argument("--seed", type=int, default=20261123)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--hidden", type=int, default=2560)
    p.add_argument("--intermediate", type=int, default=9728)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--rope-theta", type=float, default=1000000.0)
    p.add_argument("--rms-eps", type=float, default=1e-6)
    p.add_argument("--pad-id", type=int, default=151643, help="Qwen3's <|endoftext|>")
    p.add_argument("--lens", default="2048,33,300,17,64,129,7,1",
                   help="sequence lengths in pair order (chosen, rejected, chosen, ...)")
    p.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"], help="transformers' attention")
    a = p.parse_args(argv)
    a.lens = [int(x) for x in a.lens.split(",")]
    if len(a.lens) < 2 or len(a.lens) % 2 or min(a.lens) < 1:
        p.error("--lens: an even number (pairs) of positive lengths")
    if not 0 <= a.pad_id < a.vocab:
        p.error("--pad-id outside the vocabulary")
    return a


def rel_l2(got, ref):
    """||got - ref|| / ||ref|| in float64 (on the GPU when there is one: the embedding is 389M elements)."""
    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = got.to(dev, torch.float64).flatten()
    r = ref.to(dev, torch.float64).flatten()
    den = torch.linalg.vector_norm(r).item()
    num = torch.linalg.vector_norm(g - r).item()
    del g, r
    return num / den if den > 0 else (0.0 if num == 0 else float("inf"))


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
        import safetensors.torch
        import transformers
        from transformers import Qwen3Config, Qwen3ForSequenceClassification
    except ImportError as e:
        skip("python3 lacks %s (needs torch, transformers >= 4.51, safetensors)" % e.name)
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    if not os.access(a.driver, os.X_OK):
        print("hf_parity_4b: FAIL: driver %s is missing or not executable" % a.driver)
        return 1

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (our fp32 mode has TF32 off too)
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    t_start = time.time()
    print("hf_parity_4b: torch %s, transformers %s, %s" % (torch.__version__, transformers.__version__,
                                                           torch.cuda.get_device_name(0)), flush=True)
    os.makedirs(a.workdir, exist_ok=True)
    hf_dir = os.path.join(a.workdir, "hf_model")
    batch_path = os.path.join(a.workdir, "batch.safetensors")

    # ---- 1. the HF model, the batch, transformers' runs ---------------------------------------------------------
    kw = dict(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
              num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
              rms_norm_eps=a.rms_eps, tie_word_embeddings=True, num_labels=1, pad_token_id=a.pad_id,
              attention_bias=False, use_sliding_window=False, max_position_embeddings=40960)
    if int(transformers.__version__.split(".")[0]) >= 5:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": a.rope_theta}
    else:
        kw["rope_theta"] = a.rope_theta
    cfg = Qwen3Config(**kw)
    cfg.num_labels = 1
    torch.manual_seed(a.seed)
    model = Qwen3ForSequenceClassification._from_config(cfg, attn_implementation=a.attn)  # HF's init, on the CPU
    model = model.to(device="cuda", dtype=torch.float32)
    model.train()  # no dropout in Qwen3: train() and eval() compute the same
    with torch.no_grad():
        for name, mod in model.named_modules():
            if type(mod).__name__.endswith("RMSNorm"):
                mod.weight.copy_(1.0 + 0.1 * torch.randn(mod.weight.shape, device="cuda"))
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))  # on the bf16 grid (see the docstring)
    names = [n for n, _ in model.named_parameters()]
    params = dict(model.named_parameters())
    print("hf_parity_4b: %d parameters in %d tensors, %s attention" % (sum(p.numel() for p in params.values()),
                                                                     len(names), model.config._attn_implementation))
    model.save_pretrained(hf_dir)

    g = torch.Generator().manual_seed(a.seed + 1)
    seqs = []
    for n in a.lens:
        ids = torch.randint(0, a.vocab, (n,), generator=g, dtype=torch.int64)
        ids[ids == a.pad_id] = 0  # no pad inside a sequence: HF then pools the last token, as we do
        seqs.append(ids)
    safetensors.torch.save_file({"seq.%d" % i: s for i, s in enumerate(seqs)}, batch_path)

    def run_hf(model, params, autocast):
        model.zero_grad(set_to_none=True)
        ctx = torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        rewards = []
        with ctx:
            for s in seqs:  # one sequence at a time: no padding, no attention mask
                out = model(input_ids=s[None].cuda(), use_cache=False)
                rewards.append(out.logits.reshape(()).float())
        r = torch.stack(rewards)
        loss = F.softplus(r[1::2] - r[0::2]).sum()  # pmtrain's loss: the sum over pairs
        loss.backward()
        torch.cuda.synchronize()
        res = {"rewards": r.detach().cpu(), "loss": loss.detach().reshape(1).cpu()}
        for n in names:
            res["grad." + n] = params[n].grad.detach().float().cpu()
        model.zero_grad(set_to_none=True)
        return res

    t0 = time.time()
    hf32 = run_hf(model, params, False)
    hf16 = run_hf(model, params, True)
    print("hf_parity_4b: transformers fp32 and bf16-autocast runs in %.1f s; loss fp32 %.6f, bf16 %.6f"
          % (time.time() - t0, hf32["loss"].item(), hf16["loss"].item()), flush=True)
    model = params = None
    torch.cuda.empty_cache()  # the driver needs the device's memory

    # ---- 2. ours --------------------------------------------------------------------------------------------------
    ours = {}
    ok = True
    for mode in ("fp32", "bf16"):
        out_path = os.path.join(a.workdir, "ours_%s.safetensors" % mode)
        t0 = time.time()
        r = subprocess.run([a.driver, hf_dir, batch_path, mode, out_path])
        print("hf_parity_4b: driver %s exited %d after %.1f s" % (mode, r.returncode, time.time() - t0), flush=True)
        if r.returncode != 0:
            # The driver's own codes (hf_parity_driver.cpp); anything else is the loader or a signal.
            why = {1: "an error, printed above", 2: "bad arguments", 3: "a second run differs from the first",
                   127: "it could not start: a shared library or the program is missing, printed above"}
            reason = why.get(r.returncode, "killed by signal %d" % -r.returncode if r.returncode < 0 else "see above")
            print("hf_parity_4b: FAIL: the driver failed in %s mode (exit %d: %s)" % (mode, r.returncode, reason))
            ok = False
            continue
        ours[mode] = safetensors.torch.load_file(out_path)
    if not ok:
        return 1

    # ---- 3. compare -----------------------------------------------------------------------------------------------
    keys = ["rewards", "loss"] + ["grad." + n for n in names]
    missing = [k for k in keys if k not in ours["fp32"] or k not in ours["bf16"]]
    if missing:
        print("hf_parity_4b: FAIL: the driver wrote no %s" % ", ".join(missing[:5]))
        return 1
    lines = ["%-52s %11s %11s %11s %7s  %s" % ("tensor (rel L2 vs transformers fp32)", "ours fp32", "hf bf16-ac",
                                               "ours bf16", "ratio", "verdict")]
    failures = []
    for k in keys:
        if tuple(ours["fp32"][k].shape) != tuple(hf32[k].shape):
            failures.append("%s: shape %s, transformers %s" % (k, tuple(ours["fp32"][k].shape), tuple(hf32[k].shape)))
            continue
        e32 = rel_l2(ours["fp32"][k], hf32[k])
        ehf = rel_l2(hf16[k], hf32[k])
        e16 = rel_l2(ours["bf16"][k], hf32[k])
        ratio = e16 / ehf if ehf > 0 else float("inf")
        bad = []
        if not e32 <= FP32_BOUND:
            bad.append("fp32 > %.0e" % FP32_BOUND)
        if not e16 <= BF16_FACTOR * ehf:
            bad.append("bf16 > %.1fx" % BF16_FACTOR)
        lines.append("%-52s %11.3e %11.3e %11.3e %7.2f  %s" % (k[:52], e32, ehf, e16, ratio, ", ".join(bad) or "ok"))
        if bad:
            failures.append("%s: %s" % (k, ", ".join(bad)))
    lines.append("rewards: transformers fp32 %s" % " ".join("%.5f" % x for x in hf32["rewards"].tolist()))
    lines.append("rewards: ours fp32         %s" % " ".join("%.5f" % x for x in ours["fp32"]["rewards"].tolist()))
    lines.append("rewards: ours bf16         %s" % " ".join("%.5f" % x for x in ours["bf16"]["rewards"].tolist()))
    verdict = "PASS" if not failures else "FAIL: %d of %d tensors: %s" % (len(failures), len(keys), "; ".join(failures))
    lines.append("hf_parity_4b: %s (bounds: ours fp32 <= %.0e; ours bf16 <= %.1f x transformers bf16 autocast; "
                 "layers %d, hidden %d, vocab %d, lengths %s; %.0f s)"
                 % (verdict, FP32_BOUND, BF16_FACTOR, a.layers, a.hidden, a.vocab, ",".join(map(str, a.lens)),
                    time.time() - t_start))
    text = "\n".join(lines)
    print(text, flush=True)
    if a.table:
        os.makedirs(os.path.dirname(os.path.abspath(a.table)), exist_ok=True)
        with open(a.table, "w") as f:
            f.write(text + "\n")
    if not a.keep:
        shutil.rmtree(a.workdir, ignore_errors=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
