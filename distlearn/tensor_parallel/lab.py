"""Real tensor parallelism with DTensor: ``parallelize_module`` with ``ColwiseParallel`` / ``RowwiseParallel``.

Each rank builds the same small transformer MLP, causal self-attention block and pre-LN MLP block (same seed),
keeps an unsharded copy, shards the original over a 1-D device mesh of all ranks (the pre-LN block with sequence
parallelism: ``SequenceParallel`` LayerNorm, all-gather into fc1, reduce-scatter out of fc2), runs forward and
backward on both with the same input (which requires grad, so the f operator's backward all-reduce of ∂L/∂X runs)
and upstream gradient, and reports the largest differences. Every local gradient is checked as the engine leaves it
(``Shard`` / ``Replicate`` / ``Partial``), without a ``full_tensor()`` that would do a reduction for the check.
``CommDebugMode`` counts the collectives of forward, backward and one SGD step, where the ``Partial(sum)``
LayerNorm gradients of sequence parallelism are finally all-reduced. It also returns its local weight and gradient
shards (``to_local()``), so the notebook and the tests can compare them with the shards that
:mod:`distlearn.tensor_parallel.simulation` computes, and measures (``saved_tensors_hooks``) what autograd saves for a whole
sequence-parallel layer: PyTorch's plan keeps the all-gathered inputs of the column-parallel linears.

From a notebook: ``distlearn.core.launch.run(tp_check, 2)``. Alone (gloo on CPU, NCCL on GPUs):
``torchrun --nproc-per-node 2 -m distlearn.tensor_parallel.lab``.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from distlearn.core.launch import device, torchrun_main
from distlearn.core.guard import read_only


class MLP(nn.Module):
    """``fc2(gelu(fc1(x)))`` with the tanh GeLU, as in :func:`distlearn.tensor_parallel.simulation.reference_mlp`."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Attention(nn.Module):
    """Causal multi-head self-attention without biases on ``x (s, b, h)``. The head count is read from the
    projection's output width, so after ``ColwiseParallel`` each rank runs its own ``num_heads / tp`` heads."""

    def __init__(self, hidden: int, num_heads: int):
        super().__init__()
        self.head_dim = hidden // num_heads
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))

    def forward(self, x):
        s, b, _ = x.shape
        split = lambda t: t.view(s, b, -1, self.head_dim).permute(1, 2, 0, 3)  # (b, heads on this rank, s, d)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-1, -2) / self.head_dim ** 0.5
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device=x.device), 1)
        p = scores.masked_fill(mask, float("-inf")).softmax(-1)
        out = (p @ v).permute(2, 0, 1, 3).reshape(s, b, -1)
        return self.o(out)


class MLPBlock(nn.Module):
    """Pre-LN MLP block ``x + MLP(LayerNorm(x))`` (dropout omitted), as in
    :func:`distlearn.tensor_parallel.simulation.reference_mlp_block`."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.ln, self.mlp = nn.LayerNorm(hidden), MLP(hidden, ffn)

    def forward(self, x):
        return x + self.mlp(self.ln(x))


class SPLayer(nn.Module):
    """A pre-LN transformer layer ``x + Attention(LN1(x))``, then ``+ MLP(LN2(x))`` (no dropout), for measuring
    what autograd saves under PyTorch's sequence-parallel plan (:func:`_sp_layer_plan`)."""

    def __init__(self, hidden: int, ffn: int, num_heads: int):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(hidden), Attention(hidden, num_heads)
        self.ln2, self.mlp = nn.LayerNorm(hidden), MLP(hidden, ffn)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def _sequence_parallel_plan():
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel

    # LayerNorm on the local sequence shard; all-gather before fc1; reduce-scatter after fc2 (Korthikanti 2022)
    return {"ln": SequenceParallel(sequence_dim=0), "mlp.fc1": ColwiseParallel(input_layouts=Shard(0)),
            "mlp.fc2": RowwiseParallel(output_layouts=Shard(0))}


