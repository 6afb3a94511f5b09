"""Real DistributedDataParallel on gloo (or NCCL), and synchronized BatchNorm built from all_reduce.

- :func:`ddp_gradients` trains one step of a small MLP under DDP, each rank on its contiguous shard of the same
  global batch, and returns the gradients DDP leaves on the rank. :func:`reference_gradients` computes the same
  step in one process on the whole batch: with ``reduction="mean"`` they are equal (to float32 rounding); with
  ``"sum"`` DDP's gradient is the single-process one divided by world_size (DDP averages across ranks).
- :func:`ddp_bucket_layouts` reads the buckets of a real DDP reducer, the construction-time layout used by the first
  iteration and the one it rebuilds from the gradient-ready order, for several ``bucket_cap_mb`` settings, to
  compare with :func:`distlearn.data_parallel.simulation.ddp_buckets`. It reads them with the private
  ``reducer._get_zeros_like_grad_buckets()`` (a test-and-check tool, not an API to teach).
- :func:`ddp_grad_storages` shows where the gradients live: their own tensors plus a copy in DDP's buckets, or,
  with ``gradient_as_bucket_view=True``, views into the buckets.
- :func:`empty_rank_lab` gives ranks shards of sizes 1, 1, 0, 0: the empty ranks' mean loss is NaN but their
  gradient is zero, so DDP's average is half the one-process gradient; a sum loss divided by the global count (times
  world_size) fixes it. :func:`reference_shard_gradients` is the one-process side of that comparison.
- :func:`sync_batchnorm_lab` normalizes each rank's (possibly uneven) shard with the global batch statistics
  from one all_reduce of (Σx, Σx², count): ``nn.SyncBatchNorm`` refuses CPU tensors.

Run alone: ``torchrun --nproc-per-node 2 -m distlearn.data_parallel.lab``.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from distlearn.data_parallel.simulation import shard_sizes
from distlearn.core.launch import device, torchrun_main
from distlearn.core.models import ModelConfig
from distlearn.core.validate import DistlearnValueError

IN_FEATURES, HIDDEN = 8, 16


def make_batch(num_samples: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch: x (num_samples, 8), y (num_samples, 1), float32, from ``torch.Generator`` seed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_samples, IN_FEATURES, generator=g)
    y = torch.randn(num_samples, 1, generator=g)
    return x, y


def make_model(seed: int = 0) -> nn.Module:
    """Linear(8, 16) → Tanh → Linear(16, 1), initialized from ``seed`` (identical on every rank)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1))


