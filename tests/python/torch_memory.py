"""Peak memory of one rank training a 33.6M-parameter torch model (16 linear layers of 1448 x 1448 + bias)
through zero_torch at one stage, printed as one JSON line by rank 0: on the CPU the process's peak resident
memory (VmHWM); with --device cuda the rank's peak device memory, torch's own (max_memory_allocated) plus the
engine's buffers' (peak_bytes), the model on this rank's GPU and the engine on the CUDA backend. Run once per
stage: the high-water marks are per process.
usage: mpirun -np W python3 torch_memory.py [--device cuda] STAGE"""
import argparse
import json

import torch

import zero_torch
from torch_parity import rank_device

WIDTH, LAYERS, BATCH, STEPS = 1448, 16, 8, 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("stage", type=int)
    args = ap.parse_args()
    stage, device = args.stage, rank_device(args.device)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)]
    model = torch.nn.Sequential(*[m for l in layers for m in (l, torch.nn.Tanh())]).to(device)
    params = sum(p.numel() for p in model.parameters())
    dtype = str(layers[0].weight.dtype)
    zm = zero_torch.ZeroModel(model, groups=layers, stage=stage, lr=1e-4, bucket_elements=1 << 22)
    # The modules hold no parameter storage of their own any more: the engine does.
    left = sum(p.numel() for p in model.parameters())
    for s in range(STEPS):
        zm.begin_micro_step()
        x = torch.randn(BATCH, WIDTH, device=device)
        model(x).square().sum().backward()
        zm.step(BATCH * zm.world)
    # Between uses the gathered storage is freed again.
    held = sum(t.storage().size() for g in zm.groups for t in g.tensors)
    if device.type == "cuda":
        peak = {"peak_device_bytes_rank0": torch.cuda.max_memory_allocated(device) + zm.engine.peak_bytes()}
    else:
        peak = {"peak_rss_bytes_rank0": zm.engine.peak_resident_bytes()}
    if zm.rank == 0:
        print(json.dumps({"stage": stage, "world": zm.world, "params": params, "dtype": dtype,
                          "module_params_left": left,
                          "held_between_steps": held, **peak}), flush=True)


if __name__ == "__main__":
    main()
