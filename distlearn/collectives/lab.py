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


if __name__ == "__main__":
    torchrun_main(run_collectives)