def _sp_layer_plan():
    """torchtitan's plan shape: the attention's input is all-gathered **once** (``PrepareModuleInput``) and shared
    by Q, K and V; the MLP's by ``ColwiseParallel(input_layouts=Shard(0))``."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)

    return {"ln1": SequenceParallel(sequence_dim=0),
            "attn": PrepareModuleInput(input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),)),
            "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
            "attn.o": RowwiseParallel(output_layouts=Shard(0)),
            "ln2": SequenceParallel(sequence_dim=0), "mlp.fc1": ColwiseParallel(input_layouts=Shard(0)),
            "mlp.fc2": RowwiseParallel(output_layouts=Shard(0))}


def _attention_input():
    """One conversion of the block input to a replicated DTensor, shared by Q, K and V: Megatron's single f
    operator. (Three ``ColwiseParallel`` linears fed a plain tensor would each convert it, and each conversion's
    backward would all-reduce its own share of ∂L/∂X: three all-reduces instead of one.)"""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import PrepareModuleInput

    return PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(Replicate(),),
                              use_local_output=False)


PLANS = read_only({
    "sp_block": _sequence_parallel_plan,
    "mlp": lambda: {"fc1": _colwise(), "fc2": _rowwise()},
    "attention": lambda: {"q": _colwise(), "k": _colwise(), "v": _colwise(), "o": _rowwise()},
})
ROOT_PLANS = read_only({"attention": _attention_input})   # applied to the block itself, before PLANS


def _colwise():
    from torch.distributed.tensor.parallel import ColwiseParallel
    return ColwiseParallel()


def _rowwise():
    from torch.distributed.tensor.parallel import RowwiseParallel
    return RowwiseParallel()


def _local(t):
    return (t.to_local() if hasattr(t, "to_local") else t).detach().cpu().double().numpy().copy()


def _storage_tensor(t):
    """The plain tensor whose storage holds ``t``'s data on this rank (unwraps DTensor and the
    AsyncCollectiveTensor an all-gather returns)."""
    from torch.distributed._functional_collectives import AsyncCollectiveTensor
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        t = t._local_tensor
    if isinstance(t, AsyncCollectiveTensor):
        t = t.elem
    return t


def saved_storages(fn, x, params) -> tuple[object, list]:
    """Run ``fn(x)`` under ``torch.autograd.graph.saved_tensors_hooks`` and list the distinct storages autograd
    saves on this rank: ``[(nbytes, shape, placement), ...]`` (``shape``: the local tensor's; ``placement``: the
    DTensor placement as a string, ``"local"`` for a plain tensor), parameters' storages excluded, each storage once
    (platform-notes: views share a storage). Works for DTensors (their local storage is counted)."""
    skip = {_storage_tensor(p).untyped_storage().data_ptr() for p in params}
    seen: dict = {}

    def pack(t):
        local = _storage_tensor(t)
        st = local.untyped_storage()
        if st.data_ptr() not in skip and st.data_ptr() not in seen:
            placement = str(tuple(t.placements)) if hasattr(t, "placements") else "local"
            seen[st.data_ptr()] = (st.nbytes(), tuple(local.shape), placement)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(x)
    return out, sorted(seen.values(), reverse=True)


def _op_name(op) -> str:
    name = str(op).split(".")[-1].rstrip("')>")
    return {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter"}.get(name, name)


def _counts(mode) -> dict:
    return {_op_name(k): v for k, v in mode.get_comm_counts().items()}


def _minus(total: dict, part: dict) -> dict:
    out = {k: v - part.get(k, 0) for k, v in total.items()}
    return {k: v for k, v in out.items() if v}


def _grad_check(p, ref_grad, world_size: int, rank: int, ref_partial=None) -> float:
    """Largest difference between this rank's local gradient and what it must hold, read from its placement:
    ``Shard(d)``: the reference's d-th chunk; ``Replicate``: the whole reference gradient; ``Partial``: this
    rank's own share ``ref_partial`` (no collective is called here — nothing is reduced for the check)."""
    g = p.grad
    placement = g.placements[0] if hasattr(g, "placements") else None
    local = _storage_tensor(g).detach().cpu()
    ref = ref_grad.detach().cpu()
    if placement is not None and placement.is_shard():
        ref = ref.chunk(world_size, dim=placement.dim)[rank]
    elif placement is not None and placement.is_partial():
        ref = ref_partial.detach().cpu()
    return float((local - ref).abs().max())


def _ln_partials(ref_block, x, grad_out, world_size: int, rank: int):
    """The reference's LayerNorm gradients from this rank's sequence positions only (what a ``Partial`` gradient
    must hold locally): the gradient at the LN output is captured in the full backward, then the LN alone is
    differentiated on this rank's positions."""
    captured = {}
    handle = ref_block.ln.register_forward_hook(lambda m, i, o: captured.setdefault("out", o).retain_grad())
    x = x.detach().requires_grad_()
    (ref_block(x) * grad_out).sum().backward()
    handle.remove()
    d_ln = captured["out"].grad.chunk(world_size, dim=0)[rank]
    mine = ref_block.ln(x.detach().chunk(world_size, dim=0)[rank])
    return torch.autograd.grad(mine, (ref_block.ln.weight, ref_block.ln.bias), d_ln)


