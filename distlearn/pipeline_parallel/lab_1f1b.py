"""1F1B written by hand with ``dist.isend`` / ``dist.irecv`` on real processes.

One rank per stage. Activations travel forward (stage s → s + 1), gradients backward (s + 1 → s). Stage ``s`` of
``p`` runs the three loops of PipeDream-Flush (Narayanan et al. 2021, §2.2.1): ``w = min(p − s − 1, m)`` warm-up
forwards, ``m − w`` steady rounds of one forward and one backward, and ``w`` cool-down backwards
(:func:`train_step_1f1b`).

:func:`run_1f1b_check` runs it on the small MLP stack of :mod:`distlearn.pipeline_parallel.lab` and checks it three
ways, on the same stages and the same batch: the loss and every gradient against one process, the gradients against
PyTorch's own ``Schedule1F1B`` (``torch.distributed.pipelining``), and each rank's order of forwards and backwards
against the simulation's :func:`distlearn.pipeline_parallel.schedules.stage_order` (and against torch's order).
It also records the peak number of micro-batches in flight on each stage (activations kept for backward): ``p − s``
when ``m ≥ p``, where GPipe keeps ``m``.

From a notebook: ``distlearn.core.launch.run(run_1f1b_check, 4)``. Alone:
``torchrun --nproc-per-node 4 -m distlearn.pipeline_parallel.lab_1f1b``.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn

from distlearn.core.launch import device, torchrun_main
from distlearn.pipeline_parallel.lab import build_model, make_batch, stage_module, stage_slices
from distlearn.core.guard import read_only


# ------------------------------------------------------------------------------------- the readable algorithm
def train_step_1f1b(stage: nn.Module, x_mbs, y_mbs, loss_fn=nn.MSELoss()) -> dict:
    """One 1F1B training step of this rank's ``stage`` (rank s of p, one stage per rank).

    ``x_mbs``: the input micro-batches (used on stage 0); ``y_mbs``: the targets (used on the last stage). Each
    micro-batch's loss is divided by ``m``, so the gradients are those of the mean loss over the whole batch.
    Returns ``{"loss"`` (last stage: the mean micro-batch loss, else None), ``"order"`` (``[("F" | "B", j)]``),
    ``"peak_inflight"`` (most micro-batches whose activations were kept at once)}."""
    s, p, m = dist.get_rank(), dist.get_world_size(), len(x_mbs)
    first, last = s == 0, s == p - 1
    like = dict(size=x_mbs[0].shape, dtype=x_mbs[0].dtype, device=x_mbs[0].device)  # equal micro-batches / 微批次大小相同
    inflight, sends, order, losses, peak = [], [], [], [], 0

    def forward(j):
        nonlocal peak
        if first:
            inp = x_mbs[j]
        else:
            inp = torch.empty(**like)
            dist.irecv(inp, src=s - 1).wait()  # activation from the previous stage / 来自上一阶段的激活
            inp.requires_grad_()
        out = stage(inp)
        if last:
            out = loss_fn(out, y_mbs[j]) / m
            losses.append(out.item() * m)
        else:
            sends.append(dist.isend(out.detach(), dst=s + 1))  # don't wait: the next stage will / 不等待，下一阶段会收
        inflight.append((inp, out))  # kept until this micro-batch's backward / 保留到它的反向
        peak = max(peak, len(inflight))
        order.append(("F", j))

    def backward(j):
        inp, out = inflight.pop(0)  # the oldest micro-batch first / 最早的微批次先做
        if last:
            out.backward()
        else:
            grad = torch.empty_like(out)
            dist.irecv(grad, src=s + 1).wait()  # ∂L/∂output from the next stage / 来自下一阶段的梯度
            out.backward(grad)
        if not first:
            sends.append(dist.isend(inp.grad, dst=s - 1))  # ∂L/∂input to the previous stage / 传给上一阶段
        order.append(("B", j))

    warmup = min(p - s - 1, m)
    for j in range(warmup):  # warm-up: forwards only / 预热期：只做前向
        forward(j)
    for j in range(m - warmup):  # steady: one forward, one backward / 稳定期：一个前向，一个反向
        forward(warmup + j)
        backward(j)
    for j in range(m - warmup, m):  # cool-down: the backwards still owed / 收尾期：做完欠下的反向
        backward(j)
    for req in sends:  # every message has been delivered / 确认所有消息都已送达
        req.wait()
    return {"loss": sum(losses) / m if last else None, "order": order, "peak_inflight": peak}


# ------------------------------------------------------------------------------------- the checks
BREAKS = read_only({  # mistakes made on purpose: the text of train_step_1f1b replaced / 故意犯的错：替换 train_step_1f1b 中的代码
    "warmup_too_long": ("warmup = min(p - s - 1, m)", "warmup = min(p - s, m)"),
    "newest_first": ("inflight.pop(0)", "inflight.pop()"),
    "loss_not_over_m": ("out = loss_fn(out, y_mbs[j]) / m", "out = loss_fn(out, y_mbs[j])"),
    "backward_first": ("        forward(warmup + j)\n        backward(j)", "        backward(j)\n        forward(warmup + j)"),
})


def _broken_step(how: str):
    """:func:`train_step_1f1b` with one mistake of :data:`BREAKS`, compiled from its source (the tests check that
    the checks then fail)."""
    import inspect

    old, new = BREAKS[how]
    src = inspect.getsource(train_step_1f1b)
    if src.count(old) != 1:
        raise ValueError(f"break {how!r}: {old!r} must occur once in train_step_1f1b")
    namespace: dict = {}
    exec(compile(src.replace(old, new), __file__, "exec"), globals(), namespace)
    return namespace["train_step_1f1b"]


def _torch_1f1b(rank: int, world_size: int, num_microbatches: int, batch_size: int) -> tuple[list, list]:
    """The same step with PyTorch's ``Schedule1F1B`` on the same stage: ``(gradients, order)``. The order is
    recorded by a forward pre-hook ("F") and a hook on the gradient of the stage's first weight ("B", once per
    micro-batch backward); torch's one shape-inference forward before the schedule is dropped."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    dev = device()
    mod = stage_module(build_model().to(dev), *stage_slices(world_size)[rank])
    trace: list = []
    mod.register_forward_pre_hook(lambda _m, _args: trace.append("F"))
    next(mod.parameters()).register_hook(lambda g: trace.append("B") or g)
    sched = Schedule1F1B(PipelineStage(mod, rank, world_size, dev), num_microbatches, loss_fn=nn.MSELoss())
    x, y = make_batch(batch_size)
    first, last = rank == 0, rank == world_size - 1
    args = (x.to(dev),) if first else ()
    kwargs = {"target": y.to(dev)} if last else {}
    sched.step(*args, **kwargs)
    if trace.count("F") == num_microbatches + 1:
        trace.remove("F")  # the shape-inference forward / 推断形状的那次前向
    order, seen = [], {"F": 0, "B": 0}
    for kind in trace:  # micro-batches run in order within each kind / 同一种操作按微批次顺序执行
        order.append((kind, seen[kind]))
        seen[kind] += 1
    return [prm.grad.detach().cpu().clone() for prm in mod.parameters()], order


