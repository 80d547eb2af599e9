"""ZeRO stages 0-3 for an unmodified torch model, on the zero engine (CPU backend, MPI).

    model = MyModel()                                   # the same initial weights on every rank
    zm = zero_torch.ZeroModel(model, groups=[model.fc1, model.norm, model.fc2], stage=3, lr=1e-3)
    for x, y in my_shard_of_each_global_batch():
        zm.begin_micro_step()
        loss = loss_fn(model(x), y, reduction="sum")    # the SUM over this rank's samples
        loss.backward()
        zm.step(divisor=global_batch_size)              # mean, clip, AdamW on this rank's shard

Launch with mpirun (one process per rank). Each group (a module) becomes one engine group. Its
parameters leave the module: between uses the module holds no parameter memory at all, the engine holds
this rank's shard of the optimizer state (and, at stage 3, of the parameters). Before the module's
forward the engine gathers the group into fresh torch storage; after it the storage is freed (resized to
0, as FSDP does), and gathered again just before the module's backward (a hook on its outputs), since
autograd kept references to that storage. The gradients of the group arrive together in the backward of
one autograd function that produced the parameters, go to the engine and the storage is freed again.
Works with torch 1.13 (no backward pre-hooks or post-accumulate-grad hooks needed) and later.

On the GPU (backend="cuda", the default for a module whose parameters are on a CUDA device; needs the
_engine_cuda module, built where the CUDA backend is): the engine's buffers, its AdamW and its collectives
(NCCL) are on this rank's device, which it picks by node-local rank, as pmtrain does: put the module on
that device (zm.device, or torch.cuda.set_device(local_rank) before building the module). Parameters and
gradients move device to device; torch's current stream and the engine's streams are ordered by events,
with no host wait. Build the module, and run every step, on one torch stream.
"""
import importlib
import json
import os
import sys

import torch


class ZeroError(RuntimeError):
    """An error the engine reports (bad configuration, a lost peer, ...), from either compiled module."""


_modules = {}  # backend -> compiled module, loaded when a model first asks for it


def _engine_module(backend):
    """The compiled engine for `backend`: _engine (cpu) or _engine_cuda (cuda)."""
    if backend not in ("cpu", "cuda"):
        raise ValueError(f"zero_torch: backend {backend!r}: expected 'cpu' or 'cuda'")
    if backend not in _modules:
        if _modules:  # both carry the engine's libraries, whose symbols would bind across them (RTLD_GLOBAL)
            raise ValueError(f"zero_torch: backend {backend} in a process that runs backend {next(iter(_modules))}: "
                             f"one backend a process")
        name = "_engine" if backend == "cpu" else "_engine_cuda"
        flags = sys.getdlopenflags()
        sys.setdlopenflags(flags | os.RTLD_GLOBAL)  # Open MPI's plugins need libmpi's symbols global
        try:
            _modules[backend] = importlib.import_module(f".{name}", __name__)
        except ImportError as e:
            raise ImportError(f"zero_torch: backend {backend} needs the module {name}, which this build lacks "
                              f"(it is built where the {backend.upper()} backend is): {e}") from e
        finally:
            sys.setdlopenflags(flags)
    return _modules[backend]



def _free(t):
    t.storage().resize_(0)


def _alloc(t, numel):
    if t.storage().size() != numel:
        t.storage().resize_(numel)


class _GroupParams(torch.autograd.Function):
    """Produces a group's parameters (forward) and hands their gradients to the engine (backward)."""

    @staticmethod
    def forward(ctx, group, anchor):
        ctx.group = group
        return tuple(group.materialize())

    @staticmethod
    def backward(ctx, *grads):
        ctx.group.hand_in_gradients(grads)
        return None, None


