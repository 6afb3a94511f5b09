"""Pictures for chapter 08's block-scaled formats, drawn from :mod:`distlearn.precision.block_scaled` (labels in the
reader's language)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.core.validate import check_int
from distlearn.precision import block_scaled as B


def block_row_picture(row, block_size: int = 32, scheme: str = "mxfp8", ax=None):
    """One row of a tensor as bars of |value| (log scale), split into blocks of ``block_size`` elements under
    ``scheme`` (:data:`~distlearn.precision.block_scaled.SCHEMES`); above each block its scale (MX: 2**k with the
    E8M0 code; NVFP4: the E4M3 block scale; fp8: the fp32 multiplier); elements flushed to 0 marked with ×.
    ``row``: 1-D, its length a multiple of ``block_size``. Returns the axes. Raises DistlearnValueError."""
    r = B.float32_values(row).reshape(1, -1)
    q = B.quantize(r, scheme, check_int("block_size", block_size, maximum=max(r.shape[1], 1)))
    d = q.dequantize()[0]
    n = q.block[1]
    if ax is None:
        _, ax = plots.new_figure(9.5, 3.4)
    x = np.arange(r.shape[1])
    mag = np.maximum(np.abs(r[0]), 1e-3)
    colors = ["#4C72B0", "#55A868"]
    for b in range(r.shape[1] // n):
        sl = slice(b * n, (b + 1) * n)
        ax.bar(x[sl], mag[sl], width=0.8, color=colors[b % 2])
        ax.axvline(b * n - 0.5, color="#999999", lw=0.8)
        if q.scheme == "mxfp8":
            k = int(q.scale_codes[0, b]) - B.E8M0_BIAS
            label = f"2^{k}\n(E8M0 {int(q.scale_codes[0, b])})"
        elif q.scheme == "nvfp4":
            label = f"s = {B.decode(q.scale_codes[0, b], 'e4m3'):g}"
        else:
            label = f"×{q.multiplier[0, b]:.3g}"
        ax.text(b * n + n / 2 - 0.5, mag.max() * 4, label, ha="center", va="bottom", fontsize=8)
    lost = (d == 0) & (r[0] != 0)
    ax.plot(x[lost], mag[lost], "x", color="#C44E52", ms=5,
            label=bi("flushed to 0 by its block's scale", "被所在分块的缩放因子下溢为 0"))
    ax.set_yscale("log")
    ax.set_ylim(1e-3, mag.max() * 40)
    ax.set_xlim(-1, r.shape[1])
    ax.set_xlabel(bi("element of the row", "行内元素序号"))
    ax.set_ylabel(bi("|value|", "|值|"))
    if lost.any():
        ax.legend(fontsize=7, loc="upper right")
    en, zh = B.SHORT_NAMES[scheme]
    plots.title(ax, f"{en}: blocks of {n}", f"{zh}：每块 {n} 个元素")
    plt.show()
    return ax
