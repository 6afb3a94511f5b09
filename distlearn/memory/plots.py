"""Figure of chapter 01: what one parameter costs in a training step, recipe by recipe.

The bar lengths are the package's own numbers: the bytes per parameter of weights, gradients, master weights and
optimizer state come from :func:`distlearn.memory.formulas.bytes_per_param` (a test compares them). Every label goes
through :mod:`distlearn.core.i18n`, so the figure is drawn in the reader's language.
"""
from __future__ import annotations

from matplotlib.patches import Rectangle

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.memory.formulas import OPTIMIZERS, PRECISIONS, bytes_per_param
from distlearn.core.guard import read_only

__all__ = ["bytes_per_parameter", "segments", "SEGMENT_NAMES", "RECIPE_NAMES", "DEFAULT_RECIPES"]

SEGMENT_NAMES = read_only({
    "weights": ("weights", "权重"), "grads": ("gradients", "梯度"), "master": ("fp32 master weights", "fp32 主权重"),
    "m": ("Adam first moment", "Adam 一阶矩"), "v": ("Adam second moment", "Adam 二阶矩"),
    "momentum": ("momentum", "动量缓冲区"),
})
SEGMENT_COLORS = read_only({"weights": plots.COLORS["params"], "grads": plots.COLORS["grads"], "master": "#8FC79A",
                  "m": plots.COLORS["optimizer"], "v": "#3D7F4E", "momentum": plots.COLORS["optimizer"]})
RECIPE_NAMES = read_only({
    ("fp32", "adam"): ("fp32 + Adam", "fp32 + Adam"),
    ("mixed", "adam"): ("mixed precision\n(ZeRO paper)", "混合精度\n（ZeRO 论文）"),
    ("mixed-fp32-grads", "adam"): ("mixed precision,\nfp32 gradients (Megatron)", "混合精度，fp32 梯度\n（Megatron）"),
})
DEFAULT_RECIPES = (("fp32", "adam"), ("mixed", "adam"), ("mixed-fp32-grads", "adam"))


def segments(precision: str = "mixed", optimizer: str = "adam") -> list[tuple[str, int]]:
    """``[(kind, bytes), ...]`` of one parameter under a recipe, in the order drawn: weights, gradients, the fp32
    master weights (mixed precision only), then the optimizer's own state (Adam: two moments of equal size; SGD with
    momentum: one buffer; SGD: none). The bytes add up to :func:`bytes_per_param`'s total."""
    w, g, master = PRECISIONS[precision]
    state = OPTIMIZERS[optimizer]
    out = [("weights", w), ("grads", g)] + ([("master", master)] if master else [])
    if optimizer.startswith("adam"):
        out += [("m", state / 2), ("v", state / 2)]
    elif state:
        out += [("momentum", state)]
    return out


def _recipe_name(precision: str, optimizer: str) -> str:
    en, zh = RECIPE_NAMES.get((precision, optimizer), (f"{precision} + {optimizer}", f"{precision} + {optimizer}"))
    return en if en == zh else bi(en, zh, sep="\n")


def bytes_per_parameter(recipes=DEFAULT_RECIPES, ax=None):
    """One row per recipe, one coloured segment per kind of state, as long as its bytes per parameter; the number of
    bytes is written inside each segment and the total at the right. A dashed box under the rows stands for the
    residual states (activations, buffers), which do not scale with the parameter count. Returns the axes."""
    recipes = tuple(recipes)
    if ax is None:
        _, ax = plots.new_figure(9.0, 1.8 + 0.9 * len(recipes))
    longest = max(bytes_per_param(p, o)["total"] for p, o in recipes)
    seen = []
    for row, (precision, optimizer) in enumerate(recipes):
        y = len(recipes) - row
        x = 0.0
        for kind, nbytes in segments(precision, optimizer):
            hatch = "//" if kind == "master" else None
            ax.add_patch(Rectangle((x, y - 0.3), nbytes, 0.6, facecolor=SEGMENT_COLORS[kind], edgecolor="white",
                                   lw=1.5, hatch=hatch))
            ax.text(x + nbytes / 2, y, f"{nbytes:g}", ha="center", va="center", fontsize=10,
                    color="#1A1A1A" if kind == "master" else "white",
                    bbox=dict(fc="white", ec="none", pad=1) if kind == "master" else None)
            x += nbytes
            if kind not in seen:
                seen.append(kind)
        total = bytes_per_param(precision, optimizer)["total"]
        ax.text(x + 0.3, y, bi(f"= {total:g} bytes", f"= {total:g} 字节"), ha="left", va="center", fontsize=10)
        ax.text(-0.4, y, _recipe_name(precision, optimizer), ha="right", va="center", fontsize=9)
    ax.add_patch(Rectangle((0, 0.05), longest, 0.5, fill=False, ec=plots.COLORS["activations"], ls="--", lw=1))
    ax.text(longest / 2, 0.3, bi("+ activations and buffers: grow with batch and sequence, not with Ψ (chapter 08)",
                                 "+ 激活值和缓冲区：随批量和序列长度增长，与 Ψ 无关（第 08 章）", sep="\n"),
            ha="center", va="center", fontsize=8, color=plots.COLORS["activations"])
    for kind in seen:
        ax.bar(0, 0, color=SEGMENT_COLORS[kind], hatch="//" if kind == "master" else None,
               label=bi(*SEGMENT_NAMES[kind]))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncols=3, fontsize=8, frameon=False)
    ax.set_xlim(-7.5, longest + 5.0)
    ax.set_ylim(-0.05, len(recipes) + 0.6)
    ax.set_axis_off()
    plots.title(ax, "What one parameter costs in a training step (bytes per parameter)",
                "一次训练迭代中，每个参数占多少字节")
    return ax