class _Group:
    def __init__(self, zm, index, module, names, prefix):
        self.zm, self.index, self.module, self.names = zm, index, module, names
        # The parameters' qualified names in the wrapped module (its state_dict's keys).
        self.qualified = [f"{prefix}.{n}" if prefix else n for n in names]
        self.shapes = [tuple(getattr(module, n).shape) for n in names]
        self.numels = [int(torch.Size(s).numel()) for s in self.shapes]
        self.tensors = []          # this micro-step's parameter tensors (outputs of _GroupParams)
        self.gathered = False
        self.anchor = torch.zeros(1, requires_grad=True)  # makes autograd run _GroupParams.backward

    # Fresh torch storage filled from the engine's gathered views (then the engine's slot is released).
    def materialize(self):
        out = [torch.empty(s, dtype=self.zm.param_dtype, device=self.zm.device) for s in self.shapes]
        self.zm.engine.gather_into(self.index, [t.data_ptr() for t in out], self.zm._engine_dtype, self.zm._stream())
        self.gathered = True
        return out

    def regather(self):
        if self.gathered:
            return
        self.zm._enter_backward()
        for t, n in zip(self.tensors, self.numels):
            _alloc(t, n)
        # Written by the engine at the storage's address: the storage autograd saved gets its values back
        # without bumping the saved tensor's version counter.
        self.zm.engine.gather_into(self.index, [t.data_ptr() for t in self.tensors], self.zm._engine_dtype,
                                   self.zm._stream())
        self.gathered = True

    def free(self):
        for t in self.tensors:
            _free(t)
        self.gathered = False

    def hand_in_gradients(self, grads):
        self.zm._enter_backward()
        # In the parameters' dtype and contiguous, kept alive until the engine has read them (the stream order
        # covers a device).
        grads = [None if g is None else g.detach().to(self.zm.param_dtype).contiguous() for g in grads]
        self.zm.engine.grads_from(self.index, [0 if g is None else g.data_ptr() for g in grads], self.zm._engine_dtype,
                                  self.zm._stream())
        self.free()
        self.tensors = []


def _engine_dtype(engine_module, dtype, what="param_dtype"):
    """The compiled module's DType for a torch dtype the engine keeps parameters in (or reduces in: `what`)."""
    dtypes = {torch.float32: engine_module.DType.F32, torch.bfloat16: engine_module.DType.BF16}
    if dtype not in dtypes:
        raise ValueError(f"zero_torch: {what} {dtype}: expected torch.float32 or torch.bfloat16")
    return dtypes[dtype]


def _group_specs(module, groups, no_decay):
    """The engine's groups for `module`: (the group modules, each one's parameter names, the engine's specs
    [(group name, [(tensor name, numel, weight decay), ...])]); every parameter in exactly one group."""
    if groups is None:
        groups = [m for m in module.modules() if any(True for _ in m.parameters(recurse=False))]
    seen = set()
    names, specs = [], []
    for gi, m in enumerate(groups):
        own = [n for n, _ in m.named_parameters(recurse=False)]
        if not own:
            raise ValueError(f"zero_torch: group {gi} ({type(m).__name__}) owns no parameters")
        for n in own:
            p = getattr(m, n)
            if id(p) in seen:
                raise ValueError(f"zero_torch: parameter {n} of {type(m).__name__} is in two groups")
            seen.add(id(p))
        names.append(own)
        specs.append((f"group{gi}.{type(m).__name__}", [(n, getattr(m, n).numel(), n not in no_decay) for n in own]))
    missing = [n for n, p in module.named_parameters() if id(p) not in seen]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ValueError(f"zero_torch: {len(missing)} parameters not in any group (a group holds the parameters its "
                         f"module owns itself, not its submodules'): {', '.join(missing[:5])}{more}")
    return list(groups), names, specs


def _shard_ranks_arg(engine_module, shard_ranks):
    """shard_ranks as the engine takes it: a count, or "node"."""
    if shard_ranks == "node":
        return engine_module.shard_ranks_node
    if isinstance(shard_ranks, str) or int(shard_ranks) < 0:
        raise ValueError(f"zero_torch: shard_ranks {shard_ranks!r}: expected a number of ranks (0 = one group of all) "
                         f"or 'node'")
    return int(shard_ranks)


def estimate_memory(module, world, stage=3, groups=None, accum_steps=1, bucket_elements=None, prefetch_depth=None,
                    param_dtype=torch.float32, backend=None, shard_ranks=0, reduce_dtype=torch.float32):
    """The bytes each rank's engine allocates when ZeroModel(module, groups, stage, ...) runs at `world` ranks,
    before any launch (no MPI; DeepSpeed's estimate_zero3_model_states_mem_needs for this engine): the engine's
    own plan (zero/buffer_plan.h; it allocates all of it when built, nothing inside a step), as a dict by category
    (params, grads, master, optim_m, optim_v, comm_buffers, gathered, other) with "total" and "host" (in host
    memory). On the GPU that is device memory. Not counted: activations, and the storage torch holds for a
    group while it is gathered for use (FSDP's unsharded parameters): the model's. backend: the compiled
    module to ask (the plan is the same for both); None = the one this process already loaded, else "cpu".
    shard_ranks: as ZeroModel's (hybrid sharding: the plan of a world of that many ranks), as a number: "node"
    is known only once launched. reduce_dtype: as ZeroModel's (its send and receive buffers)."""
    if shard_ranks == "node":
        raise ValueError("zero_torch: estimate_memory(shard_ranks='node'): a plan before any launch cannot know the "
                         "ranks of a node; give them as a number (e.g. shard_ranks=8)")
    if backend is None:
        backend = next(iter(_modules), "cpu")
    engine_module = _engine_module(backend)
    _, _, specs = _group_specs(module, groups, ())
    return engine_module.memory_plan(
        specs, int(world), int(stage), int(accum_steps),
        engine_module.default_bucket_elements if bucket_elements is None else int(bucket_elements),
        engine_module.default_prefetch_depth if prefetch_depth is None else int(prefetch_depth),
        _engine_dtype(engine_module, param_dtype), int(shard_ranks),
        _engine_dtype(engine_module, reduce_dtype, "reduce_dtype"))


