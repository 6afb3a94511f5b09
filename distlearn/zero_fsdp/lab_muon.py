"""Muon under real FSDP2 (``fully_shard``) on gloo: two correct sharded forms and the wrong one, against one process.

The model is the tiny GPT of :mod:`distlearn.zero_fsdp.lab` (every block and the root wrapped by ``fully_shard``).
The 2-D weights inside the blocks (q, k, v, o, up, down: 12 matrices) go to Muon; the 1-D parameters (norms,
biases), the embeddings and the LM head go to ``torch.optim.AdamW`` with the same learning rate and weight decay
(Moonlight's scale 0.2·√max(A, B) makes that possible, see :mod:`distlearn.zero_fsdp.muon`).

Each Muon matrix is a DTensor sharded on dim 0: a rank holds rows ``torch.chunk(W, world_size)[rank]`` of the
weight, of its gradient (already averaged by FSDP2's reduce-scatter) and of its momentum. The momentum update is
elementwise, so every rank does it on its own rows. Newton–Schulz is not. :func:`train_muon` runs it three ways
(``form``):

- ``"all_gather"``: ``DTensor.from_local(u, mesh, [Shard(0)]).full_tensor()`` — an all-gather of the whole update on
  every rank; every rank orthogonalises every matrix and keeps its own rows;
- ``"owner"``: matrix i belongs to rank i mod W; ``dist.gather`` of the padded row shards to the owner, Newton–Schulz
  there, ``dist.scatter`` of the padded rows back;
- ``"local"``: Newton–Schulz on each rank's rows alone — the misconception; it does not equal one-process Muon.

:func:`train_reference` trains the same model with the same rule in one process on the whole batch. The last
step's optimizer collectives are counted with :class:`distlearn.zero_fsdp.lab_traffic.CollectiveRecorder` and its
Newton–Schulz FLOPs with ``torch.utils.flop_counter.FlopCounterMode``; the optimizer state is measured on the
tensors. Run alone: ``torchrun --nproc-per-node 2 -m distlearn.zero_fsdp.lab_muon``.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from distlearn.core.launch import device, torchrun_main
from distlearn.core.models import build_model
from distlearn.zero_fsdp.lab import make_batches, next_token_loss, sharded_tiny_gpt, tiny_config
from distlearn.zero_fsdp.muon import newton_schulz_torch, owner_of, update_scale

ADAMW_NAMES = ("embed.weight", "pos.weight", "lm_head.weight")   # 2-D, but not hidden matrices: AdamW
LR, WEIGHT_DECAY, BETA = 1e-2, 0.01, 0.95


def split_parameters(model) -> tuple[list, list]:
    """``(muon, adamw)``: lists of ``(name, parameter)``. Muon: the 2-D weights of the blocks; AdamW: the rest."""
    muon, adamw = [], []
    for name, p in model.named_parameters():
        (muon if p.ndim == 2 and name not in ADAMW_NAMES else adamw).append((name, p))
    return muon, adamw


def _rows(t: torch.Tensor, world_size: int, rank: int) -> torch.Tensor:
    """Rank ``rank``'s rows of ``t`` as FSDP2 cuts them (``torch.chunk``, empty past the last chunk)."""
    chunks = torch.chunk(t, world_size)
    return chunks[rank] if rank < len(chunks) else t[:0]


def _pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.cat([t, t.new_zeros(rows - t.shape[0], *t.shape[1:])]) if t.shape[0] < rows else t


