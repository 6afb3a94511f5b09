"""One model, two layouts, on real processes: FSDP2 training shards resharded to tensor-parallel generation shards.

Every rank builds the same small Llama-style block (same seed) and keeps its full weights for the check. Then:

1. **training layout**: ``fully_shard`` (FSDP2) over a 1-D mesh of all N ranks: every weight a DTensor
   ``Shard(0)``; its ``to_local()`` is the rank's training shard;
2. **direct resharding**: one ``all_to_all_single`` carries, from each rank to each other rank, exactly the blocks of
   its shard that the other's TP shard needs (:func:`distlearn.post_training.resharding.plan`); each rank rebuilds
   its TP shards (column-parallel q, k, v, gate, up: rows chunk j of tp; row-parallel o, down: columns chunk j; the
   norm whole) from what it kept and what it received;
3. **baseline**: ``all_gather`` of every shard (each rank rebuilds the whole model), then the same slices;
4. **DTensor**: the same shard as a DTensor ``[Shard(0), Shard(0)]`` on a (dp, tp) mesh, ``redistribute`` to
   ``[Replicate(), Shard(0)]`` / ``[Replicate(), Shard(1)]`` / ``[Replicate(), Replicate()]``, its collectives
   counted with ``CommDebugMode``.

Each rank returns whether each method's shards equal the slices of the full weights (exactly: only copies are
involved), and the elements it sent and received, counted from the split sizes it passed to the collectives.

From a notebook: ``distlearn.core.launch.run(reshard_check, 4, 2)``. Alone (gloo on CPU):
``torchrun --nproc-per-node 4 -m distlearn.post_training.lab_reshard``.
"""
from __future__ import annotations

import logging

import torch
import torch.distributed as dist
import torch.nn as nn

from distlearn.core.launch import device, torchrun_main
from distlearn.post_training.resharding import Weight, held, needed, plan

HIDDEN, HEADS, KV_HEADS, FFN = 16, 4, 2, 32
HEAD_DIM = HIDDEN // HEADS