class ZeroModel:
    """Wraps `module`'s parameters as engine groups, one per module in `groups` (default: every
    submodule that owns parameters directly). Every parameter must belong to exactly one group.
    bucket_elements and prefetch_depth default (None) to the engine's own defaults. backend: "cpu" or
    "cuda"; None = where the module's parameters are (all on one device). param_dtype: torch.float32, or
    torch.bfloat16 (the module's parameters and gradients in bf16, parameters gathered in bf16; the engine
    keeps the fp32 master, m and v, and accumulates gradients in fp32). reduce_dtype: the gradients' dtype on
    the wire (FSDP's MixedPrecision reduce_dtype, DeepSpeed's communication_data_type): torch.float32, or
    torch.bfloat16 (half the bytes, each reduction's sum rounded to bf16), for the shard group's reductions and
    hybrid sharding's all-reduce across groups alike. schedule: the learning
    rate over optimizer steps, as pmtrain's optim.schedule: "constant", "linear" or "cosine" decay from lr to
    min_lr_ratio x lr at step total_steps, after a linear warmup that reaches lr at step warmup_steps (each
    step(): its lr is in what step() returns). shard_ranks: hybrid sharding (PyTorch FSDP's HYBRID_SHARD): the
    state sharded over each group of that many consecutive ranks (a node's) and replicated across the groups,
    so only one all-reduce of each rank's gradient shard a step crosses groups; it must divide the world (0 =
    one group of all ranks); "node" = the ranks of a node as launched (every node the same count, placed in
    blocks of consecutive ranks: srun's default, mpirun --map-by slot). rank and world stay data parallelism's:
    every rank."""

    def __init__(self, module, groups=None, stage=3, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                 clip_norm=0.0, accum_steps=1, bucket_elements=None, prefetch_depth=None, no_decay=(), backend=None,
                 param_dtype=torch.float32, schedule="constant", warmup_steps=0, total_steps=None, min_lr_ratio=0.0,
                 shard_ranks=0, reduce_dtype=torch.float32):
        groups, names, specs = _group_specs(module, groups, no_decay)
        prefixes = {id(m): prefix for prefix, m in module.named_modules()}
        self.groups = [_Group(self, gi, m, n, prefixes.get(id(m), f"group{gi}"))
                       for gi, (m, n) in enumerate(zip(groups, names))]
        devices = {p.device for p in module.parameters()}
        if len(devices) != 1:
            raise ValueError(f"zero_torch: the module's parameters are on {len(devices)} devices "
                             f"({', '.join(sorted(map(str, devices)))}): put it on one")
        self.device = devices.pop()
        if backend is None:
            backend = "cuda" if self.device.type == "cuda" else "cpu"
        engine_module = _engine_module(backend)
        self.param_dtype, self._engine_dtype = param_dtype, _engine_dtype(engine_module, param_dtype)
        schedules = engine_module.Schedule.__members__
        if schedule not in schedules:
            raise ValueError(f"zero_torch: schedule {schedule!r}: expected one of {', '.join(schedules)}")
        if total_steps is None:
            if schedule != "constant":
                raise ValueError(f"zero_torch: schedule {schedule} decays over total_steps: give it")
            total_steps = max(1, warmup_steps)
        if not (0 <= warmup_steps <= total_steps and total_steps >= 1 and 0.0 <= min_lr_ratio <= 1.0):
            raise ValueError(f"zero_torch: schedule needs 0 <= warmup_steps <= total_steps, total_steps >= 1 and "
                             f"0 <= min_lr_ratio <= 1 (got {warmup_steps}, {total_steps}, {min_lr_ratio})")
        if bucket_elements is None:
            bucket_elements = engine_module.default_bucket_elements
        if prefetch_depth is None:
            prefetch_depth = engine_module.default_prefetch_depth
        self.engine = engine_module.Engine(specs, stage, accum_steps, lr, betas[0], betas[1], eps, weight_decay,
                                           clip_norm, bucket_elements, prefetch_depth, self._engine_dtype,
                                           schedules[schedule], warmup_steps, total_steps, min_lr_ratio,
                                           _shard_ranks_arg(engine_module, shard_ranks),
                                           _engine_dtype(engine_module, reduce_dtype, "reduce_dtype"))
        if self.device.type == "cuda" and self.device.index != self.engine.device:
            raise ValueError(f"zero_torch: the module is on {self.device}, but this rank's engine runs on "
                             f"cuda:{self.engine.device} (chosen by node-local rank): move the module there, or "
                             f"torch.cuda.set_device({self.engine.device}) before building it")
        if backend == "cpu" and self.device.type != "cpu":
            raise ValueError(f"zero_torch: backend cpu takes a module on the CPU, not on {self.device}")
        for g in self.groups:
            for t, n in enumerate(g.names):
                p = getattr(g.module, n)
                self.engine.set_tensor(g.index, t, p.detach().reshape(-1).float().cpu().numpy())
                # The module keeps no parameter of its own: the engine holds them.
                del g.module._parameters[n]
                setattr(g.module, n, None)
            g.module.register_forward_pre_hook(self._pre_forward(g))
            g.module.register_forward_hook(self._post_forward(g))
        self._backward_started = False

    def _stream(self):
        """The torch stream the engine's transfers are ordered against (0 on the CPU)."""
        return torch.cuda.current_stream(self.device).cuda_stream if self.device.type == "cuda" else 0

    @property
    def rank(self):
        return self.engine.rank

    @property
    def world(self):
        return self.engine.world

    def begin_micro_step(self):
        self.engine.begin_micro_step()
        self._backward_started = False

    def _enter_backward(self):
        if not self._backward_started:
            self.engine.begin_backward()
            self._backward_started = True

    def _pre_forward(self, g):
        def hook(module, inputs):
            tensors = _GroupParams.apply(g, g.anchor) if torch.is_grad_enabled() else tuple(g.materialize())
            g.tensors = list(tensors)
            for n, t in zip(g.names, g.tensors):
                setattr(module, n, t)
        return hook

    def _post_forward(self, g):
        def hook(module, inputs, output):
            training = torch.is_grad_enabled()
            for n in g.names:
                setattr(module, n, None)
            g.free()
            if not training:
                g.tensors = []
                return output
            outs = output if isinstance(output, (tuple, list)) else (output,)
            for o in outs:
                if isinstance(o, torch.Tensor) and o.requires_grad:
                    o.register_hook(lambda grad, g=g: (g.regather(), grad)[1])
            return output
        return hook

    def step(self, divisor):
        """The accumulation boundary: divides by `divisor` (samples in the global batch), clips, AdamW."""
        return self.engine.step(float(divisor))

    def save(self, run_dir, step, extra=None, keep_last=3):
        """A sharded checkpoint, pmtrain's format: <run_dir>/checkpoints/step_<step>, this rank's share of the
        master weights and AdamW state (and the step), `extra` (JSON-serialisable: a data cursor, metrics) beside
        it; published atomically, the newest keep_last kept. Collective: every rank, same arguments."""
        self.engine.save_checkpoint(str(run_dir), int(step), json.dumps(extra), int(keep_last))

    def load(self, run_dir, which="auto"):
        """Restores a checkpoint saved by save() (or by pmtrain, for the same groups): which="auto" takes the
        newest complete one of run_dir, else a step_<N> directory. Any world size and stage (resharded).
        Returns {"step", "extra", "dir", "saved_world", "saved_stage", "resharded"}, or None when "auto" finds
        none. Collective."""
        r = self.engine.load_checkpoint(str(run_dir), str(which))
        if r is not None:
            r["extra"] = json.loads(r["extra"])
        return r

    def full_parameters(self):
        """{qualified name (the wrapped module's state_dict key): full fp32 tensor on the CPU} on every rank
        (collective): the fp32 master weights, for torch.save or load_state_dict."""
        out = {}
        for g in self.groups:
            flat = torch.from_numpy(self.engine.full_master(g.index))
            at = 0
            for q, s, k in zip(g.qualified, g.shapes, g.numels):
                out[q] = flat[at:at + k].view(s).clone()
                at += k
        return out
