"""Tensor parallelism written by hand: Megatron's f and g operators on real processes.

Shoeybi et al. 2019 (Megatron-LM, §3, Fig. 3) need only two communicating operators for a column → GeLU → row MLP:

- **f**, before the column-parallel linear: identity in forward, all-reduce of ∂L/∂X in backward;
- **g**, after the row-parallel linear: all-reduce of the partial sums in forward, identity in backward.

:func:`fg_check` runs the hand-written MLP (:class:`ParallelMLP`) on ``world_size`` gloo processes and checks it
twice, on the same weights and numbers (float64): against one process's unsharded MLP
(:class:`distlearn.tensor_parallel.lab.MLP`), and against PyTorch's own engine (DTensor ``parallelize_module`` with
``ColwiseParallel`` / ``RowwiseParallel`` on a DeviceMesh). ``CommDebugMode`` counts the collectives of both.

From a notebook: ``distlearn.core.launch.run(fg_check, 2)``. Alone:
``torchrun --nproc-per-node 2 -m distlearn.tensor_parallel.lab_fg``.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from distlearn.core.launch import device, torchrun_main


# ------------------------------------------------------------------------------------- the readable algorithm
class CopyToTP(torch.autograd.Function):
    """Megatron's f: identity in forward, all-reduce of the gradient in backward."""

    @staticmethod
    def forward(ctx, x):
        return x  # every rank already holds the whole input / 每个 rank 已持有完整输入

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)  # ∂L/∂X = Σ_r ∂L_r/∂X over the column shards / 对各列分片的贡献求和
        return grad


