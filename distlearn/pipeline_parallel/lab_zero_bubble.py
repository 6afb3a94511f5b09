"""torch 2.13's zero-bubble pipeline schedules on gloo, against one process: ZB-H1, interleaved zero bubble, ZB-V and
DualPipeV (``torch.distributed.pipelining.schedules``).

Every rank builds the 8-block float64 MLP of :mod:`distlearn.pipeline_parallel.lab` from the same seed and keeps the stages
the schedule puts on it; one training step (forward and backward, no optimizer) runs with:

- ``"zb-h1"``: ``ScheduleInterleavedZeroBubble`` with one stage per rank (``world_size`` stages);
- ``"interleaved-zb"``: the same class with two stages per rank, looped (stage i on rank i mod world_size);
- ``"zbv"``: ``ScheduleZBVZeroBubble``: exactly two stages per rank in a V (rank r holds stages r and
  2·world_size − 1 − r, so the last stage and the loss live on rank 0, next to the first);
- ``"dualpipev"``: ``ScheduleDualPipeV``: the same V placement, at least as many micro-batches as stages
  (2·world_size), F&B blocks run as a forward then a full backward.

What is compared: the mean micro-batch loss with the full-batch loss, every stage's accumulated gradients with the
single-process gradients (torch divides them by m, ``scale_grads=True``), and the order in which each rank ran
forwards (F), input-gradient passes (I), weight-gradient passes (W) and full backwards (B) — recorded by wrapping the
stages' ``forward_one_chunk``, ``backward_one_chunk`` and ``backward_weight_one_chunk`` — with
:func:`distlearn.pipeline_parallel.schedules.stage_order`.

Run alone: ``torchrun --nproc-per-node 2 -m distlearn.pipeline_parallel.lab_zero_bubble`` (or 4).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn

from distlearn.pipeline_parallel.lab import (build_model, make_batch, single_process_reference, stage_module,
                                            stage_slices)
from distlearn.core.launch import device, torchrun_main
from distlearn.pipeline_parallel.schedules import stage_order
from distlearn.pipeline_parallel.zero_bubble import virtual_stage

SCHEDULES = ("zb-h1", "interleaved-zb", "zbv", "dualpipev")


def stages_of(schedule: str, rank: int, world_size: int) -> list[int]:
    """Pipeline stage indices on ``rank``, chunk 0 first (:func:`distlearn.pipeline_parallel.zero_bubble.virtual_stage`)."""
    chunks = 1 if schedule == "zb-h1" else 2
    return [virtual_stage(schedule, rank, c, world_size) for c in range(chunks)]


def _schedule_class(schedule: str):
    from torch.distributed.pipelining.schedules import (ScheduleDualPipeV, ScheduleInterleavedZeroBubble,
                                                        ScheduleZBVZeroBubble)
    return {"zb-h1": ScheduleInterleavedZeroBubble, "interleaved-zb": ScheduleInterleavedZeroBubble,
            "zbv": ScheduleZBVZeroBubble, "dualpipev": ScheduleDualPipeV}[schedule]


def _record(stages, trace: list) -> None:
    """Wrap each stage's compute entry points to append (kind, micro-batch, chunk) to ``trace`` when torch runs
    them: F forward, B full backward, I input gradient, W weight gradient."""
    for chunk, stage in enumerate(stages):
        fwd, bwd, wgt = stage.forward_one_chunk, stage.backward_one_chunk, stage.backward_weight_one_chunk

        def forward_one_chunk(mb, *args, _f=fwd, _c=chunk, **kwargs):
            trace.append(("F", mb, _c))
            return _f(mb, *args, **kwargs)

        def backward_one_chunk(mb, *args, _b=bwd, _c=chunk, full_backward=True, **kwargs):
            trace.append(("B" if full_backward else "I", mb, _c))
            return _b(mb, *args, full_backward=full_backward, **kwargs)

        def backward_weight_one_chunk(mb, *args, _w=wgt, _c=chunk, **kwargs):
            trace.append(("W", mb, _c))
            return _w(mb, *args, **kwargs)

        stage.forward_one_chunk = forward_one_chunk
        stage.backward_one_chunk = backward_one_chunk
        stage.backward_weight_one_chunk = backward_weight_one_chunk


def run_schedule(rank: int, world_size: int, schedule: str = "zb-h1", num_microbatches: int = 4,
                 batch_size: int = 8) -> dict:
    """One training step of ``schedule`` on ``world_size`` ranks; returns this rank's comparison with one process:
    ``{"schedule", "rank", "world_size", "num_microbatches", "stages", "loss"`` (mean micro-batch loss where the
    last stage lives, else None), ``"ref_loss"``, ``"max_grad_diff"``, ``"order"`` (what torch ran)}."""
    from torch.distributed.pipelining import PipelineStage

    dev = device()
    num_stages = world_size * (1 if schedule == "zb-h1" else 2)
    slices = stage_slices(num_stages)
    model = build_model().to(dev)
    x, y = make_batch(batch_size)
    mine = stages_of(schedule, rank, world_size)
    mods = [stage_module(model, *slices[i]) for i in mine]
    stages = [PipelineStage(mod, i, num_stages, dev) for mod, i in zip(mods, mine)]
    trace: list = []
    _record(stages, trace)
    sched = _schedule_class(schedule)(stages, num_microbatches, loss_fn=nn.MSELoss())
    losses: list = []
    kwargs = {}
    if 0 in mine:
        kwargs["x"] = x.to(dev)
    if num_stages - 1 in mine:
        kwargs.update(target=y.to(dev), losses=losses)
    args = (kwargs.pop("x"),) if "x" in kwargs else ()
    sched.step(*args, **kwargs)

    ref_loss, ref_grads = single_process_reference(batch_size)
    names = [n for n, _ in build_model().named_parameters()]
    ref = dict(zip(names, ref_grads))
    diff = 0.0
    for i, mod in zip(mine, mods):
        start = slices[i][0]
        for name, prm in mod.named_parameters():
            idx, kind = name.split(".")
            diff = max(diff, float((prm.grad.cpu() - ref[f"{int(idx) + 2 * start}.{kind}"]).abs().max()))
    loss = float(torch.stack([torch.as_tensor(l).detach() for l in losses]).mean()) if losses else None
    return {"schedule": schedule, "rank": rank, "world_size": world_size, "num_microbatches": num_microbatches,
            "stages": mine, "loss": loss, "ref_loss": ref_loss, "max_grad_diff": diff, "order": trace}


def run_all(rank: int, world_size: int, num_microbatches: int = 4, batch_size: int = 8) -> list[dict]:
    """:func:`run_schedule` for every schedule of :data:`SCHEDULES`, in one launch."""
    out = []
    for schedule in SCHEDULES:
        out.append(run_schedule(rank, world_size, schedule, num_microbatches, batch_size))
        dist.barrier()
    return out


def summarize(results_per_rank: list[list[dict]]) -> list[dict]:
    """One row per schedule: loss, reference loss, |Δ loss|, worst gradient error over the ranks, and
    ``order_matches``: every rank ran exactly :func:`distlearn.pipeline_parallel.schedules.stage_order`'s operations in its order."""
    rows = []
    for per_rank in zip(*results_per_rank):
        r0 = per_rank[0]
        loss = next(r["loss"] for r in per_rank if r["loss"] is not None)
        v = 2 if r0["schedule"] == "interleaved-zb" else 1
        matches = all(r["order"] == stage_order(r["schedule"], r["rank"], r["world_size"], r["num_microbatches"], v)
                      for r in per_rank)
        rows.append({"schedule": r0["schedule"], "num_stages": sum(len(r["stages"]) for r in per_rank),
                     "stages_of_rank0": r0["stages"], "loss": loss, "ref_loss": r0["ref_loss"],
                     "loss_diff": abs(loss - r0["ref_loss"]),
                     "max_grad_diff": max(r["max_grad_diff"] for r in per_rank), "order_matches": matches})
    return rows


def torchrun_entry(rank: int, world_size: int) -> list[dict]:
    """What ``torchrun --nproc-per-node N -m distlearn.pipeline_parallel.lab_zero_bubble`` runs: :func:`run_all`
    with 2·N microbatches (DualPipeV puts 2 stages on each rank and needs at least as many microbatches as stages)
    of 2 samples each."""
    return run_all(rank, world_size, 2 * world_size, 4 * world_size)


if __name__ == "__main__":
    torchrun_main(torchrun_entry)