def run_1f1b_check(rank: int, world_size: int, num_microbatches: int = 4, batch_size: int = 8,
                   broken: str | None = None) -> dict:
    """:func:`train_step_1f1b` on this rank's stage of :func:`build_model`, checked against one process, PyTorch's
    ``Schedule1F1B`` and the simulation's order.

    Returns ``{"rank", "world_size", "num_microbatches", "loss"`` (last stage, else None), ``"ref_loss"`` (one
    process on the whole batch), ``"grad_vs_one"`` (max |Δ| of this stage's gradients against one process's),
    ``"grad_vs_torch"`` (against ``Schedule1F1B``'s), ``"order"`` (``[("F" | "B", j)]``), ``"torch_order"``,
    ``"sim_order"`` (:func:`stage_order` of ``"1f1b"``, chunk dropped), ``"peak_inflight"``}. ``broken``: a key
    of :data:`BREAKS`, to run a version broken on purpose."""
    from distlearn.pipeline_parallel.lab import single_process_reference
    from distlearn.pipeline_parallel.schedules import stage_order

    dev = device()
    start, end = stage_slices(world_size)[rank]
    mod = stage_module(build_model().to(dev), start, end)
    x, y = make_batch(batch_size)
    step = train_step_1f1b if broken is None else _broken_step(broken)
    out = step(mod, x.to(dev).chunk(num_microbatches), y.to(dev).chunk(num_microbatches))
    mine = [prm.grad.detach().cpu().clone() for prm in mod.parameters()]
    dist.barrier()
    theirs, torch_order = _torch_1f1b(rank, world_size, num_microbatches, batch_size)

    ref_loss, ref_grads = single_process_reference(batch_size)
    ref = ref_grads[2 * start:2 * end]  # a weight and a bias per block / 每块一个权重、一个偏置
    worst = lambda a, b: max(float((u - v).abs().max()) for u, v in zip(a, b))
    sim = [(k, j) for k, j, _ in stage_order("1f1b", rank, world_size, num_microbatches)]
    return {"rank": rank, "world_size": world_size, "num_microbatches": num_microbatches, "loss": out["loss"],
            "ref_loss": ref_loss, "grad_vs_one": worst(mine, ref), "grad_vs_torch": worst(mine, theirs),
            "order": out["order"], "torch_order": torch_order, "sim_order": sim,
            "peak_inflight": out["peak_inflight"], "num_params": len(mine)}


if __name__ == "__main__":
    torchrun_main(run_1f1b_check)
