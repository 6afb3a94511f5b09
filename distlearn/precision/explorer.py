"""Explorer for chapter 08: FP8 scaling with an outlier channel → the error of a GEMM, per scheme.

``compute`` quantises fixed activations (256 tokens × 1024 channels, channel 7 scaled by ``outlier``) and weights
(512 × 1024) with :mod:`distlearn.precision.scaling` — bf16, per-tensor (current) FP8 scaling, and block scaling with
activation tiles of ``1 × tile`` and 128 × 128 weight blocks — and measures the GEMM error of the ordinary channels
(``rest_error``) and the share of activations that underflowed to 0.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.core import plots
from distlearn.precision import scaling as precision
from distlearn.core.i18n import bi, text
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

OUTLIERS = (1, 10, 100, 1000, 10000, 100000)
TILES = (32, 64, 128, 256, 512, 1024)
T = read_only({
    "title": text("widgets.precision.title", "FP8 scaling and an outlier channel", "FP8 缩放与一个异常值通道"),
    "outlier": text("widgets.precision.outlier", "outlier channel magnitude (× the others)",
                    "异常值通道的幅度（其他通道的倍数）"),
    "fmt": text("widgets.precision.fmt", "FP8 format", "FP8 格式"),
    "tile": text("widgets.precision.tile", "activation tile 1 × n (1024 = per token)", "激活分块 1 × n（1024 = 逐词元）"),
    "ylabel": text("widgets.precision.ylabel", "GEMM error of the other channels", "其他通道的 GEMM 误差"),
})
FMT_LABELS = read_only({"e4m3": "E4M3 (max 448)", "e5m2": "E5M2 (max 57344)"})
SCHEME_LABELS = read_only({"bf16": ("bf16", "bf16"), "tensorwise": ("per-tensor FP8", "逐张量缩放 FP8"),
                 "blockwise": ("block-scaled FP8", "分块缩放 FP8")})
_W = precision.gaussian_weights()


@base.within_controls(lambda: controls())
def compute(outlier: float = 10000, fmt: str = "e4m3", tile: int = 128) -> dict:
    """Errors of the three schemes for one setting: ``{"rows": [GemmError, ...], ...}``."""
    x = precision.outlier_activations(outlier=float(outlier))
    # x and _W are finite by construction: skip gemm_errors' NaN scan of both / x 与 _W 按构造必为有限值：跳过 NaN 扫描
    rows = precision.gemm_errors.unchecked(x, _W, precision.SCHEMES, fmt, exclude_channels=(7,),
                                           act_block=(1, tile))
    return {"rows": rows, "outlier": outlier, "fmt": fmt, "tile": tile}


def render(res: dict) -> None:
    print(bi(f"{FMT_LABELS[res['fmt']]}, outlier ×{res['outlier']:g}, activation tiles 1×{res['tile']}, "
             f"weight blocks 128×128", f"{FMT_LABELS[res['fmt']]}，异常值 ×{res['outlier']:g}，激活分块 1×{res['tile']}，"
             f"权重分块 128×128"))
    for r in res["rows"]:
        en, zh = SCHEME_LABELS[r.scheme]
        print(bi(f"  {en:<17} error of the other channels {r.rest_error:7.2%}, whole GEMM {r.rel_error:6.2%}, "
                 f"activations flushed to 0: {r.underflow:6.2%}",
                 f"  {zh:<10} 其他通道误差 {r.rest_error:7.2%}，整个 GEMM {r.rel_error:6.2%}，下溢为 0 的激活值 {r.underflow:6.2%}"))
    fig, ax = plots.new_figure(6.5, 3.0)
    labels = [bi(*SCHEME_LABELS[r.scheme], sep="\n") for r in res["rows"]]
    ax.bar(labels, [r.rest_error for r in res["rows"]], color=[plots.COLORS["params"], "#C44E52", "#55A868"])
    ax.set_yscale("log")
    ax.set_ylim(1e-3, 1.5)
    ax.set_ylabel(T["ylabel"].render(sep="\n"))  # both languages: one line each, to fit the 3-inch height / 双语时各占一行，才放得进 3 英寸高
    plots.title(ax, f"outlier ×{res['outlier']:g}, {res['fmt'].upper()}", f"异常值 ×{res['outlier']:g}，{res['fmt'].upper()}")
    plt.show()


def controls() -> dict:
    return {"outlier": base.W.SelectionSlider(options=list(OUTLIERS), value=10000, description=str(T["outlier"]),
                                              continuous_update=False, style=base.STYLE, layout=base.LAYOUT),
            "fmt": base.dropdown(T["fmt"], [(v, k) for k, v in FMT_LABELS.items()], "e4m3"),
            "tile": base.W.SelectionSlider(options=list(TILES), value=128, description=str(T["tile"]),
                                           continuous_update=False, style=base.STYLE, layout=base.LAYOUT)}


def explorer():
    return base.build(controls(), lambda **kw: compute(**kw), render, title=T["title"])
