"""Real collectives with torch.distributed, to compare with :class:`distlearn.core.comm.VirtualCluster`, and an
all-reduce timing sweep for fitting the α-β model.

Rank r's input is :func:`rank_input` (deterministic, integer-valued float64, so sums are exact in any order).
Run alone: ``torchrun --nproc-per-node 4 -m distlearn.collectives.lab``.
"""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from distlearn.core.launch import device, torchrun_main


def rank_input(rank: int, world_size: int, length: int, seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s input: ``length`` integers in [-50, 50) as float64, from a generator seeded by
    (seed, rank). ``length`` should be divisible by world_size for reduce_scatter and all_to_all."""
    return np.random.default_rng([seed, rank]).integers(-50, 50, size=length).astype(np.float64)


def run_collectives(rank: int, world_size: int, length: int | None = None, seed: int = 0) -> dict:
    """Run every collective on real processes; return this rank's results as numpy arrays.

    ``length``: elements per rank, divisible by world_size (default 3·world_size). Raises ValueError otherwise.

    Keys: all_reduce_sum, all_reduce_max, all_reduce_avg (``ReduceOp.AVG``, which gloo implements in torch 2.13),
    broadcast
    (from rank 0), reduce (to rank 0: only rank 0's value is meaningful), all_gather, reduce_scatter (sum),
    all_to_all, send_recv (rank r receives rank r−1's input through a ring of send/recv)."""
    length = 3 * world_size if length is None else length
    if length % world_size:
        raise ValueError(f"length ({length}) must be divisible by world_size ({world_size}) for reduce_scatter "
                         f"and all_to_all / length 必须能被 world_size 整除")
    dev = device()
    x = torch.from_numpy(rank_input(rank, world_size, length, seed)).to(dev)
    out = {}
    t = x.clone(); dist.all_reduce(t, op=dist.ReduceOp.SUM); out["all_reduce_sum"] = t
    t = x.clone(); dist.all_reduce(t, op=dist.ReduceOp.MAX); out["all_reduce_max"] = t
    t = x.clone(); dist.all_reduce(t, op=dist.ReduceOp.AVG); out["all_reduce_avg"] = t
    t = x.clone(); dist.broadcast(t, src=0); out["broadcast"] = t
    t = x.clone(); dist.reduce(t, dst=0, op=dist.ReduceOp.SUM); out["reduce"] = t
    gathered = [torch.empty_like(x) for _ in range(world_size)]
    dist.all_gather(gathered, x); out["all_gather"] = torch.cat(gathered)
    # reduce_scatter: rank r gets chunk r of the sum. torch 2.13 names it reduce_scatter_single and deprecates
    # reduce_scatter_tensor (and the private _reduce_scatter_base) with a FutureWarning; older torch has only
    # reduce_scatter_tensor. gloo implements it on CPU.
    chunk = torch.empty(length // world_size, dtype=x.dtype, device=dev)
    rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    rs(chunk, x.clone(), op=dist.ReduceOp.SUM); out["reduce_scatter"] = chunk
    t = torch.empty_like(x); dist.all_to_all_single(t, x.clone()); out["all_to_all"] = t
    # point to point around the ring: even ranks send first, odd ranks receive first (no deadlock)
    recv = torch.empty_like(x)
    nxt, prv = (rank + 1) % world_size, (rank - 1) % world_size
    if world_size > 1:
        if rank % 2 == 0:
            dist.send(x.clone(), nxt); dist.recv(recv, prv)
        else:
            dist.recv(recv, prv); dist.send(x.clone(), nxt)
    else:
        recv = x.clone()
    out["send_recv"] = recv
    return {k: v.cpu().numpy() for k, v in out.items()}


def average_of(rank: int, world_size: int, value: float = 197.0, dtype: str = "float32") -> float:
    """Every rank contributes ``value`` (a 1-element tensor of ``dtype``) to ``all_reduce(op=ReduceOp.AVG)``;
    returns the result as a Python float (what this backend's average gives, to compare with NCCL's
    :func:`distlearn.core.comm.nccl_average`)."""
    t = torch.full((1,), value, dtype=getattr(torch, dtype), device=device())
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    return float(t.item())


def time_all_reduce(rank: int, world_size: int, sizes_bytes=(4096, 65536, 1 << 20, 8 << 20, 32 << 20),
                    repeats: int = 5, samples: bool = False) -> list:
    """Median seconds of a float32 all-reduce for each message size in bytes (after two warm-up calls), measured
    between barriers on every rank; every rank returns its own. With ``samples`` it returns, for each size, the
    list of all ``repeats`` measured times instead of their median."""
    dev = device()
    medians = []
    for nbytes in sizes_bytes:
        t = torch.ones(max(1, int(nbytes) // 4), dtype=torch.float32, device=dev)
        for _ in range(2):  # warm-up
            dist.all_reduce(t)
        times = []
        for _ in range(repeats):
            dist.barrier()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            dist.all_reduce(t)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        medians.append([float(x) for x in times] if samples else float(np.median(times)))
    return medians


def hierarchical_all_reduce(rank: int, world_size: int, gpus_per_node: int, length: int | None = None,
                            seed: int = 0, dtype: str = "int64") -> dict:
    """The two-level all-reduce on real processes grouped as ``world_size // gpus_per_node`` "nodes" of
    ``gpus_per_node`` ranks (rank r on node r // k at local index r % k), next to one flat ``dist.all_reduce``.

    1. ``reduce_scatter`` inside the node: local rank i keeps chunk i of the node's sum;
    2. ``all_reduce`` of that chunk across nodes, among the ranks with the same local index (one rail);
    3. ``all_gather`` inside the node.

    ``length`` (default 4·world_size) must be divisible by gpus_per_node; ``dtype`` ``"int64"`` (sums exact in any
    order) or ``"float32"`` (the inputs divided by 7, so the two orders of addition round differently). Returns this rank's ``flat`` and ``hierarchical`` results (numpy) and ``levels``: for
    each stage (name, ranks in its group, bytes of the tensor handed to the call, bytes a ring sends per rank for
    it: (k−1)/k·M, 2(d−1)/d·M/k, (k−1)/k·M). Raises ValueError for a bad grouping."""
    k = gpus_per_node
    if k < 1 or world_size % k or (length is not None and length % k):
        raise ValueError(f"gpus_per_node ({k}) must divide world_size ({world_size}) and length ({length}) / "
                         f"gpus_per_node 必须整除 world_size 和 length")
    length = 4 * world_size if length is None else length
    d, (node, local) = world_size // k, divmod(rank, k)
    # every rank creates every group, in the same order (torch.distributed's rule for new_group)
    # 每个 rank 都按同样的顺序创建所有组（torch.distributed 对 new_group 的要求）
    node_groups = [dist.new_group(list(range(n * k, (n + 1) * k))) for n in range(d)]
    rail_groups = [dist.new_group(list(range(i, world_size, k))) for i in range(k)]
    if dtype not in ("int64", "float32"):
        raise ValueError(f"dtype must be 'int64' or 'float32', got {dtype!r} / dtype 必须是 'int64' 或 'float32'")
    values = rank_input(rank, world_size, length, seed)
    values = values if dtype == "int64" else values / 7      # floats that are not integers / 非整数的浮点数
    x = torch.from_numpy(values).to(getattr(torch, dtype)).to(device())

    flat = x.clone()
    dist.all_reduce(flat)                                                  # the reference / 参照：一次扁平 AllReduce

    shard = torch.empty(length // k, dtype=x.dtype, device=x.device)
    rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    rs(shard, x.clone(), group=node_groups[node])                          # 1. inside the node / 节点内
    dist.all_reduce(shard, group=rail_groups[local])                       # 2. across nodes, same rail / 跨节点，同一轨道
    parts = [torch.empty_like(shard) for _ in range(k)]
    dist.all_gather(parts, shard, group=node_groups[node])                 # 3. inside the node / 节点内
    out = torch.cat(parts)

    m, size = x.numel() * x.element_size(), x.element_size()
    levels = [("reduce_scatter inside", k, m, (k - 1) / k * m),
              ("all_reduce across", d, shard.numel() * size, 2 * (d - 1) / d * shard.numel() * size),
              ("all_gather inside", k, out.numel() * size, (k - 1) / k * out.numel() * size)]
    return {"flat": flat.cpu().numpy(), "hierarchical": out.cpu().numpy(), "levels": levels}


if __name__ == "__main__":
    torchrun_main(run_collectives)
