"""Our ring attention against PyTorch's own ``context_parallel`` — a prepared check for a machine with GPUs.

PyTorch 2.13's ``torch.distributed.tensor.experimental.context_parallel`` shards SDPA only for the CUDA kernels
(flash, memory-efficient, cuDNN): on CPU, SDPA dispatches to ``aten._scaled_dot_product_flash_attention_for_cpu``,
which "does not have a sharding strategy registered" (NotImplementedError). So the course's CPU lab compares its
ring and all-to-all attention with single-process SDPA and with PyTorch's own ring functions run with the CPU kernel
(:func:`distlearn.context_parallel.lab.torch_ring_check`), and this script does the comparison with the whole
``context_parallel`` API where it can run::

    torchrun --nproc-per-node 2 -m distlearn.context_parallel.lab_gpu_check     # 2, 4 or 8 GPUs

On every rank it draws the same causal Q, K, V and upstream gradient, then, for float32 (PyTorch picks the
memory-efficient kernel) and bfloat16 (flash):

1. runs PyTorch's ``context_parallel`` (its default head-tail load balancer = our zig-zag layout; rotate method
   ``"allgather"``, its default, and ``"alltoall"``, its ring-style permute) and backward on its local shards;
2. runs :class:`distlearn.context_parallel.lab.RingAttention` on the same zig-zag shards over NCCL;
3. compares both with single-GPU ``F.scaled_dot_product_attention`` on the full sequence.

Rank 0 prints one JSON line per case (the largest relative difference of the output and of dQ, dK, dV: max |a − b|
over max |b|, the worst rank deciding) and ``OK`` or ``MISMATCH`` against the tolerances below. One more case is
broken on purpose — our ring is given the contiguous causal mask while the shards are head-tail — and must come out
``MISMATCH`` against PyTorch (else the comparison could not fail, and the script says so). Exit status 0 when every
real case is OK and the broken one is caught, 1 otherwise; without CUDA or with fewer than 2 GPUs it prints why and
exits with status 2.
"""
from __future__ import annotations

import json
import os
import sys
from distlearn.core.guard import read_only

TOLERANCE = read_only({"float32": 1e-4, "bfloat16": 3e-2})
"""Largest relative difference accepted per dtype (max |a − b| / max |b| per tensor): float32 kernels accumulate in
float32 (≈1e-6 typical, 1e-4 to allow for the blockwise merge order); bfloat16 has an 8-bit mantissa (2⁻⁸ ≈ 4e-3
per rounding; flash also rounds the probabilities to bfloat16 before P·V, a few roundings in all). Relative, so the
bound does not depend on the size of the gradients (dQ, dK, dV of random inputs are several times larger than
the output)."""

NEEDS_GPU = ("This check needs CUDA and at least 2 GPUs (PyTorch's context_parallel has no CPU kernel in torch "
             "2.13). Run it with: torchrun --nproc-per-node 2 -m distlearn.context_parallel.lab_gpu_check\n"
             "此检查需要 CUDA 和至少 2 块 GPU（torch 2.13 中 PyTorch 的 context_parallel 没有 CPU 实现）。运行方式："
             "torchrun --nproc-per-node 2 -m distlearn.context_parallel.lab_gpu_check")


def gpu_problem() -> str | None:
    """Why this check cannot run here (bilingual), or None when it can: CUDA, ≥ 2 GPUs, started by torchrun.

    One GPU is enough when every rank sets its own ``NCCL_HOSTID`` and ``LOCAL_RANK=0`` (how
    ``authoring/gpu_checks.py`` runs it on a one-GPU machine): NCCL then treats the ranks as separate hosts, talking
    over its socket transport, instead of refusing two ranks on one device ("Duplicate GPU detected")."""
    import torch

    shared = bool(os.environ.get("NCCL_HOSTID"))  # each rank poses as its own host: ranks may share one GPU
    if not torch.cuda.is_available() or torch.cuda.device_count() < (1 if shared else 2):
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return f"{NEEDS_GPU}\n(CUDA GPUs found / 找到的 CUDA GPU：{found})"
    if "RANK" not in os.environ:
        return ("Start it with torchrun (one process per GPU) / 请用 torchrun 启动（每块 GPU 一个进程）: "
                "torchrun --nproc-per-node 2 -m distlearn.context_parallel.lab_gpu_check")
    return None


def _max_err(a, b) -> float:
    """Relative difference of ``a`` from the reference ``b``: max |a − b| / max |b| (0 when both are 0)."""
    scale = float(b.float().abs().max())
    return float((a.float() - b.float()).abs().max()) / (scale if scale > 0 else 1.0)


