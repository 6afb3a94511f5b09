"""Data parallelism simulated on a :class:`~distlearn.core.comm.VirtualCluster`: sharding, the correct reduction,
DistributedSampler padding, synchronized BatchNorm, and gradient bucketing with overlap.

The corrected seed function :func:`simulate_data_parallelism` gives every rank its shard, lets it compute the mean
loss and gradient of its shard, and combines them weighted by shard size — with a real all-reduce of
``(n_r · loss_r, n_r · grad_r, n_r)`` — so the result is the full-batch mean for any split, even an uneven one.
The seed averaged the per-shard means (:func:`distlearn.seeds.parallelism.seed_simulate_data_parallelism`), which
is biased when shards differ in size, e.g. 64 samples on 3 ranks (22, 21, 21).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from distlearn.core.comm import VirtualCluster
from distlearn.core.cost import collective_time
from distlearn.core.validate import (MAX_ELEMENTS, MAX_STEPS, MAX_WORLD_SIZE, DistlearnValueError, array, check_array,
                                     check_bool, check_callable, check_choice, check_int, check_number, checks, each,
                                     function, whole)

MiB = 2**20


# ---------------------------------------------------------------- sharding
def shard_sizes(num_samples: int, world_size: int) -> list[int]:
    """Sizes of ``num_samples`` split over ``world_size`` ranks as contiguous shards, like ``np.array_split`` and
    the seed: the first ``num_samples mod world_size`` ranks get one sample more; ranks may get 0 samples."""
    num_samples = check_int("num_samples", num_samples, minimum=0)
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
    base, extra = divmod(num_samples, world_size)
    return [base + (1 if r < extra else 0) for r in range(world_size)]


@checks(weight=array())
def linear_mse_model(weight: np.ndarray) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """The seed's model ``y = x @ weight`` with loss ``mean(y**2)`` over all B·d_out outputs.

    Returns ``model_fn(batch) -> (loss, grad)`` with batch (B, d_in), grad (d_in, d_out) = 2·xᵀ(x·W)/(B·d_out).
    (The seed divided by B only: its gradient was d_out times too large for its own loss.) Loss per sample is
    ``mean(y_i**2)``, so the batch loss is the mean of per-sample losses and shards combine by size.

    An empty batch (B = 0) gives what torch autograd gives for ``(x @ W).pow(2).mean()``: loss NaN (0/0) and a
    gradient of zeros, not 0/0 — autograd scales the empty output's gradient by 1/0 and then sums over no rows. This
    is the zero gradient an empty rank feeds into DDP's average (chapter 03, "Empty ranks").

    Raises DistlearnValueError when ``weight`` is not an array of finite numbers (shape (d_in, d_out) or (d_in,)),
    and ``model_fn`` raises it for a batch that is not a finite array of shape (B, d_in)."""
    weight = np.asarray(weight, dtype=float)
    d_in = weight.shape[0] if weight.ndim else 1

    def model_fn(batch):
        batch = check_array("batch", batch)
        if batch.ndim != 2 or batch.shape[1] != d_in:
            raise DistlearnValueError("batch", f"batch must be an array of shape (B, d_in) = (B, {d_in}), one row per "
                                               f"sample; got shape {batch.shape}.",
                                      f"batch 的形状必须是 (B, d_in) = (B, {d_in})，每行一个样本；收到形状 {batch.shape}。")
        out = batch @ weight
        grad = 2.0 * batch.T @ out                         # a sum over the B rows: zeros if B = 0 / 对 B 行求和：B = 0 时为零
        if out.size == 0:                                  # as autograd: loss 0/0 = NaN, gradient 0 / 与 autograd 相同：损失 NaN，梯度为 0
            return float("nan"), grad
        return float(np.mean(out ** 2)), grad / out.size

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


@checks(data=array(min_size=0), model_fn=function())
def simulate_data_parallelism(data: np.ndarray, world_size: int, model_fn) -> DPResult:
    """Data-parallel step on a virtual cluster: the corrected seed function.

    ``data``: (N, ...) samples, split into contiguous shards by :func:`shard_sizes`; ``model_fn(shard) -> (mean
    loss, mean gradient)`` over the shard. Each rank sends ``n_r·loss_r``, ``n_r·grad_r`` and ``n_r`` into one
    all-reduce (sum); loss = Σ n_r·loss_r / Σ n_r and grad likewise: the full-batch mean for any split. Ranks with
    no samples contribute zeros (they must still join the all-reduce). Raises DistlearnValueError if data is empty or
    not an array of finite numbers, or ``model_fn`` is not a function.
    """
    data = np.asarray(data)
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
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


# ---------------------------------------------------------------- loss reduction under DDP
@checks(per_sample_grads=array())
def ddp_gradient(per_sample_grads: np.ndarray, world_size: int, reduction: str = "mean") -> np.ndarray:
    """The gradient DDP leaves on every rank: each rank computes the gradient of its local loss (``reduction``
    ``"mean"`` or ``"sum"`` over its samples) and DDP all-reduces and **divides by world_size** (it averages).

    ``per_sample_grads``: (N, ...) gradients of each sample's loss, N divisible by world_size (equal shards, as
    with DistributedSampler). With ``"mean"`` this equals the full-batch mean gradient; with ``"sum"`` it is the
    full-batch sum divided by world_size — neither the single-process sum nor the mean. Source: PyTorch DDP docs
    ("gradients are averaged across processes"), torch/csrc/distributed/c10d/reducer.cpp (div_factor). Raises
    DistlearnValueError when ``per_sample_grads`` is not an array of finite numbers or N is not divisible."""
    g = np.asarray(per_sample_grads, dtype=float)
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
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
    drop_last = check_bool("drop_last", drop_last)
    n = check_int("num_samples", num_samples, minimum=1, maximum=MAX_ELEMENTS)
    ws = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
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
    over the N distinct samples.

    ``correct``: shape (N,), 1 (or True) for a sample the model got right, 0 (False) otherwise. Raises
    DistlearnValueError for anything else."""
    if isinstance(correct, np.ndarray) and correct.dtype == bool:
        correct = correct.astype(int)
    elif isinstance(correct, (list, tuple)) and correct and all(isinstance(c, bool) for c in correct):
        correct = [int(c) for c in correct]
    correct = check_array("correct", correct, ndim=1)
    if not np.isin(correct, (0.0, 1.0)).all():
        raise DistlearnValueError("correct", "correct must hold one flag per sample: 1 (right) or 0 (wrong).",
                                  "correct 必须是每个样本一个标记：1（正确）或 0（错误）。")
    shards = distributed_sampler_indices(len(correct), world_size)
    per_rank = [np.array([correct[idx].sum(), len(idx)]) for idx in shards]
    hits, seen = VirtualCluster(world_size).all_reduce(per_rank)[0]
    return float(hits / seen), float(correct.mean())


