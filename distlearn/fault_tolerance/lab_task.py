"""The small deterministic task shared by chapter 13's DiLoCo and replica-group simulations and their labs
(:mod:`distlearn.fault_tolerance.diloco`, :mod:`~distlearn.fault_tolerance.replicas`, ``lab_diloco``,
``lab_replicas``): batches, the loss, flat parameter vectors, the optimizers and the argument checks. Internal
plumbing; the boundary run leaves it out with the labs (its arguments are models and tensors the course builds)."""
from __future__ import annotations

import torch

from distlearn.core.validate import check_choice, check_divisible, check_int, check_number, check_seed

SHARD, BATCH = 256, 16        # samples per replica's shard, per batch / 每个副本的分片大小、每个批次的样本数
INNER = ("adamw", "sgd")      # inner optimizers / 内层优化器


def batch(shard, step: int):
    """Rows [16·step, 16·step + 16) of the shard, wrapping around: the ``step``-th batch of one replica."""
    x, y = shard
    i = (step * BATCH) % SHARD
    return x[i:i + BATCH], y[i:i + BATCH]


def mse(model, xy) -> torch.Tensor:
    """Mean squared error of ``model`` on the pair ``xy`` = (x of shape (n, 8), y of shape (n, 1))."""
    x, y = xy
    return torch.mean((model(x) - y) ** 2)


def flat_params(model) -> torch.Tensor:
    """All parameters of ``model`` as one detached float64 vector (321 values for the course's MLP)."""
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def set_grads(model, flat: torch.Tensor) -> None:
    """Cut the vector ``flat`` (one value per parameter, in ``model.parameters()`` order) into each ``p.grad``."""
    i = 0
    for p in model.parameters():
        p.grad = flat[i:i + p.numel()].view_as(p).clone()
        i += p.numel()


def inner_optimizer(model, inner: str, lr: float):
    """A replica's own optimizer: ``"adamw"`` (torch's AdamW, no weight decay) or ``"sgd"`` (plain SGD)."""
    if inner == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    return torch.optim.SGD(model.parameters(), lr=lr)


def outer_optimizer(params, lr: float, momentum: float):
    """DiLoCo's outer optimizer: torch's SGD with Nesterov momentum (plain SGD when ``momentum`` is 0)."""
    return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=momentum > 0)


def check_arguments(replicas, sync_every, steps, inner, inner_lr, outer_lr, outer_momentum, seed):
    """Validate a run's arguments; raises the course's bilingual DistlearnValueError naming the parameter."""
    check_int("replicas", replicas, minimum=1, maximum=16)
    check_int("sync_every", sync_every, minimum=1, maximum=1000)
    check_int("steps", steps, minimum=1, maximum=5000)
    check_divisible("steps", steps, "sync_every", sync_every)
    check_choice("inner", inner, INNER)
    check_number("inner_lr", inner_lr, minimum=0, maximum=10, strict_min=True)
    check_number("outer_lr", outer_lr, minimum=0, maximum=10, strict_min=True)
    check_number("outer_momentum", outer_momentum, minimum=0, maximum=0.999)
    check_seed("seed", seed)
