"""Planner speed: a full search for a 405B model on 1024 GPUs must finish in under 2 seconds (issue 8).

``main()`` returns ``{name: seconds}`` (best of three runs) for the benchmark runner.
"""
from __future__ import annotations

import time

from distlearn import planner


def _best_of(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> dict[str, float]:
    return {
        "planner: llama3.1-405b on 1024 h100-80gb, seq 8192, batch 2048 (full search)": _best_of(
            lambda: planner.search("llama3.1-405b", global_batch=2048, seq_len=8192, gpu="h100-80gb",
                                   num_gpus=1024)),
        "planner: llama3-70b on 64 h100-80gb, seq 8192, batch 512": _best_of(
            lambda: planner.search("llama3-70b", global_batch=512, seq_len=8192, gpu="h100-80gb", num_gpus=64)),
        "planner: gpt3-175b on 1024 a100-80gb, batch 1536": _best_of(
            lambda: planner.search(planner.GPT3_175B_MEGATRON, global_batch=1536, seq_len=2048, gpu="a100-80gb",
                                   num_gpus=1024)),
        "planner: no-fit suggestion, llama3.1-405b on 16 h100-80gb": _best_of(
            lambda: planner.search("llama3.1-405b", global_batch=64, seq_len=8192, gpu="h100-80gb", num_gpus=16),
            repeat=1),
    }


if __name__ == "__main__":
    for name, seconds in main().items():
        print(f"{seconds:8.3f} s  {name}")
