"""Real pipeline parallelism with ``torch.distributed.pipelining`` on gloo: the same small MLP run as one process
and as a pipeline of ``world_size`` stages (or ``2 · world_size`` stages with the interleaved schedule).

Each rank builds the full model from the same seed, keeps its stage's layers (``PipelineStage``), and runs one
training step (forward + backward, no optimizer) with ``ScheduleGPipe``, ``Schedule1F1B`` and, with two chunks per
rank, ``ScheduleInterleaved1F1B``. It compares with a single-process step on the whole batch:

- loss: the mean of the micro-batch losses (equal micro-batch sizes, ``MSELoss`` with mean reduction) equals the
  full-batch loss;
- gradients: with ``scale_grads=True`` torch divides the accumulated gradients by ``m`` once, after the last
  backward of the step (``stage.py``, ``PipelineStage.scale_grads``), so they equal the full-batch gradients of the
  stage's parameters;
- order: hooks record the order in which torch runs each rank's forwards and backwards, to compare with
  :func:`distlearn.pipeline_parallel.schedules.stage_order`.

Two more experiments show what the engine does with micro-batches that differ:

- :func:`run_uneven`: a batch that does not divide (10 samples, 4 micro-batches). Torch splits it with
  ``torch.tensor_split`` (``microbatch.py``: sizes 3, 3, 2, 2) but infers every stage's shapes from micro-batch 0
  (``schedules.py``: ``_initialize_stage(arg_mbs[0], …)``) and allocates its receive buffers once (``stage.py``),
  so on a multi-stage pipeline the last stage gets a 3-row activation for a 2-sample micro-batch and the loss
  fails with a size mismatch (the other stages then wait for it).
- :func:`run_loss_normalisation`: equal micro-batches whose samples do not all count (a 0/1 weight per sample,
  like padding tokens with ``ignore_index``). With a per-micro-batch mean loss and ``scale_grads=True`` (torch
  divides the accumulated gradients by m) the step optimises the **mean of the micro-batch means**, which is not
  the mean over the batch when the counts differ; a loss that sums and divides by the count of the *whole* batch,
  with ``scale_grads=False``, gives the full-batch gradient exactly.
- :func:`run_dp_normalisation`: the same loss with data parallelism too (a ``(pp, dp)`` mesh). DDP and FSDP2
  **average** the gradients over the dp replicas, so a loss already divided by the whole batch's count leaves
  the gradient at the full-batch gradient / dp, unless the averaging is turned into a sum (FSDP2
  ``set_gradient_divide_factor(1.0)``) or the loss is dp times larger.

Run alone: ``torchrun --nproc-per-node 2 -m distlearn.pipeline_parallel.lab`` (or 4).
"""
from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
import torch.nn as nn

from distlearn.core.launch import device, torchrun_main
from distlearn.pipeline_parallel.schedules import microbatch_sizes, partition_layers, stage_order

NUM_LAYERS = 8
WIDTH = 16


def build_model(seed: int = 0) -> nn.Sequential:
    """``NUM_LAYERS`` blocks of Linear(WIDTH, WIDTH) + Tanh, in float64 so comparisons are exact to ~1e-15."""
    torch.manual_seed(seed)
    layers = []
    for _ in range(NUM_LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.Tanh()]
    return nn.Sequential(*layers).double()


def make_batch(batch_size: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, WIDTH, generator=g, dtype=torch.float64)
    y = torch.randn(batch_size, WIDTH, generator=g, dtype=torch.float64)
    return x, y


def stage_slices(num_stages: int) -> list[tuple[int, int]]:
    """Block ranges ``[start, end)`` of each stage (every block placed once: :func:`partition_layers`)."""
    sizes = partition_layers(NUM_LAYERS, num_stages)
    out, start = [], 0
    for n in sizes:
        out.append((start, start + n))
        start += n
    return out


def stage_module(model: nn.Sequential, start: int, end: int) -> nn.Sequential:
    """Blocks ``[start, end)`` of :func:`build_model`'s model (each block a Linear and its Tanh) as one
    ``nn.Sequential`` sharing the model's parameters: the part one pipeline stage runs (:func:`stage_slices`)."""
    return nn.Sequential(*list(model)[2 * start:2 * end])