# ---------------------------------------------------------------- synchronized BatchNorm
@dataclass(frozen=True)
class SyncBatchNormResult:
    """What :func:`sync_batchnorm` returns for shards of ``n_r`` samples on each of ``R`` ranks, ``C`` features and
    ``N = Σ n_r`` samples in all (float64 arrays; ``mean`` in the units of the input, ``var`` in their square)."""

    outputs: list[np.ndarray]  # R arrays, shape (n_r, C): each rank's shard normalized with the batch statistics
    mean: np.ndarray           # shape (C,): the mean over all N samples, Σx / N
    var: np.ndarray            # shape (C,): the biased variance Σx² / N − mean² over all N samples, used to normalize
    running_mean: np.ndarray   # shape (C,): running mean after one update from 0, momentum · mean
    running_var: np.ndarray    # shape (C,): running variance after one update from 1, with the unbiased N/(N−1)·var


def sync_batchnorm(shards, eps: float = 1e-5, momentum: float = 0.1) -> SyncBatchNormResult:
    """Training-mode BatchNorm over the union of all ranks' shards, from one all-reduce of
    (Σx, Σx², count) per feature.

    ``shards``: list (one per rank) of (n_r, C) arrays (n_r may be 0). Returns a :class:`SyncBatchNormResult`: the
    per-rank normalized shards (``outputs``), the batch ``mean`` and biased ``var`` used to normalize, and the
    running statistics after one update from zeros/ones with ``momentum`` (the unbiased variance N/(N−1)·var, as
    ``nn.BatchNorm1d``). Equals single-process BatchNorm on the concatenated batch.
    (``nn.SyncBatchNorm`` gathers per-rank mean/invstd and counts instead — numerically steadier in fp16 — and
    refuses CPU tensors.) Raises DistlearnValueError if the total count is < 2."""
    eps = check_number("eps", eps, minimum=0, strict_min=True)
    momentum = check_number("momentum", momentum, minimum=0, maximum=1)
    if shards is None or isinstance(shards, (str, bytes, dict)) or not hasattr(shards, "__len__") or not len(shards):
        raise DistlearnValueError("shards", f"shards must be a non-empty list of (n_r, C) arrays, one per rank; got "
                                            f"{shards!r}.",
                                  f"shards 必须是非空列表，每个 rank 一个形状为 (n_r, C) 的数组；收到 {shards!r}。")
    shards = [check_array(f"shards[{r}]", s) for r, s in enumerate(shards)]
    for r, s in enumerate(shards):
        if s.ndim == 0:
            raise DistlearnValueError(f"shards[{r}]", f"shards[{r}] must be an (n_r, C) array of samples; got the "
                                                      f"number {float(s):g}.",
                                      f"shards[{r}] 必须是形状为 (n_r, C) 的样本数组；收到数值 {float(s):g}。")
    c = next((s.reshape(len(s), -1).shape[1] for s in shards if len(s)), shards[0].shape[-1])
    shards = [s.reshape(len(s), -1) if len(s) else np.zeros((0, c)) for s in shards]
    if any(s.shape[1] != c for s in shards if len(s)):
        raise DistlearnValueError("shards", f"every shard needs the same number of features C; got "
                                            f"{[s.shape[1] for s in shards]}.",
                                  f"每个分片的特征数 C 必须相同；收到 {[s.shape[1] for s in shards]}。")
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
    return SyncBatchNormResult(outputs, mean, var, running_mean, running_var)


