"""A decode-sized matrix product timed on an NVIDIA H200, stored: chapter 15's roofline aside quotes it.

``python3 -m authoring.gpu_checks`` timed a bf16 batch of B rows times Llama 3 70B's 8,192 × 28,672 up-projection
(CUDA events, median of 20 after 5 warm-ups; torch 2.11.0+cu130, CUDA 13.0, 2026-12-04), stored in
``h200_roofline.json`` beside this file, because the course runs without a GPU. FLOPs 2·B·8192·28672; bytes
2·(8192·28672 + B·(8192 + 28672)) (bf16 weight read once, input and output). Units: seconds, bytes/s, FLOP/s.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "h200_roofline.json")
"""The stored measurement (JSON)."""

IN_FEATURES, OUT_FEATURES = 8192, 28672


@dataclass(frozen=True)
class RooflineRow:
    """One batch size: ``tokens`` B, ``seconds`` (median), and what follows: ``flop_per_second``,
    ``bytes_per_second``."""
    tokens: int
    seconds: float

    @property
    def flop_per_second(self) -> float:
        return 2 * self.tokens * IN_FEATURES * OUT_FEATURES / self.seconds

    @property
    def bytes_per_second(self) -> float:
        return 2 * (IN_FEATURES * OUT_FEATURES + self.tokens * (IN_FEATURES + OUT_FEATURES)) / self.seconds


@dataclass(frozen=True)
class RooflineSummary:
    """The stored run read as a roofline: over the memory-bound batches (B ≤ ``memory_bound_max``) the time range
    (``seconds_min``, ``seconds_max``) and bandwidth range and median; over the compute-bound ones
    (B ≥ ``compute_bound_min``) the FLOP/s range and median; ``knee`` = median FLOP/s / median bandwidth (FLOPs per
    byte, about the batch where the two limits meet)."""
    memory_bound_max: int
    compute_bound_min: int
    seconds_min: float
    seconds_max: float
    bandwidth_min: float
    bandwidth_max: float
    bandwidth_median: float
    flops_min: float
    flops_max: float
    flops_median: float

    @property
    def knee(self) -> float:
        return self.flops_median / self.bandwidth_median


def h200_rows() -> tuple:
    """The stored rows, :class:`RooflineRow` per batch size, in increasing B."""
    with open(PATH, encoding="utf-8") as f:
        d = json.load(f)
    return tuple(RooflineRow(int(r["tokens"]), float(r["seconds"])) for r in d["rows"])


def _median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def h200_summary(memory_bound_max: int = 96, compute_bound_min: int = 512) -> RooflineSummary:
    """:class:`RooflineSummary` of the stored run. ``memory_bound_max`` and ``compute_bound_min``: integers in
    [1, 4096], the first below the second. Raises DistlearnValueError."""
    from distlearn.core.validate import DistlearnValueError, check_int

    lo = check_int("memory_bound_max", memory_bound_max, minimum=1, maximum=4096)
    hi = check_int("compute_bound_min", compute_bound_min, minimum=1, maximum=4096)
    if lo >= hi:
        raise DistlearnValueError("compute_bound_min", f"compute_bound_min ({hi}) must exceed memory_bound_max ({lo}).",
                                  f"compute_bound_min（{hi}）必须大于 memory_bound_max（{lo}）。")
    rows = h200_rows()
    mem = [r for r in rows if r.tokens <= lo]
    comp = [r for r in rows if r.tokens >= hi]
    return RooflineSummary(lo, hi, min(r.seconds for r in mem), max(r.seconds for r in mem),
                           min(r.bytes_per_second for r in mem), max(r.bytes_per_second for r in mem),
                           _median([r.bytes_per_second for r in mem]),
                           min(r.flop_per_second for r in comp), max(r.flop_per_second for r in comp),
                           _median([r.flop_per_second for r in comp]))