def single_process_reference(batch_size: int):
    """What one process computes on the whole batch of :func:`make_batch` (``batch_size`` samples): ``(loss,
    grads)``, the MSE loss as a float and the gradient of every parameter of :func:`build_model`, in
    ``parameters()`` order (float64 tensors shaped like the parameters). The labs compare each pipeline with it."""
    model = build_model()
    x, y = make_batch(batch_size)
    loss = nn.MSELoss()(model(x), y)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    return loss.item(), grads


def run_pipeline(rank: int, world_size: int, schedule: str = "1f1b", num_microbatches: int = 4,
                 batch_size: int = 8) -> dict:
    """One training step of a ``world_size``-rank pipeline; returns this rank's comparison with one process.

    ``schedule``: ``"gpipe"``, ``"1f1b"`` or ``"interleaved-1f1b"`` (2 chunks per rank, ``2·world_size`` stages).
    Returns ``{"schedule", "rank", "num_stages", "blocks", "loss", "ref_loss", "max_grad_diff"}``; ``loss`` is the
    mean micro-batch loss on the last stage (None elsewhere).
    """
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleaved1F1B)

    dev = device()
    chunks = 2 if schedule == "interleaved-1f1b" else 1
    num_stages = world_size * chunks
    slices = stage_slices(num_stages)
    model = build_model().to(dev)
    x, y = make_batch(batch_size)
    x, y = x.to(dev), y.to(dev)
    my_stages = [rank + c * world_size for c in range(chunks)]  # stage i lives on rank i % world_size
    mods = [stage_module(model, *slices[i]) for i in my_stages]
    stages = [PipelineStage(mod, i, num_stages, dev) for mod, i in zip(mods, my_stages)]
    trace = _record_order(mods)
    loss_fn = nn.MSELoss()
    if schedule == "gpipe":
        sched = ScheduleGPipe(stages[0], num_microbatches, loss_fn=loss_fn)
    elif schedule == "1f1b":
        sched = Schedule1F1B(stages[0], num_microbatches, loss_fn=loss_fn)
    else:
        sched = ScheduleInterleaved1F1B(stages, num_microbatches, loss_fn=loss_fn)
    losses: list = []
    last = num_stages - 1 in my_stages
    first = 0 in my_stages
    if first and last:
        sched.step(x, target=y, losses=losses)
    elif first:
        sched.step(x)
    elif last:
        sched.step(target=y, losses=losses)
    else:
        sched.step()

    ref_loss, ref_grads = single_process_reference(batch_size)
    diff = _stage_grad_diff(my_stages, mods, slices, ref_grads)
    loss = float(torch.stack([torch.as_tensor(l).detach() for l in losses]).mean()) if losses else None
    blocks = [list(range(*slices[i])) for i in my_stages]
    return {"schedule": schedule, "rank": rank, "world_size": world_size, "num_microbatches": num_microbatches,
            "num_stages": num_stages, "blocks": blocks, "loss": loss,
            "ref_loss": ref_loss, "max_grad_diff": diff, "order": _number(trace, num_microbatches)}


def _record_order(mods) -> list:
    """Record, in the order torch runs them, each forward ("F", chunk) and backward ("B", chunk) of the rank's
    stage modules: a forward pre-hook, and a hook on the gradient of the chunk's first weight (computed once per
    micro-batch backward). Torch also runs one metadata-inference forward per stage before the schedule starts
    (shapes are inferred at run time); :func:`_number` drops it."""
    trace = []
    for c, mod in enumerate(mods):
        def pre(_m, args, c=c):
            trace.append(("F", c))
        mod.register_forward_pre_hook(pre)
        first = next(mod.parameters())
        first.register_hook(lambda g, c=c: trace.append(("B", c)) or g)
    return trace


def _number(trace, num_microbatches: int) -> list[tuple[str, int, int]]:
    """Turn ("F", chunk) records into (kind, microbatch, chunk): each chunk handles micro-batches in order.

    Each chunk's first forward is torch's metadata inference when there are ``num_microbatches + 1`` of them.
    """
    trace = list(trace)
    for c in {c for _, c in trace}:
        fwd = [i for i, (k, cc) in enumerate(trace) if k == "F" and cc == c]
        if len(fwd) == num_microbatches + 1:
            del trace[fwd[0]]
    seen: dict = {}
    out = []
    for kind, c in trace:
        j = seen.get((kind, c), 0)
        seen[(kind, c)] = j + 1
        out.append((kind, j, c))
    return out