def _orthogonalise(i, u, shape, form, world_size, rank, mesh):
    """This rank's rows of NS(whole update of matrix i), from its rows ``u`` (or the wrong thing for "local")."""
    from torch.distributed.tensor import DTensor, Shard

    if form in ("single", "local"):
        return newton_schulz_torch(u)
    if form == "all_gather":
        whole = DTensor.from_local(u, mesh, [Shard(0)], shape=shape, stride=(shape[1], 1)).full_tensor()
        return _rows(newton_schulz_torch(whole), world_size, rank)
    owner = owner_of(i, world_size)
    c = -(-shape[0] // world_size)                       # ⌈rows / W⌉: gloo needs equal sizes / gloo 要求各块等长
    pieces = [u.new_empty(c, shape[1]) for _ in range(world_size)] if rank == owner else None
    dist.gather(_pad_rows(u, c).contiguous(), pieces, dst=owner)
    out = u.new_empty(c, shape[1])                       # on u's device: NCCL needs CUDA buffers / NCCL 需要 CUDA 缓冲区
    send = None
    if rank == owner:
        whole = torch.cat([p[:n] for p, n in zip(pieces, [_rows(torch.empty(shape[0]), world_size, r).numel()
                                                          for r in range(world_size)])])
        o = newton_schulz_torch(whole)
        send = [_pad_rows(_rows(o, world_size, r), c).contiguous() for r in range(world_size)]
    dist.scatter(out, send, src=owner)
    return out[:u.shape[0]]


@torch.no_grad()
def muon_step(params, momenta, form: str = "single", world_size: int = 1, rank: int = 0, mesh=None,
              lr: float = LR, weight_decay: float = WEIGHT_DECAY, beta: float = BETA):
    """One Muon step on ``params`` (full tensors, or FSDP2 DTensors sharded on dim 0) with ``momenta`` (one local
    tensor per parameter, this rank's rows), in place: m ← β m + (1 − β) g; u = (1 − β) g + β m (Nesterov); rows of
    NS(u) by ``form``; p ← p (1 − lr·wd) − lr · 0.2·√max(A, B) · NS(u)."""
    for i, (p, m) in enumerate(zip(params, momenta)):
        local = p.to_local() if hasattr(p, "to_local") else p
        g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
        m.lerp_(g, 1 - beta)
        u = g.lerp(m, beta)
        o = _orthogonalise(i, u, tuple(p.shape), form, world_size, rank, mesh)
        local.mul_(1 - lr * weight_decay).add_(o, alpha=-lr * update_scale(p.shape[0], p.shape[1]))


def _recorder():
    """A :class:`CollectiveRecorder` that also sees DTensor's functional all-gather: ``full_tensor()`` on gloo
    dispatches ``_c10d_functional.all_gather_into_tensor(input, group_size, group_name)``, not a ``c10d`` operator.
    Recorded as ``all_gather`` with its whole output, input elements × group size."""
    from distlearn.zero_fsdp.lab_traffic import CollectiveRecorder

    class Recorder(CollectiveRecorder):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if getattr(func, "namespace", "") == "_c10d_functional" and func.__name__.startswith(
                    "all_gather_into_tensor"):
                self.calls.append(("all_gather", int(args[0].numel() * args[1]), int(args[1])))
            return super().__torch_dispatch__(func, types, args, kwargs)

    return Recorder()


def _train(model, rank, world_size, form, steps, global_batch, seed, mesh):
    from torch.utils.flop_counter import FlopCounterMode

    muon, adamw = split_parameters(model)
    mparams = [p for _, p in muon]
    momenta = [torch.zeros_like(p.to_local() if hasattr(p, "to_local") else p) for p in mparams]
    opt = torch.optim.AdamW([p for _, p in adamw], lr=LR, weight_decay=WEIGHT_DECAY)
    b = global_batch // world_size
    losses, rec, flops = [], _recorder(), FlopCounterMode(display=False)
    for step, tokens in enumerate(make_batches(tiny_config(), steps, global_batch, seed)):
        loss = next_token_loss(model, tokens[rank * b:(rank + 1) * b].to(device()))
        loss.backward()
        if step == steps - 1:
            with rec, flops:
                muon_step(mparams, momenta, form, world_size, rank, mesh)
        else:
            muon_step(mparams, momenta, form, world_size, rank, mesh)
        opt.step()
        opt.zero_grad()
        for p in mparams:
            p.grad = None
        total = loss.detach().float().clone()
        if world_size > 1:
            dist.all_reduce(total)
        losses.append(total.item() / world_size)
    full = {n: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu().clone()
            for n, p in model.named_parameters()}
    nbytes = lambda t: (t.to_local() if hasattr(t, "to_local") else t).numel() * t.element_size()  # noqa: E731
    state = sum(nbytes(m) for m in momenta) + sum(nbytes(t) for st in opt.state.values()
                                                  for k, t in st.items() if k in ("exp_avg", "exp_avg_sq"))
    return {"rank": rank, "form": form, "losses": losses, "params": full,
            "muon_shapes": [tuple(p.shape) for p in mparams], "adamw_shapes": [tuple(p.shape) for _, p in adamw],
            "elements": rec.elements(), "calls": rec.calls, "flops": int(flops.get_total_flops()),
            "state_bytes": state}


def train_reference(steps: int = 4, global_batch: int = 8, seed: int = 0) -> dict:
    """One process, the whole batch, the same Muon + AdamW rule: the run every sharded form must reproduce.
    Returns the dict of :func:`train_muon` (rank 0, world size 1)."""
    torch.manual_seed(seed)
    model = build_model(tiny_config(), device="cpu")
    return _train(model, 0, 1, "single", steps, global_batch, seed, None)


def train_muon(rank: int, world_size: int, form: str = "all_gather", steps: int = 4, global_batch: int = 8,
               seed: int = 0) -> dict:
    """FSDP2 training with Muon in form ``form`` ("all_gather", "owner" or "local") on this rank's
    ``global_batch // world_size`` sequences. Returns ``{"rank", "form", "losses" (global mean per step), "params"
    {name: full tensor after training}, "muon_shapes", "adamw_shapes", "elements" {op: elements} and "calls" of the
    last step's Muon collectives, "flops" (Newton–Schulz FLOPs of that step on this rank), "state_bytes" (momentum
    + AdamW moments held by this rank)}``."""
    torch.set_num_threads(1)
    if form not in ("all_gather", "owner", "local"):
        raise ValueError(f"form must be 'all_gather', 'owner' or 'local', got {form!r}")
    model, mesh = sharded_tiny_gpt(world_size, seed)
    return _train(model, rank, world_size, form, steps, global_batch, seed, mesh)


def all_forms(rank: int, world_size: int, steps: int = 4) -> dict:
    """:func:`train_muon` for the three forms in one launch: ``{form: result}``."""
    return {form: train_muon(rank, world_size, form, steps) for form in ("all_gather", "owner", "local")}


if __name__ == "__main__":
    torchrun_main(all_forms)
