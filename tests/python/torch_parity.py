"""zero_torch against plain torch: a small model (two linear layers and a LayerNorm) trained through the
binding at the given stage on this world (mpirun -np W) must match single-process torch with
torch.optim.AdamW on the same global batches, within 1e-5 relative (parameters and losses).
usage: mpirun -np W python3 torch_parity.py [--backend cpu|cuda] [--device cpu|cuda] [--bf16] [--schedule] STAGE...
--backend cuda runs the engine's CUDA module (_engine_cuda); --device cuda puts the model on this rank's GPU
(the node-local rank's, as the engine picks it). --backend cuda --device cpu is the emulated CUDA backend
(tests/cuda/emulated), whose "device" is host memory. The reference is plain torch on the CPU either way.
--bf16: also (after fp32, in the same process) the binding's param_dtype bf16 (the model runs in bf16, the engine
keeps fp32 master weights) against
plain torch running the same mixed precision (reference_bf16), within 1e-5, the module's parameters bf16 while it
runs; the error against the fp32 reference is printed beside it. --schedule: also, at the last stage given, a
cosine learning-rate schedule with warmup against torch's AdamW under LambdaLR (cosine_lr); the lr each step
reports must be torch's. --reduce-bf16 (2 ranks): also fp32 at each stage with reduce_dtype bf16 (the gradients on
the wire in bf16) against plain torch summing its gradients as such a wire does (reference_bf16_wire), within 1e-5;
the error against the fp32 reference is printed beside it."""
import argparse
import math
import os
import sys

import torch

import zero_torch

STEPS, GLOBAL, LR, BETAS, EPS, WD = 8, 12, 1e-2, (0.9, 0.95), 1e-8, 0.01
TOLERANCE = 1e-5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.norm(self.fc1(x))))


def data(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL, 10, generator=g)
    y = torch.randn(GLOBAL, 3, generator=g)
    return x, y


def loss_sum(model, x, y):
    return 0.5 * ((model(x) - y) ** 2).sum()


# --schedule: cosine decay to 0.1 x LR at the last step after a warmup of 2 steps; lr of the 1-based step t,
# written out from the definition (warmup reaches LR at step WARMUP, the decay reaches the floor at STEPS).
WARMUP, MIN_RATIO = 2, 0.1


def cosine_lr(t):
    if t <= WARMUP:
        return LR * t / WARMUP
    progress = (t - WARMUP) / (STEPS - WARMUP)
    return LR * (MIN_RATIO + (1 - MIN_RATIO) * 0.5 * (1 + math.cos(math.pi * progress)))