def run_all(rank: int, world_size: int, num_microbatches: int = 4, batch_size: int = 8) -> list[dict]:
    """:func:`run_pipeline` with every schedule in turn (interleaved only where it applies), in one launch."""
    out = []
    for schedule in ("gpipe", "1f1b", "interleaved-1f1b"):
        out.append(run_pipeline(rank, world_size, schedule, num_microbatches, batch_size))
        dist.barrier()
    return out


def summarize(results_per_rank: list[list[dict]]) -> list[dict]:
    """One row per schedule from :func:`run_all`'s per-rank results: loss, reference loss, worst gradient error,
    and ``order_matches``: whether every rank ran its forwards and backwards in the order
    :func:`distlearn.pipeline_parallel.schedules.stage_order` predicts."""
    rows = []
    for per_rank in zip(*results_per_rank):
        loss = next(r["loss"] for r in per_rank if r["loss"] is not None)
        matches = all(r["order"] == stage_order(r["schedule"], r["rank"], r["world_size"], r["num_microbatches"],
                                                r["num_stages"] // r["world_size"]) for r in per_rank)
        rows.append({"schedule": per_rank[0]["schedule"], "num_stages": per_rank[0]["num_stages"],
                     "loss": loss, "ref_loss": per_rank[0]["ref_loss"],
                     "loss_diff": abs(loss - per_rank[0]["ref_loss"]),
                     "max_grad_diff": max(r["max_grad_diff"] for r in per_rank), "order_matches": matches})
    return rows


# ---------------------------------------------------------------------------------------------- micro-batch losses
def sample_weights(batch_size: int, num_microbatches: int) -> torch.Tensor:
    """0/1 weight per sample (float64): in micro-batch j (sizes of :func:`distlearn.pipeline_parallel.schedules.microbatch_sizes`)
    the first ``max(1, size − j)`` samples count, so the micro-batches hold different numbers of counted samples
    (8 samples in 4: 2, 1, 1, 1 of 2 each)."""
    out = []
    for j, n in enumerate(microbatch_sizes(batch_size, num_microbatches)):
        k = max(1, n - j)
        out += [1.0] * k + [0.0] * (n - k)
    return torch.tensor(out, dtype=torch.float64)


def per_sample_loss(out, y):
    """Squared error per sample: ``out`` and ``y`` (batch, WIDTH) → (batch,), the mean over features. Its mean over
    the batch is ``nn.MSELoss()(out, y)``."""
    return ((out - y) ** 2).mean(-1)


def masked_loss(out, target):
    """Mean over the counted samples of *this* micro-batch: ``target`` is ``(b, WIDTH + 1)``, targets then the
    0/1 weight (what ``F.mse_loss`` or ``F.cross_entropy(ignore_index=…)`` compute per call)."""
    w = target[:, -1]
    return (w * per_sample_loss(out, target[:, :-1])).sum() / w.sum()


class GlobalCountLoss:
    """Sum over the counted samples divided by ``num_counted``, the count of the **whole** batch (all
    micro-batches; with data parallelism, all-reduced over ranks too): the micro-batch losses then add up to the
    full-batch mean, and with ``scale_grads=False`` so do the gradients. With data parallelism, DDP and FSDP2
    then average the gradients over the replicas: :func:`run_dp_normalisation` shows the factor 1/dp and the fixes."""

    def __init__(self, num_counted: float):
        self.num_counted = float(num_counted)

    def __call__(self, out, target):
        w = target[:, -1]
        return (w * per_sample_loss(out, target[:, :-1])).sum() / self.num_counted


def _masked_reference(batch_size: int, weights):
    model = build_model()
    x, y = make_batch(batch_size)
    loss = (weights * per_sample_loss(model(x), y)).sum() / weights.sum()
    loss.backward()
    return loss.item(), [p.grad.clone() for p in model.parameters()]


def _stage_grad_diff(my_stages, mods, slices, ref_grads) -> float:
    ref_by_param = dict(zip([n for n, _ in build_model().named_parameters()], ref_grads))
    diff = 0.0
    for i, mod in zip(my_stages, mods):
        start, _ = slices[i]
        for name, prm in mod.named_parameters():
            idx, kind = name.split(".")
            ref = ref_by_param[f"{int(idx) + 2 * start}.{kind}"]
            diff = max(diff, float((prm.grad.cpu() - ref).abs().max()))
    return diff


def run_loss_normalisation(rank: int, world_size: int, mode: str = "global", num_microbatches: int = 4,
                           batch_size: int = 8) -> dict:
    """One GPipe step of a ``world_size``-stage pipeline with :func:`sample_weights`.

    ``mode="mean"``: :func:`masked_loss` per micro-batch and ``scale_grads=True`` (torch's default);
    ``mode="global"``: :class:`GlobalCountLoss` with the batch's count and ``scale_grads=False``.
    Returns ``{"mode", "rank", "microbatch_losses"`` (last stage, else None), ``"loss"`` (what the step reports:
    the mean of the micro-batch losses for "mean", their sum for "global"), ``"ref_loss"`` (one process, the
    counted samples' mean), ``"max_grad_diff"`` (this rank's stage against one process)}.
    """
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    dev = device()
    slices = stage_slices(world_size)
    model = build_model().to(dev)
    x, y = make_batch(batch_size)
    weights = sample_weights(batch_size, num_microbatches)
    target = torch.cat([y, weights[:, None]], dim=1).to(dev)
    mod = stage_module(model, *slices[rank])
    stage = PipelineStage(mod, rank, world_size, dev)
    if mode == "mean":
        sched = ScheduleGPipe(stage, num_microbatches, loss_fn=masked_loss, scale_grads=True)
    else:
        sched = ScheduleGPipe(stage, num_microbatches, loss_fn=GlobalCountLoss(weights.sum()), scale_grads=False)
    losses: list = []
    first, last = rank == 0, rank == world_size - 1
    if first and last:
        sched.step(x.to(dev), target=target, losses=losses)
    elif first:
        sched.step(x.to(dev))
    elif last:
        sched.step(target=target, losses=losses)
    else:
        sched.step()
    ref_loss, ref_grads = _masked_reference(batch_size, weights)
    mb = [float(l.detach()) for l in losses] if losses else None
    reported = (sum(mb) / len(mb) if mode == "mean" else sum(mb)) if mb else None
    return {"mode": mode, "rank": rank, "microbatch_losses": mb, "loss": reported, "ref_loss": ref_loss,
            "max_grad_diff": _stage_grad_diff([rank], [mod], slices, ref_grads)}


def run_both_normalisations(rank: int, world_size: int, num_microbatches: int = 4, batch_size: int = 8) -> list:
    """:func:`run_loss_normalisation` with ``"mean"`` then ``"global"``, in one launch."""
    out = [run_loss_normalisation(rank, world_size, "mean", num_microbatches, batch_size)]
    dist.barrier()
    out.append(run_loss_normalisation(rank, world_size, "global", num_microbatches, batch_size))
    return out


def run_uneven(rank: int, world_size: int, batch_size: int = 10, num_microbatches: int = 4) -> dict:
    """One GPipe step with ``batch_size`` not divisible by ``num_microbatches``, mean MSE loss, ``scale_grads=True``.
    On 2+ stages the last stage raises (size mismatch: its receive buffer has micro-batch 0's shape). On one stage
    (no communication) it runs and returns ``{"split": torch's micro-batch sizes, "microbatch_losses",
    "loss"`` (their mean), ``"ref_loss"`` (one process, full batch), ``"max_grad_diff"}``: the mean of the
    micro-batch means, biased when the sizes differ."""
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    from torch.distributed.pipelining.microbatch import split_args_kwargs_into_chunks

    dev = device()
    slices = stage_slices(world_size)
    model = build_model().to(dev)
    x, y = make_batch(batch_size)
    stage = PipelineStage(stage_module(model, *slices[rank]), rank, world_size, dev)
    sched = ScheduleGPipe(stage, num_microbatches, loss_fn=nn.MSELoss())
    split = [a[0].shape[0] for a in split_args_kwargs_into_chunks((x,), {}, num_microbatches)[0]]
    losses: list = []
    with warnings.catch_warnings():   # MSELoss warns about the 3-row output before it fails on it
        warnings.filterwarnings("ignore", message="Using a target size")
        if world_size == 1:
            sched.step(x.to(dev), target=y.to(dev), losses=losses)
        elif rank == 0:
            sched.step(x.to(dev))
        else:
            sched.step(target=y.to(dev), losses=losses)
    ref_loss, ref_grads = single_process_reference(batch_size)
    mb = [float(l.detach()) for l in losses]
    return {"split": split, "microbatch_losses": mb, "loss": sum(mb) / len(mb) if mb else None,
            "ref_loss": ref_loss, "max_grad_diff": _stage_grad_diff([rank], [stage.submod], slices, ref_grads)}


# ---------------------------------------------------------------------------------------------- with data parallelism
# how the data-parallel gradient reduction is set up in run_dp_normalisation / 数据并行的梯度规约方式
DP_MODES = ("fsdp", "fsdp-sum", "fsdp-loss-x-dp", "ddp", "ddp-loss-x-dp", "ddp-sum")


def _sum_hook(group, bucket):
    """A DDP communication hook that all-reduces each bucket with a plain sum (DDP's own reduction divides by the
    group's size, and so does the built-in ``allreduce_hook``)."""
    fut = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def dp_rows(batch_size: int, dp: int, dp_rank: int) -> slice:
    """The rows of the global batch that data-parallel replica ``dp_rank`` of ``dp`` takes: a contiguous block."""
    return slice(dp_rank * batch_size // dp, (dp_rank + 1) * batch_size // dp)


def masked_reference_grads(batch_size: int, weights, divisor: float, rows=None) -> dict:
    """One process: the gradient of ``Σ_{i in rows} w_i·ℓ_i / divisor`` (all rows by default) for every parameter
    of :func:`build_model`, by name. With ``divisor = Σ w`` and all rows it is the full-batch gradient of the
    counted samples' mean."""
    model = build_model()
    x, y = make_batch(batch_size)
    keep = torch.zeros(batch_size, dtype=torch.float64)
    keep[rows if rows is not None else slice(None)] = 1.0
    ((keep * weights * per_sample_loss(model(x), y)).sum() / divisor).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def stage_names(pp: int, pp_rank: int) -> list[str]:
    """Names in :func:`build_model` of the parameters stage ``pp_rank`` of ``pp`` holds, in its ``parameters()``
    order."""
    start, end = stage_slices(pp)[pp_rank]
    return [f"{2 * blk}.{kind}" for blk in range(start, end) for kind in ("weight", "bias")]


def run_dp_normalisation(rank: int, world_size: int, mode: str = "fsdp", dp: int = 2, num_microbatches: int = 4,
                         batch_size: int = 16, steps: int = 1) -> dict:
    """One GPipe step of ``world_size // dp`` stages on each of ``dp`` data-parallel replicas, with the
    global-count loss of :class:`GlobalCountLoss` and ``scale_grads=False`` (``steps`` such steps on the same
    batch, the gradients cleared before each, no optimizer: the gradients are those of the last).

    The ranks form a ``(pp, dp)`` device mesh. Replica d takes rows :func:`dp_rows` of the batch and the same rows
    of :func:`sample_weights` ``(batch_size, dp·num_microbatches)``. The count N of counted samples of the
    **whole** batch is all-reduced over the data-parallel group; every micro-batch's loss is its sum over counted
    samples divided by N. The stage module is then wrapped for data parallelism:

    - ``"fsdp"``: FSDP2 ``fully_shard`` over the dp group, defaults: the gradients are **averaged** over dp;
    - ``"fsdp-sum"``: the same with ``set_gradient_divide_factor(1.0)``: summed;
    - ``"fsdp-loss-x-dp"``: FSDP2 defaults, the loss divided by N / dp instead of N (dp times larger);
    - ``"ddp"``: ``DistributedDataParallel`` over the dp group, defaults: averaged;
    - ``"ddp-loss-x-dp"``: DDP defaults, the loss divided by N / dp;
    - ``"ddp-sum"``: DDP with :func:`_sum_hook` as its communication hook. Inside ``torch.distributed.pipelining``
      (torch 2.13) this counts micro-batch 0 dp times: the stage's metadata-inference forward runs the DDP module
      with gradients on and outside ``no_sync``, so DDP reduces micro-batch 0's gradient during its backward, and
      again, accumulated with the others, at the last backward. An average of an average is harmless; a sum of a
      sum is not. (With DDP in either mode, a second step then fails: DDP rebuilds its buckets after the first
      step from the order in which gradients arrived, and it recorded them twice.)

    Returns ``{"mode", "rank", "pp_rank", "dp_rank", "dp", "num_counted_local", "num_counted", "grad"`` (this
    rank's stage gradient, flattened, float64), ``"ref"`` (one process's full-batch gradient of the same
    parameters), ``"scale"`` (the least-squares s with grad ≈ s · ref), ``"max_diff"`` (max |grad − ref|),
    ``"max_diff_over_dp"`` (max |grad − ref / dp|)}."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    if mode not in DP_MODES:
        raise ValueError(f"mode must be one of {DP_MODES}, got {mode!r}")
    if world_size % dp or batch_size % (dp * num_microbatches):
        raise ValueError(f"world_size = {world_size} must be a multiple of dp = {dp}, and batch_size = {batch_size} "
                         f"of dp · num_microbatches = {dp * num_microbatches}")
    pp = world_size // dp
    dev = device()
    mesh = init_device_mesh(dev.type, (pp, dp), mesh_dim_names=("pp", "dp"))
    pp_rank, dp_rank = mesh.get_local_rank("pp"), mesh.get_local_rank("dp")
    dp_group = mesh["dp"].get_group()
    model = build_model().to(dev)
    x, y = make_batch(batch_size)
    weights = sample_weights(batch_size, dp * num_microbatches)
    rows = dp_rows(batch_size, dp, dp_rank)
    x, y, w = x[rows].to(dev), y[rows].to(dev), weights[rows].to(dev)
    count = w.sum().reshape(1).clone()
    dist.all_reduce(count, group=dp_group)   # N: the whole batch's count / 整批的计数
    mod = stage_module(model, *stage_slices(pp)[pp_rank])
    if mode.startswith("fsdp"):
        from torch.distributed.fsdp import fully_shard

        wrapped = fully_shard(mod, mesh=mesh["dp"])
        if mode == "fsdp-sum":
            wrapped.set_gradient_divide_factor(1.0)
    else:
        wrapped = nn.parallel.DistributedDataParallel(mod, process_group=dp_group)
        if mode == "ddp-sum":
            wrapped.register_comm_hook(dp_group, _sum_hook)
    divisor = float(count) / dp if mode.endswith("loss-x-dp") else float(count)
    stage = PipelineStage(wrapped, pp_rank, pp, dev, group=mesh["pp"].get_group())
    sched = ScheduleGPipe(stage, num_microbatches, loss_fn=GlobalCountLoss(divisor), scale_grads=False)
    target = torch.cat([y, w[:, None]], dim=1)
    first, last = pp_rank == 0, pp_rank == pp - 1
    for _ in range(steps):
        for prm in mod.parameters():
            prm.grad = None
        if first and last:
            sched.step(x, target=target)
        elif first:
            sched.step(x)
        elif last:
            sched.step(target=target)
        else:
            sched.step()
    grads = [p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad for p in mod.parameters()]
    got = torch.cat([g.detach().cpu().flatten() for g in grads])
    full = masked_reference_grads(batch_size, weights, float(weights.sum()))
    ref = torch.cat([full[n].flatten() for n in stage_names(pp, pp_rank)])
    return {"mode": mode, "rank": rank, "pp_rank": pp_rank, "dp_rank": dp_rank, "dp": dp,
            "num_counted_local": float(w.sum()), "num_counted": float(count), "grad": got, "ref": ref,
            "scale": float(got @ ref / (ref @ ref)), "max_diff": float((got - ref).abs().max()),
            "max_diff_over_dp": float((got - ref / dp).abs().max())}


def run_dp_modes(rank: int, world_size: int, modes=DP_MODES, dp: int = 2, num_microbatches: int = 4,
                 batch_size: int = 16) -> list[dict]:
    """:func:`run_dp_normalisation` for each of ``modes`` in turn, in one launch."""
    out = []
    for mode in modes:
        out.append(run_dp_normalisation(rank, world_size, mode, dp, num_microbatches, batch_size))
        dist.barrier()
    return out


if __name__ == "__main__":
    torchrun_main(run_all)
