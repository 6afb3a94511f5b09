"""Figures of chapter 11: load per expert with its capacity, and auxiliary-loss-free balancing over steps."""
from __future__ import annotations

import numpy as np

from distlearn.core import plots
from distlearn.core.i18n import bi


def loads(routings: dict, capacity: int | None = None, ax=None):
    """Bars of the assignments per expert for each ``{label: Routing}`` side by side, kept part dark, dropped
    part light, and the capacity as a dashed line."""
    if ax is None:
        _, ax = plots.new_figure(9, 3.0)
    n = len(routings)
    width = 0.8 / n
    colors = [plots.COLORS["compute"], plots.COLORS["comm"], plots.COLORS["backward"], plots.COLORS["logits"]]
    for i, (name, r) in enumerate(routings.items()):
        x = np.arange(r.num_experts) + (i - (n - 1) / 2) * width
        ax.bar(x, r.load, width, color=colors[i % len(colors)], alpha=0.3)
        ax.bar(x, r.kept_load, width, color=colors[i % len(colors)], label=name)
    if capacity is not None:
        ax.axhline(capacity, color=plots.COLORS["activations"], ls="--", lw=1, label=bi("capacity", "容量"))
    ax.set_xlabel(bi("expert", "专家"))
    ax.set_ylabel(bi("assignments (light: dropped)", "分配次数（浅色：被丢弃）"))
    ax.legend(fontsize=8)
    plots.title(ax, "Load per expert", "每个专家的负载")
    return ax


def balance(histories: dict, ax=None):
    """The busiest expert's load / the mean over training steps, one line per ``{label: BalanceHistory}``."""
    if ax is None:
        _, ax = plots.new_figure(8, 3.0)
    for name, h in histories.items():
        ax.plot(np.arange(len(h.max_over_mean)), h.max_over_mean, label=name)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xlabel(bi("training step", "训练步"))
    ax.set_ylabel(bi("max load / mean", "最大负载 / 平均"))
    ax.legend(fontsize=8)
    plots.title(ax, "Auxiliary-loss-free balancing: the selection bias evens out the load",
                "无辅助损失的负载均衡：选择偏置让负载趋于均匀")
    return ax