# ---------------------------------------------------------------- gradient bucketing and overlap
DDP_BUCKET_CAP_MB = 25      # torch/nn/parallel/distributed.py: _DEFAULT_BUCKET_CAP_MB
DDP_FIRST_BUCKET_MB = 1     # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB
ITERATIONS = ("first", "rebuilt")


def ddp_bucket_limits(bucket_cap_mb: float | None = None) -> tuple[int, int]:
    """``(first_bucket_bytes, bucket_bytes)`` that ``DistributedDataParallel`` uses, torch 2.13.

    With ``bucket_cap_mb=None`` (DDP's default) the buckets are 25 MiB and the first one only 1 MiB; **a
    ``bucket_cap_mb`` given explicitly applies to the first bucket too** (even ``bucket_cap_mb=25``): torch's
    ``_BucketCapacityConfig.create`` sets ``first_bucket_bytes_cap = _DEFAULT_FIRST_BUCKET_BYTES if
    is_using_default else bucket_bytes_cap``. Bytes are ``int(mb · 2**20)`` as in DDP. Raises DistlearnValueError
    for a non-positive cap."""
    if bucket_cap_mb is None:
        return DDP_FIRST_BUCKET_MB * MiB, DDP_BUCKET_CAP_MB * MiB
    cap = int(check_number("bucket_cap_mb", bucket_cap_mb, minimum=0, strict_min=True) * MiB)
    return cap, cap


