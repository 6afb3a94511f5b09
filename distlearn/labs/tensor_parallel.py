"""Real tensor parallelism with DTensor: ``parallelize_module`` with ``ColwiseParallel`` / ``RowwiseParallel``.

Each rank builds the same small transformer MLP, causal self-attention block and pre-LN MLP block (same seed),
keeps an unsharded copy, shards the original over a 1-D device mesh of all ranks (the pre-LN block with sequence
parallelism: ``SequenceParallel`` LayerNorm, all-gather into fc1, reduce-scatter out of fc2), runs forward and backward on both with the same
input and upstream gradient, and reports the largest differences. It also returns its local weight and gradient
shards (``to_local()``), so the notebook and the tests can compare them with the shards that
:mod:`distlearn.tensor_parallel` computes.

From a notebook: ``distlearn.launch.run(tp_check, 2)``. Alone (gloo on CPU, NCCL on GPUs):
``torchrun --nproc-per-node 2 -m distlearn.labs.tensor_parallel``.
"""
from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from distlearn.launch import device, torchrun_main


class MLP(nn.Module):
    """``fc2(gelu(fc1(x)))`` with the tanh GeLU, as in :func:`distlearn.tensor_parallel.reference_mlp`."""

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
    :func:`distlearn.tensor_parallel.reference_mlp_block`."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.ln, self.mlp = nn.LayerNorm(hidden), MLP(hidden, ffn)

    def forward(self, x):
        return x + self.mlp(self.ln(x))


def _sequence_parallel_plan():
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel

    # LayerNorm on the local sequence shard; all-gather before fc1; reduce-scatter after fc2 (Korthikanti 2022)
    return {"ln": SequenceParallel(sequence_dim=0), "mlp.fc1": ColwiseParallel(input_layouts=Shard(0)),
            "mlp.fc2": RowwiseParallel(output_layouts=Shard(0))}


PLANS = {
    "sp_block": _sequence_parallel_plan,
    "mlp": lambda: {"fc1": _colwise(), "fc2": _rowwise()},
    "attention": lambda: {"q": _colwise(), "k": _colwise(), "v": _colwise(), "o": _rowwise()},
}


def _colwise():
    from torch.distributed.tensor.parallel import ColwiseParallel
    return ColwiseParallel()


def _rowwise():
    from torch.distributed.tensor.parallel import RowwiseParallel
    return RowwiseParallel()


def _local(t):
    return (t.to_local() if hasattr(t, "to_local") else t).detach().cpu().double().numpy()


def _full(t):
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().cpu()


def tp_check(rank: int, world_size: int, seq_len: int = 8, batch: int = 2, hidden: int = 16, ffn: int = 64,
             num_heads: int = 4, seed: int = 0) -> dict:
    """Shard an MLP and an attention block over all ranks with DTensor; compare with the unsharded copies.

    Returns, per block (``"mlp"``, ``"attention"``, ``"sp_block"``; the last one with sequence parallelism, each
    rank feeding its sequence shard of ``x`` and comparing its output shard): ``out_err`` (max |output difference|), ``grad_err`` (max
    |weight-gradient difference| over all parameters, sharded gradients gathered with ``full_tensor()``),
    ``local`` (this rank's ``to_local()`` weight shards, numpy), ``local_grads`` (this rank's gradient shards),
    ``local_numel`` (parameters this rank stores), ``out_shape`` (this rank's output), and the ``full`` unsharded weights, input ``x`` and upstream
    gradient ``grad_out`` (float64, numpy) so the simulation can be run on exactly the same numbers.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    dev = device()
    mesh = init_device_mesh(dev.type, (world_size,))
    torch.manual_seed(seed)
    blocks = {"mlp": MLP(hidden, ffn), "attention": Attention(hidden, num_heads), "sp_block": MLPBlock(hidden, ffn)}
    x = torch.randn(seq_len, batch, hidden, dtype=torch.float64)
    grad_out = torch.randn(seq_len, batch, hidden, dtype=torch.float64)
    results = {}
    for name, block in blocks.items():
        block = block.double().to(dev)
        ref = copy.deepcopy(block)
        full = {k: v.detach().cpu().numpy().copy() for k, v in ref.named_parameters()}
        parallelize_module(block, mesh, PLANS[name]())
        xs, gs = x.to(dev), grad_out.to(dev)
        out_ref = ref(xs)
        if name == "sp_block":  # sequence parallel: this rank feeds and gets back only its sequence shard
            xs, gs = xs.chunk(world_size, dim=0)[rank], gs.chunk(world_size, dim=0)[rank]
            out_ref_cmp = out_ref.chunk(world_size, dim=0)[rank]
        else:
            out_ref_cmp = out_ref
        out_tp = block(xs)
        (out_ref * grad_out.to(dev)).sum().backward()
        (out_tp * gs).sum().backward()
        ref_grads = dict(ref.named_parameters())
        grad_err = max(float((_full(p.grad) - ref_grads[k].grad.cpu()).abs().max())
                       for k, p in block.named_parameters())
        results[name] = {
            "out_err": float((_full(out_tp) - out_ref_cmp.detach().cpu()).abs().max()),
            "out_shape": tuple(out_tp.shape),
            "grad_err": grad_err,
            "local": {k: _local(p) for k, p in block.named_parameters()},
            "local_grads": {k: _local(p.grad) for k, p in block.named_parameters()},
            "local_numel": sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel()
                               for p in block.parameters()),
            "full": full,
        }
    dist.barrier()
    return {"rank": rank, "world_size": world_size, "x": x.numpy(), "grad_out": grad_out.numpy(), **results}


def summary(rank: int, world_size: int) -> str:
    """The torchrun entry: one line per block with the largest differences from the unsharded model."""
    r = tp_check(rank, world_size)
    return "\n".join(f"{name}: world_size={world_size} max|Δoutput|={r[name]['out_err']:.1e} "
                     f"max|Δgrad|={r[name]['grad_err']:.1e} local params={r[name]['local_numel']}"
                     for name in ("mlp", "attention", "sp_block"))


if __name__ == "__main__":
    torchrun_main(summary)
