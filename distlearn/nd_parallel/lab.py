"""A small transformer trained for a few steps with parallelisms composed on one ``DeviceMesh`` (gloo on CPU, NCCL
with one GPU per rank under torchrun), against the same training in one process.

The mesh is ``init_device_mesh(device, (pp, dp, cp, tp), mesh_dim_names=("pp", "dp", "cp", "tp"))``. On it:

- **tp** — DTensor tensor parallelism with sequence parallelism (``parallelize_module``, torchtitan's plan): the
  embedding row-wise (its output sharded along the sequence), in every block the RMSNorms ``SequenceParallel``,
  the attention and MLP inputs all-gathered (``PrepareModuleInput``), q / k / v and gate / up column-wise, o and
  down row-wise with a reduce-scatter back to sequence shards; the final norm ``SequenceParallel`` and the LM head
  column-wise with replicated logits. Each rank runs ``num_heads / tp`` heads.
- **cp** — context parallelism with an all-gather of K and V (every rank keeps the queries of its own contiguous
  sequence chunk and attends to the gathered keys with the causal mask shifted by its offset; the gather's
  backward reduce-scatters, returning each rank the gradient of its own K / V chunk).
- **pp** — ``torch.distributed.pipelining``: the blocks split over ``pp`` stages (embedding on the first, final
  norm and LM head on the last), ``Schedule1F1B`` with ``num_microbatches`` micro-batches; without pp the
  micro-batches are accumulated.
- **dp** — FSDP2 ``fully_shard`` on every block and on the stage, over the ``dp`` mesh dimension, or over
  ``dp × cp`` flattened when cp > 1 (context-parallel ranks hold the same weights and must average their gradients
  too). ``zero_stage=2`` keeps the parameters gathered between forward and backward
  (``reshard_after_forward=False``); ``zero_stage=0`` all-reduces the gradients by hand.

Every rank builds the same model from the same seed (fp32), each data-parallel replica gets its own rows of the
global batch, each context-parallel rank its chunk of the sequence. After ``steps`` Adam steps each rank returns
its losses, the full parameters it holds (``full_tensor()``), and what it measured: the bytes of its parameter,
gradient and Adam-state shards (the real local tensors) and the peak bytes of activations autograd kept for
backward during the last step (every saved tensor counted once per storage, parameters excluded, freed when
autograd releases it — :class:`SavedActivationMeter`).

Run alone: ``torchrun --nproc-per-node 8 -m distlearn.nd_parallel.lab`` (dp 2 × tp 2 × pp 2).
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from distlearn.core.launch import device, torchrun_main
from distlearn.core.models import ModelConfig
from distlearn.nd_parallel.simulation import DIMS, TOY_MODEL, Layout, stage_layers
from distlearn.core.guard import read_only

LR = 1e-2


# ---------------------------------------------------------------------------------------------- data and reference
def make_tokens(global_batch: int, seq_len: int, steps: int, vocab_size: int, seed: int = 1) -> torch.Tensor:
    """Random token ids of shape (steps, global_batch, seq_len + 1): inputs are [:, :, :-1], targets [:, :, 1:]."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (steps, global_batch, seq_len + 1), generator=g)


DTYPES = read_only({"float32": torch.float32, "float64": torch.float64})


def build(config: ModelConfig = TOY_MODEL, seed: int = 0, dtype: str = "float32"):
    """The course's :class:`~distlearn.core.transformer.TransformerLM` from ``seed``, in ``dtype``."""
    from distlearn.core.models import build_model

    torch.manual_seed(seed)
    return build_model(config, device="cpu").to(DTYPES[dtype])


