"""Speed target: simulating interleaved 1F1B with p = 64 stages, m = 1024 micro-batches and 4 chunks per stage
(524,288 operations) takes under 100 ms. Wall-clock time is the target; CPU time is reported too, because on a
busy shared machine the wall-clock time also counts the waits for a core.

Run: ``python -m benchmarks.bench_pipeline``. ``main()`` returns ``{name: seconds}`` (best of a few runs).
"""
from __future__ import annotations

import time

from distlearn.pipeline import simulate

TARGET_S = 0.100


def main(repeats: int = 3) -> dict[str, float]:
    cases = {
        "pipeline.simulate interleaved p=64 m=1024 v=4": dict(schedule="interleaved-1f1b", num_stages=64,
                                                               num_microbatches=1024, num_chunks=4),
        "pipeline.simulate 1f1b p=64 m=1024": dict(schedule="1f1b", num_stages=64, num_microbatches=1024),
    }
    out = {}
    for name, kw in cases.items():
        best = best_cpu = float("inf")
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            simulate(**kw)
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        out[name] = best
        out[name + " (CPU time)"] = best_cpu
    return out


if __name__ == "__main__":
    for name, sec in main().items():
        print(f"{name}: {sec * 1e3:.1f} ms (target < {TARGET_S * 1e3:.0f} ms)")
