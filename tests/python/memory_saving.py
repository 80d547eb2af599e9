"""Checks what ZeRO-3 saves, from two torch_memory.py lines (stage 0, then stage 3, same world): the modules
hold no parameter storage of their own at either stage, and the peak (the line's peak_* field) at stage 3 is
below stage 0's by at least 80% of the engine's model states ZeRO-3 should save: 16 bytes a parameter (fp32
params, which are their own master, fp32 gradient accumulator, m, v) times (1 - 1/world).
usage: python3 memory_saving.py STAGE0_LINE STAGE3_LINE"""
import json
import sys

a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert (a["stage"], b["stage"], a["world"]) == (0, 3, b["world"]), f"expected stage 0 then 3 at one world: {a} {b}"
for r in (a, b):
    assert r["module_params_left"] == 0 and r["held_between_steps"] == 0, f"module storage not released: {r}"
assert a["dtype"] == b["dtype"] == "torch.float32", f"16 bytes a parameter are fp32 params' model states: {a} {b}"
key = next(k for k in a if k.startswith("peak_"))
should = 16 * a["params"] * (1 - 1 / a["world"])
saved = a[key] - b[key]
print(f"{key}: stage 0 {a[key] / 2**20:.0f} MiB, stage 3 {b[key] / 2**20:.0f} MiB: saved {saved / 2**20:.0f} MiB of the "
      f"{should / 2**20:.0f} MiB ZeRO-3 should save ({100 * saved / should:.0f}%)")
assert saved >= 0.8 * should, "stage 3 saves less than 80% of the model states it should"
