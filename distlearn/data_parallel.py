"""Data parallelism simulated on a :class:`~distlearn.comm.VirtualCluster`: sharding, the correct reduction,
DistributedSampler padding, synchronized BatchNorm, and gradient bucketing with overlap.

The corrected seed function :func:`simulate_data_parallelism` gives every rank its shard, lets it compute the mean
loss and gradient of its shard, and combines them weighted by shard size — with a real all-reduce of
``(n_r · loss_r, n_r · grad_r, n_r)`` — so the result is the full-batch mean for any split, even an uneven one.
The seed averaged the per-shard means (:func:`seed_simulate_data_parallelism`), which is biased when shards differ
in size, e.g. 64 samples on 3 ranks (22, 21, 21).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .comm import VirtualCluster
from .cost import collective_time
from .validate import DistlearnValueError, check_choice, check_int, check_number

MiB = 2**20


# ---------------------------------------------------------------- sharding
def shard_sizes(num_samples: int, world_size: int) -> list[int]:
    """Sizes of ``num_samples`` split over ``world_size`` ranks as contiguous shards, like ``np.array_split`` and
    the seed: the first ``num_samples mod world_size`` ranks get one sample more; ranks may get 0 samples."""
    num_samples = check_int("num_samples", num_samples, minimum=0)
    world_size = check_int("world_size", world_size, minimum=1)
    base, extra = divmod(num_samples, world_size)
    return [base + (1 if r < extra else 0) for r in range(world_size)]


def linear_mse_model(weight: np.ndarray) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """The seed's model ``y = x @ weight`` with loss ``mean(y**2)`` over all B·d_out outputs.

    Returns ``model_fn(batch) -> (loss, grad)`` with batch (B, d_in), grad (d_in, d_out) = 2·xᵀ(x·W)/(B·d_out).
    (The seed divided by B only: its gradient was d_out times too large for its own loss.) Loss per sample is
    ``mean(y_i**2)``, so the batch loss is the mean of per-sample losses and shards combine by size."""
    weight = np.asarray(weight, dtype=float)

    def model_fn(batch):
        batch = np.asarray(batch, dtype=float)
        out = batch @ weight
        loss = float(np.mean(out ** 2))
        grad = 2.0 * batch.T @ out / out.size
        return loss, grad

    return model_fn


@dataclass
class DPResult:
    """``loss`` (float) and ``grad`` (array) combined over ranks; per-rank ``shard_sizes``, ``losses``, ``grads``
    (None for an empty rank); ``bytes_sent`` per rank by the all-reduce."""

    loss: float
    grad: np.ndarray
    shard_sizes: list[int]
    losses: list
    grads: list
    bytes_sent: np.ndarray = field(default=None)


def simulate_data_parallelism(data: np.ndarray, world_size: int, model_fn) -> DPResult:
    """Data-parallel step on a virtual cluster: the corrected seed function.

    ``data``: (N, ...) samples, split into contiguous shards by :func:`shard_sizes`; ``model_fn(shard) -> (mean
    loss, mean gradient)`` over the shard. Each rank sends ``n_r·loss_r``, ``n_r·grad_r`` and ``n_r`` into one
    all-reduce (sum); loss = Σ n_r·loss_r / Σ n_r and grad likewise: the full-batch mean for any split. Ranks with
    no samples contribute zeros (they must still join the all-reduce). Raises DistlearnValueError if data is empty.
    """
    data = np.asarray(data)
    world_size = check_int("world_size", world_size, minimum=1)
    if data.ndim == 0 or len(data) == 0:
        raise DistlearnValueError("data", "data must hold at least one sample.", "data 至少要有一个样本。")
    sizes = shard_sizes(len(data), world_size)
    offsets = np.cumsum([0] + sizes)
    losses, grads = [], []
    for r in range(world_size):
        if sizes[r]:
            loss, grad = model_fn(data[offsets[r]:offsets[r + 1]])
            losses.append(float(loss))
            grads.append(np.asarray(grad, dtype=float))
        else:
            losses.append(None)
            grads.append(None)
    shape = next(g for g in grads if g is not None).shape
    packed = [np.concatenate([[n * (l or 0.0), n], (n * g).ravel() if g is not None else np.zeros(int(np.prod(shape)))])
              for n, l, g in zip(sizes, losses, grads)]
    cluster = VirtualCluster(world_size)
    total = cluster.all_reduce(packed)[0]
    loss_sum, count, grad_sum = total[0], total[1], total[2:]
    return DPResult(float(loss_sum / count), (grad_sum / count).reshape(shape), sizes, losses, grads,
                    cluster.bytes_sent.copy())


def seed_simulate_data_parallelism(data: np.ndarray, world_size: int, model_fn) -> tuple[float, np.ndarray]:
    """The seed's version, kept to show its mistake: the plain mean of per-shard means (biased when shards are
    uneven; NaN-free only if no shard is empty). Returns (loss, grad)."""
    data = np.asarray(data)
    sizes = shard_sizes(len(data), check_int("world_size", world_size, minimum=1))
    offsets = np.cumsum([0] + sizes)
    results = [model_fn(data[offsets[r]:offsets[r + 1]]) for r in range(world_size)]
    return float(np.mean([l for l, _ in results])), np.mean([g for _, g in results], axis=0)


# ---------------------------------------------------------------- loss reduction under DDP
def ddp_gradient(per_sample_grads: np.ndarray, world_size: int, reduction: str = "mean") -> np.ndarray:
    """The gradient DDP leaves on every rank: each rank computes the gradient of its local loss (``reduction``
    ``"mean"`` or ``"sum"`` over its samples) and DDP all-reduces and **divides by world_size** (it averages).

    ``per_sample_grads``: (N, ...) gradients of each sample's loss, N divisible by world_size (equal shards, as
    with DistributedSampler). With ``"mean"`` this equals the full-batch mean gradient; with ``"sum"`` it is the
    full-batch sum divided by world_size — neither the single-process sum nor the mean. Source: PyTorch DDP docs
    ("gradients are averaged across processes"), torch/csrc/distributed/c10d/reducer.cpp (div_factor)."""
    g = np.asarray(per_sample_grads, dtype=float)
    world_size = check_int("world_size", world_size, minimum=1)
    check_choice("reduction", reduction, ("mean", "sum"))
    if g.ndim == 0 or len(g) % world_size:
        raise DistlearnValueError("per_sample_grads", f"need N ({len(g) if g.ndim else 0}) divisible by "
                                  f"world_size ({world_size}).",
                                  f"样本数 N 必须能被 world_size（{world_size}）整除。")
    local = np.split(g, world_size)
    per_rank = [s.mean(axis=0) if reduction == "mean" else s.sum(axis=0) for s in local]
    return VirtualCluster(world_size).all_reduce(per_rank, op="mean")[0]


# ---------------------------------------------------------------- DistributedSampler
def distributed_sampler_indices(num_samples: int, world_size: int, *, drop_last: bool = False) -> list[list[int]]:
    """Indices each rank gets from ``torch.utils.data.DistributedSampler(shuffle=False)``.

    Without ``drop_last`` every rank gets ⌈N/world_size⌉ indices: the list is padded by repeating its first
    indices (10 samples on 3 ranks: 12 indices, samples 0 and 1 twice). With ``drop_last`` the tail is dropped to
    ⌊N/world_size⌋ per rank (when N isn't divisible). Rank r takes every world_size-th index from r.
    Source: torch/utils/data/distributed.py."""
    n = check_int("num_samples", num_samples, minimum=1)
    ws = check_int("world_size", world_size, minimum=1)
    per_rank = math.ceil((n - ws) / ws) if drop_last and n % ws else math.ceil(n / ws)
    total = per_rank * ws
    indices = list(range(n))
    if not drop_last:
        pad = total - n
        indices += (indices * math.ceil(pad / n))[:pad] if pad > n else indices[:pad]
    else:
        indices = indices[:total]
    return [indices[r:total:ws] for r in range(ws)]


def sampler_accuracy(correct, world_size: int) -> tuple[float, float]:
    """(naive, true) accuracy of per-sample ``correct`` flags evaluated through DistributedSampler.

    Naive: all-reduce of (#correct, #seen) over the padded shards, which counts repeated samples twice. True:
    over the N distinct samples."""
    correct = np.asarray(correct, dtype=float)
    shards = distributed_sampler_indices(len(correct), world_size)
    per_rank = [np.array([correct[idx].sum(), len(idx)]) for idx in shards]
    hits, seen = VirtualCluster(world_size).all_reduce(per_rank)[0]
    return float(hits / seen), float(correct.mean())


# ---------------------------------------------------------------- synchronized BatchNorm
def sync_batchnorm(shards, eps: float = 1e-5, momentum: float = 0.1):
    """Training-mode BatchNorm over the union of all ranks' shards, from one all-reduce of
    (Σx, Σx², count) per feature.

    ``shards``: list (one per rank) of (n_r, C) arrays (n_r may be 0). Returns ``(outputs, mean, var,
    running_mean, running_var)``: per-rank normalized shards, the batch mean and biased variance used to
    normalize, and the running statistics after one update from zeros/ones with ``momentum`` (the unbiased
    variance N/(N−1)·var, as ``nn.BatchNorm1d``). Equals single-process BatchNorm on the concatenated batch.
    (``nn.SyncBatchNorm`` gathers per-rank mean/invstd and counts instead — numerically steadier in fp16 — and
    refuses CPU tensors.) Raises DistlearnValueError if the total count is < 2."""
    shards = [np.asarray(s, dtype=float).reshape(len(s), -1) if len(s) else np.zeros((0, np.shape(s)[-1]))
              for s in shards]
    c = shards[0].shape[1]
    stats = [np.concatenate([s.sum(0), (s ** 2).sum(0), [len(s)]]) for s in shards]
    total = VirtualCluster(len(shards)).all_reduce(stats)[0]
    count = total[-1]
    if count < 2:
        raise DistlearnValueError("shards", "BatchNorm needs at least 2 samples in total.",
                                  "BatchNorm 总共至少需要 2 个样本。")
    mean = total[:c] / count
    var = total[c:2 * c] / count - mean ** 2
    outputs = [(s - mean) / np.sqrt(var + eps) for s in shards]
    running_mean = momentum * mean
    running_var = (1 - momentum) * 1.0 + momentum * var * count / (count - 1)
    return outputs, mean, var, running_mean, running_var


# ---------------------------------------------------------------- gradient bucketing and overlap
def bucket_assignment(param_bytes, bucket_cap_mb: float = 25.0, first_bucket_mb: float = 1.0) -> list[list[int]]:
    """Group parameters (indices into ``param_bytes``, given in the order their gradients become ready, i.e.
    reverse of the forward order) into buckets as DDP does: add parameters to the current bucket until its size
    reaches the limit, then start a new one. The first bucket's limit is ``first_bucket_mb`` (DDP:
    ``dist._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB), the others ``bucket_cap_mb`` (MiB, DDP's default 25).
    Source: torch/csrc/distributed/c10d/reducer.cpp ``compute_bucket_assignment_by_size``."""
    cap = check_number("bucket_cap_mb", bucket_cap_mb, minimum=0, strict_min=True) * MiB
    first = check_number("first_bucket_mb", first_bucket_mb, minimum=0, strict_min=True) * MiB
    buckets, current, size, limit = [], [], 0, first
    for i, b in enumerate(param_bytes):
        current.append(i)
        size += int(b)
        if size >= limit:
            buckets.append(current)
            current, size, limit = [], 0, cap
    if current:
        buckets.append(current)
    return buckets


@dataclass
class Timeline:
    """Backward compute and bucketed all-reduces on one rank. ``events``: (lane, start, end, label) with lane
    ``"compute"`` or ``"comm"`` (seconds); ``backward_end``, ``step_end``, ``exposed_comm`` = step_end −
    backward_end (communication not hidden behind compute), ``total_comm``, ``buckets`` (parameter indices)."""

    events: list
    backward_end: float
    step_end: float
    exposed_comm: float
    total_comm: float
    buckets: list


def overlap_timeline(param_bytes, backward_times, world_size: int, *, bucket_cap_mb: float = 25.0,
                     first_bucket_mb: float = 1.0, alpha: float = 20e-6, bandwidth: float = 10e9) -> Timeline:
    """Timeline of a DDP backward pass: gradients become ready in order (parameter i after the compute
    ``backward_times[i]`` seconds, run back to back); a bucket's all-reduce starts when its last gradient is
    ready and the previous all-reduce has finished (one communication stream); each all-reduce takes the ring
    α-β time (:func:`distlearn.cost.collective_time`, ``alpha`` s, ``bandwidth`` B/s).

    Small buckets pay α many times; one huge bucket cannot start before backward ends (nothing overlaps)."""
    pb = [int(b) for b in param_bytes]
    bt = [float(t) for t in backward_times]
    if len(pb) != len(bt) or not pb:
        raise DistlearnValueError("backward_times", "param_bytes and backward_times need the same, non-zero length.",
                                  "param_bytes 与 backward_times 的长度必须相同且不为零。")
    world_size = check_int("world_size", world_size, minimum=1)
    ready = np.cumsum(bt)
    events = [("compute", float(ready[i] - bt[i]), float(ready[i]), f"grad {i}") for i in range(len(pb))]
    buckets = bucket_assignment(pb, bucket_cap_mb, first_bucket_mb)
    comm_free, total_comm = 0.0, 0.0
    for k, b in enumerate(buckets):
        start = max(float(ready[b[-1]]), comm_free)
        dur = collective_time("ring_all_reduce", sum(pb[i] for i in b), world_size, alpha=alpha,
                              bandwidth=bandwidth)
        events.append(("comm", start, start + dur, f"bucket {k}"))
        comm_free, total_comm = start + dur, total_comm + dur
    backward_end = float(ready[-1])
    step_end = max(backward_end, comm_free)
    return Timeline(events, backward_end, step_end, step_end - backward_end, total_comm, buckets)


# ---------------------------------------------------------------- splits and reductions side by side
SPLITS = ("drop_remainder", "contiguous", "sampler_pad")
REDUCTIONS = ("weighted", "mean_of_means")


def split_indices(num_samples: int, world_size: int, split: str = "contiguous") -> list[list[int]]:
    """Per-rank sample indices. ``"contiguous"``: :func:`shard_sizes` (uneven, maybe empty ranks);
    ``"drop_remainder"``: ⌊N/world_size⌋ each, the rest unused; ``"sampler_pad"``: DistributedSampler without
    drop_last (:func:`distributed_sampler_indices`, repeats samples)."""
    check_choice("split", split, SPLITS)
    num_samples = check_int("num_samples", num_samples, minimum=1)
    world_size = check_int("world_size", world_size, minimum=1)
    if split == "sampler_pad":
        return distributed_sampler_indices(num_samples, world_size)
    sizes = shard_sizes(num_samples, world_size)
    if split == "drop_remainder":
        sizes = [num_samples // world_size] * world_size
    offsets = np.cumsum([0] + sizes)
    return [list(range(offsets[r], offsets[r + 1])) for r in range(world_size)]


def data_parallel_loss(data, world_size: int, model_fn, *, split: str = "contiguous",
                       reduction: str = "weighted") -> tuple[float, list[int]]:
    """The loss a data-parallel step reports: per-rank mean losses over ``split_indices(...)`` combined by
    ``reduction`` — ``"weighted"`` by shard size (empty ranks weigh 0) or ``"mean_of_means"`` (the seed; NaN if a
    rank is empty). Returns (loss, shard sizes). Equals ``model_fn(data)[0]`` only for ``weighted`` with the
    ``contiguous`` split (or any split without dropped or repeated samples)."""
    check_choice("reduction", reduction, REDUCTIONS)
    data = np.asarray(data)
    shards = split_indices(len(data), world_size, split)
    sizes = [len(s) for s in shards]
    losses = [model_fn(data[s])[0] if len(s) else np.nan for s in shards]
    if reduction == "weighted":
        total = sum(sizes)
        if total == 0:
            return float("nan"), sizes
        return float(sum(n * l for n, l in zip(sizes, losses) if n) / total), sizes
    return float(np.mean(losses)), sizes