@checks(param_bytes=each(whole(minimum=0, maximum=None), min_len=0))
def bucket_assignment(param_bytes, bucket_cap_mb: float | None = None,
                      first_bucket_mb: float | None = None) -> list[list[int]]:
    """Group parameters (indices into ``param_bytes``, given in the order their gradients become ready, i.e.
    reverse of the forward order) into buckets as DDP's reducer does when it rebuilds them after the first
    iteration: add parameters to the current bucket until its size reaches the limit (``>=``), then start a new
    one. The first bucket's limit and the others' come from :func:`ddp_bucket_limits` (1 MiB then 25 MiB by
    default; ``bucket_cap_mb`` for all buckets when given); ``first_bucket_mb`` overrides the first limit.
    Source: torch/csrc/distributed/c10d/reducer.cpp ``compute_bucket_assignment_by_size`` (one dtype and device:
    DDP keeps separate buckets per dtype)."""
    first, cap = ddp_bucket_limits(bucket_cap_mb)
    if first_bucket_mb is not None:
        first = int(check_number("first_bucket_mb", first_bucket_mb, minimum=0, strict_min=True) * MiB)
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


@checks(param_bytes=each(whole(minimum=0, maximum=None), min_len=0),
        ready_order=each(whole(minimum=0, maximum=None), min_len=0))
def ddp_buckets(param_bytes, ready_order, *, bucket_cap_mb: float | None = None,
                find_unused_parameters: bool = False, iteration: str = "rebuilt") -> list[list[int]]:
    """The buckets a real ``DistributedDataParallel`` (torch 2.13) holds, as lists of parameter indices, in the
    reducer's bucket order (bucket 0 is reduced first).

    ``param_bytes``: bytes of each parameter in registration order (``model.parameters()``, a tied parameter
    once); ``ready_order``: parameter indices in the order their gradients became ready in the first backward
    (:func:`gradient_ready_order`).

    - ``iteration="first"``: the construction-time layout, used by the first backward. Without
      ``find_unused_parameters`` (and without ``static_graph``) DDP puts **every parameter in one bucket**
      (size limit ``sys.maxsize``), because the registration order need not be the execution order: nothing
      overlaps in the first iteration. With it, buckets of [first, cap] over the registration order, sorted by
      their smallest index and reversed (``distributed.py``: ``compute_bucket_size_limits``,
      ``list(reversed(bucket_indices))``).
    - ``iteration="rebuilt"``: from the second iteration on. The reducer records the order in which gradients
      became ready and rebuilds the buckets over it (``Reducer::rebuild_buckets``) with limits
      :func:`ddp_bucket_limits`, without sorting. With ``find_unused_parameters`` it never rebuilds
      (``should_rebuild_buckets()`` needs ``static_graph`` or no unused-parameter search): the first layout stays.

    Raises DistlearnValueError for a bad iteration, or a ``ready_order`` that is not a permutation.
    """
    check_choice("iteration", iteration, ITERATIONS)
    find_unused_parameters = check_bool("find_unused_parameters", find_unused_parameters)
    pb = [int(b) for b in param_bytes]
    order = [int(i) for i in ready_order]
    if sorted(order) != list(range(len(pb))):
        raise DistlearnValueError("ready_order", "ready_order must list every parameter index once.",
                                  "ready_order 必须恰好列出每个参数的下标一次。")
    first, cap = ddp_bucket_limits(bucket_cap_mb)
    if iteration == "rebuilt" and not find_unused_parameters:
        groups = bucket_assignment([pb[i] for i in order], bucket_cap_mb)
        return [[order[j] for j in g] for g in groups]
    if not find_unused_parameters:
        return [list(range(len(pb)))]
    groups = bucket_assignment(pb, bucket_cap_mb, first / MiB if first < cap else None)
    return list(reversed(sorted(groups, key=min)))


