#!/usr/bin/env python3
"""Reference fixture for the C++ Qwen3 reward model, computed with Hugging Face transformers.

Builds a tiny random Qwen3ForSequenceClassification (eager attention, float32, CPU, one thread; GQA, q/k norms,
tied embeddings, q width != hidden), runs one right-padded batch of chosen/rejected pairs through it, and writes
one safetensors file with everything tests/model compares against:

    <param>               initial weights under their HF names (float32)
    input_ids, attention_mask [B, T] (int64), pool_index [B] (int64, last real token)
                          rows 0..P-1 are the chosen answers, rows P..2P-1 the rejected ones (pair i = rows i, i+P)
    act.layer<i>.out      [B, T, H] residual stream after decoder layer i
    act.final_norm.out    [B, T, H] after model.norm
    rewards [B], loss [1] mean over pairs of -logsigmoid(r_chosen - r_rejected)
    grad.<param>          d loss / d param at the initial weights (before clipping)
    train.losses [S], train.grad_norms [S], final.<param>
                          S steps of torch.optim.AdamW (single-tensor CPU path) with clip_grad_norm_ on the same batch

plus OUTDIR/config.json (save_pretrained's, with "num_labels": 1). With the default sizes and seeds this follows
the procedure of tests/fixtures/qwen3_rm_tiny (see its README): HF init under torch.manual_seed(seed), then every
RMSNorm weight := 1 + 0.1 randn in named_modules order, then score.weight := 0.2 randn, then token ids from a
separate generator seeded seed + 1. So on the same CPU and library versions it should reproduce that fixture;
`--compare FILE` checks a written fixture against another one (same tensor names, values within a tolerance).

Usage:
    python3 make_qwen3_rm_fixture.py OUTDIR [--layers 3 --hidden 40 ...]   # write, then re-verify bitwise
    python3 make_qwen3_rm_fixture.py OUTDIR --verify-only                   # recompute from OUTDIR, compare bitwise
    python3 make_qwen3_rm_fixture.py OUTDIR --compare OTHER.safetensors     # write, then compare with OTHER

Needs torch, transformers >= 4.51 (Qwen3; 5.x spells RoPE as rope_parameters, handled) and safetensors.
Runs on the CPU in seconds; downloads nothing. Written for this project (not derived from HF test code).
"""
import argparse
import inspect
import json
import os
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F
import safetensors
import safetensors.torch
import transformers
from transformers import Qwen3Config, Qwen3ForSequenceClassification

FIXTURE_NAME = "qwen3_rm_tiny.safetensors"
BATCH_KEYS = ("input_ids", "attention_mask", "pool_index")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--verify-only", action="store_true", help="recompute from OUTDIR's stored weights and batch")
    p.add_argument("--compare", metavar="FILE", help="after writing, compare with another fixture file")
    p.add_argument("--seed", type=int, default=20261122)
    p.add_argument("--vocab", type=int, default=997)
    p.add_argument("--hidden", type=int, default=48)
    p.add_argument("--intermediate", type=int, default=104)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--kv-heads", type=int, default=3)
    p.add_argument("--head-dim", type=int, default=12)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--rms-eps", type=float, default=1e-6)
    p.add_argument("--pad-id", type=int, default=0)
    p.add_argument("--chosen-lens", default="17,9,5", help="real lengths of the chosen rows")
    p.add_argument("--rejected-lens", default="12,17,3", help="real lengths of the rejected rows (same count)")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--max-norm", type=float, default=1.0)
    a = p.parse_args(argv)
    a.chosen = [int(x) for x in a.chosen_lens.split(",")]
    a.rejected = [int(x) for x in a.rejected_lens.split(",")]
    if len(a.chosen) != len(a.rejected):
        p.error("--chosen-lens and --rejected-lens need the same number of entries (one per pair)")
    if a.heads % a.kv_heads or a.head_dim % 2:
        p.error("heads must be a multiple of kv-heads and head-dim even")
    if not (0 <= a.pad_id < a.vocab):
        p.error("pad id outside the vocabulary")
    return a


# ---- model ------------------------------------------------------------------------------------------------------