def reference_gradients(num_samples: int = 32, seed: int = 0, reduction: str = "mean") -> dict:
    """Single-process gradients of the MSE loss (``reduction`` "mean" or "sum") on the whole batch."""
    model = make_model(seed)
    x, y = make_batch(num_samples, seed)
    nn.functional.mse_loss(model(x), y, reduction=reduction).backward()
    return {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


def ddp_gradients(rank: int, world_size: int, num_samples: int = 32, seed: int = 0,
                  reduction: str = "mean") -> dict:
    """One DDP backward pass; rank r uses rows [r·k, (r+1)·k) of the batch, k = num_samples / world_size.

    Returns this rank's gradients after DDP's all-reduce (name → numpy array; the same on every rank). With
    ``reduction="both"`` it runs a "mean" and then a "sum" backward pass and returns {"mean": …, "sum": …}."""
    if reduction == "both":
        return {red: ddp_gradients(rank, world_size, num_samples, seed, red) for red in ("mean", "sum")}
    if num_samples % world_size:
        raise ValueError(f"num_samples ({num_samples}) must be divisible by world_size ({world_size})")
    dev = device()
    model = make_model(seed).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    x, y = make_batch(num_samples, seed)
    k = num_samples // world_size
    xs, ys = x[rank * k:(rank + 1) * k].to(dev), y[rank * k:(rank + 1) * k].to(dev)
    nn.functional.mse_loss(ddp(xs), ys, reduction=reduction).backward()
    return {name: p.grad.cpu().numpy().copy() for name, p in model.named_parameters()}


def reference_shard_gradients(sizes=(1, 1, 0, 0), seed: int = 0) -> dict:
    """One process, no DDP: the gradients of the mean MSE loss on each shard and on the whole batch.

    ``sizes``: shard sizes, rank r gets the next ``sizes[r]`` rows of ``make_batch(sum(sizes), seed)``. Returns
    ``{"full": name → gradient of the whole batch's mean loss, "shards": [name → gradient of shard r's mean loss]}``
    (numpy float32 arrays shaped like the parameters). An empty shard's loss is NaN and its gradient zeros."""
    starts = np.cumsum([0, *sizes])
    x, y = make_batch(int(starts[-1]), seed)

    def grads(rows):
        model = make_model(seed)
        nn.functional.mse_loss(model(x[rows]), y[rows]).backward()
        return {name: p.grad.numpy().copy() for name, p in model.named_parameters()}

    return {"full": grads(slice(None)),
            "shards": [grads(slice(int(a), int(b))) for a, b in zip(starts[:-1], starts[1:])]}


def empty_rank_lab(rank: int, world_size: int, sizes=(1, 1, 0, 0), seed: int = 0) -> dict:
    """Real DDP with empty ranks: rank r trains on ``sizes[r]`` rows of ``make_batch(sum(sizes), seed)`` (default:
    2 samples on 4 ranks, shards 1, 1, 0, 0). ``len(sizes)`` must equal ``world_size`` and ``sum(sizes)`` ≥ 1.

    Two backward passes through the same DDP model, gradients zeroed in between:

    - ``"mean"``: each rank's loss is ``mse_loss(..., reduction="mean")`` over its shard — NaN on an empty rank,
      whose gradient autograd makes zero; DDP averages over all world_size ranks, so the result is
      (1/world_size)·Σ_r g_r, g_r the mean gradient of shard r (zeros if empty). With shards 1, 1, 0, 0 that is
      (g_0 + g_1)/4, half the one-process gradient (g_0 + g_1)/2.
    - ``"fix"``: each rank's loss is its *sum* of squared errors times world_size / N, N = Σ n_r the global count
      (one all_reduce of the local counts). DDP's average over world_size then gives Σ (sum loss) / N, the
      one-process mean gradient, for any shard sizes, empty ones included.

    Returns ``{"n": n_r, "loss_mean": this rank's mean loss (float, NaN if empty), "local_mean": name → this rank's
    own gradient before DDP's all-reduce (taken under ``no_sync``), "ddp_mean": name → DDP's gradient with the mean
    loss, "ddp_fix": name → DDP's gradient with the fix, "global_count": N}``; arrays float32 numpy, shaped like the
    parameters. Compare with :func:`reference_shard_gradients`. Raises DistlearnValueError for sizes that do not fit."""
    sizes = [int(n) for n in sizes]
    if len(sizes) != world_size or min(sizes) < 0 or sum(sizes) < 1:
        raise DistlearnValueError("sizes", f"sizes must be {world_size} shard sizes (one per rank), each >= 0, "
                                           f"sum >= 1; got {sizes}.",
                                  f"sizes 必须是 {world_size} 个分片大小（每个 rank 一个），每个 >= 0，总和 >= 1；"
                                  f"收到 {sizes}。")
    dev = device()
    model = make_model(seed).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    x, y = make_batch(sum(sizes), seed)
    start = sum(sizes[:rank])
    xs, ys = x[start:start + sizes[rank]].to(dev), y[start:start + sizes[rank]].to(dev)

    def grads():
        out = {name: p.grad.cpu().numpy().copy() for name, p in model.named_parameters()}
        model.zero_grad(set_to_none=True)
        return out

    with ddp.no_sync():                                  # this rank's own gradient, no all-reduce / 本 rank 自己的梯度，不做 AllReduce
        loss = nn.functional.mse_loss(ddp(xs), ys)
        loss.backward()
    local = grads()
    nn.functional.mse_loss(ddp(xs), ys).backward()     # the usual mean loss; DDP averages / 通常的平均损失；DDP 求平均
    ddp_mean = grads()
    count = torch.tensor([float(len(xs))], device=dev)
    dist.all_reduce(count)                               # N, the global number of samples / N：全局样本数
    fix = nn.functional.mse_loss(ddp(xs), ys, reduction="sum") * world_size / count
    fix.backward()                                       # sum / N, times world_size to undo DDP's average / sum / N，再乘 world_size 抵消 DDP 的平均
    return {"n": len(xs), "loss_mean": loss.item(), "local_mean": local, "ddp_mean": ddp_mean, "ddp_fix": grads(),
            "global_count": int(count.item())}


def sync_batchnorm_lab(rank: int, world_size: int, num_samples: int = 10, num_features: int = 4,
                       seed: int = 0, eps: float = 1e-5) -> np.ndarray:
    """Normalize rank r's contiguous shard (sizes from :func:`distlearn.data_parallel.simulation.shard_sizes`, may be
    uneven) with the global mean and biased variance from one all_reduce of (Σx, Σx², count). float64."""
    dev = device()
    x = torch.from_numpy(np.random.default_rng(seed).standard_normal((num_samples, num_features)) * 3 + 1)
    sizes = shard_sizes(num_samples, world_size)
    start = sum(sizes[:rank])
    local = x[start:start + sizes[rank]].to(dev)
    stats = torch.cat([local.sum(0), (local ** 2).sum(0), torch.tensor([float(len(local))], dtype=x.dtype,
                                                                          device=dev)])
    dist.all_reduce(stats)
    count = stats[-1]
    mean = stats[:num_features] / count
    var = stats[num_features:2 * num_features] / count - mean ** 2
    return ((local - mean) / torch.sqrt(var + eps)).cpu().numpy()


# Chapter 03's real-reducer check: a 2-layer GPT with a tied embedding, 2.5 MiB of fp32 gradients. Larger than DDP's
# 1 MiB first bucket and smaller than its 25 MiB later ones, so with the default caps the first-bucket rule shows:
# the first bucket closes at 1 MiB and the rest goes into one 25 MiB bucket (issue 32, item 9; the 0.5 MiB model
# used before fitted in the first bucket, and a simulation without the rule passed).
BUCKET_DEMO_CONFIG = ModelConfig("gpt-small-tied", "gpt", 2048, 128, 2, 4, 512, 16, tied_embeddings=True)
BUCKET_DEMO_CAPS = (None, 0.25, 0.5)


def ddp_bucket_layouts(rank: int, world_size: int, config=None, caps=(None,),
                       find_unused_parameters: bool | str = False,
                       seq_len: int = 8, seed: int = 0) -> dict:
    """The real reducer's buckets for each ``bucket_cap_mb`` in ``caps`` (None = DDP's default).

    ``config``: a :class:`distlearn.core.models.ModelConfig` (default: the ``gpt2-small`` preset, tied embedding).
    Returns ``{"names": registration-order parameter names, "param_bytes": their bytes, "layouts": {cap:
    {"first": buckets before the first backward, "rebuilt": buckets after it, "ready": the order gradients became
    ready (registration indices)}}}``; a bucket is a list of registration indices, buckets in the reducer's order.
    ``find_unused_parameters="both"`` runs both settings in one launch and returns ``{False: …, True: …}``.
    """
    if find_unused_parameters == "both":
        return {v: ddp_bucket_layouts(rank, world_size, config, caps, v, seq_len, seed) for v in (False, True)}
    from distlearn.core.models import build_model, get_preset

    dev = device()
    cfg = get_preset("gpt2-small") if config is None else config
    torch.manual_seed(seed)
    model = build_model(cfg, device=str(dev))
    params = dict(model.named_parameters())
    index = {p: i for i, p in enumerate(params.values())}
    tokens = torch.randint(0, cfg.vocab_size, (1, seq_len), generator=torch.Generator().manual_seed(seed)).to(dev)
    layouts = {}
    for i, cap in enumerate(caps):
        kw = {} if cap is None else {"bucket_cap_mb": cap}
        # the first wrap checks shapes and broadcasts rank 0's weights; later wraps of the same model would only
        # broadcast the same weights again (GPT-2 small: 0.5 GB each time), so they skip it (init_sync=False)
        ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=find_unused_parameters,
                                                  init_sync=i == 0, **kw)

        def layout():
            return [[index[p] for p in b.parameters()] for b in ddp.reducer._get_zeros_like_grad_buckets()]

        first = layout()
        ready: list[int] = []
        hooks = [p.register_post_accumulate_grad_hook(lambda p: ready.append(index[p])) for p in params.values()]
        ddp(tokens).float().mean().backward()
        for h in hooks:
            h.remove()
        # the reducer rebuilds its buckets at the start of the next forward, from the order it recorded: read them
        # then (a backward of this forward would compute gradients and change nothing in the layout)
        ddp(tokens)
        layouts[cap] = {"first": first, "rebuilt": layout(), "ready": ready}
        model.zero_grad(set_to_none=True)
        del ddp
    dist.barrier()
    return {"names": list(params), "param_bytes": [p.numel() * p.element_size() for p in params.values()],
            "layouts": layouts}