def gradient_ready_order(model, *example_args) -> list[str]:
    """Names of ``model``'s parameters in the order autograd finishes their gradients (``AccumulateGrad``, as
    DDP's reducer sees them), from one forward + backward of ``model(*example_args).sum()``.

    Works on the meta device (no memory, no time). A tied parameter (GPT-2's embedding = LM head) appears once,
    when its last contribution arrives: for a tied embedding that is the end of backward, although the LM head's
    matrix multiply is the first thing backward computes. Uses ``register_post_accumulate_grad_hook``; gradients
    are cleared afterwards."""
    names = {}
    for name, p in model.named_parameters():   # named_parameters lists a tied parameter once
        names[p] = name
    order: list[str] = []
    handles = [p.register_post_accumulate_grad_hook(lambda p: order.append(names[p])) for p in names]
    try:
        model(*example_args).sum().backward()
    finally:
        for h in handles:
            h.remove()
        for p in names:
            p.grad = None
    return order


@dataclass
class GradientSchedule:
    """A backward pass as DDP sees it, in gradient-ready order: parameter ``names``, ``param_bytes`` of each
    gradient, ``backward_times`` (seconds of compute between the previous gradient and this one becoming ready),
    ``ready_order`` (registration indices) and ``registration_bytes`` (bytes in ``model.parameters()`` order)."""

    names: list
    param_bytes: list
    backward_times: list
    ready_order: list
    registration_bytes: list


def gradient_schedule(model, *example_args, backward_seconds: float, dtype_bytes: int = 4) -> GradientSchedule:
    """:func:`gradient_ready_order` plus the compute between consecutive gradients, proportional to the backward
    FLOPs counted by ``torch.utils.flop_counter.FlopCounterMode`` between their ``AccumulateGrad`` hooks (so a
    tied LM head's large matmul counts at the start of backward, where it runs, and its gradient at the end), scaled
    to ``backward_seconds`` in total. ``dtype_bytes``: bytes per gradient element (4 for fp32). Runs on meta."""
    from torch.utils.flop_counter import FlopCounterMode

    seconds = check_number("backward_seconds", backward_seconds, minimum=0, strict_min=True)
    nbytes = check_int("dtype_bytes", dtype_bytes, minimum=1, maximum=16)
    params = dict(model.named_parameters())
    index = {name: i for i, name in enumerate(params)}
    marks: list[tuple[str, int]] = []
    counter = FlopCounterMode(display=False)
    handles = [p.register_post_accumulate_grad_hook(lambda p, n=n: marks.append((n, counter.get_total_flops())))
               for n, p in params.items()]
    try:
        with counter:
            out = model(*example_args).sum()
            start = counter.get_total_flops()
            out.backward()
    finally:
        for h in handles:
            h.remove()
        for p in params.values():
            p.grad = None
    flops = [m[1] - prev for m, prev in zip(marks, [start] + [m[1] for m in marks[:-1]])]
    total = sum(flops) or 1
    names = [n for n, _ in marks]
    return GradientSchedule(names, [params[n].numel() * nbytes for n in names],
                            [seconds * f / total for f in flops], [index[n] for n in names],
                            [p.numel() * nbytes for p in params.values()])


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


