"""zero_torch.estimate_memory on a model of Qwen3-4B shapes built on the meta device (nothing allocated): what each
rank's engine allocates at 1 and 8 ranks, stages 0-3, bf16, one engine group per module owning parameters.
    PYTHONPATH=build/python python3 bench/torch/estimate_qwen3_4b.py"""
import torch

import zero_torch

HIDDEN, INTER, LAYERS, VOCAB, Q_DIM, KV_DIM, HEAD_DIM = 2560, 9728, 36, 151936, 4096, 1024, 128  # Qwen3-4B


def linear(n_in, n_out):
    return torch.nn.Linear(n_in, n_out, bias=False, device="meta")


def vector(n):
    return torch.nn.Parameter(torch.empty(n, device="meta"))


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = linear(HIDDEN, Q_DIM), linear(HIDDEN, KV_DIM), linear(HIDDEN, KV_DIM)
        self.o = linear(Q_DIM, HIDDEN)
        self.gate, self.up, self.down = linear(HIDDEN, INTER), linear(HIDDEN, INTER), linear(INTER, HIDDEN)
        self.input_norm, self.post_norm = vector(HIDDEN), vector(HIDDEN)
        self.q_norm, self.k_norm = vector(HEAD_DIM), vector(HEAD_DIM)


class RewardModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN, device="meta")
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = vector(HIDDEN)
        self.score = linear(HIDDEN, 1)


def main():
    model = RewardModel()
    n = sum(p.numel() for p in model.parameters())
    print(f"# zero_torch.estimate_memory on a meta-device model of Qwen3-4B shapes ({n / 1e9:.3f}B parameters, one "
          f"group a module owning parameters), bf16, nothing allocated")
    for world in (1, 8):
        for stage in (0, 1, 2, 3):
            e = zero_torch.estimate_memory(model, world, stage, param_dtype=torch.bfloat16)
            gib = {k: v / 2**30 for k, v in e.items()}
            print(f"world {world} stage {stage}: params {gib['params']:6.2f} GiB  grads {gib['grads']:6.2f}  "
                  f"master+m+v {gib['master'] + gib['optim_m'] + gib['optim_v']:6.2f}  comm {gib['comm_buffers']:5.2f}  "
                  f"gathered {gib['gathered']:5.2f}  total {gib['total']:6.2f} GiB")


if __name__ == "__main__":
    main()
