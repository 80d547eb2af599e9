"""zero_torch's checkpoints: save at a step, resume in a new process at the same or another world size and
stage, and end where an uninterrupted run ends (torch_parity.py's model and data).
  mpirun -np W python3 torch_resume.py [--backend B --device D] save RUN_DIR REF STAGE
      an uninterrupted run of STEPS steps (its parameters to REF, from rank 0), then a second run stopped at
      step HALF with a checkpoint in RUN_DIR; and load() of a run directory without checkpoints is None
  mpirun -np W python3 torch_resume.py [--backend B --device D] resume RUN_DIR REF STAGE TOLERANCE
      load() the newest checkpoint of RUN_DIR, train the rest, compare with REF: the largest relative error of
      a tensor at most TOLERANCE (0: bit for bit)
--backend and --device as torch_parity.py's."""
import argparse
import os
import sys

import torch

import torch_parity as tp
import zero_torch

HALF = tp.STEPS // 2


def model_and_zero(stage, backend, device):
    torch.manual_seed(0)
    model = tp.Net().to(device)
    zm = zero_torch.ZeroModel(model, groups=[model.fc1, model.norm, model.fc2], stage=stage, lr=tp.LR, betas=tp.BETAS,
                              eps=tp.EPS, weight_decay=tp.WD, bucket_elements=256, backend=backend)
    return model, zm


def train(model, zm, first, last):
    W, r = zm.world, zm.rank
    for s in range(first, last):
        x, y = (t.to(zm.device) for t in tp.data(s))
        lo, hi = tp.GLOBAL * r // W, tp.GLOBAL * (r + 1) // W
        zm.begin_micro_step()
        tp.loss_sum(model, x[lo:hi], y[lo:hi]).backward()
        zm.step(tp.GLOBAL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("mode", choices=["save", "resume"])
    ap.add_argument("run_dir")
    ap.add_argument("ref")
    ap.add_argument("stage", type=int)
    ap.add_argument("tolerance", type=float, nargs="?", default=0.0)
    a = ap.parse_args()
    run_dir, ref, stage, device = a.run_dir, a.ref, a.stage, tp.rank_device(a.device)
    if a.mode == "save":
        model, zm = model_and_zero(stage, a.backend, device)
        train(model, zm, 0, tp.STEPS)
        full = zm.full_parameters()
        if zm.rank == 0:
            torch.save(full, ref)
        model, zm = model_and_zero(stage, a.backend, device)
        assert zm.load(os.path.join(run_dir, "elsewhere")) is None, "load() of a run without checkpoints"
        train(model, zm, 0, HALF)
        zm.save(run_dir, HALF, extra={"next_step": HALF, "note": "half"})
        if zm.rank == 0:
            print(f"torch_resume: world {zm.world}, stage {stage}: saved step_{HALF}", flush=True)
        return
    tolerance = a.tolerance
    model, zm = model_and_zero(stage, a.backend, device)
    got = zm.load(run_dir)
    assert got is not None and got["step"] == HALF and got["extra"] == {"next_step": HALF, "note": "half"}, got
    assert os.path.basename(got["dir"]) == f"step_{HALF}", got
    train(model, zm, got["extra"]["next_step"], tp.STEPS)
    full, want = zm.full_parameters(), torch.load(ref)
    worst = max(tp.rel(full[n], want[n]) for n in want)
    ok = worst <= tolerance
    if zm.rank == 0:
        print(f"torch_resume: saved at world {got['saved_world']} stage {got['saved_stage']}, resumed at world {zm.world} "
              f"stage {stage}{' (resharded)' if got['resharded'] else ''}: worst relative error {worst:.2e} against the "
              f"uninterrupted run (at most {tolerance:g}): {'ok' if ok else 'MISMATCH'}", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
