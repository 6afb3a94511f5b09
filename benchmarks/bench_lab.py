"""One real 4-rank gloo lab from start to finish: spawn 4 processes, initialize the process group, all_reduce,
tear down (``distlearn.launch.run(distlearn.labs.smoke.all_reduce_rank, 4)``). Goal: < 15 s on 2 cores."""
from __future__ import annotations

import time

GOAL = 15.0


def main(quick: bool = False, world_size: int = 4) -> dict[str, float]:
    from distlearn.labs.smoke import all_reduce_rank
    from distlearn.launch import run

    world_size = 2 if quick else world_size
    t0 = time.perf_counter()
    results = run(all_reduce_rank, world_size)
    seconds = time.perf_counter() - t0
    expected = world_size * (world_size + 1) / 2
    if results != [expected] * world_size:  # a wrong result would make the time meaningless
        raise RuntimeError(f"all_reduce returned {results}, expected {expected} on every rank")
    return {f"{world_size}-rank gloo lab (smoke all_reduce), start to finish": seconds}