def block_weights() -> list[Weight]:
    """The lab block's weights with their TP kinds: q, k, v, o, gate, up, down and one RMSNorm."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    return [Weight("q", q, HIDDEN, "column"), Weight("k", kv, HIDDEN, "column"), Weight("v", kv, HIDDEN, "column"),
            Weight("o", HIDDEN, q, "row"), Weight("gate", FFN, HIDDEN, "column"),
            Weight("up", FFN, HIDDEN, "column"), Weight("down", HIDDEN, FFN, "row"),
            Weight("norm", HIDDEN, 1, "replicate")]


class Block(nn.Module):
    """The weights only (no forward is needed to reshard): one ``nn.Parameter`` per :func:`block_weights` entry,
    the norm stored as a (hidden, 1) column so every weight is 2-D."""

    def __init__(self, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        for w in block_weights():
            self.register_parameter(w.name, nn.Parameter(torch.randn(w.rows, w.cols, generator=g)))


def _block(t: torch.Tensor, rows, cols) -> torch.Tensor:
    return t[rows[0]:rows[1], cols[0]:cols[1]]


def _target(full: torch.Tensor, w: Weight, n: int, tp: int, rank: int) -> torch.Tensor:
    return _block(full, *needed(w, n, tp, rank))


def direct_reshard(shards: dict, n: int, tp: int, rank: int) -> tuple[dict, int, int]:
    """TP shards of this rank from its FSDP ``shards`` (name → local rows), with one ``all_to_all_single``.
    Returns (TP shards, elements sent, elements received)."""
    weights = block_weights()
    dev = next(iter(shards.values())).device
    pieces = plan(weights, n, tp, rank)
    send, splits = [], [0] * n
    for p in pieces:  # ordered by destination, then weight / 按目标 rank、再按权重排列
        start = held(next(w for w in weights if w.name == p.name), n, rank)[0][0]
        local = (p.rows[0] - start, p.rows[1] - start)
        send.append(_block(shards[p.name], local, p.cols).reshape(-1))
        splits[p.dest] += p.elements
    incoming = [plan(weights, n, tp, s) for s in range(n)]
    recv_splits = [sum(p.elements for p in incoming[s] if p.dest == rank) for s in range(n)]
    send_buf = torch.cat(send) if send else torch.zeros(0, device=dev)
    recv_buf = torch.empty(sum(recv_splits), device=dev)
    dist.all_to_all_single(recv_buf, send_buf, recv_splits, splits)
    out = {}
    for w in weights:  # start from the part this rank holds itself / 先放入本 rank 自己持有的部分
        rows, cols = needed(w, n, tp, rank)
        out[w.name] = torch.full((rows[1] - rows[0], cols[1] - cols[0]), float("nan"), device=dev)
        h_rows = held(w, n, rank)[0]
        lo, hi = max(rows[0], h_rows[0]), min(rows[1], h_rows[1])
        if hi > lo:
            out[w.name][lo - rows[0]:hi - rows[0]] = shards[w.name][lo - h_rows[0]:hi - h_rows[0], cols[0]:cols[1]]
    offset = 0
    for s in range(n):
        for p in (p for p in incoming[s] if p.dest == rank):
            rows, cols = needed(next(w for w in weights if w.name == p.name), n, tp, rank)
            block = recv_buf[offset:offset + p.elements].view(p.rows[1] - p.rows[0], p.cols[1] - p.cols[0])
            out[p.name][p.rows[0] - rows[0]:p.rows[1] - rows[0], p.cols[0] - cols[0]:p.cols[1] - cols[0]] = block
            offset += p.elements
    return out, sum(splits), sum(recv_splits)


def all_gather_reshard(shards: dict, n: int, tp: int, rank: int) -> tuple[dict, int, int]:
    """The baseline: all-gather every weight whole, then slice this rank's TP shard. Returns (TP shards, elements
    sent, elements received); every shard has the same size here, so a rank sends its shard to N − 1 others."""
    out, sent, got = {}, 0, 0
    for w in block_weights():
        mine = shards[w.name].contiguous()
        parts = [torch.empty_like(mine) for _ in range(n)]
        dist.all_gather(parts, mine)
        out[w.name] = _target(torch.cat(parts), w, n, tp, rank).clone()
        sent += (n - 1) * mine.numel()
        got += sum(p.numel() for i, p in enumerate(parts) if i != rank)
    return out, sent, got


def dtensor_reshard(shards: dict, n: int, tp: int) -> tuple[dict, dict]:
    """The same with DTensor's ``redistribute`` from ``[Shard(0), Shard(0)]`` on a (dp, tp) mesh. Returns (TP
    shards, collective counts by name from ``CommDebugMode``)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.distributed.tensor.debug import CommDebugMode

    mesh = init_device_mesh(device().type, (n // tp, tp), mesh_dim_names=("dp", "tp"))
    goal = {"column": [Replicate(), Shard(0)], "row": [Replicate(), Shard(1)],
            "replicate": [Replicate(), Replicate()]}
    out, counter = {}, CommDebugMode()
    quiet = logging.getLogger("torch")  # PyTorch's notes on gloo's missing all-to-all, once per rank / PyTorch 关于 gloo 缺少 all-to-all 的提示
    level, quiet.level = quiet.level, logging.ERROR
    with counter:
        for w in block_weights():
            d = DTensor.from_local(shards[w.name], mesh, [Shard(0), Shard(0)], run_check=False,
                                   shape=torch.Size((w.rows, w.cols)), stride=(w.cols, 1))
            out[w.name] = d.redistribute(mesh, goal[w.kind]).to_local()
    quiet.setLevel(level)
    counts = {str(k).split(".")[-1]: v for k, v in counter.get_comm_counts().items()}
    return out, counts


def reshard_check(rank: int, world_size: int, tp: int = 2, seed: int = 0) -> dict:
    """Worker: FSDP2 shards of the lab block → TP shards, three ways (module doc). Returns, for this rank, ``equal``
    (method → whether every TP shard equals the slice of the full weights), ``sent`` / ``received`` (method →
    elements) and ``dtensor_ops`` (collective → count)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dev = device()
    block = Block(seed).to(dev)
    full = {name: p.detach().clone() for name, p in block.named_parameters()}
    fully_shard(block, mesh=init_device_mesh(dev.type, (world_size,)))
    shards = {name: p.to_local().detach() for name, p in block.named_parameters()}
    for w in block_weights():  # FSDP2's shard is rows chunk `rank` / FSDP2 的分片就是第 rank 块行
        assert torch.equal(shards[w.name], _block(full[w.name], *held(w, world_size, rank))), w.name
    results = {"direct": direct_reshard(shards, world_size, tp, rank),
               "all_gather": all_gather_reshard(shards, world_size, tp, rank)}
    dt, ops = dtensor_reshard(shards, world_size, tp)
    equal = {m: all(torch.equal(r[0][w.name], _target(full[w.name], w, world_size, tp, rank))
                    for w in block_weights()) for m, r in results.items()}
    equal["dtensor"] = all(torch.equal(dt[w.name], _target(full[w.name], w, world_size, tp, rank))
                           for w in block_weights())
    return {"rank": rank, "tp": tp, "equal": equal,
            "sent": {m: r[1] for m, r in results.items()}, "received": {m: r[2] for m, r in results.items()},
            "dtensor_ops": ops, "bytes_per_element": 4}


if __name__ == "__main__":
    torchrun_main(reshard_check, 2)
