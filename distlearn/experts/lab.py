"""Real expert parallelism with ``torch.distributed.all_to_all_single``: an MoE layer whose experts are split over
the ranks, checked against the same layer on one process.

Every rank builds the same :class:`distlearn.core.moe.MoE` (same seed) and keeps it as the single-process
**reference**; its **expert-parallel** copy holds only this rank's ``E / world_size`` experts (a slice of the
stacked expert weights) plus the replicated router and shared experts. Each rank owns ``tokens_per_rank`` tokens
of a fixed global batch. Forward, on every rank (:func:`ep_forward`):

1. route its own tokens (capacity per rank, as GShard and DeepSpeed do);
2. **exchange split sizes**: an all-to-all of the per-expert counts (rank ``r`` sends rank ``j`` how many rows it
   has for each of ``j``'s experts), so every rank knows how many rows it will receive from whom;
3. **dispatch**: ``all_to_all_single`` of the token rows with those variable ``input_split_sizes`` /
   ``output_split_sizes``;
4. each local expert runs on the rows it received;
5. **combine**: the reverse ``all_to_all_single`` (split sizes swapped) brings the outputs home, where they are
   weighted by the gates and added to their tokens, plus the shared experts.

``all_to_all_single`` has no autograd; :class:`AllToAll` gives it one: the backward of an all-to-all is the
all-to-all of the gradients with the split sizes swapped. Backward then runs on both copies with the same
upstream gradient. Compared (float64, tolerance 1e-12; the differences are rounding, ~1e-16): outputs, input
gradients, this rank's expert weight gradients against the reference's same experts, and the router and
shared-expert gradients summed over ranks (the data-parallel all-reduce they would get in training).

From a notebook: ``distlearn.core.launch.run(demo, 2)``. Alone (gloo on CPU, NCCL on GPUs):
``torchrun --nproc-per-node 4 -m distlearn.experts.lab``.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from distlearn.core.launch import device, torchrun_main
from distlearn.core.moe import MoE
from distlearn.core.validate import check_divisible


class AllToAll(torch.autograd.Function):
    """Differentiable ``dist.all_to_all_single``: forward sends ``input_split_sizes[j]`` rows to rank ``j`` and
    receives ``output_split_sizes[j]`` rows from rank ``j``; backward sends the gradients back the same way
    (split sizes swapped)."""

    @staticmethod
    def forward(ctx, x, output_split_sizes, input_split_sizes):
        ctx.splits = (output_split_sizes, input_split_sizes)
        out = x.new_empty((sum(output_split_sizes), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), output_split_sizes, input_split_sizes)
        return out

    @staticmethod
    def backward(ctx, grad):
        output_split_sizes, input_split_sizes = ctx.splits
        g = grad.new_empty((sum(input_split_sizes), *grad.shape[1:]))
        dist.all_to_all_single(g, grad.contiguous(), input_split_sizes, output_split_sizes)
        return g, None, None


def exchange_counts(counts: torch.Tensor, world_size: int) -> torch.Tensor:
    """``counts`` (E,) int64: this rank's rows per expert. Returns (world_size, E / world_size): row ``s`` holds
    how many rows rank ``s`` will send to each of this rank's experts (one all-to-all of E/world_size counts each)."""
    received = torch.empty_like(counts)
    dist.all_to_all_single(received, counts)
    return received.view(world_size, -1)


