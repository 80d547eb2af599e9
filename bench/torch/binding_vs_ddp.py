"""Step time of the same model and data at 2 ranks: zero_torch (stage 1, the sharding that
ZeroRedundancyOptimizer does) against torch DistributedDataParallel + ZeroRedundancyOptimizer(AdamW)
on gloo. Both sides run back to back in this process group (launched with mpirun -np 2); rank 0 prints
the median step time of steps 3-12 of each and their ratio. Also zero_torch at stage 3.
usage: mpirun -np 2 python3 binding_vs_ddp.py"""
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import zero_torch

WIDTH, LAYERS, BATCH, STEPS, WARM = 1024, 8, 32, 12, 2


def make_model():
    torch.manual_seed(0)
    layers = [torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)]
    return torch.nn.Sequential(*[m for l in layers for m in (l, torch.nn.Tanh())]), layers


def batch(step, rank):
    g = torch.Generator().manual_seed(step * 100 + rank)
    return torch.randn(BATCH, WIDTH, generator=g)


def time_steps(one_step):
    times = []
    for s in range(STEPS):
        dist.barrier()
        t0 = time.perf_counter()
        one_step(s)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[WARM:])


def main():
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)

    model, _ = make_model()
    ddp = DDP(model)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)

    def ddp_step(s):
        opt.zero_grad()
        ddp(batch(s, rank)).square().sum().backward()
        opt.step()

    t_ddp = time_steps(ddp_step)

    results = {}
    for stage in (1, 3):
        model, layers = make_model()
        zm = zero_torch.ZeroModel(model, groups=layers, stage=stage, lr=1e-4)

        def zero_step(s):
            zm.begin_micro_step()
            model(batch(s, rank)).square().sum().backward()
            zm.step(BATCH * world)

        results[stage] = time_steps(zero_step)
    if rank == 0:
        params = sum(l.numel() for l in make_model()[0].parameters())
        print(f"# binding_vs_ddp: world {world}, {params / 1e6:.1f}M parameters ({LAYERS} x Linear({WIDTH}, {WIDTH})), "
              f"batch {BATCH} per rank, torch {torch.__version__}, median of steps {WARM + 1}-{STEPS}")
        print(f"DDP + ZeroRedundancyOptimizer(AdamW), gloo: {t_ddp * 1e3:.1f} ms/step")
        for stage, t in results.items():
            print(f"zero_torch stage {stage}: {t * 1e3:.1f} ms/step, ratio zero_torch / DDP+ZeRO {t / t_ddp:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
