"""What an NVIDIA H200 did with FP8 sums, measured once and stored: chapter 08 compares its accumulator model with it.

The numbers come from ``python3 -m authoring.gpu_checks`` (``torch._scaled_mm``, torch 2.11.0+cu130, CUDA 13.0, on
2026-12-04), stored in ``h200_fp8_accumulation.json`` beside this file, because the course runs without a GPU. Two
experiments, both on E4M3 operands, so every product is exact and only the adding can err:

- **the probe**: one product 2**e, then 4095 products 1·1. An accumulator with p significant bits loses each 1 once
  2**e ≥ 2**p. ``use_fast_accum=True`` keeps none of them from e = 14 on: at most 14 significant bits, DeepSeek-V3's
  "around 14 bits" (arXiv 2412.19437, §3.3.2). cuBLAS's default loses only the 127 ones of the first 128 products:
  it moves the partial sum to FP32 every 128 products, DeepSeek's N_C = 128.
- **chapter 08's 64 dot products** of length 4096: the hardware's sums, to set beside
  :func:`distlearn.precision.block_scaled.accumulate`.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "h200_fp8_accumulation.json")
"""The stored measurement (JSON)."""


@dataclass(frozen=True)
class ProbeRow:
    """One row of the probe: ``big_exponent`` e, and how many of the 4095 ones each mode kept after 2**e."""
    big_exponent: int
    ones_kept_default: int
    ones_kept_fast: int


@dataclass(frozen=True)
class H200Accumulation:
    """The stored H200 run. ``probe``: :class:`ProbeRow` per e in 8..16 (K = 4096); ``exact``, ``default``,
    ``fast_accum``: float64 arrays (64,) of chapter 08's dot products: exact, and as ``torch._scaled_mm`` summed them
    with ``use_fast_accum=False`` and ``True``. ``gpu``, ``torch``, ``cuda``, ``date``: where and when."""
    gpu: str
    torch: str
    cuda: str
    date: str
    K: int
    probe: tuple
    exact: np.ndarray
    default: np.ndarray
    fast_accum: np.ndarray

    def relative_error(self, mode: str) -> np.ndarray:
        """|sum − exact| / exact of the 64 dot products for ``mode`` ``"default"`` or ``"fast_accum"``."""
        from distlearn.core.validate import check_choice

        got = getattr(self, check_choice("mode", mode, ("default", "fast_accum")))
        return np.abs(got - self.exact) / self.exact


def h200() -> H200Accumulation:
    """The stored H200 measurement as a record (read from :data:`PATH`)."""
    with open(PATH, encoding="utf-8") as f:
        d = json.load(f)
    dots = d["dot_products"]
    return H200Accumulation(
        gpu=d["gpu"], torch=d["torch"], cuda=d["cuda"], date=d["date"], K=d["probe"]["K"],
        probe=tuple(ProbeRow(int(r["big_exponent"]), int(r["ones_kept_default"]), int(r["ones_kept_fast"]))
                    for r in d["probe"]["rows"]),
        exact=np.array(dots["exact"], dtype=np.float64), default=np.array(dots["default"], dtype=np.float64),
        fast_accum=np.array(dots["fast_accum"], dtype=np.float64))


def probe_products(big_exponent: int, K: int = 4096) -> np.ndarray:
    """The probe's products as one row (1, K): 2**big_exponent, then K − 1 ones. ``big_exponent`` in [0, 16] (its
    operands 2**(e//2) and 2**(e − e//2) must fit E4M3, whose largest value is 448). Raises DistlearnValueError."""
    from distlearn.core.validate import check_int

    e = check_int("big_exponent", big_exponent, minimum=0, maximum=16)
    K = check_int("K", K, minimum=2, maximum=1 << 20)
    row = np.ones((1, K))
    row[0, 0] = 2.0 ** e
    return row