def ep_forward(local: MoE, x: torch.Tensor, rank: int, world_size: int,
               capacity_factor: float | None = None) -> tuple[torch.Tensor, dict]:
    """The expert-parallel MoE forward on this rank's tokens ``x`` (T, h) → (T, h), steps 1–5 of the module doc.
    ``local.experts`` holds this rank's experts; ``local.gate`` routes to all ``E`` of them.

    Without step 2 a rank cannot know how many rows will arrive: receiving what it sends only works when the
    routing happens to be symmetric, and gloo aborts with "Received data size doesn't match expected size".
    Returns ``(y, info)`` with this rank's split sizes and drops."""
    num_local = local.experts.num_experts
    num_experts = num_local * world_size
    r = local.route(x, capacity_factor, tokens_per_group=len(x))                     # 1. route / 1. 路由
    rows, slot = torch.where(r.kept)
    expert = r.index[rows, slot]
    order = torch.argsort(expert * x.shape[0] * r.index.shape[1] + rows * r.index.shape[1] + slot)
    rows, slot, expert = rows[order], slot[order], expert[order]     # by expert, token, choice / 按专家、词元、选择排序
    counts = torch.bincount(expert, minlength=num_experts)
    input_split_sizes = counts.view(world_size, num_local).sum(1).tolist()
    received = exchange_counts(counts, world_size)                                   # 2. split sizes / 2. 交换切分大小
    output_split_sizes = received.sum(1).tolist()
    x_recv = AllToAll.apply(x[rows], output_split_sizes, input_split_sizes)         # 3. dispatch / 3. 分发
    outs, start = [], 0
    for src in range(world_size):                                                   # 4. local experts / 4. 本地专家计算
        for e in range(num_local):
            n = int(received[src, e])
            outs.append(local.experts.expert(e, x_recv[start:start + n]))
            start += n
    y_recv = torch.cat(outs) if outs else x_recv
    y_back = AllToAll.apply(y_recv, input_split_sizes, output_split_sizes)          # 5. combine / 5. 合并
    y = torch.zeros_like(x).index_add(0, rows, r.weights[rows, slot, None] * y_back)
    if local.shared_experts is not None:
        y = y + local.shared_experts(x)
    return y, {"input_split_sizes": input_split_sizes, "output_split_sizes": output_split_sizes,
               "dropped": int((~r.kept).sum()), "received_rows": int(sum(output_split_sizes))}


