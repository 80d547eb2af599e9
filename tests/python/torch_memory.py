"""Peak resident memory of one rank training a 33.6M-parameter torch model (16 linear layers of
1448 x 1448 + bias) through zero_torch at one stage, printed as one JSON line by rank 0 (the largest
rank's VmHWM). Run once per stage: the high-water mark is per process.
usage: mpirun -np W python3 torch_memory.py STAGE"""
import json
import sys

import torch

import zero_torch

WIDTH, LAYERS, BATCH, STEPS = 1448, 16, 8, 2


def main():
    stage = int(sys.argv[1])
    torch.manual_seed(0)
    layers = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)]
    model = torch.nn.Sequential(*[m for l in layers for m in (l, torch.nn.Tanh())])
    params = sum(p.numel() for p in model.parameters())
    zm = zero_torch.ZeroModel(model, groups=layers, stage=stage, lr=1e-4, bucket_elements=1 << 22)
    # The modules hold no parameter storage of their own any more: the engine does.
    left = sum(p.numel() for p in model.parameters())
    for s in range(STEPS):
        zm.begin_micro_step()
        x = torch.randn(BATCH, WIDTH)
        model(x).square().sum().backward()
        zm.step(BATCH * zm.world)
    # Between uses the gathered storage is freed again.
    held = sum(t.storage().size() for g in zm.groups for t in g.tensors)
    if zm.rank == 0:
        print(json.dumps({"stage": stage, "world": zm.world, "params": params, "module_params_left": left,
                          "held_between_steps": held, "peak_rss_bytes_rank0": zm.engine.peak_resident_bytes()}),
              flush=True)


if __name__ == "__main__":
    main()