class ReduceFromTP(torch.autograd.Function):
    """Megatron's g: all-reduce in forward, identity in backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)  # Y = Σ_r Y_r, the partial sums of the row shards / 对各行分片的部分和求和
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad  # every rank needs the whole ∂L/∂Y / 每个 rank 都需要完整的 ∂L/∂Y


class ColumnParallelLinear(nn.Module):
    """``Y_r = f(X) · A_r``: this rank's slice of the output features; the output stays split."""

    def __init__(self, full: nn.Linear, rank: int, world_size: int):
        super().__init__()
        self.weight = nn.Parameter(full.weight.detach().chunk(world_size, dim=0)[rank].clone())  # (out/t, in)
        self.bias = nn.Parameter(full.bias.detach().chunk(world_size, dim=0)[rank].clone())

    def forward(self, x):
        return F.linear(CopyToTP.apply(x), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """``Y = g(X_r · B_r) + b``: this rank's slice of the input features; the bias is added once, after g."""

    def __init__(self, full: nn.Linear, rank: int, world_size: int):
        super().__init__()
        self.weight = nn.Parameter(full.weight.detach().chunk(world_size, dim=1)[rank].clone())  # (out, in/t)
        self.bias = nn.Parameter(full.bias.detach().clone())  # replicated / 每个 rank 一份完整的

    def forward(self, x):
        return ReduceFromTP.apply(F.linear(x, self.weight)) + self.bias


class ParallelMLP(nn.Module):
    """Column-parallel fc1 → GeLU on this rank's columns (no communication) → row-parallel fc2."""

    def __init__(self, full_mlp, rank: int, world_size: int):
        super().__init__()
        self.fc1 = ColumnParallelLinear(full_mlp.fc1, rank, world_size)
        self.fc2 = RowParallelLinear(full_mlp.fc2, rank, world_size)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


# ------------------------------------------------------------------------------------- the checks
def _run_counted(module, x, grad_out) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Forward and backward of ``module`` on ``x`` (which requires grad) with upstream gradient ``grad_out``:
    ``(output, x.grad, {"forward": {op: n}, "backward": {op: n}})`` counted by ``CommDebugMode``."""
    from torch.distributed.tensor.debug import CommDebugMode

    def counted(mode) -> dict:  # c10d's allreduce_ and the functional all_reduce: one collective / 同一种集合通信
        names = {"allreduce_": "all_reduce", "all_reduce": "all_reduce"}
        out: dict = {}
        for op, n in mode.get_comm_counts().items():
            name = str(op).split(".")[-1].rstrip("')>")
            out[names.get(name, name)] = out.get(names.get(name, name), 0) + n
        return out

    x = x.detach().clone().requires_grad_()
    with CommDebugMode() as fwd:
        out = module(x)
    with CommDebugMode() as bwd:
        out.backward(grad_out)
    out = out.to_local() if hasattr(out, "to_local") else out
    return out.detach(), x.grad.detach(), {"forward": counted(fwd), "backward": counted(bwd)}


def _local(t) -> torch.Tensor:
    return (t.to_local() if hasattr(t, "to_local") else t).detach().cpu()


def _break(how: str) -> None:
    """Break the hand-written code on purpose, in this worker process only (the tests check that the checks then
    fail): ``"no_f_all_reduce"`` (f's backward returns this rank's share), ``"no_g_all_reduce"`` (g's forward
    returns this rank's partial sum), ``"bias_before_g"`` (the row-parallel bias summed ``world_size`` times)."""
    if how == "no_f_all_reduce":
        CopyToTP.backward = staticmethod(lambda ctx, grad: grad)
    elif how == "no_g_all_reduce":
        ReduceFromTP.forward = staticmethod(lambda ctx, x: x.clone())
    elif how == "bias_before_g":
        RowParallelLinear.forward = lambda self, x: ReduceFromTP.apply(F.linear(x, self.weight, self.bias))
    else:
        raise ValueError(f"unknown break {how!r}")


def fg_check(rank: int, world_size: int, seq_len: int = 8, batch: int = 2, hidden: int = 16, ffn: int = 64,
             seed: int = 0, broken: str | None = None) -> dict:
    """The hand-written MLP (:class:`ParallelMLP`) against one process and against DTensor, on this rank.

    Every rank builds the same float64 MLP (``seed``), input ``x`` (``(seq_len, batch, hidden)``, requires grad)
    and upstream gradient. Returns, each a max |difference| (float): ``out_vs_one`` (output against the unsharded
    MLP's), ``x_grad_vs_one`` (∂L/∂X), ``grad_vs_one`` (every local weight and bias gradient against the matching
    chunk of the unsharded gradient: fc1 rows, fc2 columns, fc2's bias whole); ``out_vs_dtensor``,
    ``x_grad_vs_dtensor``, ``grad_vs_dtensor`` (the same against DTensor's ``to_local()`` values);
    ``comm`` and ``dtensor_comm``: ``{"forward": {op: n}, "backward": {op: n}}`` for the hand-written MLP and for
    DTensor; ``shapes``: this rank's local weight shapes. ``broken``: run a version broken on purpose
    (:func:`_break`)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from distlearn.tensor_parallel.lab import MLP

    if broken is not None:
        _break(broken)
    dev = device()
    torch.manual_seed(seed)
    one = MLP(hidden, ffn).double().to(dev)
    x = torch.randn(seq_len, batch, hidden, dtype=torch.float64, device=dev)
    grad_out = torch.randn(seq_len, batch, hidden, dtype=torch.float64, device=dev)

    mine = ParallelMLP(one, rank, world_size)
    engine = MLP(hidden, ffn).double().to(dev)
    engine.load_state_dict(one.state_dict())
    mesh = init_device_mesh(dev.type, (world_size,))
    parallelize_module(engine, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})

    y_one, dx_one, _ = _run_counted(one, x, grad_out)
    y_mine, dx_mine, comm = _run_counted(mine, x, grad_out)
    y_eng, dx_eng, eng_comm = _run_counted(engine, x, grad_out)

    dims = {"fc1.weight": 0, "fc1.bias": 0, "fc2.weight": 1, "fc2.bias": None}  # how each is split / 各自的切分维度
    one_grads = dict(one.named_parameters())
    eng_grads = dict(engine.named_parameters())
    grad_one = grad_eng = 0.0
    for name, p in mine.named_parameters():
        ref = one_grads[name].grad.detach().cpu()
        if dims[name] is not None:
            ref = ref.chunk(world_size, dim=dims[name])[rank]
        g = p.grad.detach().cpu()
        grad_one = max(grad_one, float((g - ref).abs().max()))
        grad_eng = max(grad_eng, float((g - _local(eng_grads[name].grad)).abs().max()))
    diff = lambda a, b: float((a.cpu() - b.cpu()).abs().max())
    return {"rank": rank, "world_size": world_size,
            "out_vs_one": diff(y_mine, y_one), "x_grad_vs_one": diff(dx_mine, dx_one), "grad_vs_one": grad_one,
            "out_vs_dtensor": diff(y_mine, y_eng), "x_grad_vs_dtensor": diff(dx_mine, dx_eng),
            "grad_vs_dtensor": grad_eng, "comm": comm, "dtensor_comm": eng_comm,
            "shapes": {n: tuple(p.shape) for n, p in mine.named_parameters()},
            "grad_norm": float(sum(p.grad.norm() ** 2 for p in one.parameters()) ** 0.5)}


if __name__ == "__main__":
    torchrun_main(fg_check)