def qwen3_config(a):
    kw = dict(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
              num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
              head_dim=a.head_dim, rms_norm_eps=a.rms_eps, tie_word_embeddings=True, num_labels=1,
              pad_token_id=a.pad_id, attention_bias=False, use_sliding_window=False)
    # transformers 5 takes rope_parameters; 4.x takes rope_theta (and would keep the other spelling as an unused
    # attribute, silently running with its default theta). generate() asserts the theta that took effect.
    major = int(transformers.__version__.split(".")[0])
    if major >= 5 or "rope_parameters" in inspect.signature(Qwen3Config.__init__).parameters:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": a.rope_theta}
    else:
        kw["rope_theta"] = a.rope_theta
    cfg = Qwen3Config(**kw)
    cfg.num_labels = 1
    return cfg


def config_rope_theta(cfg):
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict) and "rope_theta" in rp:
        return rp["rope_theta"]
    return getattr(cfg, "rope_theta", None)


def new_model(cfg):
    """HF's own init; eager attention so that softmax and masking are plain float32 ops."""
    model = Qwen3ForSequenceClassification._from_config(cfg, attn_implementation="eager")
    model = model.to(torch.float32)
    model.train()  # Qwen3 has no dropout (attention_dropout 0), so train() and eval() compute the same
    if model.config._attn_implementation != "eager":
        raise SystemExit("expected eager attention, got %s" % model.config._attn_implementation)
    names = [n for n, _ in model.named_parameters()]
    if list(model.state_dict().keys()) != names:
        raise SystemExit("state_dict and named_parameters differ (buffers or a tied lm_head?): %s"
                         % sorted(set(model.state_dict()) ^ set(names)))
    if any(b.endswith("bias") for b in names):
        raise SystemExit("Qwen3 has no biases, found %s" % [b for b in names if b.endswith("bias")])
    return model


def perturb(model, gen_note):
    """Unit RMSNorm weights and a zero-mean tiny score would hide mistakes in the C++ norms and head: randomise them.
    Global RNG, right after HF's init: each RMSNorm (named_modules order) := 1 + 0.1 randn, then score := 0.2 randn."""
    touched = []
    with torch.no_grad():
        for name, mod in model.named_modules():
            if type(mod).__name__.endswith("RMSNorm"):
                mod.weight.copy_(1.0 + 0.1 * torch.randn(mod.weight.shape))
                touched.append(name)
        model.score.weight.copy_(0.2 * torch.randn(model.score.weight.shape))
    gen_note.append("perturbed %d RMSNorms and score" % len(touched))
    return touched


# ---- batch ------------------------------------------------------------------------------------------------------

def make_batch(a):
    """Right-padded rows: the chosen answers first, then the rejected ones. Real ids are drawn from [1, vocab) and
    never equal the pad id (shifted past it when pad_id != 0), so HF's "rightmost non-pad token" is the last real
    token and equals pool_index."""
    lens = a.chosen + a.rejected
    T = max(lens)
    g = torch.Generator().manual_seed(a.seed + 1)
    ids = torch.randint(1, a.vocab, (len(lens), T), generator=g, dtype=torch.int64)
    if a.pad_id != 0:
        ids = torch.where(ids == a.pad_id, torch.zeros_like(ids), ids)  # 0 is then a real id, pad_id is not
    mask = (torch.arange(T)[None, :] < torch.tensor(lens)[:, None]).to(torch.int64)
    ids = torch.where(mask.bool(), ids, torch.full_like(ids, a.pad_id))
    pool = torch.tensor(lens, dtype=torch.int64) - 1
    return {"input_ids": ids, "attention_mask": mask, "pool_index": pool}


# ---- forward / loss / training ----------------------------------------------------------------------------------

def run_forward(model, batch):
    """Returns rewards [B] (score . final-norm hidden state at pool_index), the captured activations and HF's own
    pooled logits [B] (for a consistency check)."""
    ids, mask, pool = batch["input_ids"], batch["attention_mask"], batch["pool_index"]
    B, T = ids.shape
    captured = {}

    def capture(key):
        def hook(_module, _inputs, output):
            captured[key] = output[0] if isinstance(output, (tuple, list)) else output
        return hook

    handles = [layer.register_forward_hook(capture("act.layer%d.out" % i))
               for i, layer in enumerate(model.model.layers)]
    handles.append(model.model.norm.register_forward_hook(capture("act.final_norm.out")))
    try:
        pos = torch.arange(T, dtype=torch.int64)[None, :].expand(B, T)
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    hidden = captured["act.final_norm.out"]                       # [B, T, H]
    per_token = F.linear(hidden, model.score.weight)[..., 0]       # [B, T], as HF's score head computes it
    rewards = per_token.gather(1, pool[:, None])[:, 0]             # [B]
    return rewards, captured, out.logits.reshape(B)