def _local_copy(ref: MoE, rank: int, world_size: int) -> MoE:
    """The expert-parallel copy: this rank's slice of the experts, copies of the router and shared experts."""
    e, k = ref.experts.num_experts, ref.k
    h, f = ref.experts.w_gate.shape[2], ref.experts.w_gate.shape[1]
    shared = 0 if ref.shared_experts is None else ref.shared_experts.gate_proj.out_features // f
    like = dict(dtype=ref.gate.weight.dtype, device=ref.gate.weight.device)
    local = MoE(e // world_size, k, h, f, shared, ref.score).to(**like)
    local.gate = torch.nn.Linear(h, e, bias=False, **like)                            # routes to all E experts
    lo, hi = rank * e // world_size, (rank + 1) * e // world_size
    with torch.no_grad():
        local.gate.weight.copy_(ref.gate.weight)
        for name in ("w_gate", "w_up", "w_down"):
            getattr(local.experts, name).copy_(getattr(ref.experts, name)[lo:hi])
        if shared:
            local.shared_experts.load_state_dict(ref.shared_experts.state_dict())
    local.register_buffer("expert_bias", ref.expert_bias.clone())
    return local


def ep_check(rank: int, world_size: int, *, tokens_per_rank: int = 16, num_experts: int = 8, k: int = 2,
             hidden: int = 16, ffn: int = 24, num_shared: int = 1, capacity_factor: float | None = None,
             router: str = "softmax", seed: int = 0) -> dict:
    """Expert-parallel forward + backward vs the single-process reference on this rank (see the module doc).

    Returns this rank's largest differences (``out_err``, ``input_grad_err``, ``expert_grad_err``,
    ``router_grad_err``, ``shared_grad_err``), its split sizes, ``dropped`` assignments, and (float64 numpy)
    its output ``y``, inputs ``x`` and, on every rank, the full weights ``weights`` (router, w_gate, w_up, w_down,
    shared_*) so the numpy simulation can run on the same numbers."""
    check_divisible("num_experts", num_experts, "world_size", world_size)   # each rank holds E / world_size
    dev = device()
    torch.manual_seed(seed)
    ref = MoE(num_experts, k, hidden, ffn, num_shared, router).double().to(dev)
    local = _local_copy(ref, rank, world_size)
    g = torch.Generator().manual_seed(seed + 1)
    x_all = torch.randn(world_size * tokens_per_rank, hidden, generator=g, dtype=torch.float64).to(dev)
    grad_all = torch.randn(world_size * tokens_per_rank, hidden, generator=g, dtype=torch.float64).to(dev)
    mine = slice(rank * tokens_per_rank, (rank + 1) * tokens_per_rank)

    x_ref = x_all.clone().requires_grad_()
    (ref(x_ref, capacity_factor, tokens_per_group=tokens_per_rank) * grad_all).sum().backward()

    x = x_all[mine].clone().requires_grad_()
    y, info = ep_forward(local, x, rank, world_size, capacity_factor)
    (y * grad_all[mine]).sum().backward()

    with torch.no_grad():
        y_ref = ref(x_all, capacity_factor, tokens_per_group=tokens_per_rank)[mine]
        lo, hi = rank * num_experts // world_size, (rank + 1) * num_experts // world_size
        expert_err = max(float((getattr(local.experts, n).grad - getattr(ref.experts, n).grad[lo:hi]).abs().max())
                         for n in ("w_gate", "w_up", "w_down"))
        replicated = {"router": (local.gate.weight, ref.gate.weight)}
        if num_shared:
            for n, p in local.shared_experts.named_parameters():
                replicated[n] = (p, dict(ref.shared_experts.named_parameters())[n])
        errs = {}
        for n, (p, q) in replicated.items():
            summed = p.grad.clone()
            dist.all_reduce(summed)                                    # what data parallelism would do
            errs[n] = float((summed - q.grad).abs().max())
    as_np = lambda t: t.detach().cpu().numpy()
    weights = {"router": as_np(ref.gate.weight), "w_gate": as_np(ref.experts.w_gate),
               "w_up": as_np(ref.experts.w_up), "w_down": as_np(ref.experts.w_down)}
    if num_shared:
        weights.update(shared_gate=as_np(ref.shared_experts.gate_proj.weight),
                       shared_up=as_np(ref.shared_experts.up_proj.weight),
                       shared_down=as_np(ref.shared_experts.down_proj.weight))
    return {"rank": rank, "world_size": world_size, **info,
            "out_err": float((y.detach() - y_ref).abs().max()),
            "input_grad_err": float((x.grad - x_ref.grad[mine]).abs().max()),
            "expert_grad_err": expert_err,
            "router_grad_err": errs["router"],
            "shared_grad_err": max((v for n, v in errs.items() if n != "router"), default=0.0),
            "local_expert_params": sum(p.numel() for p in local.experts.parameters()),
            "y": as_np(y), "x": as_np(x_all[mine]), "weights": weights}


def demo(rank: int, world_size: int, capacity_factor: float = 1.0, options: dict | None = None) -> dict:
    """The chapter's lab: :func:`ep_check` without a capacity limit (``"dropless"``) and with ``capacity_factor``
    (``"capacity"``), in one launch. ``options``: more keyword arguments of :func:`ep_check` (``launch.run``
    passes positional arguments only)."""
    options = options or {}
    return {"dropless": ep_check(rank, world_size, **options),
            "capacity": ep_check(rank, world_size, capacity_factor=capacity_factor, **options)}


def summary(rank: int, world_size: int) -> str:
    """The torchrun entry: one line per run with the largest differences from the single-process layer."""
    r = demo(rank, world_size)
    return "\n".join(f"{name}: world_size={world_size} dropped={v['dropped']} splits in={v['input_split_sizes']} "
                     f"out={v['output_split_sizes']} max|Δy|={v['out_err']:.1e} max|Δdx|={v['input_grad_err']:.1e} "
                     f"max|Δdw_expert|={v['expert_grad_err']:.1e} max|Δdw_router|={v['router_grad_err']:.1e}"
                     for name, v in r.items())


if __name__ == "__main__":
    torchrun_main(summary)
