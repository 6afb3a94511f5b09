"""Plot of the rooflines of parallelism (chapter 14): each kind's threshold per GPU preset, and where two published
runs stand (compute in :mod:`distlearn.planning.rooflines`)."""
from __future__ import annotations

import numpy as np

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.planning import rooflines as R

KIND_LABELS = {"dp": ("DP", "数据并行"), "fsdp": ("FSDP", "FSDP"), "tp": ("TP", "张量并行"), "cp": ("CP", "上下文并行"),
               "ep": ("EP", "专家并行")}


def plot_rooflines(points: dict[str, tuple[float, str]], gpus=("a100-80gb", "h100-80gb"), model=None):
    """Bars: the threshold of each kind of parallelism (log scale, its own unit) per GPU; ``points``: {kind: (value,
    label)} of a setting, drawn as markers (above the bar: hidden). Returns the figure."""
    fig, ax = plots.new_figure(9, 3.6)
    kinds = list(R.KINDS)
    x = np.arange(len(kinds))
    width = 0.8 / len(gpus)
    for i, g in enumerate(gpus):
        values = [R.roofline(k, g, model=model).threshold for k in kinds]
        ax.bar(x + (i - (len(gpus) - 1) / 2) * width, values, width, label=g, alpha=0.7)
    for k, (value, label) in points.items():
        ax.plot(kinds.index(k), value, "k*", ms=12)
        ax.annotate(label, (kinds.index(k), value), textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(x, [bi(*KIND_LABELS[k]) if KIND_LABELS[k][0] != KIND_LABELS[k][1] else KIND_LABELS[k][0]
                      for k in kinds])
    ax.set_ylabel(bi("threshold", "阈值"))
    ax.legend(fontsize=8)
    plots.title(ax, "Rooflines of parallelism: communication hidden above the bar (C = 55 % of peak)",
                "各种并行的屋顶线：高于柱子时通信可被隐藏（C = 峰值的 55 %）")
    return fig
