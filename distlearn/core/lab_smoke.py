"""A minimal lab: every rank contributes ``rank + 1``; all_reduce sums them. Also used by the launcher's tests.

Run it alone: ``torchrun --nproc-per-node 2 -m distlearn.core.lab_smoke``.
"""
import os
import signal
import time

import torch
import torch.distributed as dist

from distlearn.core.launch import device, torchrun_main


def all_reduce_rank(rank: int, world_size: int) -> float:
    """Return the sum over ranks of (rank + 1), computed with a real all_reduce: world_size·(world_size+1)/2."""
    t = torch.tensor([float(rank + 1)], device=device())
    dist.all_reduce(t)
    return float(t.item())


def environment(rank: int, world_size: int, name: str) -> tuple:
    """``(os.environ.get(name), process id, parent process id)`` on this rank: what the launcher's tests inspect."""
    import os

    return os.environ.get(name), os.getpid(), os.getppid()


def raise_on_rank(rank: int, world_size: int, bad_rank: int) -> int:
    """Raise ValueError on ``bad_rank``; the other ranks wait in a collective it never joins."""
    if rank == bad_rank:
        raise ValueError(f"deliberate failure on rank {rank}")
    dist.barrier()
    return rank


def sigkill_on_rank(rank: int, world_size: int, bad_rank: int) -> int:
    """``bad_rank`` kills itself with SIGKILL (no Python error, no message); the others wait in a barrier and then
    see broken connections."""
    if rank == bad_rank:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    return rank


def hang_on_rank(rank: int, world_size: int, bad_rank: int) -> int:
    """``bad_rank`` sleeps instead of joining the all_reduce: the run hangs until the launcher's timeout."""
    if rank == bad_rank:
        time.sleep(3600)
    t = torch.ones(1)
    dist.all_reduce(t)
    return rank


if __name__ == "__main__":
    torchrun_main(all_reduce_rank)


def niceness(rank: int, world_size: int) -> int:
    """This rank's niceness (``os.nice(0)``): on a shared machine the launcher renices every lab process
    (``DISTLEARN_LAB_NICE``, :mod:`distlearn.core.limits`)."""
    return os.nice(0)
