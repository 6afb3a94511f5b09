"""DiLoCo and its DDP baseline on real processes (gloo), one replica per rank: the same algorithm, data and weights as
:func:`distlearn.fault_tolerance.diloco.simulate` / :func:`~distlearn.fault_tolerance.diloco.simulate_ddp`, which
they must equal (tests/test_diloco.py). Run them with :func:`distlearn.core.launch.run`, e.g.
``launch.run(lab_diloco, 4, 20, 300)``."""
from __future__ import annotations

from distlearn.fault_tolerance.diloco import PAPER_OUTER_LR, PAPER_OUTER_MOMENTUM, Run, make_data, make_model
from distlearn.fault_tolerance.lab_task import (batch, check_arguments, flat_params, inner_optimizer, mse,
                                                outer_optimizer, set_grads)


def lab_diloco(rank: int, world_size: int, sync_every: int = 5, steps: int = 200, inner: str = "adamw",
               inner_lr: float = 0.01, outer_lr: float = PAPER_OUTER_LR, outer_momentum: float = PAPER_OUTER_MOMENTUM,
               seed: int = 0) -> dict:
    """One DiLoCo replica per process (run it with :func:`distlearn.core.launch.run`): H inner steps on this
    rank's shard, then one ``all_reduce`` of the flat pseudo-gradient (P float64 values), the outer step, repeat.
    Returns ``{"final": θ as a vector, "eval_loss": [...], "sent_bytes": bytes handed to all-reduces, "calls":
    number of all-reduces}``."""
    import torch.distributed as dist

    check_arguments(world_size, sync_every, steps, inner, inner_lr, outer_lr, outer_momentum, seed)
    data = make_data(world_size, seed)
    glob, model = make_model(seed), make_model(seed)
    outer = outer_optimizer(glob.parameters(), outer_lr, outer_momentum)
    opt = inner_optimizer(model, inner, inner_lr)
    run, calls = Run(), 0
    run.record(0, glob, data, 0)
    for rnd in range(steps // sync_every):
        for h in range(sync_every):                                   # H inner steps, no communication / 不通信
            opt.zero_grad()
            mse(model, batch(data.shards[rank], rnd * sync_every + h)).backward()
            opt.step()
        delta = flat_params(glob) - flat_params(model)                              # pseudo-gradient / 伪梯度
        dist.all_reduce(delta)                                        # the one all-reduce / 唯一一次 all-reduce
        delta /= world_size
        calls += 1
        set_grads(glob, delta)
        outer.step()
        model.load_state_dict(glob.state_dict())
        run.record((rnd + 1) * sync_every, glob, data, calls * delta.numel() * delta.element_size())
    return {"final": flat_params(glob), "eval_loss": run.eval_loss, "sent_bytes": run.sent_bytes[-1], "calls": calls}


def lab_ddp(rank: int, world_size: int, steps: int = 200, optimizer: str = "adamw", lr: float = 0.01,
            seed: int = 0) -> dict:
    """The baseline on real processes: torch's ``DistributedDataParallel`` around the same model, one step per batch.
    A communication hook counts the bytes of every bucket DDP all-reduces, then calls torch's default
    ``allreduce_hook``. Returns ``{"final", "eval_loss" (every step), "sent_bytes", "calls"}``."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    check_arguments(world_size, 1, steps, optimizer, lr, 1.0, 0.0, seed)
    data = make_data(world_size, seed)
    model = DDP(make_model(seed))
    count = {"bytes": 0, "calls": 0}

    def counting_hook(state, bucket):                                 # count, then all-reduce / 先计数，再 all-reduce
        count["bytes"] += bucket.buffer().numel() * bucket.buffer().element_size()
        count["calls"] += 1
        return allreduce_hook(dist.group.WORLD, bucket)

    model.register_comm_hook(None, counting_hook)
    opt = inner_optimizer(model.module, optimizer, lr)
    run = Run()
    run.record(0, model.module, data, 0)
    for step in range(steps):
        opt.zero_grad()
        mse(model, batch(data.shards[rank], step)).backward()         # DDP all-reduces here / DDP 在这里 all-reduce
        opt.step()
        run.record(step + 1, model.module, data, count["bytes"])
    return {"final": flat_params(model.module), "eval_loss": run.eval_loss, "sent_bytes": count["bytes"],
            "calls": count["calls"]}