def ddp_grad_storages(rank: int, world_size: int, gradient_as_bucket_view: bool | str = False, iterations: int = 2,
                      seed: int = 0) -> dict:
    """Where DDP keeps the gradients of :func:`make_model` after ``iterations`` backward passes.

    Returns ``{"num_params", "grad_storages"}``: how many distinct storages the ``.grad`` tensors use. Without
    ``gradient_as_bucket_view`` each parameter has its own ``.grad`` and DDP copies it into its flat bucket buffers
    for the all-reduce, so the gradients exist twice; with it, each ``.grad`` becomes a view into its bucket (torch
    docs: "the saved memory size will be equal to the total gradients size"). ``gradient_as_bucket_view="both"``
    runs both settings in one launch and returns ``{False: …, True: …}``."""
    if gradient_as_bucket_view == "both":
        return {v: ddp_grad_storages(rank, world_size, v, iterations, seed) for v in (False, True)}
    dev = device()
    model = make_model(seed).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=gradient_as_bucket_view)
    x, y = make_batch(8, seed)
    for _ in range(iterations):
        nn.functional.mse_loss(ddp(x.to(dev)), y.to(dev)).backward()
    storages = {p.grad.untyped_storage().data_ptr() for p in model.parameters()}
    return {"num_params": len(list(model.parameters())), "grad_storages": len(storages)}


if __name__ == "__main__":
    torchrun_main(ddp_gradients)