def reference_run(config: ModelConfig, global_batch: int, seq_len: int, steps: int, seed: int = 0,
                  dtype: str = "float32") -> dict:
    """The same training in one process: full batch, mean cross-entropy over all tokens, Adam. Returns
    ``{"losses": [...], "params": {name: tensor}}``."""
    model = build(config, seed, dtype)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    tokens = make_tokens(global_batch, seq_len, steps, config.vocab_size)
    losses = []
    for step in range(steps):
        x, y = tokens[step, :, :-1], tokens[step, :, 1:]
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    return {"losses": losses, "params": {n: p.detach().clone() for n, p in model.named_parameters()}}


# ---------------------------------------------------------------------------------------------- the stage module
class Stage(nn.Module):
    """One pipeline stage of a :class:`~distlearn.core.transformer.TransformerLM`, keeping the model's own submodules
    and parameter names (``embed.weight``, ``blocks.2.attn.q.weight``, ``norm.weight``, ``lm_head.weight``)."""

    def __init__(self, model, first: int, last: int, is_first: bool, is_last: bool):
        super().__init__()
        self.embed = model.embed if is_first else None
        self.blocks = nn.ModuleDict({str(i): model.blocks[i] for i in range(first, last)})
        self.norm = model.norm if is_last else None
        self.lm_head = model.lm_head if is_last else None

    def forward(self, x):
        if self.embed is not None:
            x = self.embed(x)
        for block in self.blocks.values():
            x = block(x)
        if self.lm_head is not None:
            x = self.lm_head(self.norm(x))
        return x