def tp_check(rank: int, world_size: int, seq_len: int = 8, batch: int = 2, hidden: int = 16, ffn: int = 64,
             num_heads: int = 4, seed: int = 0, input_requires_grad: bool = True, lr: float = 0.1) -> dict:
    """Shard an MLP, an attention block and a sequence-parallel MLP block over all ranks with DTensor; compare
    with the unsharded copies, count the collectives PyTorch runs, and measure what autograd saves.

    Per block (``"mlp"``, ``"attention"``, ``"sp_block"``; the last with sequence parallelism, each rank feeding
    its sequence shard of ``x``):

    - ``out_err``: max |output difference| (this rank's output against the reference's, or its sequence shard);
    - ``x_grad_err``: max |input-gradient difference|: ``x`` requires grad (``input_requires_grad``), so the
      f operator's backward all-reduce of ∂L/∂X really runs and its result is compared;
    - ``grad_err``: max |weight-gradient difference|, each local gradient checked **as it is**, from its placement
      (:func:`_grad_check`): ``Shard`` against the reference's chunk, ``Replicate`` against the whole gradient,
      ``Partial`` (the LayerNorm under ``SequenceParallel``) against this rank's own share; ``grad_placements``
      (names → placement strings);
    - ``comm``: ``{phase: {op: count}}`` counted by ``torch.distributed.tensor.debug.CommDebugMode`` for
      ``"forward"``, ``"backward"`` and the optimizer ``"step"`` (an SGD step, ``lr``), comparable with
      :func:`distlearn.tensor_parallel.simulation.comm_counts` of the simulation;
    - ``step_err``: max |parameter difference| after the SGD step (local shards against the reference's), which
      fails if a ``Partial`` gradient were never reduced; for ``"sp_block"`` also ``reduced_err`` and
      ``reduce_comm``: an explicit ``redistribute(placements=[Replicate()])`` of each Partial gradient (counted)
      compared with the full reference gradient, and ``partial_vs_full``: how far the unreduced local share is
      from it (large: a check that skipped the reduction would fail);
    - ``output`` and ``x_grad``: this rank's output and input gradient (numpy; its sequence shard for
      ``"sp_block"``), compared value by value with the simulation by :func:`agreement_with_simulation`;
    - ``local`` / ``local_grads`` (this rank's ``to_local()`` weights and gradients, numpy), ``local_numel``,
      ``out_shape``, ``full`` (unsharded weights).

    ``"sp_layer"``: a whole pre-LN layer (:class:`SPLayer`) under :func:`_sp_layer_plan`: ``saved`` (this rank's
    saved storages, ``[(nbytes, shape)]``), ``saved_bytes``, ``ref_saved_bytes`` (the unsharded layer, same
    input), ``out_err``. Also ``x`` and ``grad_out`` (float64 numpy) so the simulation can use the same numbers.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import parallelize_module

    dev = device()
    mesh = init_device_mesh(dev.type, (world_size,))
    torch.manual_seed(seed)
    blocks = {"mlp": MLP(hidden, ffn), "attention": Attention(hidden, num_heads), "sp_block": MLPBlock(hidden, ffn)}
    layer = SPLayer(hidden, ffn, num_heads)
    x = torch.randn(seq_len, batch, hidden, dtype=torch.float64)
    grad_out = torch.randn(seq_len, batch, hidden, dtype=torch.float64)
    results = {}
    for name, block in blocks.items():
        block = block.double().to(dev)
        ref = copy.deepcopy(block)
        full = {k: v.detach().cpu().numpy().copy() for k, v in ref.named_parameters()}
        if name in ROOT_PLANS:
            parallelize_module(block, mesh, ROOT_PLANS[name]())
        parallelize_module(block, mesh, PLANS[name]())
        sp = name == "sp_block"
        mine = (lambda t: t.chunk(world_size, dim=0)[rank]) if sp else (lambda t: t)
        x_ref = x.to(dev).clone().requires_grad_(input_requires_grad)
        out_ref = ref(x_ref)
        (out_ref * grad_out.to(dev)).sum().backward()
        x_tp = mine(x.to(dev)).detach().clone().requires_grad_(input_requires_grad)
        mode = CommDebugMode()
        with mode:
            out_tp = block(x_tp)
            forward = _counts(mode)
            (out_tp * mine(grad_out.to(dev))).sum().backward()
        comm = {k: v for k, v in (("forward", forward), ("backward", _minus(_counts(mode), forward))) if v}
        ref_params = dict(ref.named_parameters())
        partials = dict(zip(("ln.weight", "ln.bias"), _ln_partials(copy.deepcopy(ref), x.to(dev), grad_out.to(dev), world_size,
                                                                  rank))) if sp else {}
        grad_err = max(_grad_check(p, ref_params[k].grad, world_size, rank, partials.get(k))
                       for k, p in block.named_parameters())
        res = {
            "out_err": float((_storage_tensor(out_tp).detach().cpu() - mine(out_ref).detach().cpu()).abs().max()),
            "x_grad_err": (float((x_tp.grad.cpu() - mine(x_ref.grad).cpu()).abs().max())
                           if input_requires_grad else None),
            "out_shape": tuple(out_tp.shape),
            "output": _storage_tensor(out_tp).detach().cpu().double().numpy().copy(),
            "x_grad": x_tp.grad.cpu().double().numpy().copy() if input_requires_grad else None,
            "grad_err": grad_err,
            "grad_placements": {k: str(tuple(p.grad.placements)) if hasattr(p.grad, "placements") else "plain"
                                for k, p in block.named_parameters()},
            "local": {k: _local(p) for k, p in block.named_parameters()},
            "local_grads": {k: _local(p.grad) for k, p in block.named_parameters()},
            "local_numel": sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel()
                               for p in block.parameters()),
            "full": full,
            "num_heads": num_heads,
        }
        if sp:  # the reduction the engine left for later, done explicitly and counted
            with CommDebugMode() as reduce_mode:
                reduced = {k: block.get_parameter(k).grad.redistribute(placements=[Replicate()]) for k in partials}
            res["reduce_comm"] = _counts(reduce_mode)
            res["reduced_err"] = max(float((r.to_local().cpu() - ref_params[k].grad.cpu()).abs().max())
                                     for k, r in reduced.items())
            res["partial_vs_full"] = min(float((_storage_tensor(block.get_parameter(k).grad).cpu()
                                                - ref_params[k].grad.cpu()).abs().max()) for k in partials)
        # one optimizer step on both: where a Partial gradient gets reduced in real training
        opt, opt_ref = torch.optim.SGD(block.parameters(), lr=lr), torch.optim.SGD(ref.parameters(), lr=lr)
        with CommDebugMode() as step_mode:
            opt.step()
        opt_ref.step()
        if _counts(step_mode):
            comm["step"] = _counts(step_mode)
        res["comm"] = comm
        res["step_err"] = max(_grad_check_param(p, ref_params[k], world_size, rank)
                              for k, p in block.named_parameters())
        results[name] = res
    results["sp_layer"] = _sp_layer_saved(layer.double().to(dev), mesh, x.to(dev), world_size, rank)
    dist.barrier()
    return {"rank": rank, "world_size": world_size, "x": x.numpy(), "grad_out": grad_out.numpy(), **results}


def simulate_blocks(result: dict, world_size: int) -> dict:
    """The simulation (:mod:`distlearn.tensor_parallel.simulation`) of the three blocks of :func:`tp_check`, run on
    the same weights, input and upstream gradient as rank 0's ``result``: ``{"mlp", "attention", "sp_block":
    TPResult}``. The attention is causal, as the lab's; the SP block follows PyTorch's scheme."""
    from distlearn.tensor_parallel import simulation as sim

    x, g = result["x"], result["grad_out"]
    full = result["mlp"]["full"]
    sims = {"mlp": sim.megatron_mlp(x, full["fc1.weight"].T, full["fc1.bias"], full["fc2.weight"].T,
                                    full["fc2.bias"], g, world_size)}
    full = result["attention"]["full"]
    sims["attention"] = sim.parallel_attention(x, *[full[f"{n}.weight"].T for n in "qkvo"],
                                               result["attention"]["num_heads"], g, world_size)
    full = result["sp_block"]["full"]
    sims["sp_block"] = sim.sequence_parallel_mlp_block(
        x, full["ln.weight"], full["ln.bias"], full["mlp.fc1.weight"].T, full["mlp.fc1.bias"],
        full["mlp.fc2.weight"].T, full["mlp.fc2.bias"], g, world_size, scheme="pytorch")
    return sims


# Which simulated gradient each DTensor parameter's local gradient is (transposed: nn.Linear stores (out, in)).
_GRAD_NAMES = {"mlp": {"fc1.weight": "grad_w1", "fc2.weight": "grad_w2"},
               "attention": {"q.weight": "grad_wq", "k.weight": "grad_wk", "v.weight": "grad_wv",
                             "o.weight": "grad_wo"},
               "sp_block": {"mlp.fc1.weight": "grad_w1", "mlp.fc2.weight": "grad_w2"}}


def agreement_with_simulation(results: list[dict], sims: dict, atol: float = 1e-12) -> dict:
    """Compare, value by value, what DTensor computed on every rank (``results``: :func:`tp_check` per rank) with
    the simulation (:func:`simulate_blocks`): ``{block: {"output": bool, "input_grad": bool, "weight_grads":
    bool}}``. Output and input gradient: the rank's own (its sequence shard for ``"sp_block"``); weight gradients:
    each rank's local shard of every weight against the simulated rank's shard. ``atol`` in the blocks' float64."""
    world_size = len(results)
    out = {}
    for block, names in _GRAD_NAMES.items():
        res = sims[block]
        split = block == "sp_block"
        mine = (lambda a, r: np.split(a, world_size, axis=0)[r]) if split else (lambda a, r: a)
        out[block] = {
            "output": all(np.allclose(r[block]["output"], mine(res.output, k), rtol=0, atol=atol)
                          for k, r in enumerate(results)),
            "input_grad": all(np.allclose(r[block]["x_grad"], mine(res.grads["x"], k), rtol=0, atol=atol)
                              for k, r in enumerate(results)),
            "weight_grads": all(np.allclose(r[block]["local_grads"][p], res.local[k][g].T, rtol=0, atol=atol)
                                for k, r in enumerate(results) for p, g in names.items()),
        }
    return out