def verdict(result: dict) -> bool:
    """Does one case come out as it must? A real case: PyTorch's shards are our zig-zag and all three relative
    differences are within :data:`TOLERANCE` of its dtype. The broken case (``result["broken"]``): ours must differ
    from PyTorch by more than the tolerance — if it does not, the comparison cannot fail."""
    tol = TOLERANCE[result["dtype"]]
    if result.get("broken"):
        return result["ours_vs_torch"] > tol
    return bool(result["same_shards"]) and max(result["ours_vs_sdpa"], result["torch_vs_sdpa"],
                                               result["ours_vs_torch"]) <= tol


def compare(dtype_name: str, rotate: str, seq_len: int = 1024, heads: int = 8, head_dim: int = 64,
            seed: int = 0, broken: bool = False) -> dict:
    """One case on the current process group: PyTorch CP and our ring vs the full SDPA; this rank's relative
    differences. ``broken=True`` gives our ring the contiguous layout's causal mask on the head-tail shards (a
    deliberate mistake the comparison must catch)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import set_rotate_method

    from distlearn.context_parallel.lab import layout_positions, ring_attention

    rank, ws = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v, g = (torch.randn(1, heads, seq_len, head_dim, generator=gen).to(dev, dtype) for _ in range(4))
    # the single-GPU reference on the full sequence
    full = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = F.scaled_dot_product_attention(*full, is_causal=True)
    ref.backward(g)
    pos = layout_positions(seq_len, ws, "zigzag").to(dev)
    mine = pos[rank]
    # ours: ring attention over NCCL point-to-point on the zig-zag shards
    ql, kl, vl = (t[:, :, mine].clone().requires_grad_() for t in (q, k, v))
    mask_pos = layout_positions(seq_len, ws, "contiguous").to(dev) if broken else pos
    ours = ring_attention(ql, kl, vl, mask_pos, causal=True)
    ours.backward(g[:, :, mine])
    # PyTorch: context_parallel shards the buffers in place (head-tail order = our zig-zag) and patches SDPA
    set_rotate_method(rotate)
    mesh = init_device_mesh("cuda", (ws,))
    bq, bk, bv, bg = (t.clone() for t in (q, k, v, g))
    with context_parallel(mesh, buffers=[bq, bk, bv, bg], buffer_seq_dims=[2, 2, 2, 2]):
        same = bool(torch.equal(bq, q[:, :, mine]))             # PyTorch's layout == our zig-zag
        tq, tk, tv = (t.clone().requires_grad_() for t in (bq, bk, bv))
        theirs = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        theirs.backward(bg)
    shard = lambda t: t[:, :, mine]  # noqa: E731
    return {
        "dtype": dtype_name, "rotate": rotate, "world_size": ws, "rank": rank, "broken": broken,
        "same_shards": same,
        "ours_vs_sdpa": max(_max_err(ours, shard(ref)), _max_err(ql.grad, shard(full[0].grad)),
                            _max_err(kl.grad, shard(full[1].grad)), _max_err(vl.grad, shard(full[2].grad))),
        "torch_vs_sdpa": max(_max_err(theirs, shard(ref)), _max_err(tq.grad, shard(full[0].grad)),
                             _max_err(tk.grad, shard(full[1].grad)), _max_err(tv.grad, shard(full[2].grad))),
        "ours_vs_torch": max(_max_err(ours, theirs), _max_err(ql.grad, tq.grad), _max_err(kl.grad, tk.grad),
                             _max_err(vl.grad, tv.grad)),
    }


def main() -> int:
    """Run every case under torchrun; rank 0 prints the JSON lines and a verdict. Returns the exit status."""
    problem = gpu_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    ok = True
    cases = [(d, rot, False) for d in ("float32", "bfloat16") for rot in ("allgather", "alltoall")]
    cases.append(("float32", "alltoall", True))                     # broken on purpose: must be caught
    try:
        for dtype_name, rotate, broken in cases:
            r = compare(dtype_name, rotate, broken=broken)
            worst = torch.tensor([r["ours_vs_sdpa"], r["torch_vs_sdpa"], r["ours_vs_torch"],
                                  0.0 if r["same_shards"] else 1.0], device="cuda")
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)          # the worst rank decides
            r.update(ours_vs_sdpa=worst[0].item(), torch_vs_sdpa=worst[1].item(),
                     ours_vs_torch=worst[2].item(), same_shards=worst[3].item() == 0.0,
                     tolerance=TOLERANCE[dtype_name])
            good = verdict(r)
            ok &= good
            if dist.get_rank() == 0:
                label = ("CAUGHT" if good else "NOT CAUGHT: the comparison cannot fail") if broken else (
                    "OK" if good else "MISMATCH")
                print(json.dumps({**r, "verdict": label}), flush=True)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