def pairwise_loss(rewards, n_pairs):
    chosen, rejected = rewards[:n_pairs], rewards[n_pairs:]
    return -F.logsigmoid(chosen - rejected).mean()                 # = softplus(rejected - chosen), stable


def compute_reference(model, batch, a):
    named = list(model.named_parameters())
    params = [p for _, p in named]
    n_pairs = len(a.chosen)
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps, weight_decay=a.weight_decay,
                            foreach=False, fused=False)  # the single-tensor path the C++ AdamW mirrors
    out, losses, norms, checks = {}, [], [], {}
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        rewards, acts, hf_pooled = run_forward(model, batch)
        loss = pairwise_loss(rewards, n_pairs)
        loss.backward()
        if step == 0:
            out.update({k: v.detach().clone() for k, v in acts.items()})
            out["rewards"] = rewards.detach().clone()
            out["loss"] = loss.detach().reshape(1).clone()
            for name, p in named:
                if p.grad is None:
                    raise SystemExit("no gradient for %s" % name)
                out["grad." + name] = p.grad.detach().clone()
            checks["hf_pooled"] = hf_pooled.detach().clone()
        total = torch.nn.utils.clip_grad_norm_(params, a.max_norm)  # pre-clip norm; g *= min(1, max/(n+1e-6))
        losses.append(float(loss.detach()))
        norms.append(float(total))
        opt.step()
    out["train.losses"] = torch.tensor(losses, dtype=torch.float32)
    out["train.grad_norms"] = torch.tensor(norms, dtype=torch.float32)
    for name, p in named:
        out["final." + name] = p.detach().clone()
    return out, checks


# ---- self-checks ------------------------------------------------------------------------------------------------

def self_checks(cfg, a, init, batch, res, checks):
    ids, mask, pool = batch["input_ids"], batch["attention_mask"], batch["pool_index"]
    # HF pools the rightmost token whose id != pad_token_id: that must be pool_index.
    T = ids.shape[1]
    hf_index = (torch.arange(T)[None, :] * (ids != a.pad_id).to(torch.int64)).argmax(-1)
    assert torch.equal(hf_index, pool), (hf_index, pool)
    assert torch.allclose(checks["hf_pooled"], res["rewards"], rtol=1e-6, atol=1e-6), (checks["hf_pooled"],
                                                                                      res["rewards"])
    # Real positions do not depend on the pads: each row alone, unpadded, gives the same final hidden states.
    model = new_model(cfg)
    model.load_state_dict(init, strict=True)
    worst = 0.0
    with torch.no_grad():
        for b in range(ids.shape[0]):
            L = int(pool[b]) + 1
            h = model.model(input_ids=ids[b:b + 1, :L], position_ids=torch.arange(L)[None],
                            use_cache=False).last_hidden_state[0]
            worst = max(worst, (h - res["act.final_norm.out"][b, :L]).abs().max().item())
    assert worst < 1e-5, worst
    # The embedding gradient lives only on ids seen at real positions; the pad row stays exactly zero.
    g = res["grad.model.embed_tokens.weight"]
    used = torch.unique(ids[mask.bool()])
    nonzero = (g.abs().sum(1) != 0).nonzero()[:, 0]
    assert torch.equal(nonzero, used), (nonzero, used)
    assert (init["model.embed_tokens.weight"][a.pad_id] == 0).all()
    return {"unpadded_max_abs_diff": worst, "distinct_real_ids": int(used.numel())}


# ---- files ------------------------------------------------------------------------------------------------------