class _GatherSequence(torch.autograd.Function):
    """All-gather along dim 2 (the sequence of a (b, heads, s, d) tensor) over ``group``; the backward
    reduce-scatters the gradient: each rank gets the sum, over all ranks' queries, of the gradient of its own
    keys / values."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        n = dist.get_world_size(group)
        parts = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=2)

    @staticmethod
    def backward(ctx, grad):
        n = dist.get_world_size(ctx.group)
        parts = [g.contiguous() for g in grad.chunk(n, dim=2)]
        out = torch.empty_like(parts[0])
        dist.reduce_scatter(out, parts, group=ctx.group)
        return out, None


def context_parallel_attention(a, x, group, cp_rank: int, cp: int):
    """Forward of the course's :class:`~distlearn.core.transformer.Attention` ``a`` on a sequence split in ``cp``
    contiguous chunks: the local queries attend to the K and V of all chunks, gathered over ``group``
    (:class:`_GatherSequence`); query i of chunk c sits at global position c·s_local + i and sees the keys at
    positions ≤ it. Installed as ``a.forward`` (the module and its parameter names stay the same)."""
    b, s, _ = x.shape
    q = a.q(x).view(b, s, a.n_heads, a.head_dim).transpose(1, 2)
    k = a.k(x).view(b, s, a.n_kv, a.head_dim).transpose(1, 2)
    v = a.v(x).view(b, s, a.n_kv, a.head_dim).transpose(1, 2)
    k = _GatherSequence.apply(k, group)   # (b, kv heads, s·cp, d)
    v = _GatherSequence.apply(v, group)
    rep = a.n_heads // a.n_kv
    if rep > 1:
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    qpos = cp_rank * s + torch.arange(s, device=x.device)
    mask = qpos[:, None] >= torch.arange(s * cp, device=x.device)[None, :]
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return a.o(y.transpose(1, 2).reshape(b, s, -1))


def _tensor_parallel(stage: Stage, tp_mesh, tp: int, sequence_parallel: bool) -> None:
    """torchtitan's plan (module docstring), in place; heads per rank divided by tp."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)

    seq = Shard(1) if sequence_parallel else Replicate()
    top = {}
    if stage.embed is not None:
        top["embed"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=seq)
    if stage.lm_head is not None:
        top["norm"] = SequenceParallel() if sequence_parallel else None
        top["lm_head"] = ColwiseParallel(input_layouts=seq, output_layouts=Replicate())
    parallelize_module(stage, tp_mesh, {k: v for k, v in top.items() if v is not None})
    for block in stage.blocks.values():
        plan = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
                "attn.o": RowwiseParallel(output_layouts=seq), "mlp.gate": ColwiseParallel(),
                "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel(output_layouts=seq)}
        if sequence_parallel:
            plan.update({"norm1": SequenceParallel(), "norm2": SequenceParallel(),
                         "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
                         "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))})
        parallelize_module(block, tp_mesh, plan)
        block.attn.n_heads //= tp
        block.attn.n_kv //= tp


# ---------------------------------------------------------------------------------------------- measurement
class SavedActivationMeter:
    """Live bytes of the tensors autograd saves for backward, and their peak, under
    ``torch.autograd.graph.saved_tensors_hooks``: each distinct storage counts once while any saved reference to it
    is alive (a reference dies when autograd frees the graph after the backward), parameters are left out.
    DTensors count their local shard."""

    def __init__(self, module: nn.Module):
        self.module, self.live, self.current, self.peak = module, {}, 0, 0
        self.at_peak: list[tuple[int, tuple]] = []   # (bytes, shape) of every storage alive at the peak

    def _param_storages(self):
        out = set()
        for p in self.module.parameters():
            ptr = _storage_ptr(_plain(p), freed_ok=True)
            if ptr is not None:
                out.add(ptr)
        return out

    def pack(self, t):
        local = _plain(t)
        ptr = _storage_ptr(local)
        if ptr is None:
            return t
        if ptr in self._param_storages():
            return t
        return _Held(self, t, ptr, local.untyped_storage().nbytes(), tuple(local.shape))

    @staticmethod
    def unpack(h):
        return h.tensor if isinstance(h, _Held) else h

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


def _plain(t):
    """The plain tensor holding ``t``'s data: a DTensor's local shard, an ``AsyncCollectiveTensor``'s (the result
    of a functional collective, which DTensor's redistribute returns) wrapped tensor."""
    while True:
        if hasattr(t, "_local_tensor"):
            t = t._local_tensor
        elif type(t).__name__ == "AsyncCollectiveTensor":
            t = t.elem
        else:
            return t


def _storage_ptr(t, freed_ok: bool = False):
    """The data pointer of ``t``'s storage, or None for meta tensors and empty storages. ``freed_ok``: also None
    for a storage FSDP2 has freed (its gathered parameters between uses), which torch reports as invalid."""
    if t.device.type == "meta":
        return None
    try:
        storage = t.untyped_storage()
    except RuntimeError:
        if freed_ok:
            return None
        raise
    return storage.data_ptr() if storage.nbytes() else None


class _Held:
    def __init__(self, meter, tensor, ptr, nbytes, shape):
        self.meter, self.tensor, self.ptr = meter, tensor, ptr
        count, size, first_shape = meter.live.get(ptr, (0, nbytes, shape))
        meter.live[ptr] = (count + 1, size, first_shape)
        if count == 0:
            meter.current += size
            if meter.current > meter.peak:
                meter.peak = meter.current
                meter.at_peak = sorted((n, sh) for _, n, sh in meter.live.values())

    def __del__(self):
        count, size, shape = self.meter.live[self.ptr]
        if count == 1:
            del self.meter.live[self.ptr]
            self.meter.current -= size
        else:
            self.meter.live[self.ptr] = (count - 1, size, shape)


class CollectiveCounter(TorchDispatchMode):
    """Counts the collectives a rank issues, by operator: DTensor's functional collectives
    (``_c10d_functional.all_gather_into_tensor``, ``reduce_scatter_tensor``, ``all_reduce``: tensor parallelism),
    FSDP2's ``c10d._allgather_base_`` / ``c10d._reduce_scatter_base_`` (data parallelism), ``c10d.allgather_`` /
    ``c10d.reduce_scatter_`` (the context-parallel K/V gather) and the pipeline's ``c10d.send`` / ``c10d.recv_``.
    (``CommDebugMode`` counts the same, but its module tracker fails under pipelining's interleaved
    forwards and backwards.)"""

    NAMESPACES = ("c10d", "_c10d_functional", "c10d_functional")

    def __init__(self):
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace in self.NAMESPACES and not func.__name__.startswith("wait"):
            name = f"{func.namespace.lstrip('_')}.{func._opname}"
            self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def _local_bytes(t) -> int:
    t = t.to_local() if hasattr(t, "to_local") else t
    return t.numel() * t.element_size()


def _state_bytes(stage: nn.Module, opt) -> dict[str, int]:
    params = list(stage.parameters())
    out = {"params": sum(_local_bytes(p) for p in params),
           "grads": sum(_local_bytes(p.grad) for p in params if p.grad is not None), "optimizer": 0}
    for p in params:
        for value in opt.state.get(p, {}).values():
            if torch.is_tensor(value) and value.shape == p.shape:   # exp_avg, exp_avg_sq (not the step count)
                out["optimizer"] += _local_bytes(value)
    return out


# ---------------------------------------------------------------------------------------------- the mesh
def mesh_groups(rank: int, world_size: int, shape: tuple) -> dict:
    """The groups torch's ``DeviceMesh`` gives this rank: ``init_device_mesh(device, shape, mesh_dim_names=("pp",
    "dp", "cp", "tp"))``, then for each dimension the global ranks of ``mesh[dim]``'s process group
    (``dist.get_process_group_ranks``). Returns ``{"coords": {...}, "groups": {dim: [ranks]}}``."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device().type, tuple(shape), mesh_dim_names=DIMS)
    return {"coords": {d: mesh.get_local_rank(d) for d in DIMS},
            "groups": {d: dist.get_process_group_ranks(mesh[d].get_group()) for d in DIMS}}


# ---------------------------------------------------------------------------------------------- the run
def nd_train(rank: int, world_size: int, layout: dict, steps: int = 3, seq_len: int = 16,
             config: ModelConfig = TOY_MODEL, dtype: str = "float32") -> dict:
    """Train ``steps`` steps with ``layout`` (a :meth:`Layout.as_dict`) in ``dtype`` ("float32" or "float64",
    the dtype of parameters, gradients, Adam states and activations); returns this rank's ``coords`` and
    ``groups`` (global ranks of each mesh dimension's process group, from the ``DeviceMesh``), ``stage``, ``losses`` (mean over its micro-batches, where the last stage is, else None), ``memory`` (bytes:
    params, grads, optimizer, activations = peak saved during the last step), ``params`` (full tensors, only on
    ranks with dp = cp = tp = 0), ``collectives`` (:class:`CollectiveCounter` over the last step's forward and
    backward)."""
    import logging

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import warnings

    # DTensor warns that gathering an FSDP + TP parameter takes two all-gathers: true, and not what we study here
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)
    # FSDP2 warns when a module returns a view (an in-place op on it would skip a hook); no stage does one
    warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor")
    lay = Layout(**layout)
    if lay.world_size != world_size:
        raise ValueError(f"layout {lay.describe()} needs {lay.world_size} ranks, got {world_size}")
    dev = device()
    mesh = init_device_mesh(dev.type, lay.shape, mesh_dim_names=DIMS)
    c = {d: mesh.get_local_rank(d) for d in DIMS}
    s_local = seq_len // lay.cp
    first, last = stage_layers(config.num_layers, lay.pp, c["pp"])
    is_first, is_last = c["pp"] == 0, c["pp"] == lay.pp - 1
    stage = Stage(build(config, 0, dtype), first, last, is_first, is_last).to(dev)   # one GPU per rank under NCCL
    if lay.tp > 1:
        _tensor_parallel(stage, mesh["tp"], lay.tp, lay.sequence_parallel)
    if lay.cp > 1:
        import functools

        for block in stage.blocks.values():
            block.attn.forward = functools.partial(context_parallel_attention, block.attn,
                                                   group=mesh["cp"].get_group(), cp_rank=c["cp"], cp=lay.cp)
    shard_mesh = mesh["dp", "cp"]._flatten("dp_cp") if lay.cp > 1 else mesh["dp"]
    if lay.zero_stage in (2, 3) and shard_mesh.size() > 1:
        reshard = lay.zero_stage == 3
        for block in stage.blocks.values():
            fully_shard(block, mesh=shard_mesh, reshard_after_forward=reshard)
        fully_shard(stage, mesh=shard_mesh, reshard_after_forward=reshard)
    opt = torch.optim.Adam(stage.parameters(), lr=LR)

    tokens = make_tokens(lay.global_batch, seq_len, steps, config.vocab_size)
    rows = lay.micro_batch_size * lay.num_microbatches
    meter = SavedActivationMeter(stage)
    schedule = None
    if lay.pp > 1:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B

        pstage = PipelineStage(stage, c["pp"], lay.pp, dev, group=mesh["pp"].get_group())
        schedule = Schedule1F1B(pstage, lay.num_microbatches, loss_fn=_loss)
    losses = []
    for step in range(steps):
        batch = tokens[step, c["dp"] * rows:(c["dp"] + 1) * rows]
        # own copies: saved token ids then hold this replica's (b·m, s_local) tokens, not the whole tensor
        x = batch[:, :-1][:, c["cp"] * s_local:(c["cp"] + 1) * s_local].clone().to(dev)
        y = batch[:, 1:][:, c["cp"] * s_local:(c["cp"] + 1) * s_local].clone().to(dev)
        measure = step == steps - 1
        with CollectiveCounter() if measure else _null() as comm:
            with meter.hooks() if measure else _null():
                mb_losses = _step(stage, schedule, x, y, lay, is_first, is_last)
            if lay.zero_stage == 0:
                _all_reduce_grads(stage, shard_mesh)
        if measure:
            collectives = dict(comm.counts)
        if measure:
            opt.step()
            memory = _state_bytes(stage, opt)
            memory["activations"] = meter.peak
            memory["at_peak"] = meter.at_peak
        else:
            opt.step()
        opt.zero_grad()
        losses.append(sum(mb_losses) / len(mb_losses) if mb_losses else None)
    params = None
    full = {n: p.full_tensor() if hasattr(p, "full_tensor") else p.detach() for n, p in stage.named_parameters()}
    if c["dp"] == c["cp"] == c["tp"] == 0:
        params = {n: t.detach().cpu().clone() for n, t in full.items()}
    mesh_groups_ = {d: dist.get_process_group_ranks(mesh[d].get_group()) for d in DIMS}
    return {"rank": rank, "coords": c, "groups": mesh_groups_, "stage": c["pp"], "layers": (first, last), "losses": losses,
            "memory": memory, "params": params, "collectives": collectives}


def nd_train_many(rank: int, world_size: int, layouts: list[dict], steps: int = 3, seq_len: int = 16,
                  config: ModelConfig = TOY_MODEL, dtype: str = "float32") -> list[dict]:
    """:func:`nd_train` for each layout of ``layouts`` in turn, in one launch (each builds its own mesh and model;
    one set of processes instead of one per layout: the processes' start-up dominates at this size)."""
    out = []
    for layout in layouts:
        out.append(nd_train(rank, world_size, layout, steps, seq_len, config, dtype))
        dist.barrier()
    return out


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _loss(logits, target):
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def _step(stage, schedule, x, y, lay: Layout, is_first: bool, is_last: bool) -> list[float]:
    """One step's forward and backward over the micro-batches; returns the micro-batch losses (last stage)."""
    if schedule is not None:
        losses: list = []
        if is_first:
            schedule.step(x)
        elif is_last:
            schedule.step(target=y, losses=losses)
        else:
            schedule.step()
        return [float(l.detach()) for l in losses]
    out = []
    for xm, ym in zip(x.chunk(lay.num_microbatches), y.chunk(lay.num_microbatches)):
        loss = _loss(stage(xm), ym)
        (loss / lay.num_microbatches).backward()
        out.append(float(loss.detach()))
    return out


def _all_reduce_grads(stage, shard_mesh) -> None:
    """ZeRO-0: average every gradient's local tensor over the data-parallel (and context-parallel) ranks."""
    if shard_mesh.size() == 1:
        return
    group = shard_mesh.get_group()
    for p in stage.parameters():
        if p.grad is not None:
            g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
            dist.all_reduce(g, group=group)
            g /= shard_mesh.size()


def summarize(results: list[dict], layout: dict, reference: dict) -> dict:
    """Compare a run with :func:`reference_run`: ``losses`` per step (the mean over data- and context-parallel
    ranks of the last stage), ``loss_diff`` (largest |Δ| per step), ``param_diff`` (largest |Δ| over every
    parameter after the last step), ``memory`` per rank."""
    lay = Layout(**layout)
    last = [r for r in results if r["stage"] == lay.pp - 1 and r["coords"]["tp"] == 0]
    steps = len(reference["losses"])
    losses = [sum(r["losses"][i] for r in last) / len(last) for i in range(steps)]
    params = {}
    for r in results:
        if r["params"]:
            params.update(r["params"])
    missing = set(reference["params"]) - set(params)
    if missing:
        raise AssertionError(f"parameters missing from the run: {sorted(missing)}")
    param_diff = max(float((params[n] - p).abs().max()) for n, p in reference["params"].items())
    return {"losses": losses, "ref_losses": reference["losses"],
            "loss_diff": max(abs(a - b) for a, b in zip(losses, reference["losses"])), "param_diff": param_diff,
            "memory": [r["memory"] for r in results], "coords": [r["coords"] for r in results]}


def memory_table(results: list[dict], layout: dict, config: ModelConfig = TOY_MODEL, seq_len: int = 16,
                 activation_bytes: int = 4) -> list[dict]:
    """Measured against predicted bytes per rank: for each rank ``{"rank", "coords", "measured": {params, grads,
    optimizer, activations}, "predicted": the same from :func:`distlearn.nd_parallel.simulation.predict_rank_memory`}``."""
    from distlearn.nd_parallel.simulation import predict_rank_memory

    lay = Layout(**layout)
    keys = ("params", "grads", "optimizer", "activations")
    rows = []
    for r in results:
        pred = predict_rank_memory(config, lay, r["rank"], seq_len=seq_len, activation_bytes=activation_bytes)
        rows.append({"rank": r["rank"], "coords": r["coords"], "measured": {k: r["memory"][k] for k in keys},
                     "predicted": {k: getattr(pred, k) for k in keys}})
    return rows


def torchrun_layout(world_size: int) -> Layout:
    """The layout ``torchrun`` runs on ``world_size`` ranks: tp = 2 when world_size is even, pp = 2 when 4 divides
    it, dp the rest (8 ranks: dp 2 × tp 2 × pp 2; 4: tp 2 × pp 2; 2: tp 2; an odd count: dp only)."""
    tp = 2 if world_size % 2 == 0 else 1
    pp = 2 if world_size % 4 == 0 else 1
    return Layout(pp=pp, dp=world_size // (tp * pp), tp=tp, micro_batch_size=1, num_microbatches=2)


def main(rank: int, world_size: int) -> str:
    """torchrun entry: :func:`torchrun_layout` of the world size (dp 2 × tp 2 × pp 2 on 8 ranks)."""
    layout = torchrun_layout(world_size).as_dict()
    r = nd_train(rank, world_size, layout)
    return f"rank {rank} {r['coords']}: losses {r['losses']}, memory {r['memory']}"


if __name__ == "__main__":
    torchrun_main(main)
