"""Explorer for chapter 08: block-scaled formats (FP8 with fp32 scales, MXFP8, NVFP4) and an outlier channel.

``compute`` quantises a fixed 4 × 1024 tensor (standard normal values, column 7 set to ``outlier``) with
:mod:`distlearn.precision.block_scaled` under one scheme at every block size from 16 to 1024, and returns the error of
the ordinary elements (what sharing a scale with the outlier costs), the error of the outlier itself, the share of
ordinary elements flushed to zero and the bits per element with scales. ``render`` prints the chosen block size and
draws the error against the block size.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.core import explorer as base
from distlearn.core import plots
from distlearn.core.i18n import bi, text
from distlearn.precision import block_scaled as B
from distlearn.core.guard import read_only

BLOCKS = (16, 32, 64, 128, 256, 512, 1024)
OUTLIERS = (1, 10, 100, 1000, 10000, 100000, 1000000)
T = read_only({
    "title": text("widgets.block_formats.title", "Block-scaled formats and an outlier channel",
                  "块缩放格式与一个异常值通道"),
    "scheme": text("widgets.block_formats.scheme", "format", "格式"),
    "block": text("widgets.block_formats.block", "block size 1 × n", "分块大小 1 × n"),
    "outlier": text("widgets.block_formats.outlier", "outlier channel magnitude", "异常值通道的幅度"),
    "xlabel": text("widgets.block_formats.xlabel", "block size n (elements per scale)", "分块大小 n（每个缩放因子管的元素数）"),
    "ylabel": text("widgets.block_formats.ylabel", "relative error of the other elements", "其他元素的相对误差"),
})
_TENSORS: dict[float, object] = {}


def _tensor(outlier: float):
    if outlier not in _TENSORS:
        _TENSORS[outlier] = B.outlier_tensor(rows=4, cols=1024, outlier=float(outlier))
    return _TENSORS[outlier]


@base.within_controls(lambda: controls())
def compute(scheme: str = "nvfp4", block_size: int = 16, outlier: float = 1000) -> dict:
    """``{"points": [ErrorPoint per block size], "chosen": ErrorPoint, "tensor": ErrorPoint (FP8 per tensor), ...}``."""
    x = _tensor(outlier)
    points = [B.error_point(x, scheme, n) for n in BLOCKS] if scheme != "fp8-tensor" else [B.error_point(x, scheme)]
    chosen = next((p for p in points if p.block_size == block_size), points[0])
    return {"scheme": scheme, "block_size": block_size, "outlier": outlier, "points": points, "chosen": chosen,
            "tensor": B.error_point(x, "fp8-tensor")}


def render(res: dict) -> None:
    c, en_zh = res["chosen"], B.SCHEME_NAMES[res["scheme"]]
    n_en, n_zh = (f"1 × {c.block_size}",) * 2 if c.block_size else ("the whole tensor", "整个张量")
    print(bi(f"{en_zh[0]}; blocks: {n_en}; outlier ×{res['outlier']:g}",
             f"{en_zh[1]}；分块：{n_zh}；异常值 ×{res['outlier']:g}"))
    print(bi(f"  other elements: error {c.others_error:.2%}, flushed to 0: {c.flushed:.2%}; the outlier itself: "
             f"error {c.outlier_error:.2%}; {c.bits:.3f} bits per element with scales",
             f"  其他元素：误差 {c.others_error:.2%}，下溢为 0 的 {c.flushed:.2%}；异常值本身：误差 {c.outlier_error:.2%}；"
             f"连同缩放因子每个元素 {c.bits:.3f} 位"))
    print(bi(f"  for comparison, FP8 E4M3 with one scale per tensor: other elements {res['tensor'].others_error:.2%}",
             f"  作为对比，FP8 E4M3 每个张量一个缩放因子：其他元素误差 {res['tensor'].others_error:.2%}"))
    fig, ax = plots.new_figure(6.5, 3.0)
    pts = [p for p in res["points"] if p.block_size]
    if pts:
        ax.plot([p.block_size for p in pts], [max(p.others_error, 1e-4) for p in pts], "o-",
                color=plots.COLORS["params"], label=bi(*en_zh, sep="\n"))
        ax.plot([c.block_size], [max(c.others_error, 1e-4)], "o", ms=11, mfc="none", color="#C44E52")
    ax.axhline(max(res["tensor"].others_error, 1e-4), ls="--", color="gray",
               label=bi("FP8 E4M3, one scale per tensor", "FP8 E4M3，每个张量一个缩放因子", sep="\n"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(1e-4, 2)
    # both languages: one line each, so that labels and legend stay as wide as the axes / 双语时各占一行，标签和图例不比坐标区宽
    ax.set_xlabel(T["xlabel"].render(sep="\n"))
    ax.set_ylabel(T["ylabel"].render(sep="\n"))
    ax.legend(fontsize=7)
    plots.title(ax, f"outlier ×{res['outlier']:g}", f"异常值 ×{res['outlier']:g}")
    plt.show()


def controls() -> dict:
    return {"scheme": base.dropdown(T["scheme"], [(B.SCHEME_NAMES[s], s) for s in B.SCHEMES], "nvfp4"),
            "block_size": base.selection_slider(T["block"], list(BLOCKS), 16),
            "outlier": base.selection_slider(T["outlier"], list(OUTLIERS), 1000)}


def explorer():
    return base.build(controls(), lambda **kw: compute(**kw), render, title=T["title"])