def overlap_timeline(param_bytes, backward_times, world_size: int, *, bucket_cap_mb: float | None = None,
                     first_bucket_mb: float | None = None, first_iteration: bool = False, alpha: float = 20e-6,
                     bandwidth: float = 10e9) -> Timeline:
    """Timeline of a DDP backward pass: gradients become ready in order (parameter i after the compute
    ``backward_times[i]`` seconds, run back to back); a bucket's all-reduce starts when its last gradient is
    ready and the previous all-reduce has finished (one communication stream); each all-reduce takes the ring
    α-β time (:func:`distlearn.core.cost.collective_time`, ``alpha`` s, ``bandwidth`` B/s).

    Buckets: :func:`bucket_assignment` (DDP's rebuilt layout, from the second iteration on; ``bucket_cap_mb=None``
    is DDP's default of 25 MiB with a 1 MiB first bucket); ``first_iteration=True`` is the first iteration without
    ``find_unused_parameters``, where DDP holds all gradients in one bucket (:func:`ddp_buckets`).

    Small buckets pay α many times; one huge bucket cannot start before backward ends (nothing overlaps)."""
    for name, values in (("param_bytes", param_bytes), ("backward_times", backward_times)):
        if hasattr(values, "__len__") and not isinstance(values, (str, bytes)) and len(values) > MAX_STEPS:
            raise DistlearnValueError(name, f"{name}: {len(values):,} parameters is more than this timeline "
                                            f"simulates (at most {MAX_STEPS:,}).",
                                      f"{name}：{len(values):,} 个参数超出了此时间线模拟的上限（最多 {MAX_STEPS:,} 个）。")
    pb = [int(b) for b in check_array("param_bytes", param_bytes, ndim=1, cap=MAX_STEPS)]
    bt = [float(t) for t in check_array("backward_times", backward_times, ndim=1, cap=MAX_STEPS)]
    if len(pb) != len(bt) or not pb:
        raise DistlearnValueError("backward_times", "param_bytes and backward_times need the same, non-zero length.",
                                  "param_bytes 与 backward_times 的长度必须相同且不为零。")
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
    first_iteration = check_bool("first_iteration", first_iteration)
    ready = np.cumsum(bt)
    events = [("compute", float(ready[i] - bt[i]), float(ready[i]), f"grad {i}") for i in range(len(pb))]
    buckets = [list(range(len(pb)))] if first_iteration else bucket_assignment(pb, bucket_cap_mb, first_bucket_mb)
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
    num_samples = check_int("num_samples", num_samples, minimum=1, maximum=MAX_ELEMENTS)
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
    if split == "sampler_pad":
        return distributed_sampler_indices(num_samples, world_size)
    sizes = shard_sizes(num_samples, world_size)
    if split == "drop_remainder":
        sizes = [num_samples // world_size] * world_size
    offsets = np.cumsum([0] + sizes)
    return [list(range(offsets[r], offsets[r + 1])) for r in range(world_size)]


@checks(data=array(min_size=0), model_fn=function())
def data_parallel_loss(data, world_size: int, model_fn, *, split: str = "contiguous",
                       reduction: str = "weighted") -> tuple[float, list[int]]:
    """The loss a data-parallel step reports: per-rank mean losses over ``split_indices(...)`` combined by
    ``reduction`` — ``"weighted"`` by shard size (empty ranks weigh 0) or ``"mean_of_means"`` (the seed; NaN if a
    rank is empty). Returns (loss, shard sizes). Equals ``model_fn(data)[0]`` only for ``weighted`` with the
    ``contiguous`` split (or any split without dropped or repeated samples)."""
    check_choice("reduction", reduction, REDUCTIONS)
    model_fn = check_callable("model_fn", model_fn)
    if not isinstance(data, np.ndarray):
        data = check_array("data", data, finite=False)
    if data.ndim == 0:
        raise DistlearnValueError("data", f"data must be an array of samples (one row per sample); got a scalar "
                                          f"{data!r}.", f"data 必须是样本数组（每行一个样本）；收到标量 {data!r}。")
    shards = split_indices(len(data), world_size, split)
    sizes = [len(s) for s in shards]
    losses = [model_fn(data[s])[0] if len(s) else np.nan for s in shards]
    if reduction == "weighted":
        total = sum(sizes)
        if total == 0:
            return float("nan"), sizes
        return float(sum(n * l for n, l in zip(sizes, losses) if n) / total), sizes
    return float(np.mean(losses)), sizes