def _grad_check_param(p, ref_param, world_size: int, rank: int) -> float:
    """Max |local parameter − the reference's matching slice| (after an optimizer step)."""
    local = _storage_tensor(p).detach().cpu()
    ref = ref_param.detach().cpu()
    placement = p.placements[0] if hasattr(p, "placements") else None
    if placement is not None and placement.is_shard():
        ref = ref.chunk(world_size, dim=placement.dim)[rank]
    return float((local - ref).abs().max())


def _sp_layer_saved(layer, mesh, x, world_size: int, rank: int) -> dict:
    """Saved-for-backward storages of :class:`SPLayer`, unsharded and under :func:`_sp_layer_plan`."""
    from torch.distributed.tensor.parallel import parallelize_module

    ref = copy.deepcopy(layer)
    out_ref, ref_saved = saved_storages(ref, x.clone().requires_grad_(), list(ref.parameters()))
    parallelize_module(layer, mesh, _sp_layer_plan())
    x_local = x.chunk(world_size, dim=0)[rank].clone().requires_grad_()
    out, saved = saved_storages(layer, x_local, list(layer.parameters()))
    err = float((_storage_tensor(out).detach() - out_ref.chunk(world_size, dim=0)[rank].detach()).abs().max())
    out.sum().backward()          # the graph is usable
    return {"saved": saved, "saved_bytes": sum(e[0] for e in saved), "ref_saved": ref_saved,
            "ref_saved_bytes": sum(e[0] for e in ref_saved), "out_err": err}