def reference(schedule=False):
    """Plain torch: AdamW (with LambdaLR giving optimizer step k + 1 cosine_lr under --schedule); the
    parameters and the lr of each step."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: cosine_lr(k + 1) / LR) if schedule else None
    lrs = []
    for s in range(STEPS):
        x, y = data(s)
        opt.zero_grad()
        loss = loss_sum(model, x, y) / GLOBAL
        loss.backward()
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched:
            sched.step()
    return {n: p.detach().clone() for n, p in model.named_parameters()}, lrs


def reference_bf16_wire():
    """Plain torch as reference(), the gradients summed as 2 ranks with a bf16 wire sum them: each rank's half of
    the batch rounded to bf16, the two added and the sum rounded to bf16 (a sum of two is the same in either
    order, so MPI's and NCCL's order cannot matter), then divided by the batch in fp32."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    for s in range(STEPS):
        x, y = data(s)
        halves = []
        for lo, hi in ((0, GLOBAL // 2), (GLOBAL // 2, GLOBAL)):
            model.zero_grad()
            loss_sum(model, x[lo:hi], y[lo:hi]).backward()
            halves.append([p.grad.bfloat16().float() for p in model.parameters()])
        for p, a, b in zip(model.parameters(), *halves):
            p.grad = (a + b).bfloat16().float() / GLOBAL
        opt.step()
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def reference_bf16(world, device):
    """Mixed precision as the engine runs it, in plain torch: each step the bf16 parameters are the fp32 master
    weights rounded (to nearest even, as the engine rounds), each rank's share of the batch goes through the
    bf16 model on its own (its bf16 gradients), the shares' gradients are summed in fp32, and torch's AdamW
    steps the master (on the CPU). The bf16 model runs on `device`, the binding's model's: a bf16 forward and
    backward round differently on a GPU's kernels than on the CPU's (3.3e-3 apart on the H200,
    bench/results/gpu_20261128_h200), and the binding runs torch's own kernels there."""
    torch.manual_seed(0)
    master = Net()
    model = Net().to(device, torch.bfloat16)
    opt = torch.optim.AdamW(master.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    for s in range(STEPS):
        x, y = (t.to(device, torch.bfloat16) for t in data(s))
        with torch.no_grad():
            for pb, pm in zip(model.parameters(), master.parameters()):
                pb.copy_(pm)
        acc = [torch.zeros_like(p) for p in master.parameters()]
        for r in range(world):
            lo, hi = GLOBAL * r // world, GLOBAL * (r + 1) // world
            model.zero_grad()
            loss_sum(model, x[lo:hi], y[lo:hi]).backward()
            for a, p in zip(acc, model.parameters()):
                a += p.grad.float().cpu()
        for p, a in zip(master.parameters(), acc):
            p.grad = a / GLOBAL
        opt.step()
    return {n: p.detach().clone() for n, p in master.named_parameters()}


def through_zero(stage, backend, device, dtype, schedule=False, shard_ranks=0, reduce_dtype=torch.float32):
    torch.manual_seed(0)
    model = Net().to(device)
    seen = set()  # the dtypes of fc1's weight while the model runs
    model.fc1.register_forward_hook(lambda m, i, o: seen.add(m.weight.dtype))
    groups = [model.fc1, model.norm, model.fc2]
    # zero_torch.estimate_memory before any engine exists (no MPI), for each world this test runs at: the engine's
    # allocator counts the same bytes, category by category, once it is built and at its peak after the steps.
    estimates = {w: zero_torch.estimate_memory(model, w, stage, groups, bucket_elements=256, param_dtype=dtype,
                                               backend=backend, shard_ranks=shard_ranks, reduce_dtype=reduce_dtype)
                 for w in (1, 2, 3, 4) if not shard_ranks or w % shard_ranks == 0}
    zm = zero_torch.ZeroModel(model, groups=groups, stage=stage, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD,
                              bucket_elements=256, backend=backend, param_dtype=dtype, shard_ranks=shard_ranks,
                              reduce_dtype=reduce_dtype,
                              **(dict(schedule="cosine", warmup_steps=WARMUP, total_steps=STEPS, min_lr_ratio=MIN_RATIO)
                                 if schedule else {}))
    W, r = zm.world, zm.rank
    # Every launched rank takes a share of the data (under hybrid sharding too: world is data parallelism's).
    launched = int(os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMI_SIZE") or W)
    assert W == launched, f"zm.world {W}, but {launched} ranks were launched"
    est, live = estimates[W], zm.engine.live_bytes_by_category()
    assert sorted(live) == sorted(k for k in est if k not in ("total", "host")) and est["host"] == 0, (est, live)
    assert all(est[k] == live[k] for k in live) and est["total"] == sum(live.values()) > 0, \
        f"estimate_memory {est} != the engine's allocations {live}"
    lrs = []
    for s in range(STEPS):
        x, y = (t.to(device, dtype) for t in data(s))
        lo, hi = GLOBAL * r // W, GLOBAL * (r + 1) // W
        zm.begin_micro_step()
        loss = loss_sum(model, x[lo:hi], y[lo:hi])
        loss.backward()
        lrs.append(zm.step(GLOBAL)["lr"])
    assert seen == {dtype}, f"the module ran with parameters of {seen}, not {dtype}"
    assert zm.engine.peak_bytes() == est["total"], f"peak {zm.engine.peak_bytes()} != estimate_memory {est['total']}"
    full = zm.full_parameters()
    # Keyed as the plain model's state_dict.
    assert sorted(full) == sorted(Net().state_dict()), f"full_parameters() keys {sorted(full)}"
    return full, lrs, zm


def rank_device(kind):
    """cpu, or this rank's GPU (the node-local rank's, as the engine picks it), made torch's current device."""
    if kind != "cuda":
        return torch.device(kind)
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")))
    device = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--schedule", action="store_true")
    ap.add_argument("--shard-ranks", type=int, default=0, help="hybrid sharding over groups of N ranks")
    ap.add_argument("--reduce-bf16", action="store_true")
    ap.add_argument("stages", type=int, nargs="+")
    args = ap.parse_args()
    device = rank_device(args.device)
    fp32_params, fp32_lrs = reference()
    cosine_params, cosine_lrs = reference(schedule=True)
    failed = False
    # (dtype, stage, schedule, wire): fp32 at each stage; --bf16: bf16 at each; --schedule: cosine at the last stage;
    # --reduce-bf16: fp32 with a bf16 wire at each.
    f32, bf = torch.float32, torch.bfloat16
    runs = [(f32, s, False, f32) for s in args.stages] + [(bf, s, False, f32) for s in args.stages if args.bf16]
    runs += [(f32, args.stages[-1], True, f32)] if args.schedule else []
    runs += [(f32, s, False, bf) for s in args.stages if args.reduce_bf16]
    for dtype, stage, schedule, wire in runs:
        params, lrs, zm = through_zero(stage, args.backend, device, dtype, schedule, args.shard_ranks, wire)
        bf16 = dtype == torch.bfloat16
        if wire == bf:
            assert zm.world == 2, f"--reduce-bf16: the reference sums 2 ranks' gradients, not {zm.world}"
            ref_params = reference_bf16_wire()
        else:
            ref_params = reference_bf16(zm.world, device) if bf16 else cosine_params if schedule else fp32_params
        ref_lrs = cosine_lrs if schedule else fp32_lrs
        worst = max(rel(params[n], ref_params[n]) for n in ref_params)
        worst_lr = max(abs(a - b) / b for a, b in zip(lrs, ref_lrs))
        torch.manual_seed(0)
        init = Net().state_dict()
        moved = min(rel(ref_params[n], init[n]) for n in ref_params)  # the comparison is not vacuous
        ok = worst < TOLERANCE and worst_lr < TOLERANCE and moved > 1e-3
        against_fp32 = (f" (against fp32 torch: {max(rel(params[n], fp32_params[n]) for n in ref_params):.1e})"
                        if bf16 or wire == bf else "")
        failed |= not ok
        if zm.rank == 0:
            what = f"{dtype}{', cosine schedule' if schedule else ''}{', reduce_dtype bfloat16' if wire == bf else ''}"
            print(f"torch_parity: {zm.engine.description}, {what}, stage {stage}, world {zm.world}: worst parameter relative error {worst:.2e} "
                  f"over {len(ref_params)} tensors{against_fp32}, lr {worst_lr:.1e} (training moved each by at least {moved:.1e}): "
                  f"{'ok' if ok else 'MISMATCH'}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
