"""torch's scaled_dot_product_attention on the shapes of bench/cuda/attention_bench.cu, for the attention
row of the GPU-speed issue: Qwen3-4B's attention (32 query heads, 8 kv heads, head_dim 128), causal, bf16,
sequence lengths 512 and 2048 with 16384 tokens per batch (equal lengths, so a [batch, heads, L, 128]
tensor holds them), forward + backward, median of --iters timed iterations after 2 warm-up ones (cuda
events), and the forward alone (no grad: the split beside attention_bench's). Each sdpa backend torch has
here (flash, cuDNN, memory-efficient) is timed on its own; the line
format and the FLOP count (FlashAttention-2's 7 causal products: 7 x 2 x n x L / 2 x head_dim x heads)
are attention_bench's, so the two print side by side.
usage: python3 bench/torch/sdpa_attention.py [--iters N]"""
import argparse
import statistics
import sys

HEADS, KV_HEADS, HEAD_DIM, TOKENS = 32, 8, 128, 16384


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=5)
    args = p.parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"sdpa_attention: torch unavailable ({e}), skipped")
        return 0
    if not torch.cuda.is_available():
        print("sdpa_attention: no CUDA device, skipped")
        return 0
    print(f"sdpa_attention on {torch.cuda.get_device_name(0)}: torch {torch.__version__}, heads {HEADS}, "
          f"kv_heads {KV_HEADS}, head_dim {HEAD_DIM}, {TOKENS} tokens per batch, median of {args.iters}")
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("mem_efficient", SDPBackend.EFFICIENT_ATTENTION)]
    for L in (512, 2048):
        seqs = TOKENS // L
        n = seqs * L
        gen = torch.Generator(device="cuda").manual_seed(0x5eed)

        def rand(heads, spread):
            x = (torch.rand(seqs, heads, L, HEAD_DIM, device="cuda", generator=gen) * 2 - 1) * spread
            return x.to(torch.bfloat16).requires_grad_(True)

        q, k, v = rand(HEADS, 3.0), rand(KV_HEADS, 1.0), rand(KV_HEADS, 1.0)
        d_o = rand(HEADS, 1.0).detach()
        flops = 7.0 * 2.0 * n * L / 2.0 * HEAD_DIM * HEADS
        for name, backend in backends:
            def step():
                q.grad = k.grad = v.grad = None
                with sdpa_kernel(backend):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                o.backward(d_o)
            def forward():  # the forward alone, as attention_bench's split line times ours
                with torch.no_grad(), sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

            def median_ms(f):
                for _ in range(2):
                    f()
                times = []
                for _ in range(args.iters):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    f()
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end))
                return statistics.median(times)

            try:
                ms, fwd_ms = median_ms(step), median_ms(forward)
            except RuntimeError as e:  # a backend that does not take these inputs (GQA, dtype, arch)
                print(f"  L {L:5d}  torch sdpa {name:<17} not available here: {str(e).splitlines()[0][:80]}")
                continue
            product = flops / 7.0  # one tile product's useful flops
            print(f"  L {L:5d}  torch sdpa {name:<17} {ms:9.3f} ms  {n / (ms * 1e-3):10.0f} tokens/s  "
                  f"{flops / (ms * 1e-3) / 1e12:7.2f} TFLOP/s (causal, fwd+bwd); forward {fwd_ms:.3f} ms "
                  f"({2 * product / (fwd_ms * 1e-3) / 1e12:.2f} TFLOP/s), backward {ms - fwd_ms:.3f} ms "
                  f"({5 * product / ((ms - fwd_ms) * 1e-3) / 1e12:.2f} TFLOP/s)")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