def attention_without_shared_input(rank: int, world_size: int, seq_len: int = 8, batch: int = 2, hidden: int = 16,
                                   num_heads: int = 4, seed: int = 0) -> dict:
    """The attention block with only ``PLANS["attention"]`` (no shared input conversion), input requiring grad:
    the collectives ``CommDebugMode`` counts, ``{phase: {op: count}}`` — three backward all-reduces of ∂L/∂X, one
    per ColwiseParallel linear, where Megatron's f has one."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import parallelize_module

    dev = device()
    mesh = init_device_mesh(dev.type, (world_size,))
    torch.manual_seed(seed)
    block = parallelize_module(Attention(hidden, num_heads).double().to(dev), mesh, PLANS["attention"]())
    x = torch.randn(seq_len, batch, hidden, dtype=torch.float64, device=dev, requires_grad=True)
    mode = CommDebugMode()
    with mode:
        out = block(x)
        forward = _counts(mode)
        out.sum().backward()
    dist.barrier()
    return {"forward": forward, "backward": _minus(_counts(mode), forward)}


def summary(rank: int, world_size: int) -> str:
    """The torchrun entry: one line per block with the largest differences from the unsharded model."""
    r = tp_check(rank, world_size)
    return "\n".join(f"{name}: world_size={world_size} max|Δoutput|={r[name]['out_err']:.1e} "
                      f"max|Δgrad|={r[name]['grad_err']:.1e} max|Δinput grad|={r[name]['x_grad_err']:.1e} "
                      f"local params={r[name]['local_numel']} collectives={r[name]['comm']}"
                      for name in ("mlp", "attention", "sp_block"))


if __name__ == "__main__":
    torchrun_main(summary)