def write_config(model, outdir):
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json")) as f:
            cfg = json.load(f)
    cfg["num_labels"] = 1
    with open(os.path.join(outdir, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def library_versions():
    return "torch %s; transformers %s; safetensors %s; python %s" % (
        torch.__version__, transformers.__version__, safetensors.__version__, sys.version.split()[0])


def generate(a):
    os.makedirs(a.outdir, exist_ok=True)
    torch.manual_seed(a.seed)
    cfg = qwen3_config(a)
    assert config_rope_theta(cfg) == a.rope_theta, config_rope_theta(cfg)
    model = new_model(cfg)
    notes = []
    perturb(model, notes)
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    batch = make_batch(a)
    res, checks = compute_reference(model, batch, a)
    info = self_checks(cfg, a, init, batch, res, checks)

    tensors = {}
    tensors.update(init)
    tensors.update(batch)
    tensors.update(res)
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    # A single metadata key: safetensors may order several keys differently from run to run.
    meta = {"generator": "model/reference/make_qwen3_rm_fixture.py; %s; cpu, 1 thread; seed %d; %s"
                         % (library_versions(), a.seed, "; ".join(notes))}
    path = os.path.join(a.outdir, FIXTURE_NAME)
    safetensors.torch.save_file(tensors, path, metadata=meta)
    write_config(model, a.outdir)

    print("wrote %s (%d tensors, %d parameters)" % (path, len(tensors), sum(v.numel() for v in init.values())))
    print("rewards          ", [round(float(x), 8) for x in res["rewards"]])
    print("loss             ", float(res["loss"][0]))
    print("train.losses     ", [float(x) for x in res["train.losses"]])
    print("train.grad_norms ", [float(x) for x in res["train.grad_norms"]])
    print("clipping active  ", [bool(x > a.max_norm) for x in res["train.grad_norms"]])
    print("checks           ", json.dumps(info))


def verify(a):
    """Recompute every derived tensor from the stored weights, batch and config.json; require bitwise equality."""
    path = os.path.join(a.outdir, FIXTURE_NAME)
    stored = safetensors.torch.load_file(path)
    cfg = Qwen3Config.from_pretrained(a.outdir)
    cfg.num_labels = 1
    model = new_model(cfg)
    names = [n for n, _ in model.named_parameters()]
    model.load_state_dict({n: stored[n] for n in names}, strict=True)
    batch = {k: stored[k] for k in BATCH_KEYS}
    # The run's shape comes from the stored batch, not from the command line.
    n_pairs = stored["input_ids"].shape[0] // 2
    lens = (stored["pool_index"] + 1).tolist()
    a.chosen, a.rejected = lens[:n_pairs], lens[n_pairs:]
    a.steps = stored["train.losses"].numel()
    res, _ = compute_reference(model, batch, a)
    expected = set(names) | set(BATCH_KEYS) | set(res)
    if set(stored) != expected:
        raise SystemExit("tensor names differ: %s" % sorted(set(stored) ^ expected))
    bad = [k for k, v in res.items() if not torch.equal(v, stored[k])]
    if bad:
        raise SystemExit("not bitwise equal after recomputation: %s" % bad)
    print("verify: %d recomputed tensors bitwise equal" % len(res))


def compare(a):
    """Same tensor names and values within atol + rtol*|ref| (different CPUs or versions move the last bits)."""
    mine = safetensors.torch.load_file(os.path.join(a.outdir, FIXTURE_NAME))
    other = safetensors.torch.load_file(a.compare)
    if set(mine) != set(other):
        raise SystemExit("tensor names differ: %s" % sorted(set(mine) ^ set(other)))
    worst = ("", 0.0)
    for k in sorted(mine):
        x, y = mine[k], other[k]
        if x.shape != y.shape or x.dtype != y.dtype:
            raise SystemExit("%s: %s %s vs %s %s" % (k, x.dtype, tuple(x.shape), y.dtype, tuple(y.shape)))
        if not x.is_floating_point():
            if not torch.equal(x, y):
                raise SystemExit("%s differs" % k)
            continue
        scale = y.abs().max().item() or 1.0
        err = ((x - y).abs().max().item()) / scale
        if err > worst[1]:
            worst = (k, err)
    print("compare: same %d tensors; worst max|diff|/max|ref| %.3g in %s" % (len(mine), worst[1], worst[0]))
    if worst[1] > 1e-4:
        raise SystemExit("fixtures differ by more than 1e-4 relative")


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(1)  # one fixed reduction order in the CPU kernels
    torch.use_deterministic_algorithms(True, warn_only=True)
    if not a.verify_only:
        generate(a)
    verify(a)
    if a.compare:
        compare(a)


if __name__ == "__main__":
    main(sys.argv[1:])
